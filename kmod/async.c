// SPDX-License-Identifier: GPL-2.0
/*
 * Asynchronous acquire: a file queues for a slot without a thread asleep
 * in the kernel, and poll() says when the slot is its own. Event loops
 * (ROS 2 executors, asyncio, epoll servers) wait for many slots, or for a
 * slot and their sockets, in one thread.
 *
 *   ACQUIRE_ASYNC     queue the file's waiter (or take a free slot at once)
 *   poll              EPOLLIN once granted, or once the wait failed
 *   ACQUIRE_COMPLETE  the grant (slot, generation) for the calling thread,
 *                     which is boosted now: a holder is boosted from the
 *                     moment a thread of it runs, and no earlier, as no
 *                     thread of it is known to run the job before
 *   ACQUIRE_CANCEL    leave the queue, or give back a grant not completed
 *
 * The waiter is the same FIFO entry a sleeping ACQUIRE queues, so both
 * kinds keep one order. Between the grant and COMPLETE the slot is held
 * ("pending" in the holders table) and counts as held for everyone else.
 */
#include <linux/pid.h>
#include <linux/poll.h>
#include <linux/sched.h>

#include "async.h"
#include "boost_sched.h"
#include "lock.h"

void gpuslot_async_done_locked(struct gpuslot_domain *d,
			       struct gpuslot_waiter *w, u64 now)
{
	struct gpuslot_file *f = w->file;

	lockdep_assert_held(&d->lock);
	if (w->core.granted) {
		gpuslot_grant(d, w, w->core.slot, now);
		f->state = GPUSLOT_FILE_GRANTED;
		f->hold_boost = GPUSLOT_HOLD_PENDING;
	} else {
		f->state = GPUSLOT_FILE_IDLE;
		f->async_error = w->core.error;
	}
	/* The holder took references of its own in gpuslot_grant(). */
	put_pid(w->tgid);
	put_pid(w->tid);
	w->tgid = NULL;
	w->tid = NULL;
	wake_up_interruptible_poll(&f->async_wq, EPOLLIN | EPOLLRDNORM);
}

int gpuslot_file_acquire_async(struct gpuslot_file *f,
			       struct gpuslot_acquire *a)
{
	u64 allowed = a->allowed_mask ? a->allowed_mask : ~0ULL;
	struct gpuslot_waiter *w = &f->async;
	char comm[TASK_COMM_LEN];
	struct gpuslot_domain *d;
	int slot, ret;

	/* No TRY, no timeout: the caller's event loop keeps the time. */
	if (a->flags || a->deadline_ns || a->__reserved)
		return -EINVAL;

	get_task_comm(comm, current);
	d = gpuslot_file_lock(f);
	ret = gpuslot_file_may_acquire(d, f, allowed);
	if (ret)
		goto unlock;
	slot = gpuslot_core_try_acquire(&d->core, allowed);
	if (slot < 0 && gpuslot_lock_queue_full(d)) {
		ret = -ENOSPC;
		goto unlock;
	}
	gpuslot_waiter_init(w, f);
	memcpy(w->comm, comm, sizeof(w->comm));
	w->task = NULL;
	w->tgid = get_pid(w->tgid);
	w->tid = get_pid(w->tid);

	if (slot >= 0) {
		w->core.granted = true;
		w->core.slot = slot;
		gpuslot_async_done_locked(d, w, w->start_ns);
		goto unlock;
	}
	gpuslot_core_enqueue(&d->core, &w->core, allowed);
	f->state = GPUSLOT_FILE_QUEUED;
	d->counters.contended++;
unlock:
	spin_unlock(&d->lock);
	return ret;
}

int gpuslot_file_acquire_complete(struct gpuslot_file *f,
				  struct gpuslot_acquire *a, u64 *seq)
{
	struct pid *old_tgid, *old_tid;
	char comm[TASK_COMM_LEN];
	struct gpuslot_domain *d;
	int ret;

	if (a->flags || a->deadline_ns || a->allowed_mask || a->__reserved)
		return -EINVAL;

	get_task_comm(comm, current);
	d = gpuslot_file_lock(f);
	switch (f->state) {
	case GPUSLOT_FILE_QUEUED:
		ret = -EAGAIN;
		goto unlock;
	case GPUSLOT_FILE_GRANTED:
		break;
	default:
		/* The wait failed: say why, once. */
		ret = f->async_error ? f->async_error : -EPERM;
		f->async_error = 0;
		goto unlock;
	}
	/*
	 * The completing thread is the holder now, in the tables too, and
	 * its process with it: a forked child that shares the file, or a
	 * process it was passed to, completes as itself.
	 */
	f->state = GPUSLOT_FILE_HOLDING;
	f->hold_boost = GPUSLOT_HOLD_UNBOOSTED;
	old_tgid = f->holder_tgid;
	old_tid = f->holder_tid;
	f->holder_tgid = get_pid(task_tgid(current));
	f->holder_tid = get_pid(task_pid(current));
	memcpy(f->holder_comm, comm, sizeof(f->holder_comm));
	a->slot = f->slot;
	a->generation = f->async.generation;
	*seq = f->hold_seq;
	spin_unlock(&d->lock);
	put_pid(old_tgid);
	put_pid(old_tid);
	gpuslot_file_boost(f, d, *seq, current);
	return 0;
unlock:
	spin_unlock(&d->lock);
	return ret;
}

int gpuslot_file_acquire_cancel(struct gpuslot_file *f,
				struct gpuslot_release *r)
{
	struct gpuslot_domain *d;
	LIST_HEAD(done);
	int ret = 0;

	if (r->flags || r->__reserved)
		return -EINVAL;

	d = gpuslot_file_lock(f);
	r->slot = GPUSLOT_NO_SLOT;
	switch (f->state) {
	case GPUSLOT_FILE_QUEUED:
		gpuslot_async_cleanup_locked(d, f);
		break;
	case GPUSLOT_FILE_GRANTED:
		/* Never boosted: a handoff with nothing to restore. */
		r->slot = f->slot;
		gpuslot_release_locked(d, f, &done);
		break;
	default:
		if (f->async_error)
			f->async_error = 0;
		else
			ret = -EPERM;
	}
	spin_unlock(&d->lock);
	gpuslot_finish_handoffs(d, &done);
	return ret;
}

void gpuslot_async_cleanup_locked(struct gpuslot_domain *d,
				  struct gpuslot_file *f)
{
	struct gpuslot_waiter *w = &f->async;

	lockdep_assert_held(&d->lock);
	if (f->state == GPUSLOT_FILE_QUEUED) {
		gpuslot_core_cancel(&d->core, &w->core);
		f->state = GPUSLOT_FILE_IDLE;
	}
	put_pid(w->tgid);
	put_pid(w->tid);
	w->tgid = NULL;
	w->tid = NULL;
	f->async_error = 0;
}

__poll_t gpuslot_file_poll(struct gpuslot_file *f)
{
	struct gpuslot_domain *d = gpuslot_file_lock(f);
	__poll_t mask = 0;

	if (f->state == GPUSLOT_FILE_GRANTED || f->async_error)
		mask = EPOLLIN | EPOLLRDNORM;
	spin_unlock(&d->lock);
	return mask;
}
