// SPDX-License-Identifier: GPL-2.0
/*
 * The lock of a gpuslot domain: the core (core.c) under d->lock, waiting
 * with deadlines and signals, the grant, direct handoff to the woken
 * waiter after its boost, release, and the statistics of waits and holds.
 */
#include <linux/bitops.h>
#include <linux/cred.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/pid.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/string.h>

#include "async.h"
#include "boost_sched.h"
#include "compat.h"
#include "lock.h"

ktime_t gpuslot_deadline(u64 deadline_ns)
{
	/* The caller's CLOCK_MONOTONIC is its time namespace's. */
	return gpuslot_timens_monotonic_to_host(ns_to_ktime(min_t(u64, deadline_ns,
								  KTIME_MAX)));
}

bool gpuslot_deadline_passed(ktime_t expires)
{
	return ktime_get() >= expires;
}

int gpuslot_domain_wait(struct gpuslot_domain *d, const bool *done,
			ktime_t *expires)
	__must_hold(&d->lock)
{
	int ret = 0;

	lockdep_assert_held(&d->lock);
	for (;;) {
		/* A waker sets *done under d->lock, then wakes us. */
		set_current_state(TASK_INTERRUPTIBLE);
		if (*done)
			break;
		/*
		 * The caller leaves the queue and returns: under SA_RESTART
		 * the call starts again, at the back of the queue, with the
		 * same absolute deadline; otherwise userspace sees EINTR.
		 */
		if (signal_pending(current)) {
			ret = -ERESTARTSYS;
			break;
		}
		if (expires && gpuslot_deadline_passed(*expires)) {
			ret = -ETIMEDOUT;
			break;
		}
		spin_unlock(&d->lock);
		if (expires)
			schedule_hrtimeout_range(expires,
						 current->timer_slack_ns,
						 HRTIMER_MODE_ABS);
		else
			schedule();
		spin_lock(&d->lock);
	}
	__set_current_state(TASK_RUNNING);
	/* A grant that raced with the signal or the timeout wins. */
	return *done ? 0 : ret;
}

static unsigned int gpuslot_hist_bucket(u64 ns)
{
	unsigned int b = ns ? fls64(ns) - 1 : 0;

	return min_t(unsigned int, b, GPUSLOT_HIST_BUCKETS - 1);
}

void gpuslot_grant(struct gpuslot_domain *d, struct gpuslot_waiter *w,
		   unsigned int slot, u64 now)
{
	struct gpuslot_file *f = w->file;
	struct gpuslot_counters *c = &d->counters;
	u64 wait_ns = gpuslot_since(now, w->start_ns);

	lockdep_assert_held(&d->lock);
	f->state = GPUSLOT_FILE_HOLDING;
	f->slot = slot;
	f->hold_seq++;
	f->hold_generation = d->core.generation;
	f->hold_start_ns = now;
	f->holder_tgid = get_pid(w->tgid);
	f->holder_tid = get_pid(w->tid);
	memcpy(f->holder_comm, w->comm, sizeof(f->holder_comm));
	f->hold_boost = GPUSLOT_HOLD_UNBOOSTED;
	/* The bound of this hold: max_hold_ms is read when it is granted. */
	f->hold_max_ns = (u64)d->max_hold_ms * NSEC_PER_MSEC;
	d->holder[slot] = f;

	w->slot = slot;
	w->generation = d->core.generation;
	w->seq = f->hold_seq;

	c->acquisitions++;
	c->total_wait_ns += wait_ns;
	c->max_wait_ns = max(c->max_wait_ns, wait_ns);
	c->wait_hist[gpuslot_hist_bucket(wait_ns)]++;
}

/*
 * The hold just granted to @w is the one its thread boosted itself for
 * before it slept: mark it so. The file was ACQUIRING from that boost to
 * this grant, so no other hold can have come between; should one have,
 * the boost is not claimed, and the granter boosts as for any waiter.
 */
static void gpuslot_grant_boosted_waiter(struct gpuslot_domain *d,
					 struct gpuslot_waiter *w)
{
	lockdep_assert_held(&d->lock);
	if (!w->boosted)
		return;
	if (WARN_ON_ONCE(w->seq != w->boost_seq)) {
		w->boosted = false;
		return;
	}
	gpuslot_hold_boosted_locked(d, w->file, w->budget_end_ns);
}

