// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot hardware-queue admission.
 *
 * An AMD GPU's command processor has 32 hardware queue descriptors; amdgpu
 * keeps 8 for its kernel rings, leaving 24 to user compute queues on gfx9
 * and MI-series GPUs (8 on RX 6000/7000; KFD reports it as num_cp_queues).
 * Past that the firmware time-slices queues and every task on the GPU slows
 * down without an error. Clients reserve the queues they will create; the
 * budget (budget.c) turns the silent collapse into ENOSPC or a FIFO wait.
 */
#include <linux/cred.h>
#include <linux/ktime.h>
#include <linux/pid.h>
#include <linux/sched/signal.h>
#include <linux/sched.h>
#include <linux/sysfs.h>

#include "hqd.h"
#include "lock.h"

/* A thread waiting in RESERVE_QUEUES, on that thread's stack. */
struct gpuslot_hqd_waiter {
	struct gpuslot_budget_waiter budget;
	struct gpuslot_file *file;
	struct task_struct *task;
	struct pid *tgid;	/* valid while the thread waits here */
	kuid_t uid;		/* the real uid that asked */
	char comm[TASK_COMM_LEN];
};

/* Whether @uid has @max requests waiting in @d's queue budget. */
static bool gpuslot_hqd_user_full(struct gpuslot_domain *d, kuid_t uid,
				  unsigned int max)
{
	struct gpuslot_budget_waiter *bw;
	unsigned int n = 0;

	list_for_each_entry(bw, &d->budget.waiters, node) {
		struct gpuslot_hqd_waiter *w =
			container_of(bw, struct gpuslot_hqd_waiter, budget);

		if (uid_eq(w->uid, uid) && ++n >= max)
			return true;
	}
	return false;
}

/* The bounds of the lock queue's (lock.c) for the budget's queue. */
static bool gpuslot_hqd_queue_full(struct gpuslot_domain *d, kuid_t uid)
{
	lockdep_assert_held(&d->lock);
	if (likely(d->budget.nr_waiters < GPUSLOT_MAX_WAITERS_PER_USER))
		return false;
	if (d->budget.nr_waiters >= GPUSLOT_MAX_WAITERS) {
		pr_warn_ratelimited("gpuslot: gpu%u: %u queue reservations waiting, the most a domain takes: ENOSPC for pid %d\n",
				    d->id, d->budget.nr_waiters,
				    task_tgid_nr(current));
		return true;
	}
	if (!gpuslot_hqd_user_full(d, uid, GPUSLOT_MAX_WAITERS_PER_USER))
		return false;
	pr_warn_ratelimited("gpuslot: gpu%u: uid %u has %u queue reservations waiting, the most a user takes: ENOSPC for pid %d\n",
			    d->id, from_kuid(&init_user_ns, uid),
			    GPUSLOT_MAX_WAITERS_PER_USER, task_tgid_nr(current));
	return true;
}

/* Add @count to what @f holds. Called under d->lock. */
static void gpuslot_hqd_credit(struct gpuslot_domain *d,
			       struct gpuslot_hqd_waiter *w,
			       unsigned int count)
{
	struct gpuslot_file *f = w->file;

	lockdep_assert_held(&d->lock);
	if (!f->hqd_reserved) {
		list_add_tail(&f->hqd_node, &d->hqd_files);
		d->nr_hqd_files++;
		f->hqd_tgid = get_pid(w->tgid);
		memcpy(f->hqd_comm, w->comm, sizeof(f->hqd_comm));
	}
	f->hqd_reserved += count;
}

/* Credit the granted waiters of @done and wake every one. */
static void gpuslot_hqd_wake_done(struct gpuslot_domain *d,
				  struct list_head *done)
{
	struct gpuslot_budget_waiter *bw, *tmp;

	lockdep_assert_held(&d->lock);
	list_for_each_entry_safe(bw, tmp, done, node) {
		struct gpuslot_hqd_waiter *w =
			container_of(bw, struct gpuslot_hqd_waiter, budget);

		list_del_init(&bw->node);
		if (bw->granted)
			gpuslot_hqd_credit(d, w, bw->count);
		wake_up_process(w->task);
	}
}

/* Give back @count of what @f holds. Called under d->lock. */
static void gpuslot_hqd_debit(struct gpuslot_domain *d,
			      struct gpuslot_file *f, unsigned int count)
{
	LIST_HEAD(done);

	lockdep_assert_held(&d->lock);
	f->hqd_reserved -= count;
	if (!f->hqd_reserved) {
		list_del_init(&f->hqd_node);
		d->nr_hqd_files--;
		put_pid(f->hqd_tgid);
		f->hqd_tgid = NULL;
	}
	gpuslot_budget_unreserve(&d->budget, count, &done);
	gpuslot_hqd_wake_done(d, &done);
}

void gpuslot_hqd_cleanup_locked(struct gpuslot_domain *d,
				struct gpuslot_file *f)
{
	if (f->hqd_reserved)
		gpuslot_hqd_debit(d, f, f->hqd_reserved);
}

#define GPUSLOT_RESERVE_FLAGS (GPUSLOT_RESERVE_WAIT | GPUSLOT_RESERVE_DEADLINE)

