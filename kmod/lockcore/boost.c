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
 *    SCHED_DEADLINE, and an exiting thread is not touched;
 *  - a thread that exec'd, or whose credentials changed, since it was
 *    boosted gets no real-time policy and no negative nice back;
 *  - a thread runs boosted only while its budget lasts (boost.h): its
 *    record outlives its last hold until the budget is full again.
 */
#include <linux/limits.h>
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

void gpuslot_boost_unprivileged(const struct gpuslot_sched_attr *saved,
				struct gpuslot_sched_attr *out)
{
	*out = *saved;
	if (gpuslot_policy_is_rt(out->policy) || out->policy == SCHED_DEADLINE) {
		out->policy = SCHED_NORMAL;
		out->rt_priority = 0;
	}
	if (out->nice < 0)
		out->nice = 0;
}

void gpuslot_boost_ledger_init(struct gpuslot_boost_ledger *l,
			       const struct gpuslot_boost_ops *ops)
{
	unsigned int i;

	l->ops = ops;
	l->nr_threads = 0;
	for (i = 0; i < GPUSLOT_BOOST_BUCKETS; i++)
		INIT_LIST_HEAD(&l->buckets[i]);
	INIT_LIST_HEAD(&l->idle);
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

/* The budget. */

static u64 gpuslot_boost_now(const struct gpuslot_boost_ledger *l)
{
	return l->ops->now ? l->ops->now() : 0;
}

/* @share as the ledger applies it: 100 (none) without a clock. */
static unsigned int gpuslot_budget_share(const struct gpuslot_boost_ledger *l,
					 unsigned int share)
{
	return l->ops->now && share < 100 ? share : 100;
}

/* The most boost a thread may owe at @share: the budget when full. */
static u64 gpuslot_budget_cap(unsigned int share)
{
	return GPUSLOT_BOOST_WINDOW_NS / 100 * share;
}

static u64 gpuslot_boost_cputime(const struct gpuslot_boost_ledger *l,
				 struct task_struct *p, u64 now)
{
	return l->ops->cputime ? l->ops->cputime(p) : now;
}

/*
 * Bring @t's budget up to @now: the CPU time it used boosted since is
 * charged, and the share of real time since is paid back.
 */
static void gpuslot_budget_settle(const struct gpuslot_boost_ledger *l,
				  struct gpuslot_boost_thread *t, u64 now)
{
	u64 dt = now > t->at_ns ? now - t->at_ns : 0;
	u64 cpu = gpuslot_boost_cputime(l, t->task, now);
	u64 ran = cpu > t->cpu_at_ns ? cpu - t->cpu_at_ns : 0;
	u64 back = dt * t->share / 100;

	if (now > t->at_ns)
		t->at_ns = now;
	t->cpu_at_ns = cpu;
	if (t->share >= 100) {
		t->spent_ns = 0;
		return;
	}
	if (t->boosting)
		t->spent_ns += ran;
	t->spent_ns = back < t->spent_ns ? t->spent_ns - back : 0;
}

static bool gpuslot_budget_spent(const struct gpuslot_boost_thread *t,
				 unsigned int share)
{
	return share < 100 && t->spent_ns >= gpuslot_budget_cap(share);
}

/*
 * When @t's budget, settled, runs out if it stays boosted and on a CPU all
 * the while (the earliest it can); U64_MAX: never.
 */
static u64 gpuslot_budget_end(const struct gpuslot_boost_thread *t)
{
	u64 cap = gpuslot_budget_cap(t->share);

	if (t->share >= 100)
		return U64_MAX;
	if (t->spent_ns >= cap)
		return t->at_ns;
	return t->at_ns + (cap - t->spent_ns) * 100 / (100 - t->share);
}

static void gpuslot_boost_free(struct gpuslot_boost_ledger *l,
			       struct gpuslot_boost_thread *t)
{
	list_del_init(&t->node);
	list_del_init(&t->idle_node);
	l->nr_threads--;
	l->ops->free_thread(t);
}

/*
 * Free the records without holds whose budget is full again: at most
 * GPUSLOT_BOOST_WINDOW_NS after their last hold, as one that owes the
 * most (the cap) pays it back at @share in that time.
 */
static void gpuslot_boost_prune(struct gpuslot_boost_ledger *l, u64 now)
{
	struct gpuslot_boost_thread *t, *tmp;

	list_for_each_entry_safe(t, tmp, &l->idle, idle_node) {
		if (now - t->idle_since_ns < GPUSLOT_BOOST_WINDOW_NS)
			break;
		gpuslot_boost_free(l, t);
	}
}

bool gpuslot_boost_forget(struct gpuslot_boost_ledger *l,
			  struct task_struct *p)
{
	struct gpuslot_boost_thread *t = gpuslot_boost_find(l, p);

	if (!t)
		return true;
	if (!list_empty(&t->holds))
		return false;
	gpuslot_boost_free(l, t);
	return true;
}

void gpuslot_boost_drain(struct gpuslot_boost_ledger *l)
{
	struct gpuslot_boost_thread *t, *tmp;

	list_for_each_entry_safe(t, tmp, &l->idle, idle_node)
		gpuslot_boost_free(l, t);
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
 * attributes when none is left; say whether it runs at our boost now.
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

	if (l->ops->exiting(t->task)) {
		t->boosting = false;
		return;
	}
	l->ops->get_attr(t->task, &cur);
	/*
	 * The thread took its scheduling into its own hands: leave it. (A new
	 * record has applied nothing yet, and its thread is below @target.)
	 */
	if (cur.policy == SCHED_DEADLINE ||
	    (t->applied && gpuslot_policy_is_rt(cur.policy) &&
	     cur.rt_priority > t->applied)) {
		t->boosting = false;
		return;
	}
	if (!target) {
		struct gpuslot_sched_attr back;

		if (l->ops->same_owner && !l->ops->same_owner(t))
			gpuslot_boost_unprivileged(&t->saved, &back);
		else
			back = t->saved;
		l->ops->set_attr(t->task, &back);
		t->boosting = false;
		return;
	}
	if (cur.policy == SCHED_FIFO && cur.rt_priority == target &&
	    cur.reset_on_fork) {
		t->boosting = true;
		return;
	}
	if (!l->ops->set_attr(t->task, &fifo)) {
		t->applied = target;
		t->boosting = true;
	}
}

/* The smallest share of @t's holds, the budget it runs under. */
static unsigned int gpuslot_boost_share(const struct gpuslot_boost_thread *t)
{
	const struct gpuslot_boost_hold *h;
	unsigned int share = 100;

	list_for_each_entry(h, &t->holds, node)
		if (h->share < share)
			share = h->share;
	return share;
}

static void gpuslot_boost_end(struct gpuslot_boost_ledger *l,
			      struct gpuslot_boost_hold *h, u64 now)
{
	struct gpuslot_boost_thread *t = h->thread;

	gpuslot_budget_settle(l, t, now);
	list_del_init(&h->node);
	h->thread = NULL;
	gpuslot_boost_retarget(l, t);
	if (!list_empty(&t->holds)) {
		t->share = gpuslot_boost_share(t);
	} else if (t->spent_ns && !l->ops->exiting(t->task)) {
		/* Kept until its budget is full again. */
		t->idle_since_ns = now;
		list_add_tail(&t->idle_node, &l->idle);
	} else {
		gpuslot_boost_free(l, t);
	}
}

bool gpuslot_boost_begin(struct gpuslot_boost_ledger *l,
			 struct gpuslot_boost_hold *h, u64 seq, bool live,
			 struct task_struct *p, unsigned int prio,
			 unsigned int share, u64 *budget_end_ns)
{
	u64 now = gpuslot_boost_now(l), owed = 0;
	struct gpuslot_boost_thread *t;
	struct gpuslot_sched_attr cur;

	gpuslot_boost_prune(l, now);
	/* A late call for a hold that is over, or already handled. */
	if (seq <= h->seq)
		return false;
	if (h->thread)
		gpuslot_boost_end(l, h, now);
	h->seq = seq;
	if (!live || !prio)
		return false;
	share = gpuslot_budget_share(l, share);

	t = gpuslot_boost_find(l, p);
	if (t) {
		gpuslot_budget_settle(l, t, now);
		if (gpuslot_budget_spent(t, t->share < share ? t->share : share))
			return false;
	}
	if (t && list_empty(&t->holds)) {
		/*
		 * A thread between holds, kept for its budget: it starts
		 * afresh (its attributes, credentials and image now) and
		 * carries what it owes.
		 */
		owed = t->spent_ns;
		gpuslot_boost_free(l, t);
		t = NULL;
	}
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
		t->boosting = false;
		t->share = share;
		t->spent_ns = owed;
		t->at_ns = now;
		t->cpu_at_ns = gpuslot_boost_cputime(l, p, now);
		INIT_LIST_HEAD(&t->holds);
		INIT_LIST_HEAD(&t->idle_node);
		list_add_tail(&t->node, &l->buckets[gpuslot_boost_bucket(p)]);
		l->nr_threads++;
	}
	h->prio = prio;
	h->share = share;
	h->thread = t;
	list_add_tail(&h->node, &t->holds);
	if (share < t->share)
		t->share = share;
	gpuslot_boost_retarget(l, t);
	if (!t->applied) {
		/* The first boost failed: nothing to restore later. */
		list_del_init(&h->node);
		h->thread = NULL;
		gpuslot_boost_free(l, t);
		return false;
	}
	if (budget_end_ns)
		*budget_end_ns = gpuslot_budget_end(t);
	return true;
}