/*
 * Complete what the core did under d->lock: waiters it failed are woken at
 * once and leave @done; the granted ones stay on it for
 * gpuslot_finish_handoffs(), which boosts each one that did not boost
 * itself before it slept, without d->lock, and then wakes it: the new
 * holder is SCHED_FIFO before the scheduler sees it, and does not wake to
 * spin on d->lock while its granter still holds it.
 */
void gpuslot_wake_done(struct gpuslot_domain *d, struct list_head *done,
		       u64 now)
	__must_hold(&d->lock)
{
	struct gpuslot_core_waiter *cw, *tmp;

	lockdep_assert_held(&d->lock);
	list_for_each_entry_safe(cw, tmp, done, node) {
		struct gpuslot_waiter *w =
			container_of(cw, struct gpuslot_waiter, core);

		if (!w->task) {
			list_del_init(&cw->node);
			gpuslot_async_done_locked(d, w, now);
			continue;
		}
		if (cw->granted) {
			gpuslot_grant(d, w, cw->slot, now);
			gpuslot_grant_boosted_waiter(d, w);
			/* Boosted and woken by gpuslot_finish_handoffs(). */
			get_task_struct(w->task);
			continue;
		}
		/*
		 * The file stays ACQUIRING until its thread, which may have
		 * to end its own boost first, makes it idle.
		 */
		list_del_init(&cw->node);
		/* The waiter reads ready under d->lock or after its wakeup. */
		w->ready = true;
		wake_up_process(w->task);
	}
}

/* Boost every new holder on @done that is not yet; they still sleep. */
static void gpuslot_boost_handoffs(struct gpuslot_domain *d,
				   struct list_head *done)
{
	struct gpuslot_core_waiter *cw;

	list_for_each_entry(cw, done, node) {
		struct gpuslot_waiter *w =
			container_of(cw, struct gpuslot_waiter, core);

		if (!w->boosted)
			gpuslot_file_boost(w->file, d, w->seq, w->task);
	}
}

/* Wake the boosted new holders on @done and drop their task references. */
static void gpuslot_wake_handoffs(struct list_head *done)
{
	struct gpuslot_core_waiter *cw, *tmp;

	list_for_each_entry_safe(cw, tmp, done, node) {
		struct gpuslot_waiter *w =
			container_of(cw, struct gpuslot_waiter, core);
		struct task_struct *task = w->task;

		list_del_init(&cw->node);
		/*
		 * @w lives on the waiter's stack: untouchable once it is
		 * ready. Pairs with smp_load_acquire() in gpuslot_wait_ready().
		 */
		smp_store_release(&w->ready, true);
		wake_up_process(task);
		put_task_struct(task);
	}
}

void gpuslot_finish_handoffs(struct gpuslot_domain *d, struct list_head *done)
{
	gpuslot_boost_handoffs(d, done);
	gpuslot_wake_handoffs(done);
}

void gpuslot_release_locked(struct gpuslot_domain *d, struct gpuslot_file *f,
			    struct list_head *done)
{
	u64 now = gpuslot_clock_ns();
	u64 hold_ns = gpuslot_since(now, f->hold_start_ns);

	lockdep_assert_held(&d->lock);
	d->counters.max_hold_ns = max(d->counters.max_hold_ns, hold_ns);
	d->holder[f->slot] = NULL;
	f->state = GPUSLOT_FILE_IDLE;
	put_pid(f->holder_tgid);
	put_pid(f->holder_tid);
	f->holder_tgid = NULL;
	f->holder_tid = NULL;
	/* Only a boosted hold under a bound has its clock running. */
	gpuslot_overrun_cancel_locked(f);
	gpuslot_core_release(&d->core, f->slot, done);
	gpuslot_wake_done(d, done, now);
}

void gpuslot_waiter_init(struct gpuslot_waiter *w, struct gpuslot_file *f)
{
	w->file = f;
	w->task = current;
	w->tgid = task_tgid(current);
	w->tid = task_pid(current);
	w->uid = current_uid();
	w->start_ns = gpuslot_clock_ns();
	w->ready = false;
	w->boosted = false;
}

