/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The hardware-queue (HQD) budget of one gpuslot domain.
 *
 * A counting reservation against a limit, with waiters served strictly in
 * FIFO order: the head waiter is served first even when a later, smaller
 * request would fit, so a large request is never starved; a request larger
 * than the limit could never be served, and would block every request
 * behind it, so the caller refuses it and a lowered limit fails it. Pure
 * logic, like core.c: the caller serialises every call and wakes what
 * @done holds.
 */
#ifndef GPUSLOT_BUDGET_H
#define GPUSLOT_BUDGET_H

#include <linux/list.h>
#include <linux/types.h>

/*
 * The budget a domain starts with: the HQDs amdgpu leaves to user queues on
 * gfx9/MI (KFD topology num_cp_queues). AMD's number, not kernel ABI:
 * gpuslotd writes each GPU's own (8 on RX 6000/7000).
 */
#define GPUSLOT_DEFAULT_HQD_LIMIT	24

struct gpuslot_budget_waiter {
	struct list_head node;	/* in gpuslot_budget.waiters, then @done */
	unsigned int count;	/* queues asked for */
	bool granted;
	bool done;		/* granted, or failed with @error */
	int error;		/* -ENOSPC: @count exceeds a lowered limit */
};

struct gpuslot_budget {
	struct list_head waiters;	/* FIFO: oldest first */
	unsigned int limit;
	unsigned int used;		/* may exceed a lowered limit */
	unsigned int nr_waiters;
};

void gpuslot_budget_init(struct gpuslot_budget *b, unsigned int limit);

/* Reserve @count at once: only when nobody waits and it fits. */
bool gpuslot_budget_try_reserve(struct gpuslot_budget *b, unsigned int count);

/*
 * Queue @w for @count at the tail. Call only after try_reserve failed, and
 * only with @count <= the limit.
 */
void gpuslot_budget_enqueue(struct gpuslot_budget *b,
			    struct gpuslot_budget_waiter *w,
			    unsigned int count);

/* A waiter gives up; the ones behind it may fit now. */
void gpuslot_budget_cancel(struct gpuslot_budget *b,
			   struct gpuslot_budget_waiter *w,
			   struct list_head *done);

/* Return @count queues (at most what was reserved); serve waiters. */
void gpuslot_budget_unreserve(struct gpuslot_budget *b, unsigned int count,
			      struct list_head *done);

/*
 * Change the limit. Lowering it below use revokes nothing: new requests
 * wait or fail until use falls below it; a waiting request for more than
 * the new limit fails with -ENOSPC. Raising it serves waiters.
 */
void gpuslot_budget_set_limit(struct gpuslot_budget *b, unsigned int limit,
			      struct list_head *done);

#endif /* GPUSLOT_BUDGET_H */
