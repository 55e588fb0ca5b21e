// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot domains: the lock core under a spinlock, waiting with timeouts
 * and signals, direct handoff to the woken waiter, statistics, and the
 * per-file holder state that crash cleanup relies on.
 */
#include <linux/bitops.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/nospec.h>
#include <linux/pid_namespace.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "domain.h"
#include "sysfs.h"

static struct gpuslot_domain *gpuslot_domains[GPUSLOT_MAX_DOMAINS];
static unsigned int gpuslot_domain_count;

unsigned int gpuslot_nr_domains(void)
{
	return gpuslot_domain_count;
}

/* @id comes from userspace (ATTACH): no speculative read past the table. */
struct gpuslot_domain *gpuslot_domain_get(unsigned int id)
{
	unsigned int nr = gpuslot_domain_count;

	if (id >= nr)
		return NULL;
	return gpuslot_domains[array_index_nospec(id, nr)];
}

void gpuslot_domain_free(struct kobject *kobj)
{
	kfree(container_of(kobj, struct gpuslot_domain, kobj));
}

int gpuslot_domains_create(unsigned int nr, struct kobject *parent)
{
	unsigned int i;
	int ret;

	for (i = 0; i < nr; i++) {
		struct gpuslot_domain *d = kzalloc(sizeof(*d), GFP_KERNEL);

		if (!d) {
			ret = -ENOMEM;
			goto fail;
		}
		d->id = i;
		spin_lock_init(&d->lock);
		gpuslot_core_init(&d->core, 1);
		gpuslot_budget_init(&d->budget, GPUSLOT_DEFAULT_HQD_LIMIT);
		INIT_LIST_HEAD(&d->hqd_files);
		d->boost_priority = GPUSLOT_DEFAULT_BOOST_PRIORITY;
		d->max_hold_ms = GPUSLOT_DEFAULT_MAX_HOLD_MS;
		d->max_boost_share = GPUSLOT_DEFAULT_MAX_BOOST_SHARE;
		ret = kobject_init_and_add(&d->kobj, &gpuslot_domain_ktype,
					   parent, "gpu%u", i);
		if (ret) {
			kobject_put(&d->kobj);
			goto fail;
		}
		gpuslot_domains[i] = d;
		gpuslot_domain_count = i + 1;
	}
	return 0;
fail:
	gpuslot_domains_destroy();
	return ret;
}

void gpuslot_domains_destroy(void)
{
	while (gpuslot_domain_count) {
		unsigned int i = --gpuslot_domain_count;

		kobject_put(&gpuslot_domains[i]->kobj);
		gpuslot_domains[i] = NULL;
	}
}

struct gpuslot_domain *gpuslot_file_lock(struct gpuslot_file *f)
	__acquires(&d->lock)
{
	struct gpuslot_domain *d;

	for (;;) {
		d = READ_ONCE(f->domain);
		spin_lock(&d->lock);
		if (likely(d == READ_ONCE(f->domain)))
			return d;
		spin_unlock(&d->lock);
	}
}

void gpuslot_file_init(struct gpuslot_file *f)
{
	f->domain = gpuslot_domains[0];
	f->state = GPUSLOT_FILE_IDLE;
	INIT_LIST_HEAD(&f->hqd_node);
	INIT_LIST_HEAD(&f->boost.node);
	gpuslot_file_overrun_init(f);
	f->async.file = f;
	INIT_LIST_HEAD(&f->async.core.node);
	init_waitqueue_head(&f->async_wq);
}

int gpuslot_file_attach(struct gpuslot_file *f, unsigned int id)
{
	struct gpuslot_domain *to = gpuslot_domain_get(id);
	struct gpuslot_domain *d;
	int ret = 0;

	if (!to)
		return -EINVAL;
	d = gpuslot_file_lock(f);
	/* Lock state and queue reservations belong to the old domain. */
	if (f->state != GPUSLOT_FILE_IDLE || f->async_error ||
	    f->hqd_reserved || f->hqd_waiting)
		ret = -EBUSY;
	else
		WRITE_ONCE(f->domain, to);
	spin_unlock(&d->lock);
	return ret;
}

