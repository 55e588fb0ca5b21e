// SPDX-License-Identifier: GPL-2.0
// Unit tests of the layout rules (kmod/partition.c), compiled in userspace.
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

} // namespace
