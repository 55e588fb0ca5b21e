// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot boost ledger. See boost.h for what it keeps and why.
 *
 * The rules, in one place:
 *  - a thread gets SCHED_FIFO at the highest priority of its boosted holds,
 *    with SCHED_FLAG_RESET_ON_FORK so that children do not inherit it;
 *  - a thread that already runs at that RT priority or above without
 *    gpuslot, or runs SCHED_DEADLINE, is left alone and gets no record;
 *  - when a hold ends the thread drops to the highest priority of its other
 *    holds, or, at its last, gets its saved attributes back, whenever it is
 *    still at or below what gpuslot gave it: a thread that lowered its own
 *    priority, or went back to SCHED_OTHER, while holding is restored too;
 *  - it is left alone if it moved above what gpuslot gave it or to
 *    SCHED_DEADLINE, and an exiting thread is not touched.
 */
#include <linux/types.h>
#include <uapi/linux/sched.h>

#include "boost.h"

static unsigned int gpuslot_boost_bucket(const struct task_struct *p)
{
	/* Fibonacci hashing of the pointer into 64 buckets. */
	return (unsigned int)(((u64)(uintptr_t)p * 0x61C8864680B583EBULL) >> 58);
}

static bool gpuslot_policy_is_rt(unsigned int policy)
{
	return policy == SCHED_FIFO || policy == SCHED_RR;
}

void gpuslot_boost_ledger_init(struct gpuslot_boost_ledger *l,
			       const struct gpuslot_boost_ops *ops)
{
	unsigned int i;

	l->ops = ops;
	l->nr_threads = 0;
	for (i = 0; i < GPUSLOT_BOOST_BUCKETS; i++)
		INIT_LIST_HEAD(&l->buckets[i]);
}

struct gpuslot_boost_thread *
gpuslot_boost_find(const struct gpuslot_boost_ledger *l,
		   const struct task_struct *p)
{
	const struct list_head *head = &l->buckets[gpuslot_boost_bucket(p)];
	struct gpuslot_boost_thread *t;

	list_for_each_entry(t, head, node)
		if (t->task == p)
			return t;
	return NULL;
}

static unsigned int gpuslot_boost_target(const struct gpuslot_boost_thread *t)
{
	const struct gpuslot_boost_hold *h;
	unsigned int prio = 0;

	list_for_each_entry(h, &t->holds, node)
		if (h->prio > prio)
			prio = h->prio;
	return prio;
}

/*
 * Set @t's thread to the priority its holds call for, or back to its saved
 * attributes when none is left.
 */
static void gpuslot_boost_retarget(struct gpuslot_boost_ledger *l,
				   struct gpuslot_boost_thread *t)
{
	unsigned int target = gpuslot_boost_target(t);
	struct gpuslot_sched_attr cur, fifo = {
		.policy = SCHED_FIFO,
		.rt_priority = target,
		.reset_on_fork = true,
	};

	if (l->ops->exiting(t->task))
		return;
	l->ops->get_attr(t->task, &cur);
	/*
	 * The thread took its scheduling into its own hands: leave it. (A new
	 * record has applied nothing yet, and its thread is below @target.)
	 */
	if (cur.policy == SCHED_DEADLINE ||
	    (t->applied && gpuslot_policy_is_rt(cur.policy) &&
	     cur.rt_priority > t->applied))
		return;
	if (!target) {
		l->ops->set_attr(t->task, &t->saved);
		return;
	}
	if (cur.policy == SCHED_FIFO && cur.rt_priority == target &&
	    cur.reset_on_fork)
		return;
	if (!l->ops->set_attr(t->task, &fifo))
		t->applied = target;
}

static void gpuslot_boost_end(struct gpuslot_boost_ledger *l,
			      struct gpuslot_boost_hold *h)
{
	struct gpuslot_boost_thread *t = h->thread;

	list_del_init(&h->node);
	h->thread = NULL;
	gpuslot_boost_retarget(l, t);
	if (list_empty(&t->holds)) {
		list_del_init(&t->node);
		l->nr_threads--;
		l->ops->free_thread(t);
	}
}

bool gpuslot_boost_begin(struct gpuslot_boost_ledger *l,
			 struct gpuslot_boost_hold *h, u64 seq, bool live,
			 struct task_struct *p, unsigned int prio)
{
	struct gpuslot_boost_thread *t;
	struct gpuslot_sched_attr cur;

	/* A late call for a hold that is over, or already handled. */
	if (seq <= h->seq)
		return false;
	if (h->thread)
		gpuslot_boost_end(l, h);
	h->seq = seq;
	if (!live || !prio)
		return false;

	t = gpuslot_boost_find(l, p);
	if (!t) {
		l->ops->get_attr(p, &cur);
		if (cur.policy == SCHED_DEADLINE ||
		    (gpuslot_policy_is_rt(cur.policy) && cur.rt_priority >= prio))
			return false;
		t = l->ops->new_thread(p);
		if (!t)
			return false;
		t->task = p;
		t->applied = 0;
		t->saved = cur;
		INIT_LIST_HEAD(&t->holds);
		list_add_tail(&t->node, &l->buckets[gpuslot_boost_bucket(p)]);
		l->nr_threads++;
	}
	h->prio = prio;
	h->thread = t;
	list_add_tail(&h->node, &t->holds);
	gpuslot_boost_retarget(l, t);
	if (!t->applied) {
		/* The first boost failed: nothing to restore later. */
		list_del_init(&h->node);
		h->thread = NULL;
		list_del_init(&t->node);
		l->nr_threads--;
		l->ops->free_thread(t);
		return false;
	}
	return true;
}

void gpuslot_boost_finish(struct gpuslot_boost_ledger *l,
			  struct gpuslot_boost_hold *h, u64 seq)
{
	if (h->thread && h->seq <= seq)
		gpuslot_boost_end(l, h);
}
