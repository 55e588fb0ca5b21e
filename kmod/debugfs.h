/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The tables of a domain in debugfs (debugfs.c): gpuslot/gpu<N>/holders,
 * waiters, queues and wait_hist, root's only. Without debugfs these do
 * nothing and the module works as before.
 */
#ifndef GPUSLOT_DEBUGFS_H
#define GPUSLOT_DEBUGFS_H

struct gpuslot_domain;

void gpuslot_debugfs_init(void);
void gpuslot_debugfs_exit(void);
/* Before the domain goes: the removal waits for its readers. */
void gpuslot_debugfs_add(struct gpuslot_domain *d);
void gpuslot_debugfs_remove(struct gpuslot_domain *d);

#endif /* GPUSLOT_DEBUGFS_H */
