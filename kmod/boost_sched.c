// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel side of the boost ledger (boost.c): the scheduler calls, the
 * module's one ledger and its mutex, boosting and unboosting a file's hold,
 * and max_hold_ms.
 *
 * Modules can only change a task's policy through the GPL export
 * sched_setattr_nocheck(); there is no export to read the attributes back,
 * so they are read from task_struct here. sched_setattr_nocheck() takes
 * sleeping locks (cpusets, PI), so every ledger call runs under a mutex,
 * never under a domain's spinlock. Lock order: the ledger mutex, then a
 * domain's lock.
 */
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <uapi/linux/sched/types.h>

#include "domain.h"

static DEFINE_MUTEX(gpuslot_boost_mutex);
static struct gpuslot_boost_ledger gpuslot_ledger;

static void gpuslot_sched_get(struct task_struct *p,
			      struct gpuslot_sched_attr *a)
{
	a->policy = READ_ONCE(p->policy);
	a->rt_priority = READ_ONCE(p->rt_priority);
	a->nice = task_nice(p);
	a->reset_on_fork = p->sched_reset_on_fork;
}

static int gpuslot_sched_set(struct task_struct *p,
			     const struct gpuslot_sched_attr *a)
{
	struct sched_attr attr = {
		.size = sizeof(attr),
		.sched_policy = a->policy,
		.sched_flags = a->reset_on_fork ? SCHED_FLAG_RESET_ON_FORK : 0,
		.sched_nice = a->nice,
		.sched_priority = a->rt_priority,
	};
	int ret = sched_setattr_nocheck(p, &attr);

	if (ret)
		pr_warn_ratelimited("gpuslot: cannot set policy %u priority %u of %s[%d]: %d\n",
				    a->policy, a->rt_priority, p->comm,
				    task_pid_nr(p), ret);
	return ret;
}

static bool gpuslot_sched_exiting(struct task_struct *p)
{
	return READ_ONCE(p->flags) & PF_EXITING;
}

static struct gpuslot_boost_thread *gpuslot_sched_new_thread(struct task_struct *p)
{
	struct gpuslot_boost_thread *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (t)
		get_task_struct(p);
	return t;
}

static void gpuslot_sched_free_thread(struct gpuslot_boost_thread *t)
{
	put_task_struct(t->task);
	kfree(t);
}

static const struct gpuslot_boost_ops gpuslot_sched_ops = {
	.get_attr = gpuslot_sched_get,
	.set_attr = gpuslot_sched_set,
	.exiting = gpuslot_sched_exiting,
	.new_thread = gpuslot_sched_new_thread,
	.free_thread = gpuslot_sched_free_thread,
};

void gpuslot_boost_setup(void)
{
	gpuslot_boost_ledger_init(&gpuslot_ledger, &gpuslot_sched_ops);
}

/*
 * max_hold_ms runs on a delayed work item: ending a boost sleeps, so the
 * expiry needs process context anyway, and the one spelling works on every
 * kernel from 6.1 on. Its resolution (a jiffy) is far below any useful
 * bound. This marks @f's hold, whose thread has just been boosted for it,
 * and starts its clock, which counts from the grant.
 */
void gpuslot_hold_boosted_locked(struct gpuslot_domain *d,
				 struct gpuslot_file *f)
{
	u64 max_ns = (u64)d->max_hold_ms * NSEC_PER_MSEC;
	u64 held;

	lockdep_assert_held(&d->lock);
	f->hold_boost = GPUSLOT_HOLD_BOOSTED;
	if (!max_ns)
		return;
	held = gpuslot_since(gpuslot_clock_ns(), f->hold_start_ns);
	mod_delayed_work(system_wq, &f->overrun_work,
			 nsecs_to_jiffies(held < max_ns ? max_ns - held : 0));
}

/*
 * Whether a hold of @p in @d may need the ledger. Not when the boost is
 * off, or a real-time task already runs at the boost priority or above,
 * and no thread has a boost of ours, so that @p has none to nest this hold
 * into, and @f no older one to end. (Only @p's own holds create its
 * record, and @p is here, not waiting elsewhere.) Then no mutex is taken.
 */
static bool gpuslot_boost_wanted(unsigned int prio, struct task_struct *p)
{
	unsigned int policy = READ_ONCE(p->policy);

	if (READ_ONCE(gpuslot_ledger.nr_threads))
		return true;
	if (!prio || policy == SCHED_DEADLINE)
		return false;
	return !((policy == SCHED_FIFO || policy == SCHED_RR) &&
		 READ_ONCE(p->rt_priority) >= prio);
}

