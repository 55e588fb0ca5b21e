// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot HQD budget: FIFO counting reservation. See budget.h.
 */
#include <linux/errno.h>

#include "budget.h"

void gpuslot_budget_init(struct gpuslot_budget *b, unsigned int limit)
{
	INIT_LIST_HEAD(&b->waiters);
	b->limit = limit;
	b->used = 0;
	b->nr_waiters = 0;
}

static bool gpuslot_budget_fits(const struct gpuslot_budget *b,
				unsigned int count)
{
	return b->used <= b->limit && count <= b->limit - b->used;
}

bool gpuslot_budget_try_reserve(struct gpuslot_budget *b, unsigned int count)
{
	if (b->nr_waiters || !gpuslot_budget_fits(b, count))
		return false;
	b->used += count;
	return true;
}

void gpuslot_budget_enqueue(struct gpuslot_budget *b,
			    struct gpuslot_budget_waiter *w,
			    unsigned int count)
{
	w->count = count;
	w->granted = false;
	w->done = false;
	w->error = 0;
	list_add_tail(&w->node, &b->waiters);
	b->nr_waiters++;
}

/* Serve waiters from the head for as long as the head fits. */
static void gpuslot_budget_dispatch(struct gpuslot_budget *b,
				    struct list_head *done)
{
	struct gpuslot_budget_waiter *w, *tmp;

	list_for_each_entry_safe(w, tmp, &b->waiters, node) {
		if (!gpuslot_budget_fits(b, w->count))
			break;
		b->used += w->count;
		w->granted = true;
		w->done = true;
		list_move_tail(&w->node, done);
		b->nr_waiters--;
	}
}

void gpuslot_budget_cancel(struct gpuslot_budget *b,
			   struct gpuslot_budget_waiter *w,
			   struct list_head *done)
{
	list_del_init(&w->node);
	b->nr_waiters--;
	gpuslot_budget_dispatch(b, done);
}

void gpuslot_budget_unreserve(struct gpuslot_budget *b, unsigned int count,
			      struct list_head *done)
{
	b->used -= count;
	gpuslot_budget_dispatch(b, done);
}

void gpuslot_budget_set_limit(struct gpuslot_budget *b, unsigned int limit,
			      struct list_head *done)
{
	struct gpuslot_budget_waiter *w, *tmp;

	b->limit = limit;
	list_for_each_entry_safe(w, tmp, &b->waiters, node) {
		if (w->count <= limit)
			continue;
		w->done = true;
		w->error = -ENOSPC;
		list_move_tail(&w->node, done);
		b->nr_waiters--;
	}
	gpuslot_budget_dispatch(b, done);
}
