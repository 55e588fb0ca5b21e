// SPDX-License-Identifier: GPL-2.0
// Unit tests of the layout rules (kmod/lockcore/partition.c), compiled in userspace.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>

extern "C" {
#include "partition.h"
}

namespace {

std::unique_ptr<gpuslot_partitions> cus(unsigned int nr_units)
{
	auto p = std::make_unique<gpuslot_partitions>();
	memset(p.get(), 0, sizeof(*p));
	p->unit_kind = GPUSLOT_UNIT_AMD_CU;
	p->unit_size = 1;
	p->nr_units = nr_units;
	return p;
}

TEST(Partition, UnitKinds)
{
	EXPECT_EQ(gpuslot_partitions_check_kind(GPUSLOT_UNIT_NONE, 0, 0), 0);
	EXPECT_EQ(gpuslot_partitions_check_kind(GPUSLOT_UNIT_NONE, 0, 60), -EINVAL);
	EXPECT_EQ(gpuslot_partitions_check_kind(GPUSLOT_UNIT_AMD_CU, 1, 60), 0);
	EXPECT_EQ(gpuslot_partitions_check_kind(GPUSLOT_UNIT_AMD_CU, 2, 60), -EINVAL);
	EXPECT_EQ(gpuslot_partitions_check_kind(GPUSLOT_UNIT_AMD_CU, 1, 0), -EINVAL);
	EXPECT_EQ(gpuslot_partitions_check_kind(GPUSLOT_UNIT_AMD_CU, 1, 1024), 0);
	EXPECT_EQ(gpuslot_partitions_check_kind(GPUSLOT_UNIT_AMD_CU, 1, 1025), -EINVAL);
	EXPECT_EQ(gpuslot_partitions_check_kind(GPUSLOT_UNIT_NV_SM_GROUP, 8, 16), 0);
	EXPECT_EQ(gpuslot_partitions_check_kind(GPUSLOT_UNIT_NV_SM_GROUP, 0, 16), -EINVAL);
	EXPECT_EQ(gpuslot_partitions_check_kind(3, 1, 16), -EINVAL);
}

TEST(Partition, DisjointPartitionsAndWholeGpuSlots)
{
	auto p = cus(60);
	p->units[0][0] = 0xf;
	p->units[1][0] = 0xf0;
	// Slot 2 is the whole GPU: it overlaps everything by definition.
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), 0);
	p->units[2][0] = 0x18;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), -EINVAL);
	p->units[2][0] = 0x100;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), 0);
	// A partition for a slot at or past k.
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 2), -EINVAL);
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 0), -EINVAL);
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 65), -EINVAL);
}

TEST(Partition, UnitsPastTheGpu)
{
	for (unsigned int n : {1u, 60u, 63u, 64u, 65u, 304u, 1023u, 1024u}) {
		auto p = cus(n);
		p->units[0][(n - 1) / 64] = 1ULL << ((n - 1) % 64);
		EXPECT_EQ(gpuslot_partitions_check(p.get(), 1), 0) << n;
		EXPECT_TRUE(gpuslot_partition_fits(p->units[0], n)) << n;
		if (n == GPUSLOT_MAX_UNITS)
			continue;
		p->units[0][n / 64] |= 1ULL << (n % 64);
		EXPECT_EQ(gpuslot_partitions_check(p.get(), 1), -EINVAL) << n;
		EXPECT_FALSE(gpuslot_partition_fits(p->units[0], n)) << n;
	}
}

TEST(Partition, KindNoneHasNoPartitions)
{
	auto p = cus(60);
	p->unit_kind = GPUSLOT_UNIT_NONE;
	p->unit_size = 0;
	p->nr_units = 0;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 4), 0);
	p->units[1][0] = 1;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 4), -EINVAL);
}

