// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot preemption budget: which slots have work, which of them may hold
 * the lower slots back, and for how long. See preempt.h.
 *
 * The bucket of a slot refills at share % of real time, always, and
 * drains at rate 1 while the slot preempts; over a long run a slot thus
 * preempts at most share % of the time, and a slot that never drains
 * preempts from a full bucket for capacity / (1 - share / 100) (window x
 * share / 100 plus what refilled meanwhile) and then stops.
 */
#include <asm/barrier.h>
#include <linux/compiler.h>
#include <linux/errno.h>
#include <linux/limits.h>

#include "preempt.h"

#define GPUSLOT_NSEC_PER_MSEC	1000000ULL

/* Past this, dt * 100 would overflow: a preempting bucket is empty anyway. */
#define GPUSLOT_PREEMPT_DT_MAX	(U64_MAX / 100)

static u64 gpuslot_preempt_capacity(const struct gpuslot_preempt *p)
{
	return p->window_ns / 100 * p->share +
	       p->window_ns % 100 * p->share / 100;
}

static bool gpuslot_preempt_bounded(const struct gpuslot_preempt *p)
{
	return p->share < 100;
}

/*
 * Bring @s's bucket to @now_ns; stop its preemption if it ran out. A
 * preempting bucket is rewritten only when @commit (its preemption ends,
 * or the budget changes): a timer's tick then leaves its stamp where it
 * began, so that its expiry stays the exact ceil(tokens x 100 / (100 -
 * share)) after it that gpuslot_preempt_next_expiry() said, whatever the
 * ticks between.
 */
static void gpuslot_preempt_settle(struct gpuslot_preempt *p,
				   struct gpuslot_preempt_slot *s, u64 now_ns,
				   bool commit)
{
	u64 cap = gpuslot_preempt_capacity(p);
	u64 dt, cost, gain;

	if (now_ns <= s->stamp_ns)
		return;
	dt = now_ns - s->stamp_ns;
	if (!gpuslot_preempt_bounded(p)) {
		s->tokens_ns = cap;
		s->stamp_ns = now_ns;
		return;
	}
	if (s->preempting) {
		/* Net drain: 1 - share / 100 of real time. */
		cost = dt > GPUSLOT_PREEMPT_DT_MAX ? U64_MAX :
		       dt * (100 - p->share) / 100;
		if (cost >= s->tokens_ns) {
			s->tokens_ns = 0;
			s->preempting = false;
			s->stamp_ns = now_ns;
		} else if (commit) {
			s->tokens_ns -= cost;
			s->stamp_ns = now_ns;
		}
		return;
	}
	s->stamp_ns = now_ns;
	gain = dt >= p->window_ns ? cap : dt * p->share / 100;
	s->tokens_ns = gain >= cap - s->tokens_ns ? cap : s->tokens_ns + gain;
}

static void gpuslot_preempt_settle_all(struct gpuslot_preempt *p, u64 now_ns,
				       bool commit)
{
	unsigned int i;

	for (i = 0; i < GPUSLOT_MAX_SLOTS; i++)
		gpuslot_preempt_settle(p, &p->slot[i], now_ns, commit);
}

void gpuslot_preempt_tick(struct gpuslot_preempt *p, u64 now_ns)
{
	unsigned int i;

	/* Slots past k have no work; their buckets settle when they next do. */
	for (i = 0; i < p->k; i++)
		gpuslot_preempt_settle(p, &p->slot[i], now_ns, false);
}

void gpuslot_preempt_init(struct gpuslot_preempt *p, unsigned int share,
			  unsigned int window_ms, u64 now_ns)
{
	unsigned int i;

	if (share < 1 || share > 100)
		share = GPUSLOT_DEFAULT_PREEMPT_SHARE;
	if (window_ms < 1 || window_ms > GPUSLOT_MAX_PREEMPT_WINDOW_MS)
		window_ms = GPUSLOT_DEFAULT_PREEMPT_WINDOW_MS;
	p->share = share;
	p->window_ns = window_ms * GPUSLOT_NSEC_PER_MSEC;
	p->k = 0;
	for (i = 0; i < GPUSLOT_MAX_SLOTS; i++) {
		p->priority[i] = 0;
		p->slot[i].work = false;
		p->slot[i].preempting = false;
		p->slot[i].tokens_ns = gpuslot_preempt_capacity(p);
		p->slot[i].stamp_ns = now_ns;
	}
}

int gpuslot_preempt_set_budget(struct gpuslot_preempt *p, unsigned int share,
			       unsigned int window_ms, u64 now_ns)
{
	unsigned int i;
	u64 cap;

	if (share < 1 || share > 100 || window_ms < 1 ||
	    window_ms > GPUSLOT_MAX_PREEMPT_WINDOW_MS)
		return -EINVAL;
	/* What was spent and earned so far counts under the old budget. */
	gpuslot_preempt_settle_all(p, now_ns, true);
	p->share = share;
	p->window_ns = window_ms * GPUSLOT_NSEC_PER_MSEC;
	cap = gpuslot_preempt_capacity(p);
	for (i = 0; i < GPUSLOT_MAX_SLOTS; i++)
		if (p->slot[i].tokens_ns > cap || !gpuslot_preempt_bounded(p))
			p->slot[i].tokens_ns = cap;
	return 0;
}

