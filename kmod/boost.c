// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot priority boost.
 *
 * Modules can only change a task's policy through the GPL export
 * sched_setattr_nocheck(); there is no export to read the attributes back,
 * so they are snapshotted from task_struct here. sched_setattr_nocheck()
 * takes sleeping locks (cpusets, PI), hence the rule in boost.h.
 */
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <uapi/linux/sched/types.h>

#include "boost.h"

static bool gpuslot_policy_is_rt(unsigned int policy)
{
	return policy == SCHED_FIFO || policy == SCHED_RR;
}

void gpuslot_boost_apply(struct gpuslot_boost *b, struct task_struct *p,
			 unsigned int prio)
{
	unsigned int policy = READ_ONCE(p->policy);
	struct sched_attr attr = {
		.size = sizeof(attr),
		.sched_policy = SCHED_FIFO,
		.sched_priority = prio,
		/* Children forked while boosted must not inherit the boost. */
		.sched_flags = SCHED_FLAG_RESET_ON_FORK,
	};
	int ret;

	if (!prio || policy == SCHED_DEADLINE)
		return;
	if (gpuslot_policy_is_rt(policy) && READ_ONCE(p->rt_priority) >= prio)
		return;

	b->saved_policy = policy;
	b->saved_rt_priority = READ_ONCE(p->rt_priority);
	b->saved_nice = task_nice(p);
	b->saved_reset_on_fork = p->sched_reset_on_fork;

	ret = sched_setattr_nocheck(p, &attr);
	if (ret) {
		pr_warn_ratelimited("gpuslot: cannot boost %s[%d] to SCHED_FIFO %u: %d\n",
				    p->comm, task_pid_nr(p), prio, ret);
		return;
	}
	get_task_struct(p);
	b->task = p;
	b->prio = prio;
}

void gpuslot_boost_restore(struct gpuslot_boost *b)
{
	struct task_struct *p = b->task;
	struct sched_attr attr = {
		.size = sizeof(attr),
		.sched_policy = b->saved_policy,
		.sched_flags = b->saved_reset_on_fork ?
			       SCHED_FLAG_RESET_ON_FORK : 0,
		.sched_nice = b->saved_nice,
		.sched_priority = b->saved_rt_priority,
	};
	int ret;

	if (!p)
		return;
	b->task = NULL;

	/* The thread changed its own policy while holding: leave it be. */
	if (READ_ONCE(p->policy) == SCHED_FIFO &&
	    READ_ONCE(p->rt_priority) == b->prio) {
		ret = sched_setattr_nocheck(p, &attr);
		if (ret)
			pr_warn_ratelimited("gpuslot: cannot restore policy %u of %s[%d]: %d\n",
					    b->saved_policy, p->comm,
					    task_pid_nr(p), ret);
	}
	put_task_struct(p);
}
