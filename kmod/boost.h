/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SCHED_FIFO boost of a slot holder, and the exact restore afterwards.
 * Both calls may sleep: never call them under a spinlock.
 */
#ifndef GPUSLOT_BOOST_H
#define GPUSLOT_BOOST_H

#include <linux/types.h>

struct task_struct;

struct gpuslot_boost {
	struct task_struct *task;	/* boosted thread (a reference), or NULL */
	unsigned int prio;		/* SCHED_FIFO priority it was given */
	/* What the thread ran at before; restored on gpuslot_boost_restore. */
	unsigned int saved_policy;
	unsigned int saved_rt_priority;
	int saved_nice;
	bool saved_reset_on_fork;
};

/*
 * Raise @p to SCHED_FIFO @prio, remembering its attributes. Does nothing
 * when @prio is 0, when @p is SCHED_DEADLINE, or when @p already runs at
 * an RT priority of @prio or higher.
 */
void gpuslot_boost_apply(struct gpuslot_boost *b, struct task_struct *p,
			 unsigned int prio);

/*
 * Give the boosted thread its saved attributes back, unless it changed its
 * scheduling policy itself meanwhile, and drop the task reference.
 */
void gpuslot_boost_restore(struct gpuslot_boost *b);

#endif /* GPUSLOT_BOOST_H */
