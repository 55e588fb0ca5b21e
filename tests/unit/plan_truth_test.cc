// SPDX-License-Identifier: GPL-2.0
// Every plan of every fixture, under every amdkfd CU-mask walk, for k = 1..8,
// checked against a walk of this test's own: the COMPUTE_STATIC_THREAD_MGMT
// registers that mqd_symmetrically_map_cu_mask() writes, written from the
// kernel's code as ../shared/reference/amd-kfd.md section 1 quotes it, not
// from the daemon's cu_mask.cc. A plan either says exactly what its masks
// do, or fails with a reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <numeric>

#include "amd/cu_mask.hpp"
#include "amd/planner.hpp"

namespace {

using gpuslot::CuShape;
using gpuslot::MaskAlgorithm;

bool bit(const std::vector<uint32_t> &mask, unsigned int i)
{
	return i / 32 < mask.size() && (mask[i / 32] >> (i % 32) & 1);
}

// se_mask[xcc][se] as amdkfd computes it for @mask.
std::vector<std::vector<uint32_t>> kernel_registers(const CuShape &s, MaskAlgorithm a,
						    const std::vector<uint32_t> &mask)
{
	const unsigned int nse = s.se_per_xcc, nsh = s.sh_per_se;
	std::vector<std::vector<uint32_t>> reg(s.xccs, std::vector<uint32_t>(nse, 0));
	const unsigned int count = std::min<unsigned>(unsigned(mask.size() * 32), s.total());
	auto cu_per_sh = [&](unsigned int x, unsigned int se, unsigned int sh) {
		return s.at(x, se, sh);
	};
	if (a == MaskAlgorithm::A) {
		// Linux <= 5.14: SE round robin, the register bit is the column.
		std::vector<unsigned int> cu_per_se(nse, 0);
		for (unsigned int se = 0; se < nse; se++)
			for (unsigned int sh = 0; sh < nsh; sh++)
				cu_per_se[se] += cu_per_sh(0, se, sh);
		unsigned int se = 0, cu = 0;
		for (unsigned int i = 0; i < count; i++) {
			if (bit(mask, i) && cu < 32)
				reg[0][se] |= 1u << cu;
			do {
				if (++se == nse) {
					se = 0;
					cu++;
				}
			} while (cu >= cu_per_se[se] && cu < 32);
		}
		return reg;
	}
	if (nse > 8 || nsh > 2)
		return reg; // pr_err, se_mask stays 0
	const bool w = a != MaskAlgorithm::B && s.wgp;
	const uint32_t en = w ? 3 : 1;
	const unsigned int step = w ? 2 : 1;
	const unsigned int nx = a == MaskAlgorithm::D ? s.xccs : 1;
	for (unsigned int inst = 0; inst < nx; inst++) {
		unsigned int i = inst;
		const unsigned int inc = step * nx;
		for (unsigned int cu = 0; cu < 16; cu += step)
			for (unsigned int sh = 0; sh < nsh; sh++)
				for (unsigned int se = 0; se < nse; se++) {
					if (cu_per_sh(inst, se, sh) <= cu)
						continue;
					if (i >= count)
						goto next;
					if ((i / 32 < mask.size()) &&
					    (mask[i / 32] & (en << (i % 32))))
						reg[inst][se] |= en << (cu + 16 * sh);
					i += a == MaskAlgorithm::D ? inc : step;
					// B and C stop at == count, D at >= count
				}
next:;
	}
	return reg;
}

// The register bits of real CUs: 0 .. cu_per_sh - 1 of each SH half.
uint32_t valid_bits(const CuShape &s, unsigned int x, unsigned int se)
{
	uint32_t v = 0;
	for (unsigned int sh = 0; sh < s.sh_per_se; sh++) {
		unsigned int n = std::min(s.at(x, se, sh), 16u);
		v |= (n >= 16 ? 0xffffu : (1u << n) - 1) << (16 * sh);
	}
	return v;
}

// gfx10+: a WGP (register CUs 2j and 2j+1 of a shader array) runs with
// both CUs or none.
void expect_whole_wgps(const CuShape &s, const std::vector<std::vector<uint32_t>> &reg,
		       const std::string &what)
{
	if (!s.wgp)
		return;
	for (unsigned int x = 0; x < s.xccs; x++)
		for (unsigned int se = 0; se < s.se_per_xcc; se++)
			for (unsigned int sh = 0; sh < s.sh_per_se; sh++)
				for (unsigned int j = 0; 2 * j + 1 < s.at(x, se, sh) &&
							 2 * j + 1 < 16; j++) {
					const uint32_t two = reg[x][se] >> (16 * sh + 2 * j) & 3;
					EXPECT_TRUE(two == 0 || two == 3)
						<< what << ": half a WGP on SE " << se << " SH " << sh;
				}
}

// ROCr's rule on the user bits: 2w and 2w+1 both set or both clear.
void expect_whole_pairs(const std::vector<uint32_t> &mask, const std::string &what)
{
	for (unsigned int i = 0; i < mask.size() * 32; i += 2)
		EXPECT_EQ(bit(mask, i), bit(mask, i + 1))
			<< what << ": user bit " << (bit(mask, i) ? i : i + 1)
			<< " without its pair; ROCr refuses the mask";
}

struct Case {
	const char *fixture;
	MaskAlgorithm walk;
};

class PlanTruth : public testing::TestWithParam<Case> {};

std::string case_name(const testing::TestParamInfo<Case> &info)
{
	std::string f = info.param.fixture;
	for (char &c : f)
		if (c == '-')
			c = '_';
	return f + "_" + "ABCD"[int(info.param.walk)];
}

TEST_P(PlanTruth, ClaimsMatchTheKernelsWalk)
{
	auto topo = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) / "kfd" /
					   GetParam().fixture);
	ASSERT_EQ(topo.error, "");
	const CuShape s = gpuslot::uniform_shape(topo.gpus.at(0));
	const MaskAlgorithm a = GetParam().walk;
	// Walk A cannot address a second shader array, and only the XCC walk
	// masks more than XCC 0: such plans must fail, not lie.
	const bool impossible = (a == MaskAlgorithm::A && s.sh_per_se > 1) ||
				(s.xccs > 1 && a != MaskAlgorithm::D);
	// ROCr (ROCm 5.3 and later) refuses a gfx10+ mask with half a
	// user-bit pair whatever the kernel: every walk keeps pairs whole.
	const bool pairs = s.wgp;
	// Under walk B those two bits land on two SEs: the smallest share a
	// partition can get is then a WGP on each of two SEs.
	const bool tied = s.wgp && a == MaskAlgorithm::B && s.se_per_xcc > 1;
	const unsigned int unit = (s.wgp ? 2 : 1) * (tied ? 2 : 1) * s.xccs;

	for (unsigned int k = 1; k <= 8; k++) {
		SCOPED_TRACE("k = " + std::to_string(k));
		auto plan = gpuslot::plan_partitions(s, a, k, {});
		if (impossible) {
			EXPECT_NE(plan.error, "");
			continue;
		}
		ASSERT_EQ(plan.error, "");
		ASSERT_EQ(plan.partitions.size(), k);
		std::vector<std::vector<uint32_t>> taken(s.xccs,
							 std::vector<uint32_t>(s.se_per_xcc, 0));
		unsigned int used = 0, lo = ~0u, hi = 0;
		for (const auto &p : plan.partitions) {
			auto reg = kernel_registers(s, a, p.mask);
			unsigned int cus = 0;
			std::vector<unsigned int> per_se;
			for (unsigned int x = 0; x < s.xccs; x++) {
				unsigned int in_xcc = 0;
				for (unsigned int se = 0; se < s.se_per_xcc; se++) {
					uint32_t r = reg[x][se] & valid_bits(s, x, se);
					EXPECT_EQ(r & taken[x][se], 0u) << "two partitions share a CU";
					taken[x][se] |= r;
					per_se.push_back(unsigned(std::popcount(r)));
					in_xcc += per_se.back();
				}
				EXPECT_GT(in_xcc, 0u) << "XCC " << x << " has no CU";
				cus += in_xcc;
			}
			EXPECT_EQ(cus, p.cus) << p.mask_hex();
			EXPECT_EQ(per_se, p.cus_per_se) << p.mask_hex();
			expect_whole_wgps(s, reg, p.mask_hex());
			const unsigned int most = *std::max_element(per_se.begin(), per_se.end());
			EXPECT_FALSE(most > 1 && std::count(per_se.begin(), per_se.end(), 1u))
				<< "a lone CU on an SE: " << p.mask_hex();
			for (unsigned int i = 0; pairs && i < p.mask.size() * 32; i += 2) {
				EXPECT_EQ(bit(p.mask, i), bit(p.mask, i + 1))
					<< "half a WGP at bit " << i;
			}
			used += cus;
			lo = std::min(lo, cus);
			hi = std::max(hi, cus);
		}
		// An even split: within one unit (of every XCC) of each other,
		// and only what does not divide by k idles.
		EXPECT_LE(hi - lo, unit);
		unsigned int reachable = 0;
		for (unsigned int x = 0; x < s.xccs; x++)
			for (unsigned int se = 0; se < s.se_per_xcc; se++)
				reachable += unsigned(std::popcount(valid_bits(s, x, se)));
		EXPECT_LT(reachable - used, unit * k) << "CUs idle that an even split could use";
	}
}