/* Whether @uid has @max waiters in @d's lock queue. */
static bool gpuslot_lock_user_full(struct gpuslot_domain *d, kuid_t uid,
				   unsigned int max)
{
	struct gpuslot_core_waiter *cw;
	unsigned int n = 0;

	list_for_each_entry(cw, &d->core.waiters, node) {
		struct gpuslot_waiter *w =
			container_of(cw, struct gpuslot_waiter, core);

		if (uid_eq(w->uid, uid) && ++n >= max)
			return true;
	}
	return false;
}

bool gpuslot_lock_queue_full(struct gpuslot_domain *d)
	__must_hold(&d->lock)
{
	kuid_t uid = current_uid();

	lockdep_assert_held(&d->lock);
	/* No user can have its share of a queue shorter than that. */
	if (likely(d->core.nr_waiters < GPUSLOT_MAX_WAITERS_PER_USER))
		return false;
	if (d->core.nr_waiters >= GPUSLOT_MAX_WAITERS) {
		pr_warn_ratelimited("gpuslot: gpu%u: %u waiters queued, the most a domain takes: ENOSPC for pid %d\n",
				    d->id, d->core.nr_waiters, task_tgid_nr(current));
		return true;
	}
	if (!gpuslot_lock_user_full(d, uid, GPUSLOT_MAX_WAITERS_PER_USER))
		return false;
	pr_warn_ratelimited("gpuslot: gpu%u: uid %u has %u waiters queued, the most a user takes: ENOSPC for pid %d\n",
			    d->id, from_kuid(&init_user_ns, uid),
			    GPUSLOT_MAX_WAITERS_PER_USER, task_tgid_nr(current));
	return true;
}

#define GPUSLOT_ACQUIRE_FLAGS (GPUSLOT_ACQUIRE_TRY | GPUSLOT_ACQUIRE_DEADLINE)

int gpuslot_file_may_acquire(struct gpuslot_domain *d, struct gpuslot_file *f,
			     u64 allowed)
	__must_hold(&d->lock)
{
	lockdep_assert_held(&d->lock);
	if (f->state != GPUSLOT_FILE_IDLE || f->async_error)
		return f->state == GPUSLOT_FILE_HOLDING ? -EDEADLK : -EBUSY;
	return allowed & gpuslot_core_valid(&d->core) ? 0 : -EINVAL;
}

/*
 * The second half of a granted wait: the granter boosts this thread, unless
 * it boosted itself before it slept, then sets @ready and wakes it. Not
 * interruptible: the slot is ours already, and the granter is a few
 * instructions from done.
 */
