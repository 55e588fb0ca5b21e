// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel side of the boost ledger (boost.c): the scheduler calls, the
 * module's one ledger and its lock, boosting and unboosting a file's hold,
 * and max_hold_ms.
 *
 * Modules can only change a task's policy through the GPL export
 * sched_setattr_nocheck() (or, where it is not exported, the three calls
 * that kmod/compat.h maps it to); there is no export to read the attributes back,
 * so they are read from task_struct here. sched_setattr_nocheck() takes
 * sleeping locks (cpusets, PI), so every ledger call runs under a sleeping
 * lock, never under a domain's spinlock. Lock order: the ledger lock, then
 * a domain's lock.
 */
#include <linux/capability.h>
#include <linux/cpumask.h>
#include <linux/cred.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/kthread.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/printk.h>
#include <linux/rtmutex.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <uapi/linux/sched/types.h>

#include "boost_sched.h"
#include "compat.h"

/*
 * The ledger's lock: one for every GPU, because a thread's record is
 * shared by its holds on every GPU. Ledger calls sleep, so it cannot be a
 * spinlock. It is taken on the handoff path, by the expiry thread (one
 * above the boost), and by SCHED_OTHER contexts too (close(), a granter that
 * was not boosted): a struct mutex has priority inheritance only on
 * PREEMPT_RT, so elsewhere a SCHED_OTHER owner preempted by real-time work
 * would hold up every boost and every restore on every GPU for as long as
 * that work runs. An rt_mutex lends its owner the priority of its highest
 * waiter on every kernel, and what it guards is bounded: one ledger call,
 * at most two sched_setattr_nocheck(), and no allocation (the records a
 * boost needs are made before it is taken: gpuslot_boost_lock_to_begin()).
 *
 * The walks under it, all bounded by one member's limits: a call settles
 * the budget of one member, reading the CPU time of each of its boosted
 * threads once (gpuslot_sched_cputime()), and may tell each of its boosted
 * holds that the budget ends earlier (gpuslot_sched_rearm(): the hold's
 * domain lock and an hrtimer); it looks a thread and an account up in a
 * hash bucket, and walks the accounts that still owe (one per uid at
 * most). A uid has at most GPUSLOT_MAX_DOMAINS x
 * (GPUSLOT_MAX_WAITERS_PER_USER waiters asleep boosted + GPUSLOT_MAX_SLOTS
 * holds) = 5120 records; no call walks another member's. Measured in user
 * space over the fake scheduler (tests/unit/boost_test.cc,
 * OneMembersWorstCaseIsBoundedWork): tens of microseconds for 5120; here
 * each record costs a read of its task_struct, of the order of a
 * millisecond in all if cold (not measured).
 *
 * Why one lock, not one per GPU: a member's account and a thread's record
 * span GPUs, and every walk is over one member's records on all of them.
 * Per-GPU locks would have to be taken together, in domain order, for
 * every call on a member that holds or waits on several GPUs: the same
 * serialisation, a lock order more, and no shorter walk; what they would
 * save is the contention between members on different GPUs, one such call
 * at a time.
 */
static DEFINE_RT_MUTEX(gpuslot_boost_lock);
static struct gpuslot_boost_ledger gpuslot_ledger;

/*
 * The expiry of max_hold_ms must preempt the holder it demotes, on the
 * holder's own CPU too: the holder runs SCHED_FIFO, and with RT throttling
 * off (sched_rt_runtime_us = -1, common on real-time hosts) nothing below
 * it runs there while it spins. A work item on system_wq, a timer_list
 * (softirq: ksoftirqd, or the "ktimers" threads at FIFO 1 on PREEMPT_RT) or
 * an hrtimer in soft mode all run below it. So the clock is an hrtimer in
 * hard interrupt context (HRTIMER_MODE_REL_HARD, also on PREEMPT_RT), whose
 * callback only queues a kthread_work (a raw spinlock and a wakeup, fine
 * there), and the work runs on our own kthread_worker, SCHED_FIFO one
 * above the highest priority the module has given a holder since it was
 * loaded: a domain's boost_priority (51 with the defaults) or a priority
 * inherited from waiters, raised to before it is applied (gpuslot_boost_ceiling()),
 * as a threaded interrupt handler runs above the tasks it serves. One
 * above is enough: no thread runs boosted above what the module gave (the
 * ledger boosts to it and no higher, and a thread that raised itself
 * above is not ours to end), so the worker
 * preempts every holder it may have to demote, and never more than that:
 * it takes the ledger's rt_mutex, and lends its owner its priority, so at
 * 99 it would run a ledger call above every real-time task of the host.
 * The priority only goes up: a holder boosted before boost_priority was
 * lowered may still run at the old one. It does little: one ledger call.
 *
 * Demoting the thread from its own context on its way back to user space
 * (task_work_add() from the hrtimer) was the other way; it needs the file
 * and the module pinned until a thread that may never return to user space
 * runs the work, and does not end the boost of a thread that sleeps
 * boosted in the kernel. A kthread stopped with the module has neither
 * problem.
 */