std::vector<Case> every_case()
{
	std::vector<Case> out;
	for (const char *f : {"radeon-vii-gfx906", "mi100-gfx908", "mi300x-gfx942-spx",
			      "rx6900xt-gfx1030", "rx7900xtx-gfx1100"})
		for (MaskAlgorithm a : {MaskAlgorithm::A, MaskAlgorithm::B, MaskAlgorithm::C,
					MaskAlgorithm::D})
			out.push_back({f, a});
	return out;
}

INSTANTIATE_TEST_SUITE_P(Kfd, PlanTruth, testing::ValuesIn(every_case()), case_name);

// The topologies that made the planner lie or overflow (tests/fixtures/kfd-bad).
TEST(PlanTruth, BadTopologiesGetAReasonOrAPlanThatHolds)
{
	auto shape_of = [](const char *name) {
		auto topo = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) /
						   "kfd-bad" / name);
		EXPECT_EQ(topo.error, "") << name;
		return gpuslot::uniform_shape(topo.gpus.at(0));
	};
	// 20 CUs per array: a mask reaches 16 of them; the plan says so.
	CuShape wide = shape_of("cu20-per-array");
	auto plan = gpuslot::plan_partitions(wide, MaskAlgorithm::C, 2, {});
	ASSERT_EQ(plan.error, "");
	EXPECT_EQ(plan.partitions[0].cus + plan.partitions[1].cus, 64u);
	bool noted = false;
	for (auto &n : plan.notes)
		noted |= n.find("16 CUs lie beyond") != std::string::npos;
	EXPECT_TRUE(noted);
	// More SEs than amdkfd masks: a reason, never a mask of 0x0.
	for (const char *name : {"se16-per-xcc", "mi300x-no-num-xcc"}) {
		CuShape s = shape_of(name);
		for (MaskAlgorithm a : {MaskAlgorithm::B, MaskAlgorithm::C, MaskAlgorithm::D}) {
			auto p = gpuslot::plan_partitions(s, a, 2, {});
			EXPECT_NE(p.error.find("at most 8"), std::string::npos) << name << p.error;
		}
	}
}

