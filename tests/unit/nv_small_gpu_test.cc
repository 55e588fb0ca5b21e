// SPDX-License-Identifier: GPL-2.0
// The NVIDIA planner on Jetson-sized GPUs (issue 37): an Orin Nano or Orin
// NX of 8 SMs and an AGX Orin of 16, compute capability 8.7, where a green
// context takes at least 4 SMs in multiples of 2 (CUDA 13.0's Green
// Contexts guideline for 8.x). No Orin was measured: their splits here are
// what that guideline allows, floor(SMs / G) groups of G SMs for each G,
// the way the H100's driver splits whole GPCs (nv_plan_test.cc has the
// H100's measured splits). Also the granularity where the driver reports
// none (CUDA 12.4 to 12.6, JetPack 6), and the splits read through it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpuslotd/daemon.hpp"
#include "nvidia/nv_plan.hpp"

namespace {

using gpuslot::NvGpu;
using gpuslot::NvSplit;

// Groups of G for G = 4, 6, ... up to @sms: floor(sms / G) of them.
std::vector<NvSplit> guideline_splits(unsigned int sms)
{
	std::vector<NvSplit> out;
	for (unsigned int g = 4; g <= sms; g += 2)
		out.push_back({g, sms / g});
	return out;
}

NvGpu orin(const char *name, unsigned int sms)
{
	NvGpu gpu{0, name, sms, 4, 2, "", guideline_splits(sms)};
	gpu.cc_major = 8;
	gpu.cc_minor = 7;
	return gpu;
}

NvGpu orin_nano() { return orin("Orin", 8); }
NvGpu agx_orin() { return orin("Orin", 16); }

bool has_note(const gpuslot::NvPlan &p, const std::string &text)
{
	for (const auto &n : p.notes)
		if (n.find(text) != std::string::npos)
			return true;
	return false;
}

TEST(NvSmallGpu, EightSmsMakeAtMostTwoPartitions)
{
	auto one = gpuslot::plan_nv_partitions(orin_nano(), 1, {});
	ASSERT_EQ(one.error, "");
	EXPECT_EQ(one.slot_sms, std::vector<unsigned int>{8});
	auto two = gpuslot::plan_nv_partitions(orin_nano(), 2, {});
	ASSERT_EQ(two.error, "");
	EXPECT_EQ(two.group_sms, 4u);
	EXPECT_EQ(two.groups, 2u);
	EXPECT_EQ(two.slot_sms, (std::vector<unsigned int>{4, 4}));
	EXPECT_EQ(two.slot_groups, (std::vector<std::vector<unsigned int>>{{0}, {1}}));
	EXPECT_FALSE(has_note(two, "belong to no slot"));

	// Beyond the limit: the message says the limit, why, and what to do.
	EXPECT_EQ(gpuslot::plan_nv_partitions(orin_nano(), 3, {}).error,
		  "k = 3 partitions: the driver splits 8 SMs into at most 2 co-scheduled groups "
		  "(2 x 4, 1 x 6, 1 x 8); a green context takes at least 4 SMs, in multiples of "
		  "2, on compute capability 8.7: plan at most 2 partitions, or put slots on the "
		  "whole GPU (sizes = all,...)");
}

TEST(NvSmallGpu, SixteenSmsMakeAtMostFourPartitions)
{
	const unsigned int want[][4] = {{16}, {8, 8}, {4, 4, 4}, {4, 4, 4, 4}};
	for (unsigned int k = 1; k <= 4; k++) {
		auto p = gpuslot::plan_nv_partitions(agx_orin(), k, {});
		ASSERT_EQ(p.error, "") << k;
		EXPECT_EQ(p.slot_sms, std::vector<unsigned int>(want[k - 1], want[k - 1] + k)) << k;
	}
	// Three equal partitions leave a group of 4 to no slot, and say so.
	EXPECT_TRUE(has_note(gpuslot::plan_nv_partitions(agx_orin(), 3, {}),
			     "4 of 16 SMs belong to no slot"));
	auto five = gpuslot::plan_nv_partitions(agx_orin(), 5, {});
	EXPECT_EQ(five.error.rfind("k = 5 partitions: the driver splits 16 SMs into at most 4 "
				   "co-scheduled groups (4 x 4, 2 x 6, 2 x 8, 1 x 10,",
				   0),
		  0u)
		<< five.error;
	EXPECT_NE(five.error.find("plan at most 4 partitions"), std::string::npos) << five.error;
}

// Sizes below the smallest green context are refused as such, not as a
// failure to fit the driver's groups (which is what aad0a8a said: a
// partition of 2 SMs is a whole co-scheduled group of 2 on 8.x).
TEST(NvSmallGpu, APartitionBelowTheSmallestGreenContextIsRefusedSayingWhy)
{
	const std::string why = " SMs is less than the smallest green context the driver makes: at "
				"least 4 SMs, in multiples of 2, on compute capability 8.7";
	EXPECT_EQ(gpuslot::plan_nv_partitions(orin_nano(), 2, {2, 6}).error,
		  "a partition of 2" + why);
	EXPECT_EQ(gpuslot::plan_nv_partitions(orin_nano(), 2, {3, 4}).error,
		  "a partition of 3" + why);
	EXPECT_EQ(gpuslot::plan_nv_partitions(agx_orin(), 3, {12, 2, 2}).error,
		  "a partition of 2" + why);
	// One SM is below even a co-scheduled group.
	EXPECT_NE(gpuslot::plan_nv_partitions(orin_nano(), 2, {1, 4})
			  .error.find("less than one co-scheduled group (2 SMs"),
		  std::string::npos);
}

TEST(NvSmallGpu, UnevenSizesOnSixteenSms)
{
	// 12 + 4: groups of 4.
	auto p = gpuslot::plan_nv_partitions(agx_orin(), 2, {12, 4});
	ASSERT_EQ(p.error, "");
	EXPECT_EQ(p.group_sms, 4u);
	EXPECT_EQ(p.slot_groups, (std::vector<std::vector<unsigned int>>{{0, 1, 2}, {3}}));
	// 10 + 6: no split holds both (groups of 2 are below the minimum); the
	// largest shrinks, never below 4, until groups of 6 hold them.
	auto q = gpuslot::plan_nv_partitions(agx_orin(), 2, {10, 6});
	ASSERT_EQ(q.error, "");
	EXPECT_EQ(q.slot_sms, (std::vector<unsigned int>{6, 6}));
	EXPECT_EQ(q.group_sms, 6u);
	EXPECT_TRUE(has_note(q, "partitions of 10,6 SMs do not fit"));
	// 5 + 5 + 5: rounded down to 4 each, groups of 4.
	auto r = gpuslot::plan_nv_partitions(agx_orin(), 3, {5, 5, 5});
	ASSERT_EQ(r.error, "");
	EXPECT_EQ(r.slot_sms, (std::vector<unsigned int>{4, 4, 4}));
}

TEST(NvSmallGpu, TheLayoutGpuslotdWritesForAnOrinNano)
{
	gpuslot::ModuleLayout l;
	std::vector<std::string> notes;
	std::string err;
	ASSERT_TRUE(gpuslot::plan_nv_layout(orin_nano(), 2, std::nullopt, 0, &l, &notes, &err))
		<< err;
	EXPECT_EQ(l.unit_kind, unsigned(GPUSLOT_UNIT_NV_SM_GROUP));
	EXPECT_EQ(l.unit_size, 4u);
	EXPECT_EQ(l.nr_units, 2u);
	ASSERT_EQ(l.partitions.size(), 2u);
	EXPECT_EQ(gpuslot::partition_text(l.partitions[0]), "0x1");
	EXPECT_EQ(gpuslot::partition_text(l.partitions[1]), "0x2");
	// A whole-GPU slot beside one partition of 4.
	ASSERT_TRUE(gpuslot::plan_nv_layout(orin_nano(), 2, std::string("all,4"), 0, &l, &notes,
					    &err))
		<< err;
	EXPECT_EQ(l.unit_size, 4u);
	EXPECT_FALSE(gpuslot::plan_nv_layout(orin_nano(), 3, std::nullopt, 0, &l, &notes, &err));
	EXPECT_NE(err.find("at most 2 co-scheduled groups"), std::string::npos) << err;
}

// CUDA 13.0's CUdevSmResource reports the granularity; CUDA 12.4 to 12.6
// (JetPack 6) report smCount only, and the planner falls back to NVIDIA's
// documented guideline for the compute capability, saying so.
TEST(NvSmallGpu, TheGranularityIsTheDriversElseTheDocumentedGuideline)
{
	using G = gpuslot::NvGranularity;
	EXPECT_EQ(gpuslot::nv_sm_granularity(8, 8, 9, 0), (G{8, 8, false}));
	EXPECT_EQ(gpuslot::nv_sm_granularity(4, 2, 8, 7), (G{4, 2, false}));
	EXPECT_EQ(gpuslot::nv_sm_granularity(0, 0, 8, 7), (G{4, 2, true}));  // Orin
	EXPECT_EQ(gpuslot::nv_sm_granularity(0, 0, 11, 0), (G{8, 8, true})); // Thor
	EXPECT_EQ(gpuslot::nv_sm_granularity(0, 0, 9, 0), (G{8, 8, true}));
	EXPECT_EQ(gpuslot::nv_sm_granularity(0, 0, 7, 2), (G{2, 2, true}));
	EXPECT_EQ(gpuslot::nv_sm_granularity(0, 0, 6, 2), (G{2, 2, true}));
	EXPECT_EQ(gpuslot::nv_sm_granularity(4, 0, 8, 7), (G{4, 2, true})); // half an answer
	EXPECT_EQ(gpuslot::nv_sm_granularity(0, 0, 5, 3), (G{}));
	EXPECT_EQ(gpuslot::nv_sm_granularity(0, 0, 0, 0), (G{}));

	NvGpu documented = orin_nano();
	documented.granularity_documented = true;
	EXPECT_TRUE(has_note(gpuslot::plan_nv_partitions(documented, 2, {}),
			     "the driver reports no partition granularity (CUDA before 13.0): planned "
			     "with at least 4 SMs, in multiples of 2, on compute capability 8.7 "
			     "(NVIDIA's guideline)"));
	EXPECT_FALSE(has_note(gpuslot::plan_nv_partitions(orin_nano(), 2, {}), "guideline"));
}

// The splits read from a driver that rounds minCount up to its smallest
// partition (4) and to its alignment (2), on 8 SMs.
TEST(NvSmallGpu, TheExactSplitsOfAnOrinNanosDriver)
{
	std::vector<unsigned int> asked;
	auto driver = [&](unsigned int g) {
		asked.push_back(g);
		const unsigned int made = std::max(4u, (g + 1) / 2 * 2);
		return std::vector<unsigned int>(made <= 8 ? 8 / made : 0, made);
	};
	EXPECT_EQ(gpuslot::nv_exact_splits(8, gpuslot::nv_sm_granularity(0, 0, 8, 7), driver),
		  (std::vector<NvSplit>{{4, 2}, {6, 1}, {8, 1}}));
	EXPECT_EQ(asked, (std::vector<unsigned int>{4, 6, 8}));
	// Without a granularity (what aad0a8a made of a driver that reports
	// none) there are no splits, and nothing can be planned.
	asked.clear();
	EXPECT_TRUE(gpuslot::nv_exact_splits(8, {}, driver).empty());
	EXPECT_TRUE(asked.empty());
	// Asked from the alignment where the minimum is smaller, as on an
	// H100 (8 and 8): 8, 16, ... 128.
	asked.clear();
	gpuslot::nv_exact_splits(132, {8, 8, false}, [&](unsigned int g) {
		asked.push_back(g);
		return std::vector<unsigned int>{};
	});
	ASSERT_EQ(asked.size(), 16u);
	EXPECT_EQ(asked.front(), 8u);
	EXPECT_EQ(asked.back(), 128u);
}

} // namespace
