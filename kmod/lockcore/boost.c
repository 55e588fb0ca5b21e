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
 *  - a thread runs boosted only while its member's budget lasts (boost.h):
 *    a thread's record ends with its last hold, the member's account
 *    outlives it until the budget is full again.
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
	l->nr_members = 0;
	for (i = 0; i < GPUSLOT_BOOST_BUCKETS; i++) {
		INIT_LIST_HEAD(&l->buckets[i]);
		INIT_LIST_HEAD(&l->members[i]);
	}
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

/* The most boost a member may owe at @share: the budget when full. */
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
 * How many of @n boosted threads can run at once: their CPU time, and
 * the budget's drain, come from at most that many CPUs. Without it a
 * member with many waiters asleep boosted (each counted as if it ran)
 * had the clocks of its holds set a few microseconds ahead, and each
 * expiry, finding nothing spent, set them as close again.
 */
static u64 gpuslot_boost_running(const struct gpuslot_boost_ledger *l, u64 n)
{
	u64 cpus = l->ops->nr_cpus ? l->ops->nr_cpus() : 0;

	return cpus && cpus < n ? cpus : n;
}

static unsigned int gpuslot_member_bucket(u32 id)
{
	return (unsigned int)(((u64)id * 0x61C8864680B583EBULL) >> 58);
}

static struct gpuslot_boost_member *
gpuslot_member_find(const struct gpuslot_boost_ledger *l, u32 id)
{
	const struct list_head *head = &l->members[gpuslot_member_bucket(id)];
	struct gpuslot_boost_member *m;

	list_for_each_entry(m, head, node)
		if (m->id == id)
			return m;
	return NULL;
}

/*
 * Bring @m's budget up to @now: the CPU time its threads used boosted
 * since is charged, and the share of real time since is paid back. The
 * boosted threads are the same all through (every change of them settles
 * first), but when in the interval they ran is not known: the CPU time is
 * taken to come last, all of them at once, the order in which the account
 * owes the most. Paying back first and charging after, the refill of the
 * time the account was full, which it could not take, never cancels later
 * spending.
 */
static void gpuslot_budget_settle(const struct gpuslot_boost_ledger *l,
				  struct gpuslot_boost_member *m, u64 now)
{
	u64 dt = now > m->at_ns ? now - m->at_ns : 0;
	struct gpuslot_boost_thread *t;
	u64 ran = 0, run = 0, back;
	unsigned int n = 0;

	list_for_each_entry(t, &m->threads, member_node) {
		u64 cpu = gpuslot_boost_cputime(l, t->task, now);

		if (t->boosting) {
			ran += cpu > t->cpu_at_ns ? cpu - t->cpu_at_ns : 0;
			n++;
		}
		t->cpu_at_ns = cpu;
	}
	if (now > m->at_ns)
		m->at_ns = now;
	if (m->share >= 100) {
		/*
		 * Holds at share 100 need no budget: their boost is not
		 * charged. What the member owes from holds elsewhere is not
		 * forgiven: it is paid back at the share it was owed at.
		 */
		back = dt * m->owed_share / 100;
		m->spent_ns = back < m->spent_ns ? m->spent_ns - back : 0;
		return;
	}
	if (n) {
		/* How long it took, at the least. */
		run = ran / gpuslot_boost_running(l, n);
		if (run > dt)
			run = dt;
	}
	back = (dt - run) * m->share / 100;		/* before it ran */
	m->spent_ns = back < m->spent_ns ? m->spent_ns - back : 0;
	m->spent_ns += ran - run * m->share / 100;	/* refill while it ran */
}

static bool gpuslot_budget_spent(const struct gpuslot_boost_member *m,
				 unsigned int share)
{
	return share < 100 && m->spent_ns >= gpuslot_budget_cap(share);
}

/*
 * When @m's budget, settled, runs out if every boosted thread of it stays
 * on a CPU all the while (the earliest it can); U64_MAX: never.
 */
static u64 gpuslot_budget_end(const struct gpuslot_boost_ledger *l,
			      const struct gpuslot_boost_member *m)
{
	u64 cap = gpuslot_budget_cap(m->share);
	const struct gpuslot_boost_thread *t;
	u64 n = 0;

	if (m->share >= 100)
		return U64_MAX;
	if (m->spent_ns >= cap)
		return m->at_ns;
	list_for_each_entry(t, &m->threads, member_node)
		n += t->boosting;
	n = n ? gpuslot_boost_running(l, n) : 1;
	/*
	 * Rounded up: with several threads a remainder of a few ns would
	 * round to "now", and a caller that looks again at the end it is
	 * given would look again at once, forever.
	 */
	n = 100 * n - m->share;
	return m->at_ns + ((cap - m->spent_ns) * 100 + n - 1) / n;
}

