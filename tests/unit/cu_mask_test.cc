// SPDX-License-Identifier: GPL-2.0
// amdkfd's CU-mask walk, against the kernel's comment examples and the
// worked mappings of ../shared/reference/amd-kfd.md section 1.6.
#include <gtest/gtest.h>

#include "amd/cu_mask.hpp"

using gpuslot::CuSlot;
using gpuslot::MaskAlgorithm;

namespace {

gpuslot::CuShape shape_of(const char *fixture)
{
	auto r = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) /
					"kfd" / fixture);
	EXPECT_EQ(r.error, "");
	return gpuslot::uniform_shape(r.gpus.at(0));
}

TEST(CuMask, KernelReleasesPickTheAlgorithm)
{
	MaskAlgorithm a;
	struct {
		const char *release;
		MaskAlgorithm want;
	} cases[] = {{"5.10.0-28-amd64", MaskAlgorithm::A},
		     {"5.14.21", MaskAlgorithm::A},
		     {"5.15.0-91-generic", MaskAlgorithm::B},
		     {"5.19.17", MaskAlgorithm::B},
		     {"6.1.0-56-amd64", MaskAlgorithm::C},
		     {"6.5.13", MaskAlgorithm::C},
		     {"6.6.1", MaskAlgorithm::D},
		     {"6.18.2", MaskAlgorithm::D}};
	for (auto &c : cases) {
		ASSERT_TRUE(gpuslot::algorithm_for_kernel(c.release, &a)) << c.release;
		EXPECT_EQ(a, c.want) << c.release;
	}
	EXPECT_FALSE(gpuslot::algorithm_for_kernel("linux", &a));
}

bool has_note(const gpuslot::AlgorithmChoice &c, const std::string &text)
{
	for (const auto &n : c.notes)
		if (n.find(text) != std::string::npos)
			return true;
	return false;
}

// The walk is the one of the amdkfd that drives the GPU: a family the
// release's in-tree amdkfd does not know means amdgpu-dkms (issue 31).
TEST(CuMask, TheWalkIsTheOneOfWhatDrivesTheGpu)
{
	using gpuslot::GfxVersion;
	const GfxVersion gfx1030{10, 3, 0}, gfx1100{11, 0, 0}, gfx1101{11, 0, 1},
		gfx942{9, 4, 2};
	// 5.15 drives gfx1030 itself: its walk B.
	auto c = gpuslot::choose_algorithm(gfx1030, "5.15.0-91-generic", "", std::nullopt);
	EXPECT_EQ(c.algorithm, MaskAlgorithm::B);
	EXPECT_FALSE(has_note(c, "amdgpu-dkms"));
	// 5.15 has no gfx11 (in-tree from 5.19): amdgpu-dkms, walk D.
	c = gpuslot::choose_algorithm(gfx1100, "5.15.0-91-generic", "", std::nullopt);
	EXPECT_EQ(c.algorithm, MaskAlgorithm::D);
	EXPECT_NE(c.why.find("amdgpu-dkms"), std::string::npos) << c.why;
	EXPECT_TRUE(has_note(c, "gfx1100 is not driven by Linux 5.15.0-91-generic's in-tree "
				"amdgpu (gfx_target_version 110000 is in-tree from Linux 5.19)"));
	c = gpuslot::choose_algorithm(gfx1100, "5.19.17", "", std::nullopt);
	EXPECT_EQ(c.algorithm, MaskAlgorithm::B);
	EXPECT_EQ(gpuslot::choose_algorithm(gfx1101, "5.19.17", "", std::nullopt).algorithm,
		  MaskAlgorithm::D);
	EXPECT_EQ(gpuslot::choose_algorithm(gfx1100, "6.1.0-56-amd64", "", std::nullopt).algorithm,
		  MaskAlgorithm::C);
	// What is configured wins.
	EXPECT_EQ(gpuslot::choose_algorithm(gfx1100, "5.15.0-91-generic", "", MaskAlgorithm::B)
			  .algorithm,
		  MaskAlgorithm::B);

	// MI300X: kernels before 6.5 cannot drive gfx942 at all.
	c = gpuslot::choose_algorithm(gfx942, "6.1.0-56-amd64", "", std::nullopt);
	EXPECT_EQ(c.algorithm, MaskAlgorithm::D);
	EXPECT_TRUE(has_note(c, "in-tree from Linux 6.5): this GPU runs under amdgpu-dkms"));
	EXPECT_FALSE(has_note(c, "unmasked"));
	// 6.5 writes one XCC's mask to every XCC.
	c = gpuslot::choose_algorithm(gfx942, "6.5.13", "", std::nullopt);
	EXPECT_TRUE(has_note(c, "writes the same mask to every XCC"));
	EXPECT_FALSE(has_note(c, "unmasked"));
	// 6.6 to 6.10 leave XCCs 1-7 unmasked until the fix of 6.11.
	for (const char *r : {"6.6.30", "6.10.3"}) {
		c = gpuslot::choose_algorithm(gfx942, r, "", std::nullopt);
		EXPECT_TRUE(has_note(c, "run XCCs 1-7 unmasked")) << r;
		EXPECT_TRUE(has_note(c, "85cf43c554e4, Linux 6.11, backported to 6.6.y and "
					"6.10.y")) << r;
	}
	c = gpuslot::choose_algorithm(gfx942, "6.12.57", "", std::nullopt);
	EXPECT_EQ(c.algorithm, MaskAlgorithm::D);
	EXPECT_TRUE(c.notes.empty());
	// amdgpu-dkms loaded: its walk, no warning about the in-tree driver.
	c = gpuslot::choose_algorithm(gfx942, "6.6.30", "6.16.13", std::nullopt);
	EXPECT_TRUE(c.notes.empty());
}