// Whole SEs of different sizes pack by subset sum (MI300X: 10, 10, 9, 9 CUs
// per XCC).
TEST(PlanTruth, UnequalShaderEnginesPackWhole)
{
	auto topo = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) / "kfd" /
					   "mi300x-gfx942-spx");
	CuShape s = gpuslot::uniform_shape(topo.gpus.at(0));
	for (auto sizes : {std::vector<unsigned>{80, 80, 72, 72}, std::vector<unsigned>{160, 144}}) {
		auto plan = gpuslot::plan_partitions(s, MaskAlgorithm::D, unsigned(sizes.size()),
						     sizes);
		ASSERT_EQ(plan.error, "");
		for (size_t j = 0; j < sizes.size(); j++) {
			EXPECT_TRUE(plan.partitions[j].se_packed) << j;
			EXPECT_EQ(plan.partitions[j].cus, sizes[j]);
		}
	}
}

// Issue 31: the most common RDNA host, a 5.15 kernel (Ubuntu 22.04) with a
// current ROCm. Each GPU is planned with the walk gpuslot chooses for it,
// and checked against the walk of what really drives it: 5.15's own
// amdkfd (walk B) for gfx1030; for gfx1100, which 5.15 cannot drive
// (in-tree from 5.19), amdgpu-dkms and its newest walk (D).
struct OnOldKernel {
	const char *fixture;
	MaskAlgorithm truth;
	std::vector<unsigned int> ks;
};

class PlanOn515 : public testing::TestWithParam<OnOldKernel> {};

