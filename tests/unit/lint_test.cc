// SPDX-License-Identifier: GPL-2.0
// gpuslotctl lint on the fixtures: every problem it names, and silence on
// the planner's own masks.
#include <gtest/gtest.h>

#include "amd/lint.hpp"
#include "amd/planner.hpp"

namespace {

struct Gpu {
	gpuslot::CuShape shape;
	gpuslot::MaskAlgorithm algo = gpuslot::MaskAlgorithm::C;
};

Gpu gpu(const char *fixture)
{
	auto r = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) /
					"kfd" / fixture);
	EXPECT_EQ(r.error, "");
	return {gpuslot::uniform_shape(r.gpus.at(0)),
		r.gpus.at(0).num_xcc > 1 ? gpuslot::MaskAlgorithm::D
					 : gpuslot::MaskAlgorithm::C};
}

std::vector<uint32_t> mask(const std::string &hex)
{
	std::vector<uint32_t> m;
	EXPECT_TRUE(gpuslot::parse_mask(hex, &m)) << hex;
	return m;
}

std::string all_text(const std::vector<gpuslot::LintFinding> &f)
{
	std::string out;
	for (auto &x : f)
		out += x.text() + "\n";
	return out;
}

TEST(Lint, PlannerMasksAreClean)
{
	for (const char *fx : {"radeon-vii-gfx906", "mi100-gfx908", "rx6900xt-gfx1030",
			       "rx7900xtx-gfx1100", "mi300x-gfx942-spx"}) {
		Gpu g = gpu(fx);
		for (unsigned int k = 1; k <= 8; k++) {
			auto plan = gpuslot::plan_partitions(g.shape, g.algo, k, {});
			ASSERT_EQ(plan.error, "") << fx << " k " << k;
			std::vector<std::vector<uint32_t>> masks;
			for (auto &p : plan.partitions)
				masks.push_back(p.mask);
			auto f = gpuslot::lint_masks(g.shape, g.algo, masks);
			EXPECT_TRUE(f.empty()) << fx << " k " << k << "\n" << all_text(f);
		}
	}
}

TEST(Lint, LoneCuOnAnSeIsAnError)
{
	Gpu g = gpu("radeon-vii-gfx906"); // bit i -> SE i % 4
	auto f = gpuslot::lint_masks(g.shape, g.algo, {mask("0x1f")});
	ASSERT_EQ(f.size(), 1u) << all_text(f);
	EXPECT_EQ(f[0].severity, gpuslot::LintFinding::kError);
	EXPECT_NE(f[0].problem.find("single CU"), std::string::npos);
	EXPECT_NE(f[0].consequence.find("10x"), std::string::npos);
}

TEST(Lint, AnXccWithoutCusInAMultiXccMaskIsAnError)
{
	Gpu g = gpu("mi300x-gfx942-spx"); // walk D: bit i -> XCC i % 8
	// Bits 0-3 and 8-11: XCCs 0-3 only.
	auto f = gpuslot::lint_masks(g.shape, g.algo, {mask("0xf0f")});
	ASSERT_EQ(f.size(), 1u) << all_text(f);
	EXPECT_EQ(f[0].severity, gpuslot::LintFinding::kError);
	EXPECT_NE(f[0].problem.find("XCCs 4, 5, 6, 7 have no CU"), std::string::npos)
		<< all_text(f);
	EXPECT_TRUE(gpuslot::lint_masks(g.shape, g.algo, {mask("0xffff")}).empty());
}

TEST(Lint, UnbalancedSesAreAWarning)
{
	Gpu g = gpu("radeon-vii-gfx906");
	// SE 0 gets bits 0,4,8,12 (4 CUs); SE 1..3 get 2 each.
	auto f = gpuslot::lint_masks(g.shape, g.algo, {mask("0x11ff")});
	ASSERT_EQ(f.size(), 1u) << all_text(f);
	EXPECT_EQ(f[0].severity, gpuslot::LintFinding::kWarning);
	EXPECT_NE(f[0].problem.find("unbalanced SEs: from 2 CUs"), std::string::npos)
		<< f[0].problem;
}

TEST(Lint, OverlapEmptyAndBitsPastTheGpu)
{
	Gpu g = gpu("radeon-vii-gfx906");
	auto f = gpuslot::lint_masks(
		g.shape, g.algo,
		{mask("0xff"), mask("0xff0"), mask("0x0"), mask("0xf000000000000000")});
	std::string t = all_text(f);
	EXPECT_NE(t.find("error: slots 0 and 1: they share bits 4-7"), std::string::npos) << t;
	EXPECT_NE(t.find("error: slot 2: the mask enables no CU"), std::string::npos) << t;
	EXPECT_NE(t.find("warning: slot 3: bits 60-63 are past the GPU's 60 CUs"),
		  std::string::npos) << t;
	// Bits past the GPU only: the partition is empty too.
	EXPECT_NE(t.find("error: slot 3: the mask enables no CU"), std::string::npos) << t;
}

