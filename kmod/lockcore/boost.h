/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The boost ledger: which threads gpuslot runs at SCHED_FIFO, for which
 * holds, and what each ran at before.
 *
 * One record per boosted thread, shared by every hold the thread is
 * boosted for (slots of several GPUs, or several files of one GPU). The
 * thread runs at the highest boost priority of its holds and gets its own
 * attributes back when its last hold ends. A hold is known by the open
 * file's gpuslot_boost_hold and a sequence number that grows with every
 * grant on that file, so a boost or an unboost that arrives late (another
 * thread sharing the file released and took the slot again meanwhile) can
 * be told from a current one. The boost budget is not the thread's but its
 * member's (a uid): one account, charged by all its threads (see below).
 *
 * Pure logic, like core.c: the caller serialises every call on a ledger
 * (the module keeps one ledger per member, each with its own rt_mutex, see
 * boost_sched.c; gpuslotd one, on its one thread) and supplies the
 * scheduler through gpuslot_boost_ops, whose calls may sleep. Compiled and
 * fuzzed in userspace (tests/).
 */
#ifndef GPUSLOT_BOOST_H
#define GPUSLOT_BOOST_H

#include <linux/list.h>
#include <linux/types.h>

struct task_struct;

/* The scheduling attributes gpuslot saves and restores. */
struct gpuslot_sched_attr {
	unsigned int policy;
	unsigned int rt_priority;
	int nice;
	bool reset_on_fork;
};

struct gpuslot_boost_thread;
struct gpuslot_boost_member;
struct gpuslot_boost_hold;
struct gpuslot_boost_ledger;

/*
 * The boost budget of a member (max_boost_share, in percent): one account
 * per member, its real uid when a thread of it is first boosted
 * (ops->member_id), that every boosted thread of the member charges, so
 * that new threads, several threads at once and several processes get no
 * more than one thread would (and drain it no faster than ops->nr_cpus
 * of them could, however many are boosted). It fills at that share of real time, up to
 * that share of GPUSLOT_BOOST_WINDOW_NS (the cap), and drains by the CPU
 * time the member's threads use while boosted (ops->cputime; without it,
 * by the time each is boosted). A boost begins only with budget left and
 * ends when it is spent (the clock of every boosted hold of the member is
 * brought forward when another thread of it begins a boost: ops->rearm).
 * Between ledger calls the ledger does not know when the CPU time was
 * used; it settles as if it came last, every boosted thread at once, so
 * that refill the account could not take while full is never counted
 * (the most it could owe). So over any interval of length T the threads
 * of one member run on CPUs boosted, in total, at most
 *
 *	share x (T + GPUSLOT_BOOST_WINDOW_NS) + E
 *
 * where E is the CPU time its boosted threads run between the budget's
 * end and the expiry that ends each boost (the wake-up of the expiry, and
 * the staleness of ops->cputime: a tick). What is overrun is owed and paid
 * back before the next boost. A holder that sleeps boosted (waiting for its
 * GPU work) costs nothing. 100: no budget for the holds at that share (their
 * boost is neither refused nor ended nor charged for it), not forgiveness of
 * what the member owes from holds elsewhere: that is paid back at the share
 * it was owed at (@owed_share), as between holds. The lock itself is not
 * affected: a hold whose member's budget is spent keeps its slot, it only
 * runs unboosted. The smallest share of the member's current holds rules;
 * between holds the account pays back at the last one and is freed once
 * full again.
 */
#define GPUSLOT_BOOST_WINDOW_NS		1000000000ULL