TEST_P(PlanOn515, MasksRocrAcceptsThatSayWhatTheDriversWalkDoes)
{
	auto topo = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) / "kfd" /
					   GetParam().fixture);
	ASSERT_EQ(topo.error, "");
	const auto &gpu = topo.gpus.at(0);
	const CuShape s = gpuslot::uniform_shape(gpu);
	auto walk = gpuslot::choose_algorithm(gpu.gfx, "5.15.0-91-generic", "", std::nullopt);
	for (unsigned int k : GetParam().ks) {
		SCOPED_TRACE("k = " + std::to_string(k) + ", walk " +
			     gpuslot::algorithm_name(walk.algorithm));
		auto plan = gpuslot::plan_partitions(s, walk.algorithm, k, {});
		ASSERT_EQ(plan.error, "");
		ASSERT_EQ(plan.partitions.size(), k);
		std::vector<uint32_t> taken(s.se_per_xcc, 0);
		for (size_t j = 0; j < k; j++) {
			const auto &p = plan.partitions[j];
			const std::string what = "slot " + std::to_string(j) + " " + p.mask_hex();
			expect_whole_pairs(p.mask, what);
			auto reg = kernel_registers(s, GetParam().truth, p.mask);
			expect_whole_wgps(s, reg, what);
			std::vector<unsigned int> per_se;
			for (unsigned int se = 0; se < s.se_per_xcc; se++) {
				uint32_t r = reg[0][se] & valid_bits(s, 0, se);
				EXPECT_EQ(r & taken[se], 0u) << what << " shares a CU";
				taken[se] |= r;
				per_se.push_back(unsigned(std::popcount(r)));
			}
			EXPECT_EQ(per_se, p.cus_per_se) << what;
			const unsigned int most = *std::max_element(per_se.begin(), per_se.end());
			EXPECT_FALSE(most > 1 && std::count(per_se.begin(), per_se.end(), 1u))
				<< what << ": a lone CU on an SE";
		}
	}
}

INSTANTIATE_TEST_SUITE_P(
	Issue31, PlanOn515,
	testing::Values(OnOldKernel{"rx6900xt-gfx1030", MaskAlgorithm::B, {3, 4, 6, 7, 8}},
			OnOldKernel{"rx7900xtx-gfx1100", MaskAlgorithm::D, {2, 3, 5, 6, 7, 8}}),
	[](const testing::TestParamInfo<OnOldKernel> &info) {
		std::string f = info.param.fixture;
		return f.substr(0, f.find('-'));
	});

// The issue's own example: k = 4 on an RX 6900 XT under 5.15 gave slot 0
// 0x11111111111111111111 (user bit 0 without bit 1). No SE can be held
// alone with pairs whole (bits 2w and 2w+1 are SEs 0 and 1, or 2 and 3):
// each slot gets a WGP column on two SEs, and the plan says what it gave
// up.
TEST(PlanOn515, Rx6900xtFourSlotsGiveUpSePackingAndSaySo)
{
	auto topo = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) / "kfd" /
					   "rx6900xt-gfx1030");
	ASSERT_EQ(topo.error, "");
	const CuShape s = gpuslot::uniform_shape(topo.gpus.at(0));
	auto plan = gpuslot::plan_partitions(s, MaskAlgorithm::B, 4, {});
	ASSERT_EQ(plan.error, "");
	EXPECT_NE(plan.partitions[0].mask_hex(), "0x11111111111111111111");
	for (const auto &p : plan.partitions) {
		EXPECT_EQ(p.cus, 20u);
		EXPECT_FALSE(p.se_packed);
		expect_whole_pairs(p.mask, p.mask_hex());
	}
	bool tied = false, given_up = false;
	for (const auto &n : plan.notes) {
		tied |= n.find("holds SEs 0 and 1, SEs 2 and 3 together") != std::string::npos;
		given_up |= n.find("not SE-packed") != std::string::npos;
	}
	EXPECT_TRUE(tied);
	EXPECT_TRUE(given_up);
	// Two slots still fill whole SEs: SEs 0 and 1, and SEs 2 and 3.
	plan = gpuslot::plan_partitions(s, MaskAlgorithm::B, 2, {});
	ASSERT_EQ(plan.error, "");
	EXPECT_TRUE(plan.partitions[0].se_packed);
	EXPECT_TRUE(plan.partitions[1].se_packed);
}

} // namespace
