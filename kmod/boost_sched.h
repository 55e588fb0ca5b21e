/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The boost of a file's holds (boost_sched.c): the scheduler side of the
 * boost ledger (boost.c), and the clock of max_hold_ms.
 */
#ifndef GPUSLOT_BOOST_SCHED_H
#define GPUSLOT_BOOST_SCHED_H

#include "domain.h"

int gpuslot_boost_setup(void);
void gpuslot_boost_teardown(void);
/*
 * The expiry worker (SCHED_FIFO above every holder the module boosts) for
 * other clocks that must run above the holders they end: the preemption
 * budget's (work.c). Queue from a hard hrtimer; cancel before the domain
 * goes.
 */
void gpuslot_expiry_queue(struct kthread_work *work);
void gpuslot_expiry_cancel(struct kthread_work *work);
/*
 * A domain's boost_priority becomes @boost_priority: the expiry worker
 * moves above it first, if it is not already. May sleep.
 */
int gpuslot_boost_ceiling(unsigned int boost_priority);
/* A new file's boost: its hold, its locks, the clock of max_hold_ms. */
void gpuslot_file_boost_init(struct gpuslot_file *f);
/* Stop the clock of @f's hold, under d->lock: the hold ends. */
void gpuslot_overrun_cancel_locked(struct gpuslot_file *f);
/* Wait until @f's clock and its work are done; @f is idle. May sleep. */
void gpuslot_overrun_sync(struct gpuslot_file *f);
/*
 * Boost @p for hold @seq of @f in @d if that hold is still the file's
 * current one. May sleep: call without d->lock.
 */
void gpuslot_file_boost(struct gpuslot_file *f, struct gpuslot_domain *d,
			u64 seq, struct task_struct *p);
/*
 * Boost the thread of @w, which is about to wait in @d and is current,
 * for the hold that its grant will make: the granter then only wakes it,
 * and the release path makes no sched_setattr() for it. Called under
 * d->lock; returns true if it dropped it meanwhile (then the file is
 * ACQUIRING on return). Sets w->boosted and w->boost_seq if it boosted. A
 * wait that fails after a boost ends it: see gpuslot_file_acquire().
 */
bool gpuslot_waiter_boost(struct gpuslot_domain *d, struct gpuslot_waiter *w)
	__must_hold(&d->lock);
/*
 * The hold of @f was boosted: say so and start its clock, to max_hold_ms or
 * to @budget_end_ns (ktime_get_ns(); U64_MAX: none), the end of its
 * thread's boost budget, whichever comes first.
 */
void gpuslot_hold_boosted_locked(struct gpuslot_domain *d,
				 struct gpuslot_file *f, u64 budget_end_ns);
/* How fdinfo names a refusal of the boost. */
const char *gpuslot_boost_refusal_name(enum gpuslot_boost_refusal r);
/*
 * Apply to the holders of @d the priorities their waiters lend them
 * (priority inheritance, lock.c) where they changed since. May sleep: call
 * without d->lock.
 */
void gpuslot_domain_inherit(struct gpuslot_domain *d);
/* End the boost of hold @seq of @f (or an older one). May sleep. */
void gpuslot_file_unboost(struct gpuslot_file *f, u64 seq);
/*
 * Wait until gpuslot_domain_inherit() is done with @f, which is no holder
 * any more: then it may be freed. May sleep.
 */
void gpuslot_file_unpinned(struct gpuslot_file *f);
int gpuslot_domain_set_max_hold_ms(struct gpuslot_domain *d,
				   unsigned int ms);
unsigned int gpuslot_domain_max_hold_ms(struct gpuslot_domain *d);
int gpuslot_domain_set_max_boost_share(struct gpuslot_domain *d,
				       unsigned int share);
unsigned int gpuslot_domain_max_boost_share(struct gpuslot_domain *d);

#endif /* GPUSLOT_BOOST_SCHED_H */