static_assert(GPUSLOT_MAX_BOOST_PRIORITY + 1 < MAX_RT_PRIO);
static struct kthread_worker *gpuslot_expiry_worker;
/*
 * An rt_mutex, as the ledger's: it is taken under the ledger's lock, whose
 * waiter (the expiry worker) must be able to lend its priority through it
 * to a SCHED_OTHER writer of boost_priority.
 */
static DEFINE_RT_MUTEX(gpuslot_expiry_prio_lock);
static unsigned int gpuslot_expiry_prio;	/* under gpuslot_expiry_prio_lock */

static int gpuslot_expiry_set_prio(unsigned int prio)
{
	struct sched_attr attr = {
		.size = sizeof(attr),
		.sched_policy = SCHED_FIFO,
		.sched_priority = prio,
	};

	return gpuslot_sched_setattr(gpuslot_expiry_worker->task, &attr);
}

int gpuslot_boost_ceiling(unsigned int boost_priority)
{
	int ret = 0;

	rt_mutex_lock(&gpuslot_expiry_prio_lock);
	if (boost_priority + 1 > gpuslot_expiry_prio) {
		unsigned int above = gpuslot_sched_prio_above(boost_priority);

		ret = gpuslot_expiry_set_prio(above);
		if (!ret)
			gpuslot_expiry_prio = above;
	}
	rt_mutex_unlock(&gpuslot_expiry_prio_lock);
	return ret;
}

/*
 * @prio, once the expiry thread runs above it; if it cannot be raised
 * there, the highest priority below it, so that no boost outruns it.
 */
static unsigned int gpuslot_boost_below_expiry(unsigned int prio)
{
	if (!gpuslot_boost_ceiling(prio))
		return prio;
	return min(prio, READ_ONCE(gpuslot_expiry_prio) - 1);
}

/* A thread record, and who the thread was when it was boosted. */
struct gpuslot_sched_thread {
	struct gpuslot_boost_thread t;
	const struct cred *cred;	/* its objective credentials then */
	u64 exec_id;			/* its self_exec_id then */
};

static bool gpuslot_policy_rt(unsigned int policy)
{
	return policy == SCHED_FIFO || policy == SCHED_RR;
}

/*
 * Read without the task's locks, as sched_getattr() reads them (under RCU
 * alone; we hold a reference): the thread may change its own attributes
 * meanwhile, and what is read is then from before or after that change,
 * as if it came after or before the ledger's call. Each field is one word
 * (sched_reset_on_fork one bit of one), so no read tears.
 */
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
	bool rt = gpuslot_policy_rt(a->policy);

	struct sched_attr attr = {
		.size = sizeof(attr),
		.sched_policy = a->policy,
		.sched_flags = a->reset_on_fork ? SCHED_FLAG_RESET_ON_FORK : 0,
		.sched_nice = a->nice,
		.sched_priority = a->rt_priority,
	};
	char comm[TASK_COMM_LEN];
	int ret;

	/*
	 * sched_setattr_nocheck() skips the scheduler's refusal of RT in a
	 * task group without RT runtime. The callers checked before
	 * (gpuslot_boost_refusal()); this closes the window since, for a
	 * boost and for a restore alike. A thread that is RT now is in no
	 * such group (the kernel neither moves an RT task into one nor takes
	 * the runtime of a group with RT tasks), so a change between RT
	 * priorities is never refused here. Where the kernel cannot restore
	 * every policy, the thread's own is checked again here too, as it
	 * may have changed it since (kmod/compat.h).
	 */
	if (rt && !gpuslot_policy_rt(READ_ONCE(p->policy)) &&
	    (gpuslot_rt_group_refuses(p) || gpuslot_sched_boost_refused(p)))
		return -EPERM;
	ret = gpuslot_sched_setattr(p, &attr);
	if (ret) {
		get_task_comm(comm, p);
		pr_warn_ratelimited("gpuslot: cannot set policy %u priority %u of %s[%d]: %d\n",
				    a->policy, a->rt_priority, comm, task_pid_nr(p), ret);
	}
	return ret;
}

static bool gpuslot_sched_exiting(struct task_struct *p)
{
	return READ_ONCE(p->flags) & PF_EXITING;
}