TEST(CuMask, RadeonViiIsSeRoundRobinUnderEveryAlgorithm)
{
	auto s = shape_of("radeon-vii-gfx906");
	for (auto a : {MaskAlgorithm::A, MaskAlgorithm::B, MaskAlgorithm::C,
		       MaskAlgorithm::D}) {
		auto slots = gpuslot::mask_bit_slots(s, a);
		ASSERT_EQ(slots.size(), 60u) << gpuslot::algorithm_name(a);
		for (unsigned int i = 0; i < 60; i++)
			ASSERT_EQ(slots[i], (CuSlot{0, i % 4, 0, i / 4}))
				<< "bit " << i << ", " << gpuslot::algorithm_name(a);
	}
}

TEST(CuMask, Mi100IsSeRoundRobinOverEightEngines)
{
	auto slots = gpuslot::mask_bit_slots(shape_of("mi100-gfx908"),
					     MaskAlgorithm::C);
	ASSERT_EQ(slots.size(), 120u);
	for (unsigned int i = 0; i < 120; i++)
		ASSERT_EQ(slots[i], (CuSlot{0, i % 8, 0, i / 8})) << i;
}

TEST(CuMask, VersionBMatchesTheKernelCommentExample)
{
	// "4 SE x 2 SH: bit0 -> SE0/SH0/CU0, bit1 -> SE1/SH0/CU0,
	//  bit4 -> SE0/SH1/CU0, bit8 -> SE0/SH0/CU1"
	auto slots = gpuslot::mask_bit_slots(shape_of("rx6900xt-gfx1030"),
					     MaskAlgorithm::B);
	ASSERT_EQ(slots.size(), 80u);
	EXPECT_EQ(slots[0], (CuSlot{0, 0, 0, 0}));
	EXPECT_EQ(slots[1], (CuSlot{0, 1, 0, 0}));
	EXPECT_EQ(slots[4], (CuSlot{0, 0, 1, 0}));
	EXPECT_EQ(slots[8], (CuSlot{0, 0, 0, 1}));
	for (unsigned int i = 0; i < 80; i++)
		ASSERT_EQ(slots[i], (CuSlot{0, i % 4, (i / 4) % 2, i / 8})) << i;
}

