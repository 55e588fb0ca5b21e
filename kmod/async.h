/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Asynchronous acquire (async.c): ACQUIRE_ASYNC, _COMPLETE, _CANCEL, poll.
 */
#ifndef GPUSLOT_ASYNC_H
#define GPUSLOT_ASYNC_H

#include "domain.h"

int gpuslot_file_acquire_async(struct gpuslot_file *f,
			       struct gpuslot_acquire *a);
int gpuslot_file_acquire_complete(struct gpuslot_file *f,
				  struct gpuslot_acquire *a, u64 *seq);
int gpuslot_file_acquire_cancel(struct gpuslot_file *f,
				struct gpuslot_release *r);
__poll_t gpuslot_file_poll(struct gpuslot_file *f);
/* The queued async waiter of @f was granted or failed, under d->lock. */
void gpuslot_async_done_locked(struct gpuslot_domain *d,
			       struct gpuslot_waiter *w, u64 now);
/* Drop the async state of a file that is closing, under d->lock. */
void gpuslot_async_cleanup_locked(struct gpuslot_domain *d,
				  struct gpuslot_file *f);

#endif /* GPUSLOT_ASYNC_H */