/*
 * One thread record and one member account made ready before the ledger
 * lock is taken for a boost (gpuslot_boost_lock_to_begin()), so that no
 * allocation (memcg charging, reclaim) happens under it: a boost makes at
 * most one of each. Under the ledger lock.
 */
static struct gpuslot_sched_thread *gpuslot_spare_thread;
static struct gpuslot_boost_member *gpuslot_spare_member;

/* Take the ledger lock for gpuslot_boost_begin(), with the spares filled. */
static void gpuslot_boost_lock_to_begin(void)
{
	struct gpuslot_sched_thread *st = NULL;
	struct gpuslot_boost_member *m = NULL;
	bool made = false;

	for (;;) {
		rt_mutex_lock(&gpuslot_boost_lock);
		if (!gpuslot_spare_thread) {
			gpuslot_spare_thread = st;
			st = NULL;
		}
		if (!gpuslot_spare_member) {
			gpuslot_spare_member = m;
			m = NULL;
		}
		/* Filled (a spare stays empty only when out of memory). */
		if (made || (gpuslot_spare_thread && gpuslot_spare_member))
			break;
		rt_mutex_unlock(&gpuslot_boost_lock);
		/* Charged to the caller, as the module's other per-file memory. */
		st = kzalloc(sizeof(*st), GFP_KERNEL_ACCOUNT);
		m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
		made = true;
	}
	/* Not needed: another caller filled that spare meanwhile. */
	kfree(st);
	kfree(m);
}

static struct gpuslot_boost_thread *gpuslot_sched_new_thread(struct task_struct *p)
{
	struct gpuslot_sched_thread *st = gpuslot_spare_thread;

	/* NULL only if the allocation before the lock failed: no boost. */
	if (!st)
		return NULL;
	gpuslot_spare_thread = NULL;
	get_task_struct(p);
	st->cred = get_task_cred(p);
	st->exec_id = READ_ONCE(p->self_exec_id);
	return &st->t;
}

static void gpuslot_sched_free_thread(struct gpuslot_boost_thread *t)
{
	struct gpuslot_sched_thread *st =
		container_of(t, struct gpuslot_sched_thread, t);

	put_cred(st->cred);
	put_task_struct(t->task);
	kfree(st);
}

/*
 * The member a thread's boost is charged to: its real uid now (a boost
 * begins in the thread's own acquire, or at a grant to it). The group
 * `gpuslot` admits users, so a user is the unit of trust; a member cannot
 * change its uid without privilege, while it may make new threads and
 * processes at will, or move them between cgroups it was delegated.
 */
static u32 gpuslot_sched_member_id(struct task_struct *p)
{
	kuid_t uid;

	rcu_read_lock();
	uid = task_uid(p);
	rcu_read_unlock();
	return __kuid_val(uid);
}

/* One per uid that boosts, at most, as long as it owes budget. */
static struct gpuslot_boost_member *gpuslot_sched_new_member(void)
{
	struct gpuslot_boost_member *m = gpuslot_spare_member;

	gpuslot_spare_member = NULL;
	return m;
}

static void gpuslot_sched_free_member(struct gpuslot_boost_member *m)
{
	kfree(m);
}

static void gpuslot_sched_rearm(struct gpuslot_boost_hold *h, u64 budget_end_ns);

/* CPU hotplug may change it between calls: each reads it anew. */
static unsigned int gpuslot_sched_nr_cpus(void)
{
	return num_online_cpus();
}

static u64 gpuslot_sched_now(void)
{
	return ktime_get_ns();
}

/*
 * The CPU time @p has used: its sum_exec_runtime, brought up to date at
 * every tick and context switch, and, while @p is on a CPU, the time since
 * it last was (se.exec_start), as task_sched_runtime() adds (not exported).
 * A holder releases from its own system call, on its CPU, with up to a
 * tick not yet in sum_exec_runtime; its record then goes, and what it
 * missed would never be charged. local_clock() is on the base of the run
 * queue's clock that exec_start is read on, and counts interrupt time too:
 * the added part errs high, never low. On a nohz_full CPU a lone running
 * task's runtime is brought up to date only by the remote tick, about once
 * a second, and exec_start with it, so the sum stays right there too.
 * max_hold_ms, a clock of its own, is not affected.
 *
 * Read without the run queue's lock (the scheduler's own readers take it,
 * and it is not ours to take): the record holds a reference to @p, so the
 * memory is valid; each read is one load on a 64-bit kernel (the module
 * is 64-bit only: below); and a read that races with an update of the two
 * fields counts the time since exec_start twice (errs high) or misses at
 * most that time (up to a tick, the staleness boost.h's bound allows).
 */
