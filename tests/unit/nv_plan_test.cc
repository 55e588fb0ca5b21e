// SPDX-License-Identifier: GPL-2.0
// The NVIDIA planner's arithmetic, with the H100/H200's 132 SMs and the
// splits measured on an H200 (reference nvidia.md section 1.3).
#include <gtest/gtest.h>

#include <numeric>

#include "daemon.hpp"
#include "nv_plan.hpp"

namespace {

gpuslot::NvGpu h200()
{
	return {0, "NVIDIA H200", 132, 8, 8, "0000:19:00.0"};
}

TEST(NvPlan, SplitCountsMatchTheMeasuredIgnoreSplits)
{
	// groups x size + remainder, IGNORE_SM_COSCHEDULING, 132 SMs.
	EXPECT_EQ(gpuslot::nv_split_groups(132, 1), 66u);
	EXPECT_EQ(gpuslot::nv_split_groups(132, 2), 66u);
	EXPECT_EQ(gpuslot::nv_split_groups(132, 8), 16u);
	EXPECT_EQ(gpuslot::nv_split_groups(132, 12), 11u);
	EXPECT_EQ(gpuslot::nv_split_groups(132, 16), 8u);
	EXPECT_EQ(gpuslot::nv_split_groups(132, 24), 5u);
	EXPECT_EQ(gpuslot::nv_split_groups(132, 33), 3u); // 3 x 34 + 30
	EXPECT_EQ(gpuslot::nv_split_groups(132, 44), 3u);
	EXPECT_EQ(gpuslot::nv_split_groups(132, 66), 2u);
}

TEST(NvPlan, EqualPartitionsForKOneToEight)
{
	for (unsigned int k = 1; k <= 8; k++) {
		auto p = gpuslot::plan_nv_partitions(h200(), k, {});
		ASSERT_EQ(p.error, "") << k;
		ASSERT_EQ(p.slot_groups.size(), k);
		EXPECT_EQ(p.group_sms % 2, 0u);
		EXPECT_LE(p.group_sms * k, 132u);
		// Equal, one group each, the groups the split really makes.
		for (unsigned int j = 0; j < k; j++) {
			EXPECT_EQ(p.slot_groups[j], std::vector<unsigned int>{j});
			EXPECT_EQ(p.slot_sms[j], p.group_sms);
		}
		EXPECT_GE(p.groups, k);
		EXPECT_EQ(p.groups, gpuslot::nv_split_groups(132, p.group_sms));
	}
	EXPECT_EQ(gpuslot::plan_nv_partitions(h200(), 2, {}).group_sms, 66u);
	EXPECT_EQ(gpuslot::plan_nv_partitions(h200(), 4, {}).group_sms, 32u);
}

TEST(NvPlan, UnevenSizesCombineGroupsOfOneSplit)
{
	auto p = gpuslot::plan_nv_partitions(h200(), 2, {96, 36});
	ASSERT_EQ(p.error, "");
	EXPECT_EQ(p.group_sms, 12u);
	EXPECT_EQ(p.groups, 11u);
	EXPECT_EQ(p.slot_groups[0].size(), 8u);
	EXPECT_EQ(p.slot_groups[1], (std::vector<unsigned int>{8, 9, 10}));
	EXPECT_EQ(p.slot_sms, (std::vector<unsigned int>{96, 36}));
	EXPECT_TRUE(p.notes.empty());

	auto q = gpuslot::plan_nv_partitions(h200(), 3, {33, 33, 66});
	ASSERT_EQ(q.error, "");
	EXPECT_EQ(q.slot_sms, (std::vector<unsigned int>{32, 32, 66}));
	EXPECT_EQ(q.group_sms, 2u);
	EXPECT_FALSE(q.notes.empty()); // the rounding is reported
}

TEST(NvPlan, ImpossiblePlansSayWhy)
{
	EXPECT_NE(gpuslot::plan_nv_partitions(h200(), 0, {}).error, "");
	EXPECT_NE(gpuslot::plan_nv_partitions(h200(), 2, {100, 40}).error.find("more than the 132"),
		  std::string::npos);
	EXPECT_NE(gpuslot::plan_nv_partitions(h200(), 2, {1, 40}).error.find("less than one TPC"),
		  std::string::npos);
	EXPECT_NE(gpuslot::plan_nv_partitions(h200(), 2, {40}).error, "");
	gpuslot::NvGpu tiny{0, "tiny", 6, 2, 2, ""};
	EXPECT_NE(gpuslot::plan_nv_partitions(tiny, 4, {}).error.find("less than one TPC"),
		  std::string::npos);
}

TEST(NvPlan, TheLayoutGpuslotdWritesForIt)
{
	gpuslot::ModuleLayout l;
	std::vector<std::string> notes;
	std::string err;
	ASSERT_TRUE(gpuslot::plan_nv_layout(h200(), 2, std::string("96,36"), 0, &l, &notes, &err))
		<< err;
	EXPECT_EQ(l.k, 2u);
	EXPECT_EQ(l.unit_kind, unsigned(GPUSLOT_UNIT_NV_SM_GROUP));
	EXPECT_EQ(l.unit_size, 12u);
	EXPECT_EQ(l.nr_units, 11u);
	EXPECT_EQ(l.hqd_limit, 0u);
	ASSERT_EQ(l.partitions.size(), 2u);
	EXPECT_EQ(gpuslot::partition_text(l.partitions[0]), "0xff");
	EXPECT_EQ(gpuslot::partition_text(l.partitions[1]), "0x700");
	// Percentages of the SMs, and sizes for another k fall back to equal.
	ASSERT_TRUE(gpuslot::plan_nv_layout(h200(), 2, std::string("50%,50%"), 0, &l, &notes, &err));
	EXPECT_EQ(l.unit_size, 66u);
	notes.clear();
	ASSERT_TRUE(gpuslot::plan_nv_layout(h200(), 3, std::string("96,36"), 0, &l, &notes, &err));
	EXPECT_EQ(l.unit_size, 44u);
	EXPECT_NE(notes.at(0).find("planning k equal partitions"), std::string::npos);
	EXPECT_FALSE(gpuslot::plan_nv_layout(h200(), 2, std::string("x"), 0, &l, &notes, &err));
}

} // namespace
