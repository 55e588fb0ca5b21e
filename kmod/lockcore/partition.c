// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot partitions: the rules a layout must keep. See partition.h.
 */
/*
 * Before <linux/nospec.h>, which uses BUILD_BUG_ON() without including it
 * (on x86 of 6.1 <asm/barrier.h> happens to; 5.10 and arm64 do not).
 */
#include <linux/build_bug.h>
#include <linux/errno.h>
#include <linux/nospec.h>

#include "partition.h"

int gpuslot_partitions_check_kind(u32 unit_kind, u32 unit_size, u32 nr_units)
{
	switch (unit_kind) {
	case GPUSLOT_UNIT_NONE:
		return unit_size || nr_units ? -EINVAL : 0;
	case GPUSLOT_UNIT_AMD_CU:
		if (unit_size != 1)
			return -EINVAL;
		break;
	case GPUSLOT_UNIT_NV_SM_GROUP:
		if (!unit_size)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	return nr_units >= 1 && nr_units <= GPUSLOT_MAX_UNITS ? 0 : -EINVAL;
}

bool gpuslot_partition_is_whole(const u64 units[GPUSLOT_UNIT_WORDS])
{
	unsigned int w;

	for (w = 0; w < GPUSLOT_UNIT_WORDS; w++)
		if (units[w])
			return false;
	return true;
}

bool gpuslot_partition_fits(const u64 units[GPUSLOT_UNIT_WORDS],
			    u32 nr_units)
{
	unsigned int w = nr_units / 64;

	/*
	 * @nr_units is the caller's (SET_LAYOUT, sysfs), checked before but
	 * read here as an index: bound it under speculation too.
	 */
	if (w < GPUSLOT_UNIT_WORDS &&
	    (units[array_index_nospec(w, GPUSLOT_UNIT_WORDS)] &
	     ~((1ULL << (nr_units % 64)) - 1)))
		return false;
	for (w++; w < GPUSLOT_UNIT_WORDS; w++)
		if (units[w])
			return false;
	return true;
}

/* The two partitions share a unit. */
static bool gpuslot_partitions_meet(const u64 a[GPUSLOT_UNIT_WORDS],
				    const u64 b[GPUSLOT_UNIT_WORDS])
{
	unsigned int w;

	for (w = 0; w < GPUSLOT_UNIT_WORDS; w++)
		if (a[w] & b[w])
			return true;
	return false;
}

int gpuslot_partitions_check(const struct gpuslot_partitions *p,
			     unsigned int k)
{
	unsigned int slot, other;

	if (k < 1 || k > GPUSLOT_MAX_SLOTS ||
	    gpuslot_partitions_check_kind(p->unit_kind, p->unit_size,
					  p->nr_units))
		return -EINVAL;
	for (slot = 0; slot < GPUSLOT_MAX_SLOTS; slot++) {
		const u64 *units = p->units[slot];

		if (p->priority[slot] >
		    (slot < k ? GPUSLOT_MAX_SLOT_PRIORITY : 0))
			return -EINVAL;
		if (gpuslot_partition_is_whole(units))
			continue;
		if (slot >= k || p->unit_kind == GPUSLOT_UNIT_NONE ||
		    !gpuslot_partition_fits(units, p->nr_units))
			return -EINVAL;
		/*
		 * Confined partitions at one priority must be disjoint: the
		 * GPU orders work of different priorities where they meet,
		 * and nothing orders work of the same one. A whole-GPU slot
		 * (no bit set) meets none here. At most 64 * 63 / 2 pairs of
		 * 16 words.
		 */
		for (other = 0; other < slot; other++)
			if (p->priority[other] == p->priority[slot] &&
			    gpuslot_partitions_meet(p->units[other], units))
				return -EINVAL;
	}
	return 0;
}

bool gpuslot_partitions_reset(struct gpuslot_partitions *p)
{
	bool changed = false;
	unsigned int slot, w;

	for (slot = 0; slot < GPUSLOT_MAX_SLOTS; slot++) {
		for (w = 0; w < GPUSLOT_UNIT_WORDS; w++) {
			changed |= p->units[slot][w] != 0;
			p->units[slot][w] = 0;
		}
		changed |= p->priority[slot] != 0;
		p->priority[slot] = 0;
	}
	return changed;
}
