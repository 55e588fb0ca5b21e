/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The hardware-queue budget of a domain (hqd.c).
 */
#ifndef GPUSLOT_HQD_H
#define GPUSLOT_HQD_H

#include "domain.h"

int gpuslot_file_reserve_queues(struct gpuslot_file *f,
				struct gpuslot_reserve_queues *r);
int gpuslot_file_unreserve_queues(struct gpuslot_file *f,
				  struct gpuslot_unreserve_queues *u);
/*
 * Take back the @count queues a RESERVE_QUEUES of @f added, whose result
 * could not be copied out; at most what the file holds.
 */
void gpuslot_file_unreserve_undo(struct gpuslot_file *f, unsigned int count);
void gpuslot_hqd_cleanup_locked(struct gpuslot_domain *d,
				struct gpuslot_file *f);
int gpuslot_domain_set_hqd_limit(struct gpuslot_domain *d,
				 unsigned int limit);
bool gpuslot_hqd_set_limit_locked(struct gpuslot_domain *d,
				  unsigned int limit);
unsigned int gpuslot_domain_hqd_limit(struct gpuslot_domain *d);
unsigned int gpuslot_domain_hqd_used(struct gpuslot_domain *d);
unsigned int gpuslot_domain_hqd_waiters(struct gpuslot_domain *d);

#endif /* GPUSLOT_HQD_H */
