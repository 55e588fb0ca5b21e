/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpuslot layouts: the ioctls and sysfs files over a domain's partitions.
 */
#ifndef GPUSLOT_LAYOUT_H
#define GPUSLOT_LAYOUT_H

#include <linux/types.h>
#include <uapi/linux/gpuslot.h>

struct gpuslot_domain;
struct gpuslot_file;

/* GPUSLOT_IOC_SET_LAYOUT; the caller checked CAP_SYS_ADMIN. */
int gpuslot_file_set_layout(struct gpuslot_file *f, struct gpuslot_layout *l);
int gpuslot_file_get_layout(struct gpuslot_file *f, struct gpuslot_layout *l);

/* sysfs "units": "<kind> <nr_units> <unit_size>". */
ssize_t gpuslot_domain_show_units(struct gpuslot_domain *d, char *buf);
/* sysfs "partitions": "<slot> <all|0xhex>" per slot below k. */
ssize_t gpuslot_domain_show_partitions(struct gpuslot_domain *d, char *buf);
ssize_t gpuslot_domain_store_partitions(struct gpuslot_domain *d,
					const char *buf, size_t count);

#endif /* GPUSLOT_LAYOUT_H */