static void gpuslot_preempt_clear(struct gpuslot_preempt *p, unsigned int slot,
				  u64 now_ns)
{
	struct gpuslot_preempt_slot *s = &p->slot[slot];

	gpuslot_preempt_settle(p, s, now_ns, true);
	s->work = false;
	s->preempting = false;
}

void gpuslot_preempt_set_layout(struct gpuslot_preempt *p, unsigned int k,
				const u8 *priority, u64 now_ns)
{
	unsigned int i;

	if (k > GPUSLOT_MAX_SLOTS)
		k = GPUSLOT_MAX_SLOTS;
	for (i = 0; i < GPUSLOT_MAX_SLOTS; i++) {
		if (i >= k)
			gpuslot_preempt_clear(p, i, now_ns);
		p->priority[i] = i < k && priority ? priority[i] : 0;
	}
	p->k = k;
}

void gpuslot_preempt_set_work(struct gpuslot_preempt *p, unsigned int slot,
			      bool pending, u64 now_ns)
{
	struct gpuslot_preempt_slot *s;

	if (slot >= p->k)
		return;
	if (!pending) {
		gpuslot_preempt_clear(p, slot, now_ns);
		return;
	}
	s = &p->slot[slot];
	gpuslot_preempt_settle(p, s, now_ns, true);
	/*
	 * A second report of work already pending changes nothing: a slot
	 * whose bucket ran out preempts again only after it drained.
	 */
	if (s->work)
		return;
	s->work = true;
	s->preempting = !gpuslot_preempt_bounded(p) || s->tokens_ns > 0;
}

void gpuslot_preempt_hold_ended(struct gpuslot_preempt *p, unsigned int slot,
				u64 now_ns)
{
	if (slot < GPUSLOT_MAX_SLOTS)
		gpuslot_preempt_clear(p, slot, now_ns);
}

u64 gpuslot_preempt_next_expiry(const struct gpuslot_preempt *p)
{
	u64 next = U64_MAX, at;
	unsigned int i;

	if (!gpuslot_preempt_bounded(p))
		return U64_MAX;
	for (i = 0; i < p->k; i++) {
		const struct gpuslot_preempt_slot *s = &p->slot[i];
		unsigned int net = 100 - p->share;

		if (!s->preempting)
			continue;
		/* The first dt whose cost, dt x net / 100, covers the bucket. */
		at = s->stamp_ns + (s->tokens_ns * 100 + net - 1) / net;
		if (at < next)
			next = at;
	}
	return next;
}

u64 gpuslot_preempt_work_mask(const struct gpuslot_preempt *p)
{
	u64 mask = 0;
	unsigned int i;

	for (i = 0; i < p->k; i++)
		if (p->slot[i].work)
			mask |= 1ULL << i;
	return mask;
}

u64 gpuslot_preempt_preempt_mask(const struct gpuslot_preempt *p)
{
	u64 mask = 0;
	unsigned int i;

	for (i = 0; i < p->k; i++)
		if (p->slot[i].preempting)
			mask |= 1ULL << i;
	return mask;
}

u32 gpuslot_preempt_level(const struct gpuslot_preempt *p)
{
	u32 level = 0;
	unsigned int i;

	for (i = 0; i < p->k; i++)
		if (p->slot[i].preempting && p->priority[i] + 1U > level)
			level = p->priority[i] + 1U;
	return level;
}

void gpuslot_preempt_publish(const struct gpuslot_preempt *p,
			     struct gpuslot_work_state *out, u64 generation,
			     u64 held_mask)
{
	u32 seq = out->seq;
	unsigned int i;

	WRITE_ONCE(out->seq, seq + 1);
	/* Readers see the odd seq before any field changes ... */
	smp_wmb();
	WRITE_ONCE(out->version, GPUSLOT_WORK_STATE_VERSION);
	WRITE_ONCE(out->generation, generation);
	WRITE_ONCE(out->k, p->k);
	WRITE_ONCE(out->preempt_level, gpuslot_preempt_level(p));
	WRITE_ONCE(out->held_mask, held_mask);
	WRITE_ONCE(out->work_mask, gpuslot_preempt_work_mask(p));
	WRITE_ONCE(out->preempt_mask, gpuslot_preempt_preempt_mask(p));
	WRITE_ONCE(out->updates, out->updates + 1);
	for (i = 0; i < GPUSLOT_MAX_SLOTS; i++)
		WRITE_ONCE(out->priority[i], p->priority[i]);
	/* ... and every field before the even seq that says it is stable. */
	smp_wmb();
	WRITE_ONCE(out->seq, seq + 2);
}