/*
 * @m runs under @share now. A share below 100 is also the one its debt is
 * paid back at from now on; 100 (no budget) leaves that as it was: a
 * member owes only what it ran boosted under a share below 100.
 */
static void gpuslot_member_set_share(struct gpuslot_boost_member *m,
				     unsigned int share)
{
	m->share = share;
	if (share < 100)
		m->owed_share = share;
}

/* The share @m pays back at; not 0 while it owes (@spent_ns). */
static unsigned int gpuslot_member_payback(const struct gpuslot_boost_member *m)
{
	return m->share < 100 ? m->share : m->owed_share;
}

/* The smallest share of the holds of @m's threads: the budget it runs under. */
static unsigned int gpuslot_member_share(const struct gpuslot_boost_member *m)
{
	const struct gpuslot_boost_thread *t;
	const struct gpuslot_boost_hold *h;
	unsigned int share = 100;

	list_for_each_entry(t, &m->threads, member_node)
		list_for_each_entry(h, &t->holds, node)
			if (h->share < share)
				share = h->share;
	return share;
}

static void gpuslot_member_free(struct gpuslot_boost_ledger *l,
				struct gpuslot_boost_member *m)
{
	list_del_init(&m->node);
	list_del_init(&m->idle_node);
	l->nr_members--;
	l->ops->free_member(m);
}

/*
 * @m has no threads left: kept until its budget is full again, so that
 * the next thread of the member owes what this one did; freed at once if
 * it owes nothing. The idle list is kept in the order the accounts fill.
 */
static void gpuslot_member_idle(struct gpuslot_boost_ledger *l,
				struct gpuslot_boost_member *m)
{
	struct gpuslot_boost_member *pos;

	if (!m->spent_ns) {
		gpuslot_member_free(l, m);
		return;
	}
	m->full_at_ns = m->at_ns + m->spent_ns * 100 / gpuslot_member_payback(m);
	list_for_each_entry(pos, &l->idle, idle_node)
		if (pos->full_at_ns > m->full_at_ns)
			break;
	list_add_tail(&m->idle_node, &pos->idle_node);	/* before @pos */
}

/* Free the idle accounts that are full again. */
static void gpuslot_boost_prune(struct gpuslot_boost_ledger *l, u64 now)
{
	struct gpuslot_boost_member *m, *tmp;

	list_for_each_entry_safe(m, tmp, &l->idle, idle_node) {
		if (m->full_at_ns > now)
			break;
		gpuslot_member_free(l, m);
	}
}

/* The account of the member @p is charged to, settled; NULL if out of memory. */
static struct gpuslot_boost_member *
gpuslot_member_get(struct gpuslot_boost_ledger *l, struct task_struct *p,
		   unsigned int share, u64 now)
{
	u32 id = l->ops->member_id(l, p);
	struct gpuslot_boost_member *m = gpuslot_member_find(l, id);

	if (m) {
		gpuslot_budget_settle(l, m, now);
		if (list_empty(&m->threads)) {
			/* Idle: its holds' share is this one's now. */
			list_del_init(&m->idle_node);
			gpuslot_member_set_share(m, share);
		}
		return m;
	}
	m = l->ops->new_member(l);
	if (!m)
		return NULL;
	m->id = id;
	m->owed_share = 0;
	gpuslot_member_set_share(m, share);
	m->spent_ns = 0;
	m->at_ns = now;
	INIT_LIST_HEAD(&m->threads);
	INIT_LIST_HEAD(&m->idle_node);
	list_add_tail(&m->node, &l->members[gpuslot_member_bucket(id)]);
	l->nr_members++;
	return m;
}

static void gpuslot_boost_free(struct gpuslot_boost_ledger *l,
			       struct gpuslot_boost_thread *t)
{
	struct gpuslot_boost_member *m = t->member;

	list_del_init(&t->node);
	list_del_init(&t->member_node);
	l->nr_threads--;
	l->ops->free_thread(t);
	if (list_empty(&m->threads))
		gpuslot_member_idle(l, m);
}

bool gpuslot_boost_forget(struct gpuslot_boost_ledger *l,
			  struct task_struct *p)
{
	return !gpuslot_boost_find(l, p);
}

void gpuslot_boost_pass(struct gpuslot_boost_hold *h, u64 seq)
{
	if (seq > h->seq)
		h->seq = seq;
}