static_assert(IS_ENABLED(CONFIG_64BIT),
	      "sum_exec_runtime and exec_start are read as single loads");
static u64 gpuslot_sched_cputime(struct task_struct *p)
{
	u64 ns = READ_ONCE(p->se.sum_exec_runtime), start, now;

	if (READ_ONCE(p->on_cpu)) {
		start = READ_ONCE(p->se.exec_start);
		now = local_clock();
		if (now > start)
			ns += now - start;
	}
	return ns;
}

/*
 * No exec since the boost (self_exec_id counts them), and the same
 * credentials: commit_creds() replaces the struct on every change, so an
 * unchanged pointer is unchanged credentials. A change that kept every
 * value only costs a restore without the privileged parts.
 */
static bool gpuslot_sched_same_owner(struct gpuslot_boost_thread *t)
{
	struct gpuslot_sched_thread *st =
		container_of(t, struct gpuslot_sched_thread, t);
	struct task_struct *p = t->task;

	return READ_ONCE(p->self_exec_id) == st->exec_id &&
	       rcu_access_pointer(p->real_cred) == st->cred;
}

static const struct gpuslot_boost_ops gpuslot_sched_ops = {
	.get_attr = gpuslot_sched_get,
	.set_attr = gpuslot_sched_set,
	.exiting = gpuslot_sched_exiting,
	.new_thread = gpuslot_sched_new_thread,
	.free_thread = gpuslot_sched_free_thread,
	.same_owner = gpuslot_sched_same_owner,
	.now = gpuslot_sched_now,
	.cputime = gpuslot_sched_cputime,
	.member_id = gpuslot_sched_member_id,
	.new_member = gpuslot_sched_new_member,
	.free_member = gpuslot_sched_free_member,
	.rearm = gpuslot_sched_rearm,
	.nr_cpus = gpuslot_sched_nr_cpus,
};

int gpuslot_boost_setup(void)
{
	struct kthread_worker *w;
	int ret;

	gpuslot_boost_ledger_init(&gpuslot_ledger, &gpuslot_sched_ops);
	w = kthread_create_worker(0, "gpuslot_expiry");
	if (IS_ERR(w))
		return PTR_ERR(w);
	gpuslot_expiry_worker = w;
	/* Every domain starts at the default. */
	ret = gpuslot_boost_ceiling(GPUSLOT_BOOST_PRIORITY_DEFAULT);
	if (ret) {
		gpuslot_expiry_worker = NULL;
		kthread_destroy_worker(w);
	}
	return ret;
}

void gpuslot_boost_teardown(void)
{
	/* Every file is closed: no clock runs, no work is queued. */
	kthread_destroy_worker(gpuslot_expiry_worker);
	/* Threads kept for their budget only. */
	rt_mutex_lock(&gpuslot_boost_lock);
	gpuslot_boost_drain(&gpuslot_ledger);
	kfree(gpuslot_spare_thread);
	gpuslot_spare_thread = NULL;
	kfree(gpuslot_spare_member);
	gpuslot_spare_member = NULL;
	rt_mutex_unlock(&gpuslot_boost_lock);
}

void gpuslot_expiry_queue(struct kthread_work *work)
{
	kthread_queue_work(gpuslot_expiry_worker, work);
}

void gpuslot_expiry_cancel(struct kthread_work *work)
{
	kthread_cancel_work_sync(work);
}

static enum hrtimer_restart gpuslot_overrun_timer_fn(struct hrtimer *timer)
{
	struct gpuslot_file *f = container_of(timer, struct gpuslot_file,
					      overrun_timer);

	kthread_queue_work(gpuslot_expiry_worker, &f->overrun_work);
	return HRTIMER_NORESTART;
}

static void gpuslot_overrun_work_fn(struct kthread_work *work);

