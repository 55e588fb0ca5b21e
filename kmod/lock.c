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
	f->inherit_prio = 0;
	f->inherit_applied = 0;
	/* The bound of this hold: max_hold_ms is read when it is granted. */
	f->hold_max_ns = (u64)d->max_hold_ms * NSEC_PER_MSEC;
	d->holder[slot] = f;
	/* held_mask changed. */
	gpuslot_work_publish_locked(d);

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
 * Priority inheritance over the k-exclusion lock.
 *
 * The rule: a queued waiter lends its real-time priority (lend_prio, at
 * most GPUSLOT_MAX_BOOST_PRIORITY) to the holder of every slot it accepts,
 * and a holder runs at least at the highest priority lent to it, within
 * the hold's boost: its effective priority is max(boost_priority, what it
 * inherits), and nothing at all when the boost is off (boost_priority 0).
 *
 * Why every holder the waiter accepts, not one: with one FIFO queue over k
 * slots a waiter is blocked by every holder of a slot it accepts, and any
 * one of them releasing moves it forward (the slot goes to the first waiter
 * that accepts it, this one or one ahead of it, which then holds a slot
 * this one accepts and inherits in turn). Lending to all of them bounds its
 * wait by the shortest of their remaining holds at its priority. The
 * k-FMLP (Brandenburg's dissertation; GPUSync, Elliott and Anderson) gives
 * each of k replicas a FIFO queue of its own, whose holder inherits from
 * that queue; here one FIFO queue serves every slot, and the "queue" a
 * waiter is in is every slot it accepts, so it lends to every holder among
 * them. Lending to one (the oldest holder, say) would leave the waiter
 * behind that one's hold when another could have served it sooner, and
 * picking the one that finishes first needs knowing the future.
 *
 * The cost: a walk of the queue under d->lock, O(waiters x slots) at most
 * (1024 x 64 bit tests), only while some queued waiter lends a priority (or
 * just stopped): a domain without real-time waiters pays a counter test.
 * Nothing is allocated; the ledger calls that apply the result sleep and
 * run without d->lock, in gpuslot_domain_inherit(), by the thread whose
 * change made them necessary: a lending waiter as it queues, at the
 * priority it lends, so the raise never waits for anyone below it; a
 * waiter that leaves (timeout, signal) before it returns; a granter before
 * it ends its own boost, still at least at the priority of every waiter
 * that lends to the new holder (they accept the slot it just gave up, so
 * they lent to it too), unless its boost ran out; and the new holder
 * itself as it boosts itself.
 */
static void gpuslot_inherit_update_locked(struct gpuslot_domain *d)
{
	u8 want[GPUSLOT_MAX_SLOTS] = { 0 };
	struct gpuslot_core_waiter *cw;
	unsigned int s;

	lockdep_assert_held(&d->lock);
	if (!d->nr_lending && !d->inheriting)
		return;
	list_for_each_entry(cw, &d->core.waiters, node) {
		struct gpuslot_waiter *w =
			container_of(cw, struct gpuslot_waiter, core);
		u64 m = cw->allowed & d->core.held;

		if (!w->task || !w->lend_prio)
			continue;
		while (m) {
			s = __ffs64(m);
			m &= m - 1;
			if (s < GPUSLOT_MAX_SLOTS && w->lend_prio > want[s])
				want[s] = w->lend_prio;
		}
	}
	for (s = 0; s < GPUSLOT_MAX_SLOTS; s++) {
		struct gpuslot_file *f = d->holder[s];

		if (!f || f->inherit_prio == want[s])
			continue;
		f->inherit_prio = want[s];
		d->inherit_dirty = true;
	}
	d->inheriting = d->nr_lending != 0;
}

/* The real-time priority the current thread lends while it waits. */
static unsigned int gpuslot_current_lend_prio(void)
{
	unsigned int policy = READ_ONCE(current->policy);

	/*
	 * SCHED_DEADLINE runs above every real-time priority: it lends the
	 * highest the ceiling allows.
	 */
	if (policy == SCHED_DEADLINE)
		return GPUSLOT_MAX_BOOST_PRIORITY;
	if (policy != SCHED_FIFO && policy != SCHED_RR)
		return 0;
	return min_t(unsigned int, READ_ONCE(current->rt_priority),
		     GPUSLOT_MAX_BOOST_PRIORITY);
}

/*
 * Complete what the core did under d->lock: waiters it failed or granted
 * are woken at once, under d->lock; the holders' inherited priorities are
 * brought up to date for gpuslot_finish_handoffs().
 *
 * A new holder is woken here, before its granter drops d->lock, and boosts
 * itself once it runs: the handoff has no window in which it sleeps on its
 * granter. It used to sleep, uninterruptibly, until its granter had boosted
 * it after dropping d->lock with preemption on: a granter at SCHED_OTHER
 * preempted there left a higher-priority new holder asleep for as long as
 * anything above the granter ran. This is the choice rtmutex.c makes for
 * its wake_q (the waiter is woken with the lock's preemption still off,
 * and adjusts its own priority): the new holder wakes at the priority it
 * waited at, its own, which is what the scheduler owes it; the boost only
 * raises it above that, and a waiter that wanted a boost took it before it
 * slept (gpuslot_waiter_boost()), so in the common case it wakes boosted.
 * Having the granter lend the new holder its priority for the step instead
 * would need the granter to run sched_setattr() on itself around the
 * handoff: two more sleeping calls on the path, for what the wake-up gives
 * for free. Outside PREEMPT_RT d->lock keeps preemption off until the
 * granter drops it, so the woken thread runs no later than that; on
 * PREEMPT_RT d->lock is a priority-inheriting lock, and a woken holder that
 * preempts its granter and blocks on it lends the granter its priority
 * until the unlock. Either way the granter cannot be preempted between the
 * grant and the wake-up.
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

		list_del_init(&cw->node);
		if (!w->task) {
			gpuslot_async_done_locked(d, w, now);
			continue;
		}
		if (w->lend_prio)
			d->nr_lending--;
		if (cw->granted) {
			gpuslot_grant(d, w, cw->slot, now);
			gpuslot_grant_boosted_waiter(d, w);
		}
		/*
		 * The waiter reads done under d->lock, which we hold: @w,
		 * on its stack, and its task stay until we drop it. A failed
		 * one's file stays ACQUIRING until its thread, which may
		 * have to end its own boost first, makes it idle.
		 */
		wake_up_process(w->task);
	}
	gpuslot_inherit_update_locked(d);
}