bool gpuslot_boost_expire(struct gpuslot_boost_ledger *l,
			  struct gpuslot_boost_hold *h, u64 seq,
			  u64 *budget_end_ns)
{
	u64 now = gpuslot_boost_now(l);
	struct gpuslot_boost_thread *t = h->thread;

	gpuslot_boost_prune(l, now);
	*budget_end_ns = U64_MAX;
	if (!t || h->seq != seq)
		return false;
	gpuslot_budget_settle(l, t, now);
	if (!gpuslot_budget_spent(t, t->share)) {
		*budget_end_ns = gpuslot_budget_end(t);
		return false;
	}
	gpuslot_boost_end(l, h, now);
	return true;
}

void gpuslot_boost_finish(struct gpuslot_boost_ledger *l,
			  struct gpuslot_boost_hold *h, u64 seq)
{
	u64 now = gpuslot_boost_now(l);

	gpuslot_boost_prune(l, now);
	if (h->thread && h->seq <= seq)
		gpuslot_boost_end(l, h, now);
}

/*
 * Priority inheritance (boost.h). A hold the ledger has not boosted yet
 * (not begun, begun below its thread's own priority, or begun when the
 * boost was off) begins as gpuslot_boost_begin() would, budget and all.
 */
bool gpuslot_boost_set_prio(struct gpuslot_boost_ledger *l,
			    struct gpuslot_boost_hold *h, u64 seq,
			    struct task_struct *p, unsigned int prio,
			    unsigned int share, u64 *budget_end_ns)
{
	struct gpuslot_boost_thread *t = h->thread;
	u64 now;

	if (seq < h->seq)
		return false;
	if (seq > h->seq || !t) {
		/* Seen and not boosted: begin it again, as a new hold. */
		if (seq == h->seq)
			h->seq = seq - 1;
		return gpuslot_boost_begin(l, h, seq, true, p, prio, share,
					   budget_end_ns);
	}
	now = gpuslot_boost_now(l);
	gpuslot_boost_prune(l, now);
	/* No priority at or below what the thread runs at on its own. */
	if (gpuslot_policy_is_rt(t->saved.policy) &&
	    t->saved.rt_priority >= prio)
		prio = 0;
	if (!prio) {
		gpuslot_boost_end(l, h, now);
		return false;
	}
	/* Bring the budget up to now before the boost may start or stop. */
	gpuslot_budget_settle(l, t, now);
	h->prio = prio;
	gpuslot_boost_retarget(l, t);
	if (budget_end_ns)
		*budget_end_ns = gpuslot_budget_end(t);
	return true;
}
