/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The partitions of one gpuslot domain: per slot, the units of the GPU its
 * work may use (see GPUSLOT_IOC_SET_LAYOUT in the uapi header).
 *
 * Pure logic like core.c, so tests/unit checks it in userspace; the caller
 * serialises access.
 */
#ifndef GPUSLOT_PARTITION_H
#define GPUSLOT_PARTITION_H

#include <linux/types.h>
#include <uapi/linux/gpuslot.h>

struct gpuslot_partitions {
	u32 unit_kind;		/* GPUSLOT_UNIT_* */
	u32 unit_size;
	u32 nr_units;
	/* Per slot; all zero is the whole GPU. Slots >= k are zero. */
	u64 units[GPUSLOT_MAX_SLOTS][GPUSLOT_UNIT_WORDS];
	/* Per slot, 0 .. GPUSLOT_MAX_SLOT_PRIORITY; slots >= k are 0. */
	u8 priority[GPUSLOT_MAX_SLOTS];
};

/* The unit kind and its sizes are consistent: 0 or -EINVAL. */
int gpuslot_partitions_check_kind(u32 unit_kind, u32 unit_size, u32 nr_units);

/*
 * The layout of slots 0 .. k - 1 is one the uapi allows: the partitions fit
 * the unit kind and @nr_units, every priority is at most
 * GPUSLOT_MAX_SLOT_PRIORITY, slots >= k are the whole GPU at priority 0, and
 * no two partitions that are both not the whole GPU share a unit at the
 * same priority (different priorities may overlap: the GPU orders their
 * work; a whole-GPU slot may sit beside any): 0, or -EINVAL.
 */
int gpuslot_partitions_check(const struct gpuslot_partitions *p,
			     unsigned int k);

bool gpuslot_partition_is_whole(const u64 units[GPUSLOT_UNIT_WORDS]);

/* No unit at or past @nr_units is set. */
bool gpuslot_partition_fits(const u64 units[GPUSLOT_UNIT_WORDS],
			    u32 nr_units);

/*
 * Make every slot the whole GPU at priority 0 again; true if one was not.
 */
bool gpuslot_partitions_reset(struct gpuslot_partitions *p);

#endif /* GPUSLOT_PARTITION_H */