void gpuslot_finish_handoffs(struct gpuslot_domain *d, struct list_head *done)
{
	/* Every waiter on @done was woken under d->lock. */
	WARN_ON_ONCE(!list_empty(done));
	if (READ_ONCE(d->inherit_dirty))
		gpuslot_domain_inherit(d);
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
	/* Its work goes with the hold, before the slot goes to anyone. */
	gpuslot_work_hold_ended_locked(d, f->slot);
	gpuslot_core_release(&d->core, f->slot, done);
	gpuslot_work_publish_locked(d);
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
	w->boosted = false;
	w->lend_prio = gpuslot_current_lend_prio();
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
	if (w.lend_prio) {
		/*
		 * Lend our priority to the holders we wait for before we
		 * sleep, at that priority: d->lock is dropped meanwhile, and
		 * a grant then finds us awake, which the wait sees.
		 */
		d->nr_lending++;
		gpuslot_inherit_update_locked(d);
		if (d->inherit_dirty) {
			spin_unlock(&d->lock);
			gpuslot_domain_inherit(d);
			spin_lock(&d->lock);
		}
	}
	ret = gpuslot_domain_wait(d, &w.core.done, timed ? &expires : NULL);
	if (ret) {
		gpuslot_core_cancel(&d->core, &w.core);
		if (w.lend_prio) {
			d->nr_lending--;
			gpuslot_inherit_update_locked(d);
		}
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
	/*
	 * Woken by the granter, which did not boost us: we run at the
	 * priority we waited at, and boost ourselves (the hold's boost and
	 * what its waiters lend it) unless we did before we slept.
	 */
	if (!w.boosted)
		gpuslot_file_boost(f, d, w.seq, current);
	if (READ_ONCE(d->inherit_dirty))
		gpuslot_domain_inherit(d);
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
	/* The holders we lent to get their own priority back. */
	if (READ_ONCE(d->inherit_dirty))
		gpuslot_domain_inherit(d);
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
	 * The new holder was woken under d->lock and boosts itself; we
	 * apply what the waiters still queued lend it while we still run at
	 * our own boost and inheritance (they lent to us too), then end
	 * ours: the restore is not on the new holder's path.
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