int gpuslot_file_reserve_queues(struct gpuslot_file *f,
				struct gpuslot_reserve_queues *r)
{
	bool timed = r->flags & GPUSLOT_RESERVE_DEADLINE;
	struct gpuslot_hqd_waiter w = {
		.file = f,
		.task = current,
		.tgid = task_tgid(current),
		.uid = current_uid(),
	};
	struct gpuslot_domain *d;
	ktime_t expires = 0;
	int ret = 0;

	if ((r->flags & ~GPUSLOT_RESERVE_FLAGS) ||
	    (r->flags & GPUSLOT_RESERVE_WAIT && timed) ||
	    (!timed && r->deadline_ns) ||
	    r->count < 1 || r->count > GPUSLOT_MAX_HQD)
		return -EINVAL;
	get_task_comm(w.comm, current);
	if (timed)
		expires = gpuslot_deadline(r->deadline_ns);

	d = gpuslot_file_lock(f);
	/* More than the limit could never be served, and would block the queue. */
	if (r->count > d->budget.limit) {
		ret = -EINVAL;
		goto unlock;
	}
	if (gpuslot_budget_try_reserve(&d->budget, r->count)) {
		gpuslot_hqd_credit(d, &w, r->count);
		goto done;
	}
	if (!(r->flags & GPUSLOT_RESERVE_FLAGS)) {
		ret = -ENOSPC;
		goto unlock;
	}
	/* A full queue is said first, whatever the deadline, as for ACQUIRE. */
	if (gpuslot_hqd_queue_full(d, w.uid)) {
		ret = -ENOSPC;
		goto unlock;
	}
	/* A deadline already past was one try: nothing queued. */
	if (timed && gpuslot_deadline_passed(expires)) {
		ret = -ETIMEDOUT;
		goto unlock;
	}

	gpuslot_budget_enqueue(&d->budget, &w.budget, r->count);
	f->hqd_waiting++;
	f->hqd_asked += r->count;
	ret = gpuslot_domain_wait(d, &w.budget.done,
				  timed ? &expires : NULL);
	f->hqd_asked -= r->count;
	f->hqd_waiting--;
	if (ret) {
		LIST_HEAD(done);

		/* The waiters behind this one may fit now. */
		gpuslot_budget_cancel(&d->budget, &w.budget, &done);
		gpuslot_hqd_wake_done(d, &done);
		goto unlock;
	}
	/* A lowered limit that this request no longer fits under. */
	ret = w.budget.error;
	if (ret)
		goto unlock;
done:
	r->reserved = f->hqd_reserved;
	r->hqd_used = d->budget.used;
	r->hqd_limit = d->budget.limit;
unlock:
	spin_unlock(&d->lock);
	return ret;
}

int gpuslot_file_unreserve_queues(struct gpuslot_file *f,
				  struct gpuslot_unreserve_queues *u)
{
	struct gpuslot_domain *d;
	int ret = 0;

	if (u->__reserved)
		return -EINVAL;
	d = gpuslot_file_lock(f);
	if (u->count < 1 || u->count > f->hqd_reserved) {
		ret = -EINVAL;
	} else {
		gpuslot_hqd_debit(d, f, u->count);
		u->reserved = f->hqd_reserved;
	}
	spin_unlock(&d->lock);
	return ret;
}

void gpuslot_file_unreserve_undo(struct gpuslot_file *f, unsigned int count)
{
	struct gpuslot_domain *d = gpuslot_file_lock(f);

	/*
	 * What another thread of the file returned since came out of this
	 * call's queues too: the file keeps what it had before the call,
	 * and never less than nothing.
	 */
	count = min(count, f->hqd_reserved);
	if (count)
		gpuslot_hqd_debit(d, f, count);
	spin_unlock(&d->lock);
}

bool gpuslot_hqd_set_limit_locked(struct gpuslot_domain *d, unsigned int limit)
{
	LIST_HEAD(done);
	bool changed = d->budget.limit != limit;

	lockdep_assert_held(&d->lock);
	gpuslot_budget_set_limit(&d->budget, limit, &done);
	gpuslot_hqd_wake_done(d, &done);
	return changed;
}

int gpuslot_domain_set_hqd_limit(struct gpuslot_domain *d,
				 unsigned int limit)
{
	bool changed;

	if (limit < 1 || limit > GPUSLOT_MAX_HQD)
		return -EINVAL;
	spin_lock(&d->lock);
	changed = gpuslot_hqd_set_limit_locked(d, limit);
	spin_unlock(&d->lock);
	if (changed)
		sysfs_notify(&d->dev.kobj, NULL, "hqd_limit");
	return 0;
}

unsigned int gpuslot_domain_hqd_limit(struct gpuslot_domain *d)
{
	return READ_ONCE(d->budget.limit);
}

unsigned int gpuslot_domain_hqd_used(struct gpuslot_domain *d)
{
	return READ_ONCE(d->budget.used);
}

unsigned int gpuslot_domain_hqd_waiters(struct gpuslot_domain *d)
{
	return READ_ONCE(d->budget.nr_waiters);
}
