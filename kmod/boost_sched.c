// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel side of the boost ledger (boost.c): the scheduler calls, the
 * module's ledgers (one per member) and their locks, boosting and
 * unboosting a file's hold, and max_hold_ms.
 *
 * Modules can only change a task's policy through the GPL export
 * sched_setattr_nocheck() (or, where it is not exported, the three calls
 * that kmod/compat.h maps it to); there is no export to read the attributes back,
 * so they are read from task_struct here. sched_setattr_nocheck() takes
 * sleeping locks (cpusets, PI), so every ledger call runs under a sleeping
 * lock, never under a domain's spinlock. Lock order: a file's boost_lock,
 * then a member's ledger lock, then a domain's lock (or a thread-index
 * bucket's); never two of one kind at once.
 */
#include <linux/capability.h>
#include <linux/cpumask.h>
#include <linux/cred.h>
#include <linux/hash.h>
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
#include <linux/wait_bit.h>
#include <uapi/linux/sched/types.h>

#include "boost_sched.h"
#include "compat.h"

/*
 * The ledgers: one per member (a uid: gpuslot_task_member()), holding
 * its account and the records of its boosted threads, each with a lock of
 * its own, so that no member's ledger call waits for another member's
 * (issue 38: one global lock let a member, preempted inside a ledger call,
 * hold up every boost and restore of every other member on every GPU).
 * A member's records and account span GPUs, and every walk a ledger call
 * makes is over one member's records (boost.h), so the member, not the GPU,
 * is the unit a lock can serialise alone.
 *
 * The lock is an rt_mutex: ledger calls sleep (sched_setattr_nocheck()),
 * so it cannot be a spinlock. It is taken on the handoff path, by the
 * expiry thread (one above the boost), and by SCHED_OTHER contexts too
 * (close(), a granter that was not boosted): a struct mutex has priority
 * inheritance only on PREEMPT_RT, so elsewhere a SCHED_OTHER owner
 * preempted by real-time work would hold up the member's boosts and
 * restores for as long as that work runs. An rt_mutex lends its owner the
 * priority of its highest waiter on every kernel, and what it guards is
 * bounded: one ledger call, at most two sched_setattr_nocheck(), and no
 * allocation (the records a boost needs are made before it is taken:
 * gpuslot_boost_prepare()).
 *
 * The walks under it, bounded by the member's limits: a call settles the
 * member's budget, reading the CPU time of each of its boosted threads
 * once (gpuslot_sched_cputime()), and may tell each of its boosted holds
 * that the budget ends earlier (gpuslot_sched_rearm(): the hold's domain
 * lock and an hrtimer). A uid has at most GPUSLOT_MAX_DOMAINS x
 * (GPUSLOT_MAX_WAITERS_PER_USER waiters asleep boosted + GPUSLOT_MAX_SLOTS
 * holds) = 5120 records. Measured in user space over the fake scheduler
 * (tests/unit/boost_test.cc, OneMembersWorstCaseIsBoundedWork): tens of
 * microseconds for 5120; here each record costs a read of its
 * task_struct, of the order of a millisecond in all if cold (not
 * measured). That cost now falls on the member's own calls alone.
 *
 * A ledger is made the first time its uid needs one and lives until the
 * module goes: at most one per uid that ever held a slot (a member cannot
 * make uids), which is what an account cost before, kept only until full.
 * Ledgers are found by uid under RCU (gpuslot_ledgers[], added to under
 * gpuslot_ledgers_lock), and a thread's record by its task_struct in the
 * thread index (gpuslot_threads[], a spinlock per bucket), which names
 * the ledger that has it: a thread whose uid changed while boosted keeps
 * its record, and so its ledger, until its last hold ends, and is never
 * recorded in two (gpuslot_ledger_owns()).
 *
 * A file's hold is changed only by calls on that file, serialised by the
 * file's boost_lock, taken before any ledger's: a hold recorded in one
 * member's ledger (an older hold of the file, of another thread and uid)
 * is ended there before a new one begins in another
 * (gpuslot_hold_lock()).
 */
struct gpuslot_sched_thread;

struct gpuslot_member_ledger {
	struct gpuslot_boost_ledger l;
	struct rt_mutex lock;
	u32 uid;
	struct hlist_node node;		/* in gpuslot_ledgers[], RCU */
	/*
	 * One thread record and one member account made ready before @lock
	 * is taken for a boost, so that no allocation (memcg charging,
	 * reclaim) happens under it: a boost makes at most one of each.
	 * Under @lock.
	 */
	struct gpuslot_sched_thread *spare_thread;
	struct gpuslot_boost_member *spare_member;
};

#define GPUSLOT_INDEX_BITS	6
static struct hlist_head gpuslot_ledgers[1 << GPUSLOT_INDEX_BITS];
/* Adds to gpuslot_ledgers[]: once per uid; lookups take RCU only. */
static DEFINE_SPINLOCK(gpuslot_ledgers_lock);

struct gpuslot_thread_bucket {
	spinlock_t lock;	/* @head; held for a walk of one bucket */
	struct hlist_head head;		/* gpuslot_sched_thread.index */
};

static struct gpuslot_thread_bucket gpuslot_threads[1 << GPUSLOT_INDEX_BITS];
/* Thread records in every ledger: none, and no hold needs a ledger call. */
static atomic_t gpuslot_nr_records = ATOMIC_INIT(0);

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
 * it takes a file's and a member's rt_mutex, and lends their owner its
 * priority, so at 99 it would run a ledger call above every real-time task
 * of the host.
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
 * An rt_mutex, as the ledgers': it is taken under a file's boost_lock,
 * whose waiter (the expiry worker) must be able to lend its priority
 * through it to a SCHED_OTHER writer of boost_priority.
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

	/*
	 * Every boost asks; the priority only rises, so a boost below it
	 * takes no lock that every member's boost would take.
	 */
	if (boost_priority + 1 <= READ_ONCE(gpuslot_expiry_prio))
		return 0;
	rt_mutex_lock(&gpuslot_expiry_prio_lock);
	if (boost_priority + 1 > gpuslot_expiry_prio) {
		unsigned int above = gpuslot_sched_prio_above(boost_priority);

		ret = gpuslot_expiry_set_prio(above);
		if (!ret)
			WRITE_ONCE(gpuslot_expiry_prio, above);
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
	struct gpuslot_member_ledger *ledger;	/* that has it */
	struct hlist_node index;	/* in gpuslot_threads[] */
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

static struct gpuslot_member_ledger *gpuslot_ledger_of(struct gpuslot_boost_ledger *l)
{
	return container_of(l, struct gpuslot_member_ledger, l);
}

static struct gpuslot_thread_bucket *gpuslot_thread_bucket(const struct task_struct *p)
{
	return &gpuslot_threads[hash_ptr(p, GPUSLOT_INDEX_BITS)];
}

static struct gpuslot_sched_thread *
gpuslot_thread_find_locked(struct gpuslot_thread_bucket *b,
			   const struct task_struct *p)
{
	struct gpuslot_sched_thread *st;

	lockdep_assert_held(&b->lock);
	hlist_for_each_entry(st, &b->head, index)
		if (st->t.task == p)
			return st;
	return NULL;
}

/*
 * The ledger that has @p's record, or NULL. Ledgers live until the module
 * goes, so the answer stays a valid pointer; whether it still has the
 * record is asked again under its lock (gpuslot_ledger_owns()).
 */
static struct gpuslot_member_ledger *gpuslot_thread_ledger(struct task_struct *p)
{
	struct gpuslot_thread_bucket *b = gpuslot_thread_bucket(p);
	struct gpuslot_member_ledger *ml = NULL;
	struct gpuslot_sched_thread *st;

	spin_lock(&b->lock);
	st = gpuslot_thread_find_locked(b, p);
	if (st)
		ml = st->ledger;
	spin_unlock(&b->lock);
	return ml;
}

static const struct gpuslot_boost_ops gpuslot_sched_ops;

/*
 * The ledger of member @uid; if it has none, one is made if @make (NULL if
 * out of memory), else NULL.
 */
static struct gpuslot_member_ledger *gpuslot_member_ledger(u32 uid, bool make)
{
	struct hlist_head *head = &gpuslot_ledgers[hash_32(uid, GPUSLOT_INDEX_BITS)];
	struct gpuslot_member_ledger *ml, *made;

	rcu_read_lock();
	hlist_for_each_entry_rcu(ml, head, node)
		if (ml->uid == uid)
			break;
	rcu_read_unlock();
	if (ml || !make)
		return ml;
	/* Charged to the caller, as the module's other per-file memory. */
	made = kzalloc(sizeof(*made), GFP_KERNEL_ACCOUNT);
	if (!made)
		return NULL;
	gpuslot_boost_ledger_init(&made->l, &gpuslot_sched_ops);
	rt_mutex_init(&made->lock);
	made->uid = uid;
	spin_lock(&gpuslot_ledgers_lock);
	hlist_for_each_entry(ml, head, node)
		if (ml->uid == uid)
			break;
	if (!ml) {
		hlist_add_head_rcu(&made->node, head);
		ml = made;
		made = NULL;
	}
	spin_unlock(&gpuslot_ledgers_lock);
	kfree(made);	/* another caller made it meanwhile */
	return ml;
}

static u32 gpuslot_task_member(struct task_struct *p);

/*
 * Under @ml's lock: whether a boost of @p belongs in @ml. It does if @p's
 * record is there, or if @p has none and @ml is its member's: a thread is
 * recorded in one ledger at most, and a member's account is only ever in
 * its own.
 */
static bool gpuslot_ledger_owns(struct gpuslot_member_ledger *ml,
				struct task_struct *p)
{
	struct gpuslot_member_ledger *has = gpuslot_thread_ledger(p);

	return has ? has == ml : ml->uid == gpuslot_task_member(p);
}

/*
 * What a ledger call may need for a boost of a thread, made before the
 * file's or the member's lock is taken, so that no allocation (memcg
 * charging, reclaim) happens under either: the expiry thread, which serves
 * every member, may wait for both. A thread record and a member account
 * (a boost makes at most one of each), and the ledger of the thread's
 * member. What the ledger does not take is freed after the call.
 */
struct gpuslot_boost_prep {
	struct gpuslot_sched_thread *thread;
	struct gpuslot_boost_member *member;
};

/* @p: the thread to be boosted; NULL: none known yet (the spares only). */
static void gpuslot_boost_prepare(struct gpuslot_boost_prep *prep,
				  struct task_struct *p)
{
	/* Charged to the caller, as the module's other per-file memory. */
	prep->thread = kzalloc(sizeof(*prep->thread), GFP_KERNEL_ACCOUNT);
	prep->member = kzalloc(sizeof(*prep->member), GFP_KERNEL_ACCOUNT);
	if (p)
		gpuslot_member_ledger(gpuslot_task_member(p), true);
}

static void gpuslot_boost_unprepare(struct gpuslot_boost_prep *prep)
{
	kfree(prep->thread);
	kfree(prep->member);
}

/*
 * How often the ledger of @p is looked for again when it changed between
 * the look-up and the lock (the thread's last hold ended and its uid had
 * changed, say): a thread whose uid keeps changing gets no boost.
 */
#define GPUSLOT_LEDGER_TRIES	4

/*
 * Lock and return the ledger a boost of @p belongs in, its spares filled
 * from @prep where empty (an empty one stays so only when out of memory:
 * then the boost that needs it is not given); NULL if there is none (out
 * of memory, or its uid changed since @prep, or the tries above spent):
 * then no boost.
 */
static struct gpuslot_member_ledger *
gpuslot_ledger_lock_for(struct task_struct *p, struct gpuslot_boost_prep *prep)
{
	struct gpuslot_member_ledger *ml;
	unsigned int tries;

	for (tries = 0; tries < GPUSLOT_LEDGER_TRIES; tries++) {
		ml = gpuslot_thread_ledger(p);
		if (!ml)
			ml = gpuslot_member_ledger(gpuslot_task_member(p), false);
		if (!ml)
			return NULL;
		rt_mutex_lock(&ml->lock);
		if (gpuslot_ledger_owns(ml, p)) {
			if (!ml->spare_thread) {
				ml->spare_thread = prep->thread;
				prep->thread = NULL;
			}
			if (!ml->spare_member) {
				ml->spare_member = prep->member;
				prep->member = NULL;
			}
			return ml;
		}
		rt_mutex_unlock(&ml->lock);
	}
	return NULL;
}

static struct gpuslot_boost_thread *
gpuslot_sched_new_thread(struct gpuslot_boost_ledger *l, struct task_struct *p)
{
	struct gpuslot_member_ledger *ml = gpuslot_ledger_of(l);
	struct gpuslot_thread_bucket *b = gpuslot_thread_bucket(p);
	struct gpuslot_sched_thread *st = ml->spare_thread;

	/* NULL only if the allocation before the lock failed: no boost. */
	if (!st)
		return NULL;
	spin_lock(&b->lock);
	/*
	 * Recorded in another ledger since gpuslot_ledger_owns() (a call on
	 * another of its holds, after its uid changed): no second record,
	 * whose restore would undo the first's. This hold goes unboosted.
	 */
	if (gpuslot_thread_find_locked(b, p)) {
		spin_unlock(&b->lock);
		return NULL;
	}
	ml->spare_thread = NULL;
	st->t.task = p;
	st->ledger = ml;
	hlist_add_head(&st->index, &b->head);
	spin_unlock(&b->lock);
	atomic_inc(&gpuslot_nr_records);
	get_task_struct(p);
	st->cred = get_task_cred(p);
	st->exec_id = READ_ONCE(p->self_exec_id);
	return &st->t;
}

static void gpuslot_sched_free_thread(struct gpuslot_boost_thread *t)
{
	struct gpuslot_sched_thread *st =
		container_of(t, struct gpuslot_sched_thread, t);
	struct gpuslot_thread_bucket *b = gpuslot_thread_bucket(t->task);

	spin_lock(&b->lock);
	hlist_del(&st->index);
	spin_unlock(&b->lock);
	atomic_dec(&gpuslot_nr_records);
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
static u32 gpuslot_task_member(struct task_struct *p)
{
	kuid_t uid;

	rcu_read_lock();
	uid = task_uid(p);
	rcu_read_unlock();
	return __kuid_val(uid);
}

/*
 * The member of a record of ledger @l: @l's, which gpuslot_ledger_owns()
 * chose for @p's uid under @l's lock (read again now, a uid changed since
 * would put a second account of it in @l).
 */
static u32 gpuslot_sched_member_id(struct gpuslot_boost_ledger *l,
				   struct task_struct *p)
{
	return gpuslot_ledger_of(l)->uid;
}

/* One per ledger (its uid's) at most, as long as it owes budget. */
static struct gpuslot_boost_member *
gpuslot_sched_new_member(struct gpuslot_boost_ledger *l)
{
	struct gpuslot_member_ledger *ml = gpuslot_ledger_of(l);
	struct gpuslot_boost_member *m = ml->spare_member;

	ml->spare_member = NULL;
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
	unsigned int i;
	int ret;

	for (i = 0; i < ARRAY_SIZE(gpuslot_threads); i++) {
		spin_lock_init(&gpuslot_threads[i].lock);
		INIT_HLIST_HEAD(&gpuslot_threads[i].head);
		INIT_HLIST_HEAD(&gpuslot_ledgers[i]);
	}
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
	struct gpuslot_member_ledger *ml;
	struct hlist_node *tmp;
	unsigned int i;

	/* Every file is closed: no clock runs, no work is queued. */
	kthread_destroy_worker(gpuslot_expiry_worker);
	/* Nobody else looks: the accounts kept for their budget only. */
	for (i = 0; i < ARRAY_SIZE(gpuslot_ledgers); i++) {
		hlist_for_each_entry_safe(ml, tmp, &gpuslot_ledgers[i], node) {
			WARN_ON_ONCE(ml->l.nr_threads);
			gpuslot_boost_drain(&ml->l);
			hlist_del(&ml->node);
			kfree(ml->spare_thread);
			kfree(ml->spare_member);
			kfree(ml);
		}
	}
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

void gpuslot_file_boost_init(struct gpuslot_file *f)
{
	rt_mutex_init(&f->boost_lock);
	atomic_set(&f->boost_pins, 0);
	INIT_LIST_HEAD(&f->boost.node);
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
	return atomic_read(&gpuslot_nr_records) ||
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

/* The ledger that has the record of @h's boost; @h has one. */
static struct gpuslot_member_ledger *gpuslot_hold_ledger(struct gpuslot_boost_hold *h)
{
	return container_of(h->thread, struct gpuslot_sched_thread, t)->ledger;
}

/*
 * For a ledger call on hold @seq of @f, for thread @p, with f->boost_lock
 * held: lock and return the ledger it goes to. That is the one with the
 * record of @f's boost when the call is about that hold (or is late, about
 * an older one). Otherwise a boost an older hold of @f still has is ended
 * in its own ledger first (gpuslot_boost_begin() would end it in the
 * ledger it is given, another member's perhaps), and the ledger is the one
 * a boost of @p belongs in (gpuslot_ledger_lock_for(), its spares from
 * @prep). NULL: none could be had; @f then has no boost recorded, and the
 * caller passes the hold by (gpuslot_boost_pass()).
 */
static struct gpuslot_member_ledger *
gpuslot_hold_lock(struct gpuslot_file *f, u64 seq, struct task_struct *p,
		  struct gpuslot_boost_prep *prep)
{
	struct gpuslot_boost_hold *h = &f->boost;
	struct gpuslot_member_ledger *ml;

	if (h->thread) {
		ml = gpuslot_hold_ledger(h);
		rt_mutex_lock(&ml->lock);
		if (seq <= h->seq)
			return ml;
		gpuslot_boost_finish(&ml->l, h, h->seq);
		rt_mutex_unlock(&ml->lock);
	}
	return gpuslot_ledger_lock_for(p, prep);
}

/*
 * After a ledger call on hold @seq of @f, in @d: the hold's state and clock
 * follow what the ledger says of its boost, if it is still that hold. A
 * boost begun starts the clock; one ended (lent nothing above the thread's
 * own now, or spent) stops it.
 */
static void gpuslot_hold_follow_ledger(struct gpuslot_domain *d,
				       struct gpuslot_file *f, u64 seq,
				       bool boosted, u64 budget_end)
{
	spin_lock(&d->lock);
	if (READ_ONCE(f->domain) == d && f->state == GPUSLOT_FILE_HOLDING &&
	    f->hold_seq == seq) {
		if (boosted && f->hold_boost == GPUSLOT_HOLD_UNBOOSTED) {
			gpuslot_hold_boosted_locked(d, f, budget_end);
		} else if (!boosted && f->hold_boost == GPUSLOT_HOLD_BOOSTED) {
			f->hold_boost = GPUSLOT_HOLD_UNBOOSTED;
			gpuslot_overrun_cancel_locked(f);
		}
	}
	spin_unlock(&d->lock);
}

void gpuslot_file_boost(struct gpuslot_file *f, struct gpuslot_domain *d,
			u64 seq, struct task_struct *p)
{
	unsigned int boost = READ_ONCE(d->boost_priority);
	unsigned int share = READ_ONCE(d->max_boost_share);
	enum gpuslot_boost_refusal refusal = GPUSLOT_BOOST_ALLOWED;
	struct gpuslot_member_ledger *ml;
	struct gpuslot_boost_prep prep;
	unsigned int prio;
	u64 budget_end = U64_MAX;
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

	gpuslot_boost_prepare(&prep, p);
	rt_mutex_lock(&f->boost_lock);
	/*
	 * Under the file's boost_lock, a release of hold @seq cannot slip
	 * between this check and the boost: its unboost waits for the lock.
	 * Nor can gpuslot_domain_inherit() apply another inherited priority
	 * to it. A refused hold still goes to the ledger, not live, to end an
	 * older hold's boost and take its number.
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
	if (live)
		prio = gpuslot_boost_below_expiry(prio);
	ml = gpuslot_hold_lock(f, seq, p, &prep);
	if (!ml) {
		gpuslot_boost_pass(&f->boost, seq);
		boosted = false;
	} else if (live) {
		boosted = gpuslot_boost_set_prio(&ml->l, &f->boost, seq, p,
						 prio, share, &budget_end);
	} else {
		boosted = gpuslot_boost_begin(&ml->l, &f->boost, seq, false,
					      p, prio, share, NULL);
		/* One gpuslot_domain_inherit() began before the refusal. */
		if (refusal)
			gpuslot_boost_finish(&ml->l, &f->boost, seq);
	}
	gpuslot_hold_follow_ledger(d, f, seq, boosted, budget_end);
	if (ml)
		rt_mutex_unlock(&ml->lock);
	rt_mutex_unlock(&f->boost_lock);
	gpuslot_boost_unprepare(&prep);
}

bool gpuslot_waiter_boost(struct gpuslot_domain *d, struct gpuslot_waiter *w)
	__must_hold(&d->lock)
{
	unsigned int prio = READ_ONCE(d->boost_priority);
	unsigned int share = READ_ONCE(d->max_boost_share);
	struct gpuslot_file *f = w->file;
	struct gpuslot_member_ledger *ml;
	struct gpuslot_boost_prep prep;
	bool live;
	u64 seq;

	lockdep_assert_held(&d->lock);
	if (!gpuslot_boost_wanted(prio, current))
		return false;
	/*
	 * The file is ACQUIRING from here: no other thread of it can acquire,
	 * so its next hold, @seq, is this thread's, and nothing can end or
	 * release it before it is granted. A record the ledger still keeps
	 * for an older hold of the file ends in gpuslot_hold_lock().
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
	gpuslot_boost_prepare(&prep, current);
	rt_mutex_lock(&f->boost_lock);
	ml = gpuslot_hold_lock(f, seq, current, &prep);
	if (ml) {
		w->boosted = gpuslot_boost_begin(&ml->l, &f->boost, seq, live,
						 current, prio, share,
						 &w->budget_end_ns);
		rt_mutex_unlock(&ml->lock);
	} else {
		gpuslot_boost_pass(&f->boost, seq);
		w->boosted = false;
	}
	rt_mutex_unlock(&f->boost_lock);
	gpuslot_boost_unprepare(&prep);
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
 * Apply to @f, a holder in @d, the priority its waiters lend it, if that
 * changed since; @p is the thread of its hold as the caller found it. The
 * caller pinned @f (f->boost_pins) under d->lock: its memory stays until
 * this returns (gpuslot_file_cleanup() waits), though its hold may end
 * meanwhile, which the checks under d->lock see; a hold whose thread is no
 * longer @p is left to the caller's next look. A thread the boost is
 * refused to (the policy checks of gpuslot_boost_refusal()) inherits
 * nothing either.
 */
static void gpuslot_hold_inherit(struct gpuslot_domain *d,
				 struct gpuslot_file *f, struct task_struct *p,
				 struct gpuslot_boost_prep *prep)
{
	unsigned int share = READ_ONCE(d->max_boost_share);
	struct gpuslot_member_ledger *ml;
	u64 seq, budget_end = U64_MAX;
	bool boosted, lend = false;
	unsigned int prio;

	rt_mutex_lock(&f->boost_lock);
	spin_lock(&d->lock);
	/* Released meanwhile, or brought up to date by its own boost. */
	if (READ_ONCE(f->domain) != d || f->state != GPUSLOT_FILE_HOLDING ||
	    f->inherit_applied == f->inherit_prio) {
		spin_unlock(&d->lock);
		rt_mutex_unlock(&f->boost_lock);
		return;
	}
	rcu_read_lock();
	if (pid_task(f->holder_tid, PIDTYPE_PID) != p) {
		/* Another hold now: its thread is found on the next look. */
		rcu_read_unlock();
		spin_unlock(&d->lock);
		rt_mutex_unlock(&f->boost_lock);
		return;
	}
	rcu_read_unlock();
	f->inherit_applied = f->inherit_prio;
	seq = f->hold_seq;
	prio = gpuslot_hold_prio(READ_ONCE(d->boost_priority), f->inherit_prio);
	/*
	 * A hold whose boost ran out stays out, inherited or not, and one
	 * past max_hold_ms begins none (its clock would end it at once,
	 * after it ran boosted until the expiry thread came).
	 */
	if (p && f->hold_boost != GPUSLOT_HOLD_OVERRUN &&
	    !(f->hold_max_ns && !gpuslot_boost_left(f, U64_MAX)))
		lend = true;
	spin_unlock(&d->lock);
	if (lend && gpuslot_boost_refusal(f, p, gpuslot_boost_due(prio, p)))
		lend = false;
	if (!lend) {
		rt_mutex_unlock(&f->boost_lock);
		return;
	}
	prio = gpuslot_boost_below_expiry(prio);
	ml = gpuslot_hold_lock(f, seq, p, prep);
	if (ml) {
		boosted = gpuslot_boost_set_prio(&ml->l, &f->boost, seq, p,
						 prio, share, &budget_end);
	} else {
		gpuslot_boost_pass(&f->boost, seq);
		boosted = false;
	}
	gpuslot_hold_follow_ledger(d, f, seq, boosted, budget_end);
	if (ml)
		rt_mutex_unlock(&ml->lock);
	rt_mutex_unlock(&f->boost_lock);
}

/*
 * Apply the priorities the holders of @d inherit (lock.c) where they
 * changed: one holder at a time, d->lock dropped around each one's ledger
 * call, which takes only that holder's file and member locks. The thread
 * of a hold is the one that acquired it, found through its pid: one that
 * exited inherits nothing.
 */
void gpuslot_domain_inherit(struct gpuslot_domain *d)
{
	for (;;) {
		struct gpuslot_boost_prep prep;
		struct gpuslot_file *f = NULL;
		struct task_struct *p;
		unsigned int s;

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
			break;
		}
		atomic_inc(&f->boost_pins);
		p = get_pid_task(f->holder_tid, PIDTYPE_PID);
		spin_unlock(&d->lock);
		gpuslot_boost_prepare(&prep, p);
		gpuslot_hold_inherit(d, f, p, &prep);
		gpuslot_boost_unprepare(&prep);
		if (p)
			put_task_struct(p);
		/* wake_up_var() only hashes the address: @f may be gone. */
		if (atomic_dec_and_test(&f->boost_pins))
			wake_up_var(&f->boost_pins);
	}
}

void gpuslot_file_unboost(struct gpuslot_file *f, u64 seq)
{
	struct gpuslot_member_ledger *ml;

	rt_mutex_lock(&f->boost_lock);
	if (f->boost.thread) {
		ml = gpuslot_hold_ledger(&f->boost);
		rt_mutex_lock(&ml->lock);
		gpuslot_boost_finish(&ml->l, &f->boost, seq);
		rt_mutex_unlock(&ml->lock);
	}
	rt_mutex_unlock(&f->boost_lock);
}

void gpuslot_file_unpinned(struct gpuslot_file *f)
{
	wait_var_event(&f->boost_pins, !atomic_read(&f->boost_pins));
}

/*
 * On the expiry worker, above every boost: the hold outlived max_hold_ms,
 * or its thread's budget may be spent (the ledger says). The worker serves
 * every file: it waits here for this file's and its member's locks, whose
 * owner it lends its priority to for one ledger call at most.
 */
static void gpuslot_overrun_work_fn(struct kthread_work *work)
{
	struct gpuslot_file *f = container_of(work, struct gpuslot_file,
					      overrun_work);
	struct gpuslot_domain *d = gpuslot_file_lock(f);
	u64 max_ns = f->hold_max_ns, seq = f->hold_seq, budget_end = U64_MAX;
	struct gpuslot_member_ledger *ml = NULL;
	unsigned int slot = f->slot;
	bool spent = false;

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

	rt_mutex_lock(&f->boost_lock);
	if (f->boost.thread) {
		ml = gpuslot_hold_ledger(&f->boost);
		rt_mutex_lock(&ml->lock);
		spent = gpuslot_boost_expire(&ml->l, &f->boost, seq,
					     &budget_end);
	}
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
	if (ml)
		rt_mutex_unlock(&ml->lock);
	rt_mutex_unlock(&f->boost_lock);
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