void gpuslot_file_overrun_init(struct gpuslot_file *f)
{
	gpuslot_hrtimer_setup(&f->overrun_timer, gpuslot_overrun_timer_fn,
			      CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	kthread_init_work(&f->overrun_work, gpuslot_overrun_work_fn);
}

/* Start the clock of @f's hold to end at @in_ns from now. */
static void gpuslot_overrun_arm(struct gpuslot_file *f, u64 in_ns)
{
	hrtimer_start(&f->overrun_timer, ns_to_ktime(in_ns),
		      HRTIMER_MODE_REL_HARD);
}

void gpuslot_overrun_cancel_locked(struct gpuslot_file *f)
{
	/*
	 * Cancelling makes atomic updates on the handoff's path: only a
	 * clock that runs is cancelled. One whose callback runs now queues
	 * work that finds the hold over.
	 */
	if (hrtimer_is_queued(&f->overrun_timer))
		hrtimer_try_to_cancel(&f->overrun_timer);
}

void gpuslot_overrun_sync(struct gpuslot_file *f)
{
	/* The file is idle: the work cannot arm the clock again. */
	hrtimer_cancel(&f->overrun_timer);
	kthread_cancel_work_sync(&f->overrun_work);
}

/*
 * When @f's boost must end from @now on (local_clock() for the hold,
 * ktime_get_ns() for the budget): at the max_hold_ms read at the grant
 * (f->hold_max_ns; a later change is for later holds), or at @budget_end_ns,
 * the end of its thread's boost budget, whichever comes first. In ns from
 * now; U64_MAX: never.
 */
static u64 gpuslot_boost_left(struct gpuslot_file *f, u64 budget_end_ns)
{
	u64 left = U64_MAX, held, now;

	if (f->hold_max_ns) {
		held = gpuslot_since(gpuslot_clock_ns(), f->hold_start_ns);
		left = held < f->hold_max_ns ? f->hold_max_ns - held : 0;
	}
	if (budget_end_ns != U64_MAX) {
		now = ktime_get_ns();
		left = min(left, budget_end_ns > now ? budget_end_ns - now : 0);
	}
	return left;
}

void gpuslot_hold_boosted_locked(struct gpuslot_domain *d,
				 struct gpuslot_file *f, u64 budget_end_ns)
{
	u64 left, told;

	lockdep_assert_held(&d->lock);
	f->hold_boost = GPUSLOT_HOLD_BOOSTED;
	/*
	 * The ledger may have brought the budget's end forward since the
	 * caller read it (another thread of the member was boosted while
	 * this hold's waiter slept): written under the ledger lock, read
	 * here under the domain lock, which the ledger's rearm takes after.
	 */
	told = READ_ONCE(f->boost.budget_end_ns);
	if (told && told < budget_end_ns)	/* 0: a hold never boosted */
		budget_end_ns = told;
	left = gpuslot_boost_left(f, budget_end_ns);
	if (left != U64_MAX)
		gpuslot_overrun_arm(f, left);
}

/*
 * Whether a boost of @p at @prio is due at all: the boost is on, and @p is
 * neither SCHED_DEADLINE nor RT at @prio or above already.
 */
static bool gpuslot_boost_due(unsigned int prio, struct task_struct *p)
{
	unsigned int policy = READ_ONCE(p->policy);

	return prio && policy != SCHED_DEADLINE &&
	       !(gpuslot_policy_rt(policy) && READ_ONCE(p->rt_priority) >= prio);
}

/*
 * Under the ledger lock, with no domain lock held: another thread of the
 * member of @h's holder began a boost, and the member's budget now ends
 * at @budget_end_ns if they all run. The clock of @h's hold comes forward
 * if it is boosted now; a hold still being granted (a waiter boosted
 * before it slept) reads h->budget_end_ns when its clock starts.
 */
static void gpuslot_sched_rearm(struct gpuslot_boost_hold *h, u64 budget_end_ns)
{
	struct gpuslot_file *f = container_of(h, struct gpuslot_file, boost);
	struct gpuslot_domain *d = gpuslot_file_lock(f);

	if (f->state == GPUSLOT_FILE_HOLDING && f->hold_seq == h->seq &&
	    f->hold_boost == GPUSLOT_HOLD_BOOSTED)
		gpuslot_hold_boosted_locked(d, f, budget_end_ns);
	spin_unlock(&d->lock);
}

/*
 * Whether a hold of @p in @d may need the ledger. Not when the boost is
 * off, or a real-time task already runs at the boost priority or above,
 * and no thread has a boost of ours, so that @p has none to nest this hold
 * into, and @f no older one to end. (Only @p's own holds create its
 * record, and @p is here, not waiting elsewhere.) Then no lock is taken.
 */
static bool gpuslot_boost_wanted(unsigned int prio, struct task_struct *p)
{
	return READ_ONCE(gpuslot_ledger.nr_threads) ||
	       gpuslot_boost_due(prio, p);
}

/*
 * Whether @p may be boosted for a hold of @f, and if not, why. The boost
 * is the opener's: a thread of another user that got the file (SCM_RIGHTS,
 * a setuid child) takes slots with it, as the file's opener could, but is
 * boosted only if it could make itself RT anyway (CAP_SYS_NICE in the
 * initial user namespace). And it never goes where the scheduler would
 * refuse it to the thread itself: into a task group without RT runtime.
 * (The LSM setsched hook cannot be asked from a module: docs/device.md.)
 */
static enum gpuslot_boost_refusal
gpuslot_boost_refusal(struct gpuslot_file *f, struct task_struct *p, bool due)
{
	bool opener;

	rcu_read_lock();
	opener = uid_eq(__task_cred(p)->euid, f->opener_euid);
	rcu_read_unlock();
	if (!opener && !gpuslot_has_capability_noaudit(p, CAP_SYS_NICE))
		return GPUSLOT_BOOST_REFUSED_OTHER_USER;
	/*
	 * A thread RT at the priority or above needs no boost, unless it is
	 * ours already (then it is in no group without runtime: the kernel
	 * takes no runtime from a group with RT tasks).
	 */
	if (due && gpuslot_rt_group_refuses(p))
		return GPUSLOT_BOOST_REFUSED_RT_GROUP;
	/* What this kernel cannot boost and restore exactly: compat.h */
	if (due && gpuslot_sched_boost_refused(p))
		return GPUSLOT_BOOST_REFUSED_KERNEL;
	return GPUSLOT_BOOST_ALLOWED;
}

static const char *const gpuslot_boost_refusal_says[] = {
	[GPUSLOT_BOOST_ALLOWED] = "-",
	[GPUSLOT_BOOST_REFUSED_RT_GROUP] = "rt-group-without-runtime",
	[GPUSLOT_BOOST_REFUSED_OTHER_USER] = "not-the-openers-user",
	[GPUSLOT_BOOST_REFUSED_KERNEL] = "kernel-cannot-restore",
};

const char *gpuslot_boost_refusal_name(enum gpuslot_boost_refusal r)
{
	return gpuslot_boost_refusal_says[r];
}

/* Say that hold @seq of @f in @d was refused its boost. */
static void gpuslot_boost_refused(struct gpuslot_domain *d,
				  struct gpuslot_file *f, u64 seq,
				  struct task_struct *p,
				  enum gpuslot_boost_refusal why)
{
	char comm[TASK_COMM_LEN];
	bool current_hold;

	spin_lock(&d->lock);
	current_hold = f->state == GPUSLOT_FILE_HOLDING && f->hold_seq == seq;
	if (current_hold) {
		f->boost_refusal = why;
		f->boost_refused_seq = seq;
		d->counters.boosts_refused++;
	}
	spin_unlock(&d->lock);
	if (!current_hold)
		return;
	get_task_comm(comm, p);
	pr_info_ratelimited("gpuslot: gpu%u: no boost for %s[%d], holder of slot %u: %s\n",
			    d->id, comm, task_pid_nr(p), f->slot,
			    gpuslot_boost_refusal_says[why]);
}

/*
 * The priority of a hold: its boost, or what its waiters lend it if that
 * is higher (lock.c says who lends), up to what this kernel can set
 * (compat.h); none while the boost is off.
 */
static unsigned int gpuslot_hold_prio(unsigned int boost, unsigned int lent)
{
	return boost ? min_t(unsigned int, max(boost, lent),
			     GPUSLOT_BOOST_PRIORITY_LIMIT) : 0;
}

void gpuslot_file_boost(struct gpuslot_file *f, struct gpuslot_domain *d,
			u64 seq, struct task_struct *p)
{
	unsigned int boost = READ_ONCE(d->boost_priority);
	unsigned int share = READ_ONCE(d->max_boost_share);
	enum gpuslot_boost_refusal refusal = GPUSLOT_BOOST_ALLOWED;
	unsigned int prio;
	u64 budget_end;
	bool live, boosted;

	/* A hint: what the hold inherits is read again under d->lock. */
	prio = gpuslot_hold_prio(boost, READ_ONCE(f->inherit_prio));
	if (!gpuslot_boost_wanted(prio, p))
		return;
	/*
	 * Checked also when @p is RT at @prio already: that may be a boost of
	 * ours for another hold, which this one must not join.
	 */
	if (prio)
		refusal = gpuslot_boost_refusal(f, p, gpuslot_boost_due(prio, p));
	if (refusal)
		gpuslot_boost_refused(d, f, seq, p, refusal);

	gpuslot_boost_lock_to_begin();
	/*
	 * Under the ledger lock, a release of hold @seq cannot slip between
	 * this check and the boost: its unboost waits for the lock. Nor can
	 * gpuslot_domain_inherit() apply another inherited priority to it. A
	 * refused hold still goes to the ledger, not live, to end an older
	 * hold's boost and take its number.
	 */
	spin_lock(&d->lock);
	live = f->state == GPUSLOT_FILE_HOLDING && f->hold_seq == seq &&
	       f->hold_boost != GPUSLOT_HOLD_OVERRUN && !refusal;
	prio = gpuslot_hold_prio(boost, f->inherit_prio);
	if (live)
		f->inherit_applied = f->inherit_prio;
	spin_unlock(&d->lock);
	/*
	 * gpuslot_domain_inherit() may have begun the hold already, with
	 * what was lent then: set its priority to what is lent now. The
	 * expiry thread goes above it first, as it must preempt every boost
	 * it may have to end.
	 */
	if (live) {
		prio = gpuslot_boost_below_expiry(prio);
		boosted = gpuslot_boost_set_prio(&gpuslot_ledger, &f->boost, seq,
						 p, prio, share, &budget_end);
	} else {
		boosted = gpuslot_boost_begin(&gpuslot_ledger, &f->boost, seq,
					      false, p, prio, share, NULL);
		/* One gpuslot_domain_inherit() began before the refusal. */
		if (refusal)
			gpuslot_boost_finish(&gpuslot_ledger, &f->boost, seq);
	}
	spin_lock(&d->lock);
	if (f->state == GPUSLOT_FILE_HOLDING && f->hold_seq == seq) {
		if (boosted && f->hold_boost == GPUSLOT_HOLD_UNBOOSTED) {
			gpuslot_hold_boosted_locked(d, f, budget_end);
		} else if (!boosted && f->hold_boost == GPUSLOT_HOLD_BOOSTED) {
			/* Ended: lent nothing above the thread's own now. */
			f->hold_boost = GPUSLOT_HOLD_UNBOOSTED;
			gpuslot_overrun_cancel_locked(f);
		}
	}
	spin_unlock(&d->lock);
	rt_mutex_unlock(&gpuslot_boost_lock);
}

bool gpuslot_waiter_boost(struct gpuslot_domain *d, struct gpuslot_waiter *w)
	__must_hold(&d->lock)
{
	unsigned int prio = READ_ONCE(d->boost_priority);
	unsigned int share = READ_ONCE(d->max_boost_share);
	struct gpuslot_file *f = w->file;
	bool live;
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
	/*
	 * A refusal is said once, for the hold, by the granter's
	 * gpuslot_file_boost(): here the thread only goes unboosted.
	 */
	live = !prio || !gpuslot_boost_refusal(f, current,
					       gpuslot_boost_due(prio, current));
	gpuslot_boost_lock_to_begin();
	w->boosted = gpuslot_boost_begin(&gpuslot_ledger, &f->boost, seq,
					 live, current, prio, share,
					 &w->budget_end_ns);
	rt_mutex_unlock(&gpuslot_boost_lock);
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

/*
 * Apply the priorities the holders of @d inherit (lock.c) where they
 * changed: one holder at a time, d->lock dropped around each ledger call.
 * The file stays valid meanwhile: its hold's release ends in
 * gpuslot_file_unboost(), which waits for the ledger's lock we hold, and a
 * file is freed only after that. The ledger's lock is taken afresh for
 * each holder, with the records a boost may need made before it (no
 * allocation under it). A thread the boost is refused to (the policy
 * checks of gpuslot_boost_refusal()) inherits nothing either. The thread
 * of the hold is the one that acquired it, found again through its pid:
 * one that exited is skipped.
 */
void gpuslot_domain_inherit(struct gpuslot_domain *d)
{
	unsigned int share = READ_ONCE(d->max_boost_share);

	for (;;) {
		struct gpuslot_file *f = NULL;
		struct task_struct *p = NULL;
		unsigned int s, prio;
		u64 seq, budget_end = U64_MAX;
		bool boosted;

		gpuslot_boost_lock_to_begin();
		spin_lock(&d->lock);
		for (s = 0; s < GPUSLOT_MAX_SLOTS && !f; s++) {
			f = d->holder[s];
			if (f && (f->state != GPUSLOT_FILE_HOLDING ||
				  f->inherit_applied == f->inherit_prio))
				f = NULL;
		}
		if (!f) {
			d->inherit_dirty = false;
			spin_unlock(&d->lock);
			rt_mutex_unlock(&gpuslot_boost_lock);
			break;
		}
		f->inherit_applied = f->inherit_prio;
		seq = f->hold_seq;
		prio = gpuslot_hold_prio(READ_ONCE(d->boost_priority),
					 f->inherit_prio);
		/*
		 * A hold whose boost ran out stays out, inherited or not, and
		 * one past max_hold_ms begins none (its clock would end it at
		 * once, after it ran boosted until the expiry thread came).
		 */
		if (f->hold_boost != GPUSLOT_HOLD_OVERRUN &&
		    !(f->hold_max_ns && !gpuslot_boost_left(f, U64_MAX)))
			p = get_pid_task(f->holder_tid, PIDTYPE_PID);
		spin_unlock(&d->lock);
		if (p && gpuslot_boost_refusal(f, p,
					       gpuslot_boost_due(prio, p))) {
			put_task_struct(p);
			p = NULL;
		}
		if (!p) {
			rt_mutex_unlock(&gpuslot_boost_lock);
			continue;
		}
		prio = gpuslot_boost_below_expiry(prio);
		boosted = gpuslot_boost_set_prio(&gpuslot_ledger, &f->boost,
						 seq, p, prio, share,
						 &budget_end);
		put_task_struct(p);
		spin_lock(&d->lock);
		if (f->state == GPUSLOT_FILE_HOLDING && f->hold_seq == seq) {
			if (boosted && f->hold_boost == GPUSLOT_HOLD_UNBOOSTED) {
				gpuslot_hold_boosted_locked(d, f, budget_end);
			} else if (!boosted &&
				   f->hold_boost == GPUSLOT_HOLD_BOOSTED) {
				/* Lent nothing above the thread's own now. */
				f->hold_boost = GPUSLOT_HOLD_UNBOOSTED;
				gpuslot_overrun_cancel_locked(f);
			}
		}
		spin_unlock(&d->lock);
		rt_mutex_unlock(&gpuslot_boost_lock);
	}
}

void gpuslot_file_unboost(struct gpuslot_file *f, u64 seq)
{
	rt_mutex_lock(&gpuslot_boost_lock);
	gpuslot_boost_finish(&gpuslot_ledger, &f->boost, seq);
	rt_mutex_unlock(&gpuslot_boost_lock);
}

/*
 * On the expiry worker, above every boost: the hold outlived max_hold_ms,
 * or its thread's budget may be spent (the ledger says).
 */
static void gpuslot_overrun_work_fn(struct kthread_work *work)
{
	struct gpuslot_file *f = container_of(work, struct gpuslot_file,
					      overrun_work);
	struct gpuslot_domain *d = gpuslot_file_lock(f);
	u64 max_ns = f->hold_max_ns, seq = f->hold_seq, budget_end;
	unsigned int slot = f->slot;
	bool spent;

	if (f->state != GPUSLOT_FILE_HOLDING ||
	    f->hold_boost != GPUSLOT_HOLD_BOOSTED) {
		spin_unlock(&d->lock);
		return;
	}
	if (max_ns && !gpuslot_boost_left(f, U64_MAX)) {
		f->hold_boost = GPUSLOT_HOLD_OVERRUN;
		d->counters.overruns++;
		spin_unlock(&d->lock);
		pr_info_ratelimited("gpuslot: gpu%u: a holder of slot %u outlived max_hold_ms %llu: its boost ends\n",
				    d->id, slot, max_ns / NSEC_PER_MSEC);
		gpuslot_file_unboost(f, seq);
		return;
	}
	spin_unlock(&d->lock);

	rt_mutex_lock(&gpuslot_boost_lock);
	spent = gpuslot_boost_expire(&gpuslot_ledger, &f->boost, seq,
				     &budget_end);
	/* The file may have moved to another domain meanwhile. */
	d = gpuslot_file_lock(f);
	if (f->state == GPUSLOT_FILE_HOLDING && f->hold_seq == seq &&
	    f->hold_boost == GPUSLOT_HOLD_BOOSTED) {
		if (spent) {
			f->hold_boost = GPUSLOT_HOLD_OVERRUN;
			d->counters.overruns++;
		} else {
			/*
			 * Not yet: the clocks of the hold (local_clock()) and
			 * of the timer differ by a little.
			 */
			gpuslot_hold_boosted_locked(d, f, budget_end);
		}
	}
	spin_unlock(&d->lock);
	rt_mutex_unlock(&gpuslot_boost_lock);
	if (spent)
		pr_info_ratelimited("gpuslot: gpu%u: the holder of slot %u spent its boost budget (max_boost_share): its boost ends\n",
				    d->id, slot);
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

int gpuslot_domain_set_max_boost_share(struct gpuslot_domain *d,
				       unsigned int share)
{
	if (share < 1 || share > 100)
		return -EINVAL;
	WRITE_ONCE(d->max_boost_share, share);
	return 0;
}

unsigned int gpuslot_domain_max_boost_share(struct gpuslot_domain *d)
{
	return READ_ONCE(d->max_boost_share);
}
