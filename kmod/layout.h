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

/*
 * sysfs: unit_kind, and slot<i>/units ("all" or a %*pb bitmap) and
 * slot<i>/priority of the live layout; -ENXIO for a slot at or past k.
 */
ssize_t gpuslot_domain_show_unit_kind(struct gpuslot_domain *d, char *buf);
ssize_t gpuslot_domain_show_slot_units(struct gpuslot_domain *d,
				       unsigned int slot, char *buf);
ssize_t gpuslot_domain_show_slot_priority(struct gpuslot_domain *d,
					  unsigned int slot, char *buf);
/*
 * Writes to slot<i>/units and slot<i>/priority, staged; "commit" applies
 * the staging as one generation. They check CAP_SYS_ADMIN themselves.
 */
ssize_t gpuslot_domain_stage_units(struct gpuslot_domain *d, unsigned int slot,
				   const char *buf, size_t count);
ssize_t gpuslot_domain_stage_priority(struct gpuslot_domain *d,
				      unsigned int slot, const char *buf,
				      size_t count);
ssize_t gpuslot_domain_commit(struct gpuslot_domain *d, const char *buf,
			      size_t count);

#endif /* GPUSLOT_LAYOUT_H */