ktime_t gpuslot_deadline(u64 deadline_ns)
{
	return ns_to_ktime(min_t(u64, deadline_ns, KTIME_MAX));
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
static void gpuslot_wake_done(struct gpuslot_domain *d, struct list_head *done,
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

void gpuslot_file_cleanup(struct gpuslot_file *f)
{
	struct gpuslot_domain *d = gpuslot_file_lock(f);
	LIST_HEAD(done);

	/* No ioctl runs on a file being released: it cannot be ACQUIRING. */
	if (f->state == GPUSLOT_FILE_HOLDING ||
	    f->state == GPUSLOT_FILE_GRANTED)
		gpuslot_release_locked(d, f, &done);
	gpuslot_async_cleanup_locked(d, f);
	gpuslot_hqd_cleanup_locked(d, f);
	spin_unlock(&d->lock);
	gpuslot_finish_handoffs(d, &done);

	/* Idle now: the work cannot arm the clock again. */
	gpuslot_overrun_sync(f);
	gpuslot_file_unboost(f, U64_MAX);
}

void gpuslot_waiter_init(struct gpuslot_waiter *w, struct gpuslot_file *f)
{
	w->file = f;
	w->task = current;
	w->tgid = task_tgid(current);
	w->tid = task_pid(current);
	w->start_ns = gpuslot_clock_ns();
	w->ready = false;
	w->boosted = false;
}

bool gpuslot_lock_queue_full(struct gpuslot_domain *d)
	__must_hold(&d->lock)
{
	lockdep_assert_held(&d->lock);
	if (likely(d->core.nr_waiters < GPUSLOT_MAX_WAITERS))
		return false;
	pr_warn_ratelimited("gpuslot: gpu%u: %u waiters queued, the most a domain takes: ENOSPC for pid %d\n",
			    d->id, d->core.nr_waiters, task_tgid_nr(current));
	return true;
}

void gpuslot_escape_name(char out[GPUSLOT_NAME_ESCAPED_LEN],
			 const char comm[TASK_COMM_LEN])
{
	static const char hex[] = "0123456789abcdef";
	unsigned int i, n = 0;

	for (i = 0; i < TASK_COMM_LEN - 1 && comm[i]; i++) {
		unsigned char c = comm[i];

		if (c > ' ' && c <= '~' && c != '\\') {
			out[n++] = c;
			continue;
		}
		out[n++] = '\\';
		out[n++] = 'x';
		out[n++] = hex[c >> 4];
		out[n++] = hex[c & 15];
	}
	if (!n) {
		memcpy(out, "\\x00", 4);
		n = 4;
	}
	out[n] = '\0';
}

pid_t gpuslot_pid_nr_live(struct pid *pid, struct pid_namespace *ns)
{
	/*
	 * A record keeps the struct pid, which outlives its task, but the
	 * number does not: an exit frees it at once (free_pid()), and another
	 * process may have it by now. Only a pid that still has its task is
	 * named. A thread's struct pid never moves to another thread group
	 * (de_thread() swaps pids within one), so a live holder tid is a
	 * thread of the recorded process, which COMPLETE and the grant take
	 * from the same task.
	 */
	if (!pid || !pid_has_task(pid, PIDTYPE_PID))
		return 0;
	return pid_nr_ns(pid, ns);
}

pid_t gpuslot_pid_for_reader(struct pid *pid)
{
	return gpuslot_pid_nr_live(pid, task_active_pid_ns(current));
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

	now = w.start_ns;
	slot = gpuslot_core_try_acquire(&d->core, allowed);
	/* A deadline already past was one try: no boost, no queueing. */
	if (slot < 0 && timed && gpuslot_deadline_passed(expires)) {
		d->counters.contended++;
		d->counters.timeouts++;
		ret = -ETIMEDOUT;
		goto unlock;
	}
	/* No boost for a waiter that cannot queue. */
	if (slot < 0 && !(a->flags & GPUSLOT_ACQUIRE_TRY) &&
	    gpuslot_lock_queue_full(d)) {
		ret = -ENOSPC;
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

int gpuslot_file_domain_info(struct gpuslot_file *f,
			     struct gpuslot_domain_info *info)
{
	struct gpuslot_domain *d = gpuslot_file_lock(f);

	info->domain = d->id;
	info->k = d->core.k;
	info->boost_priority = d->boost_priority;
	info->nr_holders = hweight64(d->core.held);
	info->nr_waiters = d->core.nr_waiters;
	info->held_mask = d->core.held;
	info->generation = d->core.generation;
	info->hqd_limit = d->budget.limit;
	info->hqd_used = d->budget.used;
	spin_unlock(&d->lock);
	return 0;
}

static void gpuslot_domain_counters(struct gpuslot_domain *d,
				    struct gpuslot_counters *out)
{
	spin_lock(&d->lock);
	*out = d->counters;
	spin_unlock(&d->lock);
}

int gpuslot_file_stats(struct gpuslot_file *f, struct gpuslot_stats *s)
{
	struct gpuslot_counters c;

	if (s->__reserved)
		return -EINVAL;
	gpuslot_domain_counters(READ_ONCE(f->domain), &c);
	s->acquisitions = c.acquisitions;
	s->contended = c.contended;
	s->timeouts = c.timeouts;
	s->interrupted = c.interrupted;
	s->total_wait_ns = c.total_wait_ns;
	s->max_wait_ns = c.max_wait_ns;
	s->max_hold_ns = c.max_hold_ns;
	s->overruns = c.overruns;
	BUILD_BUG_ON(sizeof(s->wait_hist) != sizeof(c.wait_hist));
	memcpy(s->wait_hist, c.wait_hist, sizeof(s->wait_hist));
	return 0;
}

void gpuslot_domain_notify_layout(struct gpuslot_domain *d)
{
	/* Lets gpuslotd and clients poll() instead of re-reading. */
	sysfs_notify(&d->kobj, NULL, "k");
	sysfs_notify(&d->kobj, NULL, "generation");
	sysfs_notify(&d->kobj, NULL, "partitions");
}

int gpuslot_domain_set_k(struct gpuslot_domain *d, unsigned int k,
			 u64 *generation)
{
	LIST_HEAD(done);
	bool changed;

	if (k < 1 || k > GPUSLOT_MAX_SLOTS)
		return -EINVAL;
	spin_lock(&d->lock);
	changed = gpuslot_core_set_k(&d->core, k, &done);
	/* Partitions planned for the old k are the daemon's to redo. */
	if (gpuslot_partitions_reset(&d->parts) && !changed) {
		gpuslot_core_new_generation(&d->core);
		changed = true;
	}
	gpuslot_wake_done(d, &done, gpuslot_clock_ns());
	if (generation)
		*generation = d->core.generation;
	spin_unlock(&d->lock);
	gpuslot_finish_handoffs(d, &done);

	if (changed)
		gpuslot_domain_notify_layout(d);
	return 0;
}

int gpuslot_domain_set_layout(struct gpuslot_domain *d, unsigned int k,
			      const struct gpuslot_partitions *parts,
			      unsigned int hqd_limit, const u64 *expected,
			      u64 *generation)
{
	LIST_HEAD(done);
	bool hqd_changed = false;
	bool changed;

	spin_lock(&d->lock);
	/* Someone changed the layout since the caller read it. */
	if (expected && *expected != d->core.generation) {
		*generation = d->core.generation;
		spin_unlock(&d->lock);
		return -EAGAIN;
	}
	/*
	 * The same layout again is no new generation: clients rebuild their
	 * GPU streams on a new one, which preempts every queue on the GPU.
	 */
	changed = memcmp(&d->parts, parts, sizeof(*parts));
	if (changed)
		d->parts = *parts;
	if (gpuslot_core_set_k(&d->core, k, &done))
		changed = true;
	else if (changed)
		gpuslot_core_new_generation(&d->core);
	gpuslot_wake_done(d, &done, gpuslot_clock_ns());
	if (hqd_limit)
		hqd_changed = gpuslot_hqd_set_limit_locked(d, hqd_limit);
	*generation = d->core.generation;
	spin_unlock(&d->lock);
	gpuslot_finish_handoffs(d, &done);

	if (changed)
		gpuslot_domain_notify_layout(d);
	if (hqd_changed)
		sysfs_notify(&d->kobj, NULL, "hqd_limit");
	return 0;
}

int gpuslot_domain_set_boost_priority(struct gpuslot_domain *d,
				      unsigned int prio)
{
	/* The expiry of max_hold_ms runs above every boost: boost_sched.c */
	if (prio > GPUSLOT_MAX_BOOST_PRIORITY)
		return -EINVAL;
	spin_lock(&d->lock);
	d->boost_priority = prio;
	spin_unlock(&d->lock);
	return 0;
}

unsigned int gpuslot_domain_k(struct gpuslot_domain *d)
{
	unsigned int k;

	spin_lock(&d->lock);
	k = d->core.k;
	spin_unlock(&d->lock);
	return k;
}

u64 gpuslot_domain_generation(struct gpuslot_domain *d)
{
	u64 gen;

	spin_lock(&d->lock);
	gen = d->core.generation;
	spin_unlock(&d->lock);
	return gen;
}

unsigned int gpuslot_domain_boost_priority(struct gpuslot_domain *d)
{
	return READ_ONCE(d->boost_priority);
}

int gpuslot_table_end(char *buf, int len, unsigned int skipped)
{
	if (skipped)
		len += sysfs_emit_at(buf, len, "... %u more\n", skipped);
	return len;
}

static const char *const gpuslot_hold_boost_names[] = {
	[GPUSLOT_HOLD_UNBOOSTED] = "unboosted",
	[GPUSLOT_HOLD_BOOSTED] = "boosted",
	[GPUSLOT_HOLD_OVERRUN] = "overrun",
	[GPUSLOT_HOLD_PENDING] = "pending",
};

ssize_t gpuslot_domain_show_holders(struct gpuslot_domain *d, char *buf)
{
	char name[GPUSLOT_NAME_ESCAPED_LEN];
	unsigned int slot, skipped = 0;
	int len = 0;
	u64 now;

	spin_lock(&d->lock);
	/* Read under the lock: a clock read before it can predate a grant. */
	now = gpuslot_clock_ns();
	for (slot = 0; slot < GPUSLOT_MAX_SLOTS; slot++) {
		struct gpuslot_file *f = d->holder[slot];

		if (!f)
			continue;
		if (gpuslot_table_full(len, GPUSLOT_TABLE_LINE_MAX)) {
			skipped++;
			continue;
		}
		gpuslot_escape_name(name, f->holder_comm);
		len += sysfs_emit_at(buf, len, "%u %d %d %s %llu %s\n", slot,
				     gpuslot_pid_for_reader(f->holder_tgid),
				     gpuslot_pid_for_reader(f->holder_tid),
				     name, gpuslot_since(now, f->hold_start_ns),
				     gpuslot_hold_boost_names[f->hold_boost]);
	}
	spin_unlock(&d->lock);
	return gpuslot_table_end(buf, len, skipped);
}

ssize_t gpuslot_domain_show_waiters(struct gpuslot_domain *d, char *buf)
{
	char name[GPUSLOT_NAME_ESCAPED_LEN];
	struct gpuslot_core_waiter *cw;
	unsigned int shown = 0;
	int len = 0;
	u64 now;

	spin_lock(&d->lock);
	now = gpuslot_clock_ns();
	list_for_each_entry(cw, &d->core.waiters, node) {
		struct gpuslot_waiter *w =
			container_of(cw, struct gpuslot_waiter, core);

		/* The rest is counted, not walked. */
		if (gpuslot_table_full(len, GPUSLOT_TABLE_LINE_MAX))
			break;
		gpuslot_escape_name(name, w->comm);
		len += sysfs_emit_at(buf, len, "%d %d %s %llu 0x%llx\n",
				     gpuslot_pid_for_reader(w->tgid),
				     gpuslot_pid_for_reader(w->tid), name,
				     gpuslot_since(now, w->start_ns), cw->allowed);
		shown++;
	}
	len = gpuslot_table_end(buf, len, d->core.nr_waiters - shown);
	spin_unlock(&d->lock);
	return len;
}

ssize_t gpuslot_domain_show_stats(struct gpuslot_domain *d, char *buf)
{
	struct gpuslot_counters c;
	unsigned int i;
	int len;

	gpuslot_domain_counters(d, &c);
	len = sysfs_emit(buf,
			 "acquisitions %llu\ncontended %llu\ntimeouts %llu\n"
			 "interrupted %llu\ntotal_wait_ns %llu\nmax_wait_ns %llu\n"
			 "max_hold_ns %llu\noverruns %llu\nwait_hist_log2_ns",
			 c.acquisitions, c.contended, c.timeouts,
			 c.interrupted, c.total_wait_ns, c.max_wait_ns,
			 c.max_hold_ns, c.overruns);
	for (i = 0; i < GPUSLOT_HIST_BUCKETS; i++)
		len += sysfs_emit_at(buf, len, " %llu", c.wait_hist[i]);
	len += sysfs_emit_at(buf, len, "\n");
	return len;
}