static void gpuslot_wait_ready(struct gpuslot_waiter *w)
{
	for (;;) {
		set_current_state(TASK_UNINTERRUPTIBLE);
		/* Pairs with smp_store_release() in gpuslot_wake_handoffs(). */
		if (smp_load_acquire(&w->ready))
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
}

int gpuslot_file_acquire(struct gpuslot_file *f, struct gpuslot_acquire *a,
			 u64 *seq)
{
	bool timed = a->flags & GPUSLOT_ACQUIRE_DEADLINE;
	u64 allowed = a->allowed_mask ? a->allowed_mask : ~0ULL;
	struct gpuslot_domain *d;
	struct gpuslot_waiter w;
	ktime_t expires = 0;
	int slot, ret;
	u64 now;

	if (a->__reserved || (a->flags & ~GPUSLOT_ACQUIRE_FLAGS) ||
	    (a->flags & GPUSLOT_ACQUIRE_TRY && timed) ||
	    (!timed && a->deadline_ns))
		return -EINVAL;

	gpuslot_waiter_init(&w, f);
	get_task_comm(w.comm, current);
	if (timed)
		expires = gpuslot_deadline(a->deadline_ns);

	d = gpuslot_file_lock(f);
	ret = gpuslot_file_may_acquire(d, f, allowed);
	if (ret)
		goto unlock;
	/* For fdinfo while the file is ACQUIRING; one acquire at a time. */
	f->wait_allowed = allowed;

	now = w.start_ns;
	slot = gpuslot_core_try_acquire(&d->core, allowed);
	/*
	 * No boost for a waiter that cannot queue. A full queue is said
	 * first, whatever the deadline, so that the bound's error does not
	 * depend on how fast the caller got here.
	 */
	if (slot < 0 && !(a->flags & GPUSLOT_ACQUIRE_TRY) &&
	    gpuslot_lock_queue_full(d)) {
		ret = -ENOSPC;
		goto unlock;
	}
	/* A deadline already past was one try: no boost, no queueing. */
	if (slot < 0 && timed && gpuslot_deadline_passed(expires)) {
		d->counters.contended++;
		d->counters.timeouts++;
		ret = -ETIMEDOUT;
		goto unlock;
	}
	if (slot < 0 && !(a->flags & GPUSLOT_ACQUIRE_TRY) &&
	    gpuslot_waiter_boost(d, &w)) {
		/*
		 * d->lock was dropped meanwhile: a slot may have come free,
		 * or k shrunk below @allowed.
		 */
		now = gpuslot_clock_ns();
		if (!(allowed & gpuslot_core_valid(&d->core))) {
			ret = -EINVAL;
			goto fail;
		}
		slot = gpuslot_core_try_acquire(&d->core, allowed);
	}
	if (slot >= 0) {
		gpuslot_grant(d, &w, slot, now);
		gpuslot_grant_boosted_waiter(d, &w);
		spin_unlock(&d->lock);
		if (!w.boosted)
			gpuslot_file_boost(f, d, w.seq, current);
		goto granted;
	}
	if (a->flags & GPUSLOT_ACQUIRE_TRY) {
		ret = -EAGAIN;
		goto unlock;
	}

	/* Others may have queued while the boost dropped d->lock. */
	if (gpuslot_lock_queue_full(d)) {
		ret = -ENOSPC;
		goto fail;
	}
	gpuslot_core_enqueue(&d->core, &w.core, allowed);
	f->state = GPUSLOT_FILE_ACQUIRING;
	d->counters.contended++;
	ret = gpuslot_domain_wait(d, &w.core.done, timed ? &expires : NULL);
	if (ret) {
		gpuslot_core_cancel(&d->core, &w.core);
		/* Once per interrupted wait, restarted or not. */
		if (ret == -ERESTARTSYS)
			d->counters.interrupted++;
		else
			d->counters.timeouts++;
		goto fail;
	}
	if (w.core.error) {
		ret = w.core.error;
		goto fail;
	}
	spin_unlock(&d->lock);
	gpuslot_wait_ready(&w);
granted:
	/* This call's grant: the file may hold a later one by now. */
	a->slot = w.slot;
	a->generation = w.generation;
	*seq = w.seq;
	return 0;
fail:
	/*
	 * The wait failed. A boost taken for it ends, and its hold number
	 * is used up, so that the ledger takes the boost of the file's
	 * next hold. The file was ACQUIRING until here: no other thread of
	 * it can have been granted that number meanwhile.
	 */
	f->state = GPUSLOT_FILE_IDLE;
	if (w.boosted)
		f->hold_seq = w.boost_seq;
	spin_unlock(&d->lock);
	if (w.boosted)
		gpuslot_file_unboost(f, w.boost_seq);
	return ret;
unlock:
	spin_unlock(&d->lock);
	return ret;
}

/* Release the hold of @f: hold @seq only, unless @any. */
static int gpuslot_release_hold(struct gpuslot_file *f, bool any, u64 seq,
				unsigned int *slot)
{
	struct gpuslot_domain *d = gpuslot_file_lock(f);
	LIST_HEAD(done);

	if (f->state != GPUSLOT_FILE_HOLDING || (!any && f->hold_seq != seq)) {
		spin_unlock(&d->lock);
		return -EPERM;
	}
	if (slot)
		*slot = f->slot;
	seq = f->hold_seq;
	gpuslot_release_locked(d, f, &done);
	spin_unlock(&d->lock);
	/*
	 * The new holder is boosted while it sleeps and woken before this
	 * thread restores its own attributes: the restore is not on the new
	 * holder's path. Where the scheduler would put it on this CPU, still
	 * at the same RT priority, it picks an idle or lower-priority CPU
	 * instead; one pinned here runs as soon as the restore drops this
	 * thread below it, as early as restoring first would have let it.
	 */
	gpuslot_finish_handoffs(d, &done);
	gpuslot_file_unboost(f, seq);
	return 0;
}

int gpuslot_file_release(struct gpuslot_file *f, struct gpuslot_release *r)
{
	if (r->flags || r->__reserved)
		return -EINVAL;
	return gpuslot_release_hold(f, true, 0, &r->slot);
}

int gpuslot_file_release_hold(struct gpuslot_file *f, u64 seq)
{
	return gpuslot_release_hold(f, false, seq, NULL);
}
