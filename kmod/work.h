/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Preemptive slots (work.c): GPUSLOT_IOC_SET_WORK, the read-only work
 * state page of a domain, and the expiry of its preemption budget.
 */
#ifndef GPUSLOT_WORK_H
#define GPUSLOT_WORK_H

#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/types.h>
#include <uapi/linux/gpuslot.h>

#include "lockcore/preempt.h"

struct gpuslot_domain;
struct gpuslot_file;
struct vm_area_struct;

/* A domain's work state; under d->lock but where said. */
struct gpuslot_work {
	struct gpuslot_preempt preempt;	/* times: ktime_get_ns() */
	/* One zeroed page, mapped read-only by members; the module writes it. */
	struct gpuslot_work_state *state;
	/*
	 * The budget's next expiry. d->lock is a spinlock_t, a sleeping
	 * lock on PREEMPT_RT, and its users never disable interrupts: the
	 * timer, in hard interrupt context (also on PREEMPT_RT), only queues
	 * @expire on the module's expiry worker (boost_sched.c), which runs
	 * above every holder the module boosts: the slot whose budget ran
	 * out is typically held by a boosted thread spinning on its own
	 * CPU, below which a workqueue or a soft timer would never run.
	 */
	struct hrtimer timer;
	struct kthread_work expire;
	u64 armed_ns;		/* what @timer was last started for; U64_MAX: none */
};

int gpuslot_work_init(struct gpuslot_domain *d);
/* Stop the timer and its work, free the page: the domain is going. */
void gpuslot_work_destroy(struct gpuslot_domain *d);

/* Write the page from the domain's state and arm the expiry, under d->lock. */
void gpuslot_work_publish_locked(struct gpuslot_domain *d);
/*
 * The hold of @slot ends, under d->lock: its work is cleared before the
 * slot can go to anyone else; the caller publishes once the core released
 * it.
 */
void gpuslot_work_hold_ended_locked(struct gpuslot_domain *d,
				    unsigned int slot);
/* k, the priorities or the generation changed, under d->lock: publish. */
void gpuslot_work_layout_locked(struct gpuslot_domain *d);
/* Whether the hold of @f reported work pending, under d->lock. */
bool gpuslot_work_file_pending_locked(struct gpuslot_domain *d,
				      struct gpuslot_file *f);

int gpuslot_file_set_work(struct gpuslot_file *f, struct gpuslot_set_work *w);
/* mmap() of the file: its domain's page, read-only. */
int gpuslot_file_mmap(struct gpuslot_file *f, struct vm_area_struct *vma);

/* sysfs preempt_share and preempt_window_ms. */
unsigned int gpuslot_domain_preempt_share(struct gpuslot_domain *d);
int gpuslot_domain_set_preempt_share(struct gpuslot_domain *d,
				     unsigned int share);
unsigned int gpuslot_domain_preempt_window_ms(struct gpuslot_domain *d);
int gpuslot_domain_set_preempt_window_ms(struct gpuslot_domain *d,
					 unsigned int ms);

#endif /* GPUSLOT_WORK_H */