TEST(Lint, HalfAWgpOnRdnaIsAnError)
{
	Gpu g = gpu("rx6900xt-gfx1030");
	auto f = gpuslot::lint_masks(g.shape, g.algo, {mask("0xff"), mask("0x700")});
	std::string t = all_text(f);
	EXPECT_EQ(t.find("slot 0: half a WGP"), std::string::npos) << t;
	EXPECT_NE(t.find("error: slot 1: half a WGP: bit 10 without"), std::string::npos) << t;
	EXPECT_NE(t.find("EINVAL"), std::string::npos) << t;
	// The refused mask gets no balance findings on top.
	EXPECT_EQ(f.size(), 1u) << t;
	// Before Linux 6.0 (walk B) the kernel maps single CUs, but ROCr
	// (ROCm 5.3 and later) refuses half a user-bit pair whatever the
	// kernel (issue 31): the RX 6900 XT's k = 4 slot 0 under 5.15.
	for (const char *m : {"0x700", "0x11111111111111111111"}) {
		auto b = gpuslot::lint_masks(g.shape, gpuslot::MaskAlgorithm::B, {mask(m)});
		t = all_text(b);
		EXPECT_NE(t.find("error: slot 0: half a WGP: bit"), std::string::npos) << m << t;
		EXPECT_NE(t.find("ROCr (ROCm 5.3 and later, whatever the kernel) refuses"),
			  std::string::npos) << t;
		EXPECT_EQ(t.find("EINVAL"), std::string::npos) << t;
	}
	// Walk B, user pairs whole, but SE 0 SH 0 gets CU 0 without CU 1:
	// a WGP with one CU enabled (bits 0 and 1 are SEs 0 and 1, CU 0).
	auto h = gpuslot::lint_masks(g.shape, gpuslot::MaskAlgorithm::B, {mask("0x3")});
	EXPECT_NE(all_text(h).find("WGP 0 gets one CU of its two"), std::string::npos)
		<< all_text(h);
	// Bits 0, 1 and 8, 9: CUs 0 and 1 of SH 0 on SEs 0 and 1, whole.
	EXPECT_TRUE(gpuslot::lint_masks(g.shape, gpuslot::MaskAlgorithm::B, {mask("0x303")})
			    .empty());
}

// Every plan on every fixture under every walk lints clean under that walk
// (pairs included on gfx10+, whatever the walk).
TEST(Lint, PlannerMasksAreCleanUnderEveryWalk)
{
	for (const char *fx : {"radeon-vii-gfx906", "mi100-gfx908", "rx6900xt-gfx1030",
			       "rx7900xtx-gfx1100", "mi300x-gfx942-spx"})
		for (auto a : {gpuslot::MaskAlgorithm::A, gpuslot::MaskAlgorithm::B,
			       gpuslot::MaskAlgorithm::C, gpuslot::MaskAlgorithm::D}) {
			Gpu g = gpu(fx);
			for (unsigned int k = 1; k <= 8; k++) {
				auto plan = gpuslot::plan_partitions(g.shape, a, k, {});
				if (!plan.error.empty())
					continue; // a walk that cannot mask this GPU
				std::vector<std::vector<uint32_t>> masks;
				for (auto &p : plan.partitions)
					masks.push_back(p.mask);
				auto f = gpuslot::lint_masks(g.shape, a, masks);
				EXPECT_TRUE(f.empty()) << fx << " walk " << gpuslot::algorithm_name(a)
						       << " k " << k << "\n" << all_text(f);
			}
		}
}

TEST(Lint, MaskParsing)
{
	std::vector<uint32_t> m;
	EXPECT_TRUE(gpuslot::parse_mask("0x1_", &m) == false);
	EXPECT_FALSE(gpuslot::parse_mask("", &m));
	EXPECT_FALSE(gpuslot::parse_mask("0x", &m));
	EXPECT_FALSE(gpuslot::parse_mask(std::string(257, 'f'), &m));
	ASSERT_TRUE(gpuslot::parse_mask("0X1fffffffff", &m));
	EXPECT_EQ(m, (std::vector<uint32_t>{0xffffffff, 0x1f}));
}

} // namespace