TEST(CuMask, Rdna2PairsBitsIntoWgps)
{
	// C/D: pair p = i/2 -> SE p%4, SH (p/4)%2, WGP p/8.
	auto s = shape_of("rx6900xt-gfx1030");
	for (auto a : {MaskAlgorithm::C, MaskAlgorithm::D}) {
		auto slots = gpuslot::mask_bit_slots(s, a);
		ASSERT_EQ(slots.size(), 80u);
		for (unsigned int i = 0; i < 80; i++) {
			unsigned int p = i / 2;
			ASSERT_EQ(slots[i], (CuSlot{0, p % 4, (p / 4) % 2, 2 * (p / 8)}))
				<< i;
		}
	}
	// One bit of a pair enables the whole WGP: both register bits.
	auto regs = gpuslot::se_registers(s, MaskAlgorithm::C, {0x1, 0, 0});
	EXPECT_EQ(regs, (std::vector<uint32_t>{0x3, 0, 0, 0}));
	regs = gpuslot::se_registers(s, MaskAlgorithm::C, {0x300, 0, 0}); // p=4
	EXPECT_EQ(regs, (std::vector<uint32_t>{0x3u << 16, 0, 0, 0}));
}

TEST(CuMask, Rdna3SixEngines)
{
	// C/D: p = i/2 -> SE p%6, SH (p/6)%2, WGP p/12.
	auto slots = gpuslot::mask_bit_slots(shape_of("rx7900xtx-gfx1100"),
					     MaskAlgorithm::C);
	ASSERT_EQ(slots.size(), 96u);
	for (unsigned int i = 0; i < 96; i++) {
		unsigned int p = i / 2;
		ASSERT_EQ(slots[i], (CuSlot{0, p % 6, (p / 6) % 2, 2 * (p / 12)})) << i;
	}
}

TEST(CuMask, Mi300xInterleavesXccsFirst)
{
	// D: bit i -> XCC i%8; slot s = i/8 in it -> SE s%4, CU s/4 while
	// every SE has a CU in that column.
	auto s = shape_of("mi300x-gfx942-spx");
	EXPECT_TRUE(s.uniform_assumed);
	EXPECT_EQ(s.total(), 304u);
	auto slots = gpuslot::mask_bit_slots(s, MaskAlgorithm::D);
	ASSERT_EQ(slots.size(), 304u);
	for (unsigned int i = 0; i < 36 * 8; i++) {
		unsigned int slot = i / 8;
		ASSERT_EQ(slots[i], (CuSlot{i % 8, slot % 4, 0, slot / 4})) << i;
	}
	// 38 CUs per XCC: the tenth column exists on two SEs only.
	EXPECT_EQ(slots[36 * 8], (CuSlot{0, 0, 0, 9}));
	EXPECT_EQ(slots[37 * 8 + 7], (CuSlot{7, 1, 0, 9}));
}

TEST(CuMask, VersionAIgnoresShaderArrays)
{
	// The bug B fixed: on 2-SH chips, A fills SH0's register columns
	// past its CUs before SH1 gets any.
	auto slots = gpuslot::mask_bit_slots(shape_of("rx6900xt-gfx1030"),
					     MaskAlgorithm::A);
	EXPECT_EQ(slots[4], (CuSlot{0, 0, 0, 1}));
	EXPECT_EQ(slots[40], (CuSlot{0, 0, 0, 10})); // SH0 has CUs 0..9 only
}

TEST(CuMask, RegistersOfSePackedAndFullMasks)
{
	auto s = shape_of("radeon-vii-gfx906");
	// Every 4th bit from 0: all of SE0.
	std::vector<uint32_t> se0 = {0x11111111, 0x11111111};
	EXPECT_EQ(gpuslot::se_registers(s, MaskAlgorithm::C, se0),
		  (std::vector<uint32_t>{0x7fff, 0, 0, 0}));
	std::vector<uint32_t> all = {0xffffffff, 0xffffffff};
	EXPECT_EQ(gpuslot::se_registers(s, MaskAlgorithm::C, all),
		  (std::vector<uint32_t>{0x7fff, 0x7fff, 0x7fff, 0x7fff}));
	// A short mask enables only the slots it covers.
	EXPECT_EQ(gpuslot::se_registers(s, MaskAlgorithm::C, {0xf}),
		  (std::vector<uint32_t>{1, 1, 1, 1}));
}

} // namespace
