// SPDX-License-Identifier: GPL-2.0
// The partition planner on the KFD fixtures: the dissertation's Radeon VII
// layouts, and the pitfall rules for every fixture and k = 1..8.
#include <gtest/gtest.h>

#include <bit>
#include <numeric>

#include "amd/planner.hpp"

namespace {

struct Gpu {
	gpuslot::GpuNode node;
	gpuslot::CuShape shape;
	gpuslot::MaskAlgorithm algo;
};

Gpu gpu(const char *fixture)
{
	auto r = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) /
					"kfd" / fixture);
	EXPECT_EQ(r.error, "");
	Gpu g{r.gpus.at(0), gpuslot::uniform_shape(r.gpus.at(0)),
	      r.gpus.at(0).num_xcc > 1 ? gpuslot::MaskAlgorithm::D :
					 gpuslot::MaskAlgorithm::C};
	return g;
}

std::vector<unsigned int> ses(std::initializer_list<unsigned int> v)
{
	return v;
}

TEST(Planner, RadeonViiTwoSlotsAreSePacked)
{
	Gpu g = gpu("radeon-vii-gfx906");
	auto plan = gpuslot::plan_partitions(g.shape, g.algo, 2, {});
	ASSERT_EQ(plan.error, "");
	ASSERT_EQ(plan.partitions.size(), 2u);
	EXPECT_EQ(plan.partitions[0].cus, 30u);
	EXPECT_EQ(plan.partitions[1].cus, 30u);
	EXPECT_TRUE(plan.partitions[0].se_packed);
	EXPECT_TRUE(plan.partitions[1].se_packed);
	EXPECT_EQ(plan.partitions[0].cus_per_se, ses({15, 15, 0, 0}));
	EXPECT_EQ(plan.partitions[1].cus_per_se, ses({0, 0, 15, 15}));
	// SE0 and SE1 are the bits i % 4 in {0, 1}.
	EXPECT_EQ(plan.partitions[0].mask_hex(), "0x333333333333333");
	EXPECT_EQ(plan.partitions[1].mask_hex(), "0xccccccccccccccc");
}

TEST(Planner, RadeonViiThreeSlotsAreSeDistributed)
{
	Gpu g = gpu("radeon-vii-gfx906");
	auto plan = gpuslot::plan_partitions(g.shape, g.algo, 3, {});
	ASSERT_EQ(plan.error, "");
	for (auto &p : plan.partitions) {
		EXPECT_EQ(p.cus, 20u);
		EXPECT_FALSE(p.se_packed);
		EXPECT_EQ(p.cus_per_se, ses({5, 5, 5, 5}));
	}
}

TEST(Planner, RadeonViiFourSlotsGetOneSeEach)
{
	Gpu g = gpu("radeon-vii-gfx906");
	auto plan = gpuslot::plan_partitions(g.shape, g.algo, 4, {});
	ASSERT_EQ(plan.error, "");
	for (unsigned int j = 0; j < 4; j++) {
		EXPECT_TRUE(plan.partitions[j].se_packed);
		std::vector<unsigned int> want(4, 0);
		want[j] = 15;
		EXPECT_EQ(plan.partitions[j].cus_per_se, want);
	}
}

TEST(Planner, SizedPartitions)
{
	Gpu g = gpu("radeon-vii-gfx906");
	std::vector<unsigned int> sizes;
	std::string err;
	ASSERT_TRUE(gpuslot::parse_sizes("30,10,10,10", 60, &sizes, &err));
	auto plan = gpuslot::plan_partitions(g.shape, g.algo, 4, sizes);
	ASSERT_EQ(plan.error, "");
	EXPECT_TRUE(plan.partitions[0].se_packed);
	EXPECT_EQ(plan.partitions[0].cus, 30u);
	for (unsigned int j = 1; j < 4; j++) {
		EXPECT_EQ(plan.partitions[j].cus, 10u);
		EXPECT_EQ(plan.partitions[j].cus_per_se, ses({0, 0, 5, 5}));
	}
	ASSERT_TRUE(gpuslot::parse_sizes("50%,25%,25%", 60, &sizes, &err));
	EXPECT_EQ(sizes, ses({30, 15, 15}));
	EXPECT_FALSE(gpuslot::parse_sizes("30,ten", 60, &sizes, &err));
	EXPECT_NE(err.find("'ten'"), std::string::npos);
	EXPECT_FALSE(gpuslot::parse_sizes("0", 60, &sizes, &err));
	EXPECT_FALSE(gpuslot::parse_sizes("", 60, &sizes, &err));
}

