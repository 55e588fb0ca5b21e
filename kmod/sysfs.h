/* SPDX-License-Identifier: GPL-2.0 */
/*
 * /sys/kernel/gpuslot: the module's version and one directory per domain.
 */
#ifndef GPUSLOT_SYSFS_H
#define GPUSLOT_SYSFS_H

#include <linux/kobject.h>

extern const struct kobj_type gpuslot_domain_ktype;

/* Create /sys/kernel/gpuslot; returns its kobject or NULL. */
struct kobject *gpuslot_sysfs_create(void);
void gpuslot_sysfs_destroy(struct kobject *root);

#endif /* GPUSLOT_SYSFS_H */