struct gpuslot_boost_ops {
	void (*get_attr)(struct task_struct *p, struct gpuslot_sched_attr *a);
	int (*set_attr)(struct task_struct *p,
			const struct gpuslot_sched_attr *a);
	bool (*exiting)(struct task_struct *p);
	/*
	 * A thread record of ledger @l, with a reference to @p; NULL if out
	 * of memory (or, in the module, if @p is recorded in another ledger).
	 */
	struct gpuslot_boost_thread *(*new_thread)(struct gpuslot_boost_ledger *l,
						   struct task_struct *p);
	/* Free a record made by new_thread(), dropping its reference. */
	void (*free_thread)(struct gpuslot_boost_thread *t);
	/*
	 * Whether @t's thread still runs the image and the credentials it
	 * had when new_thread() made the record (no exec, no change of
	 * uid, gid or capabilities since). NULL: always.
	 */
	bool (*same_owner)(struct gpuslot_boost_thread *t);
	/* A monotonic clock in ns, for the budget. NULL: no budget. */
	u64 (*now)(void);
	/* The CPU time @p has used, in ns. NULL: charge real time. */
	u64 (*cputime)(struct task_struct *p);
	/*
	 * The member @p's boost is charged to in ledger @l: its real uid
	 * (in the module, the uid of @l, one ledger per member).
	 */
	u32 (*member_id)(struct gpuslot_boost_ledger *l, struct task_struct *p);
	/* A zeroed member account of ledger @l; NULL if out of memory. */
	struct gpuslot_boost_member *(*new_member)(struct gpuslot_boost_ledger *l);
	void (*free_member)(struct gpuslot_boost_member *m);
	/*
	 * Boosted hold @h's budget now ends earlier, at @budget_end_ns
	 * (another thread of its member began a boost): its clock must
	 * fire by then. NULL: the caller reads h->budget_end_ns itself.
	 */
	void (*rearm)(struct gpuslot_boost_hold *h, u64 budget_end_ns);
	/*
	 * How many threads can run at once (the CPUs online): a member's
	 * budget drains no faster than that many of its threads, however
	 * many are boosted (a waiter sleeps boosted, to wake so). NULL or
	 * 0: no limit.
	 */
	unsigned int (*nr_cpus)(void);
};

/* The boost budget of one member; see above. */
struct gpuslot_boost_member {
	struct list_head node;		/* in gpuslot_boost_ledger.members[] */
	u32 id;
	struct list_head threads;	/* gpuslot_boost_thread.member_node */
	unsigned int share;		/* the smallest of its holds', or last */
	unsigned int owed_share;	/* the last @share below 100: payback */
	u64 spent_ns;			/* boost not yet paid back */
	u64 at_ns;			/* when @spent_ns was last brought up to date */
	struct list_head idle_node;	/* in ledger->idle, without threads */
	u64 full_at_ns;			/* when its budget is full again, idle */
};

/* One boosted thread: what it ran at before, and its holds. */
struct gpuslot_boost_thread {
	struct list_head node;		/* in gpuslot_boost_ledger.buckets[] */
	struct task_struct *task;
	struct list_head holds;		/* gpuslot_boost_hold.node */
	unsigned int applied;		/* SCHED_FIFO priority set last */
	struct gpuslot_sched_attr saved;	/* what it ran at before */
	struct gpuslot_boost_member *member;	/* charged for its boost */
	struct list_head member_node;
	bool boosting;			/* runs at our boost now */
	u64 cpu_at_ns;			/* its CPU time at member->at_ns */
};

/* The boost of one open file's hold; zero-initialised. */
struct gpuslot_boost_hold {
	struct list_head node;			/* in thread->holds */
	struct gpuslot_boost_thread *thread;	/* NULL: no boost now */
	unsigned int prio;
	unsigned int share;		/* max_boost_share of its domain */
	u64 seq;			/* the newest hold seen; holds start at 1 */
	/* When its member's budget ends, as last told (U64_MAX: never). */
	u64 budget_end_ns;
};

#define GPUSLOT_BOOST_BUCKETS 64

struct gpuslot_boost_ledger {
	const struct gpuslot_boost_ops *ops;
	struct list_head buckets[GPUSLOT_BOOST_BUCKETS];
	struct list_head members[GPUSLOT_BOOST_BUCKETS];
	unsigned int nr_threads;	/* thread records: each has holds */
	unsigned int nr_members;	/* accounts, idle ones included */
	struct list_head idle;		/* accounts without threads, by full_at_ns */
};

void gpuslot_boost_ledger_init(struct gpuslot_boost_ledger *l,
			       const struct gpuslot_boost_ops *ops);

/*
 * Boost @p at @prio for hold @seq of @h, under a budget of @share percent
 * charged to @p's member.
 * @live: the caller saw @seq as the file's current hold. Nothing happens
 * for a hold older than one already seen. A boost still recorded for an
 * older hold of @h (whose release is on its way) ends first. A thread
 * already at @prio or above that gpuslot did not boost, a SCHED_DEADLINE
 * thread, or one whose member's budget is spent, gets no boost. Returns
 * true if @h is boosted now; then *@budget_end_ns (if not NULL) is when its
 * member's budget runs out if every boosted thread of it stays on a CPU
 * (U64_MAX: never), on ops->now(), and the other boosted holds of the
 * member whose end that brings forward are told (ops->rearm).
 */