TEST(Planner, RoundsToSafeSizesAndSaysSo)
{
	Gpu g = gpu("radeon-vii-gfx906");
	// 9 CUs: as many SEs as possible, counts within one of each other.
	auto plan = gpuslot::plan_partitions(g.shape, g.algo, 1, {9});
	ASSERT_EQ(plan.error, "");
	EXPECT_EQ(plan.partitions[0].cus, 9u);
	EXPECT_EQ(plan.partitions[0].cus_per_se, ses({3, 2, 2, 2}));
	// 5 CUs: 2+1+1+1 and 2+2+1 leave a lone CU next to two (the 10x
	// pitfall); 3+2 on two SEs does not.
	plan = gpuslot::plan_partitions(g.shape, g.algo, 1, {5});
	EXPECT_EQ(plan.partitions[0].cus_per_se, ses({3, 2, 0, 0}));
	// RDNA: whole WGPs, so 9 CUs become 8, and a note says so.
	Gpu r = gpu("rx6900xt-gfx1030");
	plan = gpuslot::plan_partitions(r.shape, r.algo, 1, {9});
	ASSERT_EQ(plan.error, "");
	EXPECT_EQ(plan.partitions[0].cus, 8u);
	bool noted = false;
	for (auto &n : plan.notes)
		noted |= n.find("9 CUs rounded to 8") != std::string::npos;
	EXPECT_TRUE(noted);
}

TEST(Planner, BadSpecsAreRefused)
{
	Gpu g = gpu("radeon-vii-gfx906");
	EXPECT_NE(gpuslot::plan_partitions(g.shape, g.algo, 0, {}).error, "");
	EXPECT_NE(gpuslot::plan_partitions(g.shape, g.algo, 65, {}).error, "");
	EXPECT_NE(gpuslot::plan_partitions(g.shape, g.algo, 2, {10}).error.find(
			  "1 sizes for k = 2"),
		  std::string::npos);
	EXPECT_NE(gpuslot::plan_partitions(g.shape, g.algo, 2, {40, 40}).error.find(
			  "more than the 60 CUs"),
		  std::string::npos);
}

// The rules, for every fixture and k = 1..8.
class PlannerRules : public testing::TestWithParam<const char *> {};

TEST_P(PlannerRules, DisjointBalancedNoLoneCu)
{
	Gpu g = gpu(GetParam());
	const unsigned int unit = g.shape.wgp ? 2 : 1;
	for (unsigned int k = 1; k <= 8; k++) {
		SCOPED_TRACE("k = " + std::to_string(k));
		auto plan = gpuslot::plan_partitions(g.shape, g.algo, k, {});
		ASSERT_EQ(plan.error, "");
		std::vector<uint32_t> seen((g.shape.total() + 31) / 32, 0);
		unsigned int used = 0;
		for (auto &p : plan.partitions) {
			unsigned int bits = 0;
			for (size_t w = 0; w < p.mask.size(); w++) {
				EXPECT_EQ(seen[w] & p.mask[w], 0u) << "overlap";
				seen[w] |= p.mask[w];
				bits += std::popcount(p.mask[w]);
			}
			EXPECT_EQ(bits, p.cus);
			EXPECT_EQ(std::accumulate(p.cus_per_se.begin(),
						  p.cus_per_se.end(), 0u),
				  p.cus);
			EXPECT_GT(p.cus, 0u);
			EXPECT_EQ(p.cus % unit, 0u) << "half a WGP";
			unsigned int lo = ~0u, hi = 0;
			for (unsigned int c : p.cus_per_se)
				if (c) {
					lo = std::min(lo, c);
					hi = std::max(hi, c);
				}
			EXPECT_LE(hi - lo, unit) << "unbalanced SEs";
			EXPECT_FALSE(lo == unit && hi > unit) << "a lone CU on an SE";
			// XCCs within one SE's share of each other.
			std::vector<unsigned int> per_xcc(g.shape.xccs, 0);
			for (size_t se = 0; se < p.cus_per_se.size(); se++)
				per_xcc[se / g.shape.se_per_xcc] += p.cus_per_se[se];
			auto [mn, mx] = std::minmax_element(per_xcc.begin(),
							    per_xcc.end());
			EXPECT_LE(*mx - *mn, hi) << "unbalanced XCCs";
			used += p.cus;
		}
		EXPECT_LE(used, g.shape.total());
		// Equal partitions use all but what cannot be split safely.
		EXPECT_GE(used + k * 2 * unit + g.shape.total() % k,
			  g.shape.total() - g.shape.total() % k);
	}
}

INSTANTIATE_TEST_SUITE_P(Kfd, PlannerRules,
			 testing::Values("radeon-vii-gfx906", "mi100-gfx908",
					 "mi300x-gfx942-spx", "rx6900xt-gfx1030",
					 "rx7900xtx-gfx1100"));

} // namespace
