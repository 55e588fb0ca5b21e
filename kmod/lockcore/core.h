/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The slotted k-exclusion state machine of one gpuslot domain.
 *
 * Pure logic: no sleeping, no allocation, no locking. The caller serialises
 * every call (the module with the domain spinlock) and wakes the waiters a
 * call moves to its @done list: granted, or failed with an error. Keeping
 * the kernel glue out lets the same file be compiled and tested in
 * userspace (tests/unit).
 *
 * Invariant kept by every operation: no queued waiter accepts a slot that is
 * free and below k. A new caller may therefore take any free slot it accepts
 * without overtaking a waiter, and a freed slot is handed straight to the
 * first waiter (FIFO order) that accepts it.
 */
#ifndef GPUSLOT_CORE_H
#define GPUSLOT_CORE_H

#include <linux/list.h>
#include <linux/types.h>

struct gpuslot_core_waiter {
	struct list_head node;	/* in gpuslot_core.waiters, then @done */
	u64 allowed;		/* slots this waiter accepts, never 0 */
	int slot;		/* granted slot, or -1 while queued */
	bool granted;		/* set with @slot when the slot is handed over */
	bool done;		/* granted, or failed with @error */
	int error;		/* -EINVAL: k shrank below every allowed slot */
};

#define GPUSLOT_CORE_SLOTS 64

struct gpuslot_core {
	struct list_head waiters;	/* FIFO: oldest first */
	u64 held;			/* slots with a holder, >= k retiring */
	u64 generation;			/* bumped on every layout change */
	unsigned int k;			/* 1 .. GPUSLOT_CORE_SLOTS */
	unsigned int nr_waiters;
	/*
	 * Queued waiters that accept any slot, and per slot those that
	 * accept it with a narrower mask. A release of a slot that no
	 * waiter accepts then costs O(1) however long the queue is.
	 */
	unsigned int nr_any;
	unsigned int nr_wanting[GPUSLOT_CORE_SLOTS];
};

void gpuslot_core_init(struct gpuslot_core *c, unsigned int k);

/* Slots below k. */
u64 gpuslot_core_valid(const struct gpuslot_core *c);

/* Take a free slot from @allowed without waiting: the slot, or -1. */
int gpuslot_core_try_acquire(struct gpuslot_core *c, u64 allowed);

/* Queue @w at the tail. Call only after try_acquire failed. */
void gpuslot_core_enqueue(struct gpuslot_core *c,
			  struct gpuslot_core_waiter *w, u64 allowed);

/* Remove a waiter that gives up; it must still be queued (slot == -1). */
void gpuslot_core_cancel(struct gpuslot_core *c,
			 struct gpuslot_core_waiter *w);

/* Free @slot and hand it to the first waiter that accepts it. */
void gpuslot_core_release(struct gpuslot_core *c, unsigned int slot,
			  struct list_head *done);

/*
 * Set k. Growing hands the new free slots to waiters in FIFO order, each
 * the lowest free slot it accepts; shrinking leaves holders alone and the
 * slots >= k retire as they are released. A waiter that accepts no slot
 * below the new k can never be served: it leaves the queue for @done with
 * -EINVAL, as a new caller with its mask would be refused. Returns true if
 * k changed.
 */
bool gpuslot_core_set_k(struct gpuslot_core *c, unsigned int k,
			struct list_head *done);

/* Start a new generation: the slots' partitions changed, k did not. */
void gpuslot_core_new_generation(struct gpuslot_core *c);

#endif /* GPUSLOT_CORE_H */
