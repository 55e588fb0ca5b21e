/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The lock of a domain (lock.c): acquire, release, the grant and the
 * handoff to a woken waiter, and waiting under d->lock.
 */
#ifndef GPUSLOT_LOCK_H
#define GPUSLOT_LOCK_H

#include "domain.h"

/* ACQUIRE; *@seq: the hold granted, for gpuslot_file_release_hold(). */
int gpuslot_file_acquire(struct gpuslot_file *f, struct gpuslot_acquire *a,
			 u64 *seq);
int gpuslot_file_release(struct gpuslot_file *f, struct gpuslot_release *r);
/*
 * Whether @f may start an acquire of @allowed now, under d->lock: 0, or
 * the errno ACQUIRE and ACQUIRE_ASYNC give (-EDEADLK, -EBUSY, -EINVAL).
 */
int gpuslot_file_may_acquire(struct gpuslot_domain *d, struct gpuslot_file *f,
			     u64 allowed)
	__must_hold(&d->lock);
/* Release hold @seq of @f, and no later one; -EPERM if it is over. */
int gpuslot_file_release_hold(struct gpuslot_file *f, u64 seq);
/*
 * Give back the slot @f holds (HOLDING or GRANTED), under d->lock; the
 * waiters it grants are woken, and gpuslot_finish_handoffs() must follow
 * once d->lock is dropped.
 */
void gpuslot_release_locked(struct gpuslot_domain *d, struct gpuslot_file *f,
			    struct list_head *done);
/*
 * Complete under d->lock what the core did to the waiters on @done: the
 * granted ones become holders, and every one is woken and leaves it. What
 * the holders inherit is brought up to date, for gpuslot_finish_handoffs().
 */
void gpuslot_wake_done(struct gpuslot_domain *d, struct list_head *done,
		       u64 now)
	__must_hold(&d->lock);
/*
 * After gpuslot_wake_done(), without d->lock: apply the priorities the
 * holders inherit now (gpuslot_domain_inherit()). @done is empty. May sleep.
 */
void gpuslot_finish_handoffs(struct gpuslot_domain *d, struct list_head *done);
/* Everything but @w->comm, which the caller reads before taking d->lock. */
void gpuslot_waiter_init(struct gpuslot_waiter *w, struct gpuslot_file *f);
/*
 * Whether d->lock's lock queue holds GPUSLOT_MAX_WAITERS already; says so
 * in the kernel log (rate-limited) when it does.
 */
bool gpuslot_lock_queue_full(struct gpuslot_domain *d)
	__must_hold(&d->lock);
/* Make @w's file the holder of @slot, under d->lock. */
void gpuslot_grant(struct gpuslot_domain *d, struct gpuslot_waiter *w,
		   unsigned int slot, u64 now);

/*
 * An absolute CLOCK_MONOTONIC deadline from userspace, as a ktime. It is
 * absolute so that a call restarted after a signal (-ERESTARTSYS) ends
 * when the first one would have: the restart reads the same struct.
 */
ktime_t gpuslot_deadline(u64 deadline_ns);
/* CLOCK_MONOTONIC has reached @expires: a wait for it would not sleep. */
bool gpuslot_deadline_passed(ktime_t expires);
/*
 * Sleep with d->lock held (dropped while asleep) until a waker sets *done
 * under d->lock, a signal arrives (-ERESTARTSYS: the caller leaves the
 * queue and returns it, so that SA_RESTART restarts the call and userspace
 * sees EINTR otherwise) or *expires passes (-ETIMEDOUT; NULL waits without
 * a deadline). *done wins every race.
 */
int gpuslot_domain_wait(struct gpuslot_domain *d, const bool *done,
			ktime_t *expires)
	__must_hold(&d->lock);

#endif /* GPUSLOT_LOCK_H */