TEST(Partition, ResetMakesEverySlotWholeAndSaysSo)
{
	auto p = cus(304);
	EXPECT_FALSE(gpuslot_partitions_reset(p.get()));
	p->units[63][4] = 1;
	EXPECT_TRUE(gpuslot_partitions_reset(p.get()));
	for (auto &slot : p->units)
		EXPECT_TRUE(gpuslot_partition_is_whole(slot));
	EXPECT_EQ(p->nr_units, 304u);
}

// Issue 32: priorities go with the partitions; a priority alone is a change.
TEST(Partition, ResetMakesEveryPriorityZeroAndSaysSo)
{
	auto p = cus(60);
	p->priority[5] = 3;
	EXPECT_TRUE(gpuslot_partitions_reset(p.get()));
	for (auto prio : p->priority)
		EXPECT_EQ(prio, 0);
	EXPECT_FALSE(gpuslot_partitions_reset(p.get()));
}

TEST(Partition, PrioritiesAreInRangeBelowKAndZeroFromK)
{
	auto p = cus(60);
	p->priority[0] = GPUSLOT_MAX_SLOT_PRIORITY;
	p->priority[2] = 1;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), 0);
	p->priority[2] = GPUSLOT_MAX_SLOT_PRIORITY + 1;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), -EINVAL);
	p->priority[2] = 255;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), -EINVAL);
	p->priority[2] = 0;
	p->priority[3] = 1; // slot 3 is past k
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), -EINVAL);
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 4), 0);
	p->priority[63] = 1;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 63), -EINVAL);
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 64), 0);
	// Unit kind NONE: every slot the whole GPU, at any priority.
	p = cus(60);
	p->unit_kind = GPUSLOT_UNIT_NONE;
	p->unit_size = 0;
	p->nr_units = 0;
	p->priority[1] = 4;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 2), 0);
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 1), -EINVAL);
}

TEST(Partition, ConfinedPartitionsMayMeetOnlyAtDifferentPriorities)
{
	auto p = cus(60);
	p->units[0][0] = 0x0fffffffffffffffULL; // most of the GPU
	p->units[1][0] = 0xff;
	p->units[2][0] = 0xff00;
	// All at priority 0: slot 0 meets both.
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), -EINVAL);
	p->priority[0] = 5;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), 0);
	// Slots 1 and 2 meet at their common priority 0.
	p->units[2][0] = 0x1f0;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), -EINVAL);
	// ... and at a common nonzero one.
	p->priority[1] = 2;
	p->priority[2] = 2;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), -EINVAL);
	// Three levels: each meets the others, none at its own priority.
	p->priority[2] = 1;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 3), 0);
	// A meeting in a high word only.
	auto q = cus(304);
	q->units[0][4] = 1ULL << 7;
	q->units[1][4] = 1ULL << 7;
	q->units[1][0] = 1;
	EXPECT_EQ(gpuslot_partitions_check(q.get(), 2), -EINVAL);
	q->priority[1] = 1;
	EXPECT_EQ(gpuslot_partitions_check(q.get(), 2), 0);
	// A fourth slot at priority 5 meeting slot 0 (also at 5), far apart
	// in the slot order.
	p->units[40][0] = 1ULL << 59;
	p->priority[40] = 5;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 41), -EINVAL);
	p->priority[40] = 6;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 41), 0);
}

// The whole GPU (no bit set) is the "no partition" case: beside confined
// slots at any priority, and any number of them at one priority.
TEST(Partition, WholeGpuSlotsSitBesideAnythingAtAnyPriority)
{
	auto p = cus(60);
	p->units[1][0] = 0xff;
	p->units[3][0] = 0xff00;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 4), 0);
	p->priority[0] = 3;
	p->priority[1] = 3;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 4), 0);
	p->priority[2] = 0;
	p->priority[3] = 0;
	EXPECT_EQ(gpuslot_partitions_check(p.get(), 4), 0);
	auto whole = cus(60);
	EXPECT_EQ(gpuslot_partitions_check(whole.get(), 64), 0);
}

} // namespace