bool gpuslot_boost_begin(struct gpuslot_boost_ledger *l,
			 struct gpuslot_boost_hold *h, u64 seq, bool live,
			 struct task_struct *p, unsigned int prio,
			 unsigned int share, u64 *budget_end_ns);

/*
 * Hold @seq of @h reached the end of its member's budget, or may have:
 * if the budget is spent, its boost ends as in gpuslot_boost_finish() and
 * this returns true. Otherwise *@budget_end_ns says when to look again.
 */
bool gpuslot_boost_expire(struct gpuslot_boost_ledger *l,
			  struct gpuslot_boost_hold *h, u64 seq,
			  u64 *budget_end_ns);

/*
 * Whether @p has no record (a record lives only while its thread has
 * holds; the budget is its member's). Returns false if @p has one.
 */
bool gpuslot_boost_forget(struct gpuslot_boost_ledger *l,
			  struct task_struct *p);

/*
 * Hold @seq of @h gets no boost, and no ledger will see it (the module had
 * none to give it: out of memory): its number is taken, as
 * gpuslot_boost_begin() takes a hold's that is not live. @h has no boost
 * recorded.
 */
void gpuslot_boost_pass(struct gpuslot_boost_hold *h, u64 seq);

/* Free every member account without threads (the end of the ledger). */
void gpuslot_boost_drain(struct gpuslot_boost_ledger *l);

/*
 * End the boost of hold @seq of @h, or of an older hold still recorded:
 * its thread drops to the highest priority of its other holds, or gets
 * its saved attributes back if this was its last. Unless it is exiting,
 * or it moved itself above what gpuslot gave it or to SCHED_DEADLINE. A
 * thread whose image or credentials changed since it was boosted gets back
 * only what needs no privilege: see gpuslot_boost_unprivileged().
 */
void gpuslot_boost_finish(struct gpuslot_boost_ledger *l,
			  struct gpuslot_boost_hold *h, u64 seq);

/*
 * What a thread whose owner changed gets back instead of @saved: a real-time
 * policy becomes SCHED_OTHER, a negative nice value 0. The saved attributes
 * were allowed to the old image and credentials (root's, say); written by
 * the module, which checks no permission, onto the new ones they would be
 * a privilege gpuslot never had to give.
 */
void gpuslot_boost_unprivileged(const struct gpuslot_sched_attr *saved,
				struct gpuslot_sched_attr *out);

/* The record of @p, or NULL. */
struct gpuslot_boost_thread *
gpuslot_boost_find(const struct gpuslot_boost_ledger *l,
		   const struct task_struct *p);

/*
 * Change the priority of hold @seq of @h, of thread @p, to @prio: the
 * hold's boost and what its waiters lend it by priority inheritance,
 * whichever is higher (the caller computes it). The thread runs at the
 * highest of its holds, as with gpuslot_boost_begin(). A @prio at or below
 * what the thread ran at before gpuslot (its saved real-time priority), or
 * 0, ends the hold's boost (gpuslot_boost_finish()): the thread drops to
 * its other holds' highest or gets its saved attributes back. A hold not
 * boosted yet (not begun, or begun without a boost) begins as in
 * gpuslot_boost_begin(), under the same budget, @share; an older hold
 * than one already seen changes nothing. A boosted hold whose member's
 * budget is spent is not raised: its boost ends, as gpuslot_boost_expire()
 * would end it. Returns true if @h is boosted after the call; then
 * *@budget_end_ns (if not NULL) is as in gpuslot_boost_begin(), and every
 * boosted hold of the member whose end that brings forward, @h included,
 * is told (ops->rearm; without it the caller compares h->budget_end_ns).
 */
bool gpuslot_boost_set_prio(struct gpuslot_boost_ledger *l,
			    struct gpuslot_boost_hold *h, u64 seq,
			    struct task_struct *p, unsigned int prio,
			    unsigned int share, u64 *budget_end_ns);

#endif /* GPUSLOT_BOOST_H */
