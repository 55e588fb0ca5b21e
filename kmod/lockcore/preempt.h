/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The work state of one gpuslot domain and the preemption budget of its
 * slots (issue 40; uapi's GPUSLOT_IOC_SET_WORK and struct
 * gpuslot_work_state).
 *
 * A slot's holder says when the slot has GPU work pending and when it has
 * drained; while a slot of higher priority has work, lower slots hold
 * their launches back. What one slot may hold back is bounded by a token
 * bucket of window x share / 100 ns, refilled at share % of real time and
 * drained while the slot preempts: a periodic task whose work fits the
 * share preempts every job, one that never drains preempts for the share
 * and then no longer until it drains and its bucket holds again.
 *
 * Pure logic, like core.c: times are the caller's (ns of a monotonic
 * clock), the caller serialises every call, publishes the result
 * (gpuslot_preempt_publish()) and arms one timer per domain for
 * gpuslot_preempt_next_expiry().
 */
#ifndef GPUSLOT_PREEMPT_H
#define GPUSLOT_PREEMPT_H

#include <linux/types.h>
#include <uapi/linux/gpuslot.h>

/* Defaults, from issue 40's measurement (docs/preemption.md says which). */
#define GPUSLOT_DEFAULT_PREEMPT_SHARE		25	/* % */
#define GPUSLOT_DEFAULT_PREEMPT_WINDOW_MS	1000
#define GPUSLOT_MAX_PREEMPT_WINDOW_MS		60000

struct gpuslot_preempt_slot {
	bool work;		/* the holder reported work pending */
	bool preempting;	/* work, and the bucket was not empty */
	u64 tokens_ns;		/* bucket content at @stamp_ns */
	u64 stamp_ns;		/* last settle */
};

struct gpuslot_preempt {
	unsigned int share;	/* 1..100 (%): 100 = no bound */
	u64 window_ns;
	unsigned int k;
	u8 priority[GPUSLOT_MAX_SLOTS];
	struct gpuslot_preempt_slot slot[GPUSLOT_MAX_SLOTS];
};

void gpuslot_preempt_init(struct gpuslot_preempt *p, unsigned int share,
			  unsigned int window_ms, u64 now_ns);

/* Admin knobs; -EINVAL (nothing changed) out of range. */
int gpuslot_preempt_set_budget(struct gpuslot_preempt *p, unsigned int share,
			       unsigned int window_ms, u64 now_ns);

/* A new layout: k and the priorities; slots >= k lose their work. */
void gpuslot_preempt_set_layout(struct gpuslot_preempt *p, unsigned int k,
				const u8 *priority, u64 now_ns);

/* The holder of @slot reports work pending or drained. */
void gpuslot_preempt_set_work(struct gpuslot_preempt *p, unsigned int slot,
			      bool pending, u64 now_ns);

/* The hold of @slot ended (release, death, retirement): no work. */
void gpuslot_preempt_hold_ended(struct gpuslot_preempt *p, unsigned int slot,
				u64 now_ns);

/* Settle every bucket at @now_ns; a slot whose bucket ran out stops preempting. */
void gpuslot_preempt_tick(struct gpuslot_preempt *p, u64 now_ns);

/* When the next preempting slot's bucket runs out; U64_MAX if none. */
u64 gpuslot_preempt_next_expiry(const struct gpuslot_preempt *p);

u64 gpuslot_preempt_work_mask(const struct gpuslot_preempt *p);
u64 gpuslot_preempt_preempt_mask(const struct gpuslot_preempt *p);
/* 0, or 1 + the highest priority among the preempting slots. */
u32 gpuslot_preempt_level(const struct gpuslot_preempt *p);

/*
 * Write the state into @out with the seqcount protocol of
 * struct gpuslot_work_state (@out->seq odd while writing; the caller
 * provides the memory barriers' home: WRITE_ONCE/smp_wmb in the kernel,
 * the shim's in userspace). Each call increments @out->updates: publish
 * once per change.
 */
void gpuslot_preempt_publish(const struct gpuslot_preempt *p,
			     struct gpuslot_work_state *out, u64 generation,
			     u64 held_mask);

#endif /* GPUSLOT_PREEMPT_H */
