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
 * be told from a current one.
 *
 * Pure logic, like core.c: the caller serialises every call (the module
 * with one mutex) and supplies the scheduler through gpuslot_boost_ops,
 * whose calls may sleep. Compiled and fuzzed in userspace (tests/).
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

struct gpuslot_boost_ops {
	void (*get_attr)(struct task_struct *p, struct gpuslot_sched_attr *a);
	int (*set_attr)(struct task_struct *p,
			const struct gpuslot_sched_attr *a);
	bool (*exiting)(struct task_struct *p);
	/* A thread record, with a reference to @p; NULL if out of memory. */
	struct gpuslot_boost_thread *(*new_thread)(struct task_struct *p);
	/* Free a record made by new_thread(), dropping its reference. */
	void (*free_thread)(struct gpuslot_boost_thread *t);
};

/* One boosted thread. */
struct gpuslot_boost_thread {
	struct list_head node;		/* in gpuslot_boost_ledger.buckets[] */
	struct task_struct *task;
	struct list_head holds;		/* gpuslot_boost_hold.node */
	unsigned int applied;		/* SCHED_FIFO priority set last */
	struct gpuslot_sched_attr saved;	/* what it ran at before */
};

/* The boost of one open file's hold; zero-initialised. */
struct gpuslot_boost_hold {
	struct list_head node;			/* in thread->holds */
	struct gpuslot_boost_thread *thread;	/* NULL: no boost now */
	unsigned int prio;
	u64 seq;			/* the newest hold seen; holds start at 1 */
};

#define GPUSLOT_BOOST_BUCKETS 64

struct gpuslot_boost_ledger {
	const struct gpuslot_boost_ops *ops;
	struct list_head buckets[GPUSLOT_BOOST_BUCKETS];
	unsigned int nr_threads;
};

void gpuslot_boost_ledger_init(struct gpuslot_boost_ledger *l,
			       const struct gpuslot_boost_ops *ops);

/*
 * Boost @p at @prio for hold @seq of @h. @live: the caller saw @seq as the
 * file's current hold. Nothing happens for a hold older than one already
 * seen. A boost still recorded for an older hold of @h (whose release is on
 * its way) ends first. A thread already at @prio or above that gpuslot did
 * not boost, or a SCHED_DEADLINE thread, gets no boost. Returns true if @h
 * is boosted now.
 */
bool gpuslot_boost_begin(struct gpuslot_boost_ledger *l,
			 struct gpuslot_boost_hold *h, u64 seq, bool live,
			 struct task_struct *p, unsigned int prio);

/*
 * End the boost of hold @seq of @h, or of an older hold still recorded:
 * its thread drops to the highest priority of its other holds, or gets
 * its saved attributes back if this was its last. Unless it is exiting,
 * or it moved itself above what gpuslot gave it or to SCHED_DEADLINE.
 */
void gpuslot_boost_finish(struct gpuslot_boost_ledger *l,
			  struct gpuslot_boost_hold *h, u64 seq);

/* The record of @p, or NULL. */
struct gpuslot_boost_thread *
gpuslot_boost_find(const struct gpuslot_boost_ledger *l,
		   const struct task_struct *p);

#endif /* GPUSLOT_BOOST_H */
