/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpuslot sysfs (sysfs.c): class gpuslot, one device gpu<N> per domain,
 * one value per file; api_version on the misc device.
 */
#ifndef GPUSLOT_SYSFS_H
#define GPUSLOT_SYSFS_H

#include <linux/device.h>

struct gpuslot_domain;

/* For miscdevice.groups: /sys/class/misc/gpuslot/api_version. */
extern const struct attribute_group *gpuslot_misc_groups[];

/* Register the class and build the slot<i>/ groups: 0 or -errno. */
int gpuslot_sysfs_init(void);
void gpuslot_sysfs_exit(void);
/* Class, parent and attribute groups of @d's device, before device_add(). */
void gpuslot_sysfs_init_device(struct gpuslot_domain *d, struct device *parent);

#endif /* GPUSLOT_SYSFS_H */
