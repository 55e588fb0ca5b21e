// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot lock core: FIFO slotted k-exclusion with direct handoff.
 * See core.h for the invariant every function keeps.
 */
#include <linux/bitops.h>
#include <linux/errno.h>

#include "core.h"

u64 gpuslot_core_valid(const struct gpuslot_core *c)
{
	/* k == 64 must not shift by the width of the type. */
	return c->k >= 64 ? ~0ULL : (1ULL << c->k) - 1;
}

void gpuslot_core_init(struct gpuslot_core *c, unsigned int k)
{
	unsigned int s;

	INIT_LIST_HEAD(&c->waiters);
	c->held = 0;
	c->generation = 1;
	c->k = k;
	c->nr_waiters = 0;
	c->nr_any = 0;
	for (s = 0; s < GPUSLOT_CORE_SLOTS; s++)
		c->nr_wanting[s] = 0;
}

/* Count a waiter that accepts @allowed in, or out. */
static void gpuslot_core_count(struct gpuslot_core *c, u64 allowed, bool in)
{
	if (allowed == ~0ULL) {
		c->nr_any += in ? 1 : -1;
		return;
	}
	while (allowed) {
		unsigned int s = __ffs64(allowed);

		c->nr_wanting[s] += in ? 1 : -1;
		allowed &= allowed - 1;
	}
}

/* The slots of @free that some queued waiter accepts. */
static u64 gpuslot_core_wanted(const struct gpuslot_core *c, u64 free)
{
	u64 wanted = 0;

	if (c->nr_any)
		return free;
	while (free) {
		unsigned int s = __ffs64(free);

		if (c->nr_wanting[s])
			wanted |= 1ULL << s;
		free &= free - 1;
	}
	return wanted;
}

int gpuslot_core_try_acquire(struct gpuslot_core *c, u64 allowed)
{
	u64 free = gpuslot_core_valid(c) & ~c->held & allowed;
	int slot;

	if (!free)
		return -1;
	slot = __ffs64(free);
	c->held |= 1ULL << slot;
	return slot;
}

void gpuslot_core_enqueue(struct gpuslot_core *c,
			  struct gpuslot_core_waiter *w, u64 allowed)
{
	w->allowed = allowed;
	w->slot = -1;
	w->granted = false;
	w->done = false;
	w->error = 0;
	list_add_tail(&w->node, &c->waiters);
	c->nr_waiters++;
	gpuslot_core_count(c, allowed, true);
}

void gpuslot_core_cancel(struct gpuslot_core *c,
			 struct gpuslot_core_waiter *w)
{
	/* Leaving the queue only drops constraints: the invariant holds. */
	list_del_init(&w->node);
	c->nr_waiters--;
	gpuslot_core_count(c, w->allowed, false);
}

/*
 * Hand the slots in @free to queued waiters, oldest first. Each waiter gets
 * the lowest slot of @free it accepts. @free holds only slots that may have
 * become wanted; the other free slots are unwanted by the invariant.
 */
static void gpuslot_core_dispatch(struct gpuslot_core *c, u64 free,
				  struct list_head *done)
{
	struct gpuslot_core_waiter *w, *tmp;

	free = gpuslot_core_wanted(c, free);
	list_for_each_entry_safe(w, tmp, &c->waiters, node) {
		u64 take;

		if (!free)
			break;
		take = free & w->allowed;
		if (!take)
			continue;
		w->slot = __ffs64(take);
		w->granted = true;
		w->done = true;
		c->held |= 1ULL << w->slot;
		free &= ~(1ULL << w->slot);
		list_move_tail(&w->node, done);
		c->nr_waiters--;
		gpuslot_core_count(c, w->allowed, false);
	}
}

/* Fail the waiters that accept no slot below k. */
static void gpuslot_core_fail_unservable(struct gpuslot_core *c,
					 struct list_head *done)
{
	u64 valid = gpuslot_core_valid(c);
	struct gpuslot_core_waiter *w, *tmp;

	/* A waiter that accepts any slot always has one below k. */
	if (c->nr_waiters == c->nr_any)
		return;
	list_for_each_entry_safe(w, tmp, &c->waiters, node) {
		if (w->allowed & valid)
			continue;
		w->done = true;
		w->error = -EINVAL;
		list_move_tail(&w->node, done);
		c->nr_waiters--;
		gpuslot_core_count(c, w->allowed, false);
	}
}

void gpuslot_core_release(struct gpuslot_core *c, unsigned int slot,
			  struct list_head *done)
{
	u64 bit = 1ULL << slot;

	c->held &= ~bit;
	/* A slot at or above k retires here instead of being handed on. */
	gpuslot_core_dispatch(c, bit & gpuslot_core_valid(c), done);
}

bool gpuslot_core_set_k(struct gpuslot_core *c, unsigned int k,
			struct list_head *done)
{
	bool shrink = k < c->k;

	if (k == c->k)
		return false;
	c->k = k;
	c->generation++;
	if (shrink)
		gpuslot_core_fail_unservable(c, done);
	gpuslot_core_dispatch(c, gpuslot_core_valid(c) & ~c->held, done);
	return true;
}

void gpuslot_core_new_generation(struct gpuslot_core *c)
{
	c->generation++;
}