void gpuslot_file_boost(struct gpuslot_file *f, struct gpuslot_domain *d,
			u64 seq, struct task_struct *p)
{
	unsigned int prio = READ_ONCE(d->boost_priority);
	bool live, boosted;

	if (!gpuslot_boost_wanted(prio, p))
		return;

	mutex_lock(&gpuslot_boost_mutex);
	/*
	 * Under the mutex, a release of hold @seq cannot slip between this
	 * check and the boost: its unboost waits for the mutex.
	 */
	spin_lock(&d->lock);
	live = f->state == GPUSLOT_FILE_HOLDING && f->hold_seq == seq &&
	       f->hold_boost != GPUSLOT_HOLD_OVERRUN;
	spin_unlock(&d->lock);
	boosted = gpuslot_boost_begin(&gpuslot_ledger, &f->boost, seq, live,
				      p, prio);
	if (boosted) {
		spin_lock(&d->lock);
		if (f->state == GPUSLOT_FILE_HOLDING && f->hold_seq == seq &&
		    f->hold_boost == GPUSLOT_HOLD_UNBOOSTED)
			gpuslot_hold_boosted_locked(d, f);
		spin_unlock(&d->lock);
	}
	mutex_unlock(&gpuslot_boost_mutex);
}

bool gpuslot_waiter_boost(struct gpuslot_domain *d, struct gpuslot_waiter *w)
	__must_hold(&d->lock)
{
	unsigned int prio = READ_ONCE(d->boost_priority);
	struct gpuslot_file *f = w->file;
	u64 seq;

	lockdep_assert_held(&d->lock);
	if (!gpuslot_boost_wanted(prio, current))
		return false;
	/*
	 * The file is ACQUIRING from here: no other thread of it can acquire,
	 * so its next hold, @seq, is this thread's, and nothing can end or
	 * release it before it is granted. A record the ledger still keeps
	 * for an older hold of the file ends in gpuslot_boost_begin().
	 */
	f->state = GPUSLOT_FILE_ACQUIRING;
	seq = f->hold_seq + 1;
	spin_unlock(&d->lock);
	mutex_lock(&gpuslot_boost_mutex);
	w->boosted = gpuslot_boost_begin(&gpuslot_ledger, &f->boost, seq,
					 true, current, prio);
	mutex_unlock(&gpuslot_boost_mutex);
	spin_lock(&d->lock);
	if (w->boosted) {
		w->boost_seq = seq;
	} else {
		/*
		 * The ledger has seen @seq and would take a boost of the
		 * hold for a late one: the grant gets the next number, and
		 * its granter boosts as usual.
		 */
		f->hold_seq = seq;
	}
	return true;
}

void gpuslot_file_unboost(struct gpuslot_file *f, u64 seq)
{
	mutex_lock(&gpuslot_boost_mutex);
	gpuslot_boost_finish(&gpuslot_ledger, &f->boost, seq);
	mutex_unlock(&gpuslot_boost_mutex);
}

void gpuslot_overrun_work_fn(struct work_struct *work)
{
	struct gpuslot_file *f = container_of(to_delayed_work(work),
					      struct gpuslot_file,
					      overrun_work);
	struct gpuslot_domain *d = gpuslot_file_lock(f);
	u64 max_ns = (u64)d->max_hold_ms * NSEC_PER_MSEC;
	u64 held, seq = f->hold_seq;
	unsigned int slot = f->slot, max_ms = d->max_hold_ms;
	bool overrun = false;

	if (f->state == GPUSLOT_FILE_HOLDING && max_ns &&
	    f->hold_boost == GPUSLOT_HOLD_BOOSTED) {
		held = gpuslot_since(gpuslot_clock_ns(), f->hold_start_ns);
		if (held >= max_ns) {
			overrun = true;
			f->hold_boost = GPUSLOT_HOLD_OVERRUN;
			d->counters.overruns++;
		} else {
			/* max_hold_ms was raised since the clock started. */
			mod_delayed_work(system_wq, &f->overrun_work,
					 nsecs_to_jiffies(max_ns - held));
		}
	}
	spin_unlock(&d->lock);
	if (!overrun)
		return;
	pr_info_ratelimited("gpuslot: gpu%u: a holder of slot %u outlived max_hold_ms %u: its boost ends\n",
			    d->id, slot, max_ms);
	gpuslot_file_unboost(f, seq);
}

int gpuslot_domain_set_max_hold_ms(struct gpuslot_domain *d, unsigned int ms)
{
	if (ms > GPUSLOT_MAX_MAX_HOLD_MS)
		return -EINVAL;
	spin_lock(&d->lock);
	d->max_hold_ms = ms;
	spin_unlock(&d->lock);
	return 0;
}

unsigned int gpuslot_domain_max_hold_ms(struct gpuslot_domain *d)
{
	return READ_ONCE(d->max_hold_ms);
}
