// SPDX-License-Identifier: GPL-2.0
// The NVIDIA planner, with the H100's 132 SMs and the co-scheduled splits
// its driver made (`gpuslotctl plan --nvidia` on the H100, driver 580,
// docs/results-ch6.md): groups of exactly G SMs for each G asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "gpuslotd/daemon.hpp"
#include "nvidia/nv_plan.hpp"

namespace {

gpuslot::NvGpu h100()
{
	return {0,
		"NVIDIA H100 80GB HBM3",
		132,
		8,
		8,
		"0000:19:00.0",
		{{8, 15},
		 {16, 8},
		 {24, 5},
		 {32, 4},
		 {40, 3},
		 {48, 2},
		 {56, 2},
		 {64, 2},
		 {72, 1},
		 {80, 1},
		 {88, 1},
		 {96, 1},
		 {104, 1},
		 {112, 1},
		 {120, 1},
		 {128, 1}}};
}

unsigned int sum(const std::vector<unsigned int> &v)
{
	return std::accumulate(v.begin(), v.end(), 0u);
}

// Every plan takes whole groups of one split the driver really makes,
// never more than it has, one group set per slot, disjoint.
void expect_valid(const gpuslot::NvGpu &gpu, const gpuslot::NvPlan &p, unsigned int k)
{
	ASSERT_EQ(p.error, "");
	ASSERT_EQ(p.slot_groups.size(), k);
	EXPECT_NE(std::find(gpu.splits.begin(), gpu.splits.end(),
			    gpuslot::NvSplit{p.group_sms, p.groups}),
		  gpu.splits.end());
	std::vector<bool> taken(p.groups);
	for (unsigned int j = 0; j < k; j++) {
		EXPECT_EQ(p.slot_sms[j], p.slot_groups[j].size() * p.group_sms);
		EXPECT_EQ(p.slot_sms[j] % gpu.coscheduled_alignment, 0u);
		for (unsigned int g : p.slot_groups[j]) {
			ASSERT_LT(g, p.groups);
			EXPECT_FALSE(taken[g]);
			taken[g] = true;
		}
	}
}

TEST(NvPlan, EqualPartitionsTakeTheLargestGroupTheDriverMakesKOf)
{
	const unsigned int want[] = {0, 128, 64, 40, 32, 24, 16, 16, 16, 8, 8, 8, 8, 8, 8, 8};
	for (unsigned int k = 1; k <= 15; k++) {
		auto p = gpuslot::plan_nv_partitions(h100(), k, {});
		expect_valid(h100(), p, k);
		EXPECT_EQ(p.group_sms, want[k]) << k;
		for (unsigned int j = 0; j < k; j++)
			EXPECT_EQ(p.slot_groups[j], std::vector<unsigned int>{j});
	}
	auto p = gpuslot::plan_nv_partitions(h100(), 16, {});
	EXPECT_NE(p.error.find("at most 15 co-scheduled groups (15 x 8, 8 x 16, 5 x 24, 4 x 32, "
			       "3 x 40, 2 x 48, 2 x 56, 2 x 64, 1 x 72,"),
		  std::string::npos)
		<< p.error;
}

TEST(NvPlan, UnevenSizesCombineGroupsOfOneSplit)
{
	// 96 + 36: 36 rounds down to 32, and groups of 32 hold both.
	auto p = gpuslot::plan_nv_partitions(h100(), 2, {96, 36});
	expect_valid(h100(), p, 2);
	EXPECT_EQ(p.group_sms, 32u);
	EXPECT_EQ(p.slot_groups, (std::vector<std::vector<unsigned int>>{{0, 1, 2}, {3}}));
	EXPECT_EQ(p.slot_sms, (std::vector<unsigned int>{96, 32}));
	EXPECT_NE(p.notes.at(0).find("36 SMs rounded down to 32"), std::string::npos);

	// Chapter 6's layouts (percentages of 132 SMs, rounded down).
	struct {
		std::vector<unsigned int> asked, planned;
		unsigned int group;
	} cases[] = {
		{{66, 66}, {64, 64}, 64},		  // 50 %, 50 %
		{{33, 33, 33, 33}, {32, 32, 32, 32}, 32}, // 4 x 25 %
		{{44, 43, 43}, {40, 40, 40}, 40},	  // 34 %, 33 %, 33 %
		{{66, 33, 33}, {64, 32, 32}, 32},	  // 50 %, 25 %, 25 %
		{{43, 29, 29, 29}, {40, 24, 24, 24}, 8},  // 33 % and thirds of the rest
		{{66, 22, 22, 22}, {64, 16, 16, 16}, 16}, // 50 % and thirds of the rest
	};
	for (const auto &c : cases) {
		auto q = gpuslot::plan_nv_partitions(h100(), unsigned(c.asked.size()), c.asked);
		expect_valid(h100(), q, unsigned(c.asked.size()));
		EXPECT_EQ(q.slot_sms, c.planned);
		EXPECT_EQ(q.group_sms, c.group);
	}
}

TEST(NvPlan, SizesBeyondTheCoScheduledGroupsShrinkTheLargestLoudly)
{
	// 88 + 40 = 128 SMs need 16 groups of 8; the driver makes 15.
	auto p = gpuslot::plan_nv_partitions(h100(), 2, {88, 40});
	expect_valid(h100(), p, 2);
	EXPECT_EQ(p.slot_sms, (std::vector<unsigned int>{80, 40}));
	EXPECT_EQ(sum(p.slot_sms), 120u);
	bool said = false;
	for (const auto &n : p.notes)
		said |= n.find("partitions of 88,40 SMs do not fit") != std::string::npos &&
			n.find("planned 80,40") != std::string::npos;
	EXPECT_TRUE(said);
	EXPECT_NE(p.notes.back().find("12 of 132 SMs belong to no slot"), std::string::npos);
}

TEST(NvPlan, ImpossiblePlansSayWhy)
{
	EXPECT_NE(gpuslot::plan_nv_partitions(h100(), 0, {}).error, "");
	EXPECT_NE(gpuslot::plan_nv_partitions(h100(), 2, {100, 40}).error.find("more than the 132"),
		  std::string::npos);
	EXPECT_NE(gpuslot::plan_nv_partitions(h100(), 2, {7, 40})
			  .error.find("less than one co-scheduled group (8 SMs"),
		  std::string::npos);
	EXPECT_NE(gpuslot::plan_nv_partitions(h100(), 2, {40}).error, "");
	// Sixteen partitions of one group each: the driver makes 15.
	std::vector<unsigned int> sixteen(16, 8);
	EXPECT_NE(gpuslot::plan_nv_partitions(h100(), 16, sixteen).error.find("do not fit"),
		  std::string::npos);
	gpuslot::NvGpu unsplittable = h100();
	unsplittable.splits.clear();
	EXPECT_NE(gpuslot::plan_nv_partitions(unsplittable, 2, {}).error.find("no co-scheduled split"),
		  std::string::npos);
}

TEST(NvPlan, TheLayoutGpuslotdWritesForIt)
{
	gpuslot::ModuleLayout l;
	std::vector<std::string> notes;
	std::string err;
	ASSERT_TRUE(gpuslot::plan_nv_layout(h100(), 2, std::string("96,36"), 0, &l, &notes, &err))
		<< err;
	EXPECT_EQ(l.k, 2u);
	EXPECT_EQ(l.unit_kind, unsigned(GPUSLOT_UNIT_NV_SM_GROUP));
	EXPECT_EQ(l.unit_size, 32u);
	EXPECT_EQ(l.nr_units, 4u);
	EXPECT_EQ(l.hqd_limit, 0u);
	ASSERT_EQ(l.partitions.size(), 2u);
	EXPECT_EQ(gpuslot::partition_text(l.partitions[0]), "0x7");
	EXPECT_EQ(gpuslot::partition_text(l.partitions[1]), "0x8");
	// Percentages of the SMs, and sizes for another k fall back to equal.
	ASSERT_TRUE(gpuslot::plan_nv_layout(h100(), 2, std::string("50%,50%"), 0, &l, &notes, &err));
	EXPECT_EQ(l.unit_size, 64u);
	notes.clear();
	ASSERT_TRUE(gpuslot::plan_nv_layout(h100(), 3, std::string("96,36"), 0, &l, &notes, &err));
	EXPECT_EQ(l.unit_size, 40u);
	EXPECT_NE(notes.at(0).find("planning k equal partitions"), std::string::npos);
	EXPECT_FALSE(gpuslot::plan_nv_layout(h100(), 2, std::string("x"), 0, &l, &notes, &err));
}

} // namespace