void gpuslot_boost_drain(struct gpuslot_boost_ledger *l)
{
	struct gpuslot_boost_member *m, *tmp;

	list_for_each_entry_safe(m, tmp, &l->idle, idle_node)
		gpuslot_member_free(l, m);
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

static void gpuslot_boost_end(struct gpuslot_boost_ledger *l,
			      struct gpuslot_boost_hold *h, u64 now)
{
	struct gpuslot_boost_thread *t = h->thread;
	struct gpuslot_boost_member *m = t->member;

	gpuslot_budget_settle(l, m, now);
	list_del_init(&h->node);
	h->thread = NULL;
	h->budget_end_ns = U64_MAX;
	gpuslot_boost_retarget(l, t);
	if (list_empty(&t->holds)) {
		bool last = list_is_singular(&m->threads);

		/* The account stays while it owes (and may go with @t). */
		gpuslot_boost_free(l, t);
		if (last)
			return;
	}
	gpuslot_member_set_share(m, gpuslot_member_share(m));
}

/*
 * @m's budget now ends at @end, if its boosted threads all run: its
 * boosted holds but @except (NULL: none) whose clocks were set later are
 * told.
 */
static void gpuslot_member_rearm(struct gpuslot_boost_ledger *l,
				 struct gpuslot_boost_member *m,
				 const struct gpuslot_boost_hold *except, u64 end)
{
	struct gpuslot_boost_thread *t;
	struct gpuslot_boost_hold *h;

	list_for_each_entry(t, &m->threads, member_node)
		list_for_each_entry(h, &t->holds, node) {
			if (h == except || h->budget_end_ns <= end)
				continue;
			h->budget_end_ns = end;
			if (l->ops->rearm)
				l->ops->rearm(h, end);
		}
}

bool gpuslot_boost_begin(struct gpuslot_boost_ledger *l,
			 struct gpuslot_boost_hold *h, u64 seq, bool live,
			 struct task_struct *p, unsigned int prio,
			 unsigned int share, u64 *budget_end_ns)
{
	u64 now = gpuslot_boost_now(l), end;
	struct gpuslot_boost_member *m;
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
		/* Boosted for other holds: charged where those are. */
		m = t->member;
		gpuslot_budget_settle(l, m, now);
		if (gpuslot_budget_spent(m, m->share < share ? m->share : share))
			return false;
	} else {
		l->ops->get_attr(p, &cur);
		if (cur.policy == SCHED_DEADLINE ||
		    (gpuslot_policy_is_rt(cur.policy) && cur.rt_priority >= prio))
			return false;
		m = gpuslot_member_get(l, p, share, now);
		if (!m)
			return false;
		t = NULL;
		if (!gpuslot_budget_spent(m, m->share < share ? m->share : share))
			t = l->ops->new_thread(l, p);
		if (!t) {
			if (list_empty(&m->threads))
				gpuslot_member_idle(l, m);
			return false;
		}
		t->task = p;
		t->applied = 0;
		t->saved = cur;
		t->boosting = false;
		t->member = m;
		t->cpu_at_ns = gpuslot_boost_cputime(l, p, now);
		INIT_LIST_HEAD(&t->holds);
		list_add_tail(&t->member_node, &m->threads);
		list_add_tail(&t->node, &l->buckets[gpuslot_boost_bucket(p)]);
		l->nr_threads++;
	}
	h->prio = prio;
	h->share = share;
	h->thread = t;
	list_add_tail(&h->node, &t->holds);
	if (share < m->share)
		gpuslot_member_set_share(m, share);
	gpuslot_boost_retarget(l, t);
	if (!t->applied) {
		/* The first boost failed: nothing to restore later. */
		list_del_init(&h->node);
		h->thread = NULL;
		gpuslot_boost_free(l, t);
		return false;
	}
	end = gpuslot_budget_end(l, m);
	h->budget_end_ns = end;
	gpuslot_member_rearm(l, m, h, end);
	if (budget_end_ns)
		*budget_end_ns = end;
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
	gpuslot_budget_settle(l, t->member, now);
	if (!gpuslot_budget_spent(t->member, t->member->share)) {
		*budget_end_ns = gpuslot_budget_end(l, t->member);
		h->budget_end_ns = *budget_end_ns;
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
	struct gpuslot_boost_member *m;
	u64 now, end;

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
	m = t->member;
	gpuslot_budget_settle(l, m, now);
	/*
	 * Spent, and the hold's clock has not ended it yet (it fires at the
	 * end, and its work runs a little later): lending raises no boost
	 * past its member's budget, it ends it, as the expiry would.
	 */
	if (gpuslot_budget_spent(m, m->share)) {
		gpuslot_boost_end(l, h, now);
		return false;
	}
	h->prio = prio;
	gpuslot_boost_retarget(l, t);
	/*
	 * The end comes earlier if the thread runs at our boost again (it
	 * had moved itself above it, and drained nothing): every boosted
	 * hold of the member whose clock is set later is told, this one
	 * too, so that none runs boosted past the budget.
	 */
	end = gpuslot_budget_end(l, m);
	gpuslot_member_rearm(l, m, NULL, end);
	h->budget_end_ns = end;
	if (budget_end_ns)
		*budget_end_ns = end;
	return true;
}
