// SPDX-License-Identifier: GPL-2.0
// Issue 32's layouts: a slot is a partition (or the whole GPU) and a stream
// priority. The planner's protect preset on the Radeon VII fixture and on
// the H100's shape, sizes with `all`, priorities in the layout gpuslotd
// writes, and what lint says of priorities.
#include <gtest/gtest.h>

#include <algorithm>

#include "gpuslotd/daemon.hpp"
#include "amd/lint.hpp"
#include "plan/slot_layout.hpp"

namespace {

gpuslot::GpuNode radeon_vii()
{
	auto r = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) / "kfd" /
					"radeon-vii-gfx906");
	EXPECT_EQ(r.error, "");
	return r.gpus.at(0);
}

// The H100 (132 SMs) and the co-scheduled splits its driver made
// (nv_plan_test.cc), compute capability 9.0.
gpuslot::NvGpu h100()
{
	gpuslot::NvGpu g;
	g.ordinal = 0;
	g.name = "NVIDIA H100 80GB HBM3";
	g.sm_count = 132;
	g.min_partition_sms = 8;
	g.coscheduled_alignment = 8;
	g.pci_bus_id = "0000:19:00.0";
	g.splits = {{8, 15},  {16, 8}, {24, 5}, {32, 4},  {40, 3},  {48, 2},  {56, 2},  {64, 2},
		    {72, 1},  {80, 1}, {88, 1}, {96, 1},  {104, 1}, {112, 1}, {120, 1}, {128, 1}};
	g.cc_major = 9;
	g.cc_minor = 0;
	return g;
}

std::string joined(const std::vector<std::string> &notes)
{
	std::string out;
	for (const auto &n : notes)
		out += n + "\n";
	return out;
}

std::string joined(const std::vector<gpuslot::LintFinding> &f)
{
	std::string out;
	for (const auto &x : f)
		out += x.text() + "\n";
	return out;
}

unsigned int units(const gpuslot_partition &p)
{
	unsigned int n = 0;
	for (uint64_t w : p.units)
		n += unsigned(__builtin_popcountll(w));
	return n;
}

gpuslot::GpuSettings protect(std::optional<unsigned int> reserve = {})
{
	gpuslot::GpuSettings s;
	s.layout = gpuslot::LayoutKind::protect;
	s.reserve_percent = reserve;
	return s;
}

TEST(SlotLayout, ProtectOnTheH100IsSlotZeroOnTheWholeGpuAtAHigherPriority)
{
	gpuslot::ModuleLayout l;
	std::vector<std::string> notes;
	std::string err;
	ASSERT_TRUE(gpuslot::plan_nv_layout(h100(), 4, protect(), 0, &l, &notes, &err)) << err;
	ASSERT_EQ(l.partitions.size(), 4u);
	EXPECT_TRUE(gpuslot::partition_is_whole(l.partitions[0]));
	EXPECT_EQ(l.priorities, (std::vector<unsigned int>{gpuslot::kProtectPriority, 0, 0, 0}));
	EXPECT_EQ(gpuslot::kProtectPriority, 1u);
	// 75% of 132 SMs is 99: three confined slots of 33, rounded to whole
	// groups of 8 and a split the driver makes: 3 x 32, 36 SMs reserved.
	EXPECT_EQ(l.unit_size, 32u);
	unsigned int confined = 0;
	for (unsigned int j = 1; j < 4; j++) {
		EXPECT_EQ(units(l.partitions[j]), 1u);
		confined += units(l.partitions[j]) * l.unit_size;
		for (unsigned int i = 1; i < j; i++)
			for (size_t w = 0; w < GPUSLOT_UNIT_WORDS; w++)
				EXPECT_EQ(l.partitions[i].units[w] & l.partitions[j].units[w], 0u);
	}
	EXPECT_EQ(confined, 96u);
	const std::string t = joined(notes);
	EXPECT_NE(t.find("layout protect: slot 0 runs on the whole GPU (132 SMs) at priority 1, "
			 "slots 1-3 at priority 0 confined to 96 SMs: where they meet the GPU "
			 "starts slot 0's kernels first (stream priority), and the 36 SMs no "
			 "confined slot may use (the reserve, 25% asked)"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("the reserve's default (25%) is the one measured on the H100"), std::string::npos) << t;
	EXPECT_NE(t.find("let the protected task hold slot 0 across its jobs"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("at most 4 kernels pending at once (one stream per slot, one holder per "
			 "slot), within the GPU's 128 task slots"),
		  std::string::npos) << t;
	EXPECT_EQ(t.find("belong to no slot"), std::string::npos) << t;
	// The layout protects: lint finds nothing wrong with its priorities.
	const auto f = gpuslot::lint_priorities(l.partitions, l.priorities,
						{GPUSLOT_UNIT_NV_SM_GROUP, 128, "compute capability 9.0", false});
	EXPECT_TRUE(f.empty()) << joined(f);

	// A larger reserve leaves the confined slots less; k = 2.
	notes.clear();
	ASSERT_TRUE(gpuslot::plan_nv_layout(h100(), 2, protect(50), 0, &l, &notes, &err)) << err;
	EXPECT_EQ(units(l.partitions[1]) * l.unit_size, 64u);
	EXPECT_FALSE(gpuslot::plan_nv_layout(h100(), 1, protect(), 0, &l, &notes, &err));
	EXPECT_NE(err.find("k >= 2"), std::string::npos) << err;
}

TEST(SlotLayout, ProtectOnTheRadeonViiKeepsPriorityZeroAndSaysWhy)
{
	const auto gpu = radeon_vii();
	gpuslot::ModuleLayout l;
	std::vector<std::string> notes;
	std::string err;
	ASSERT_TRUE(gpuslot::plan_layout(gpu, gpuslot::uniform_shape(gpu), gpuslot::MaskAlgorithm::C,
					 4, protect(), 24, &l, &notes, &err))
		<< err;
	// 45 CUs for three slots: one SE each; SE 3 is slot 0's reserve.
	ASSERT_EQ(l.partitions.size(), 4u);
	EXPECT_TRUE(gpuslot::partition_is_whole(l.partitions[0]));
	EXPECT_EQ(gpuslot::partition_text(l.partitions[1]), "0x111111111111111");
	EXPECT_EQ(gpuslot::partition_text(l.partitions[2]), "0x222222222222222");
	EXPECT_EQ(gpuslot::partition_text(l.partitions[3]), "0x444444444444444");
	// HIP makes no CU-masked stream at a priority; slot 0's plain stream
	// could have one, at an HQD per client: 0 everywhere, said why.
	EXPECT_EQ(l.priorities, (std::vector<unsigned int>{0, 0, 0, 0}));
	const std::string t = joined(notes);
	EXPECT_NE(t.find("layout protect: slot 0 runs on the whole GPU (60 CUs), slots 1-3 confined "
			 "to 45 CUs, all at priority 0: HIP makes no CU-masked stream at a priority, "
			 "and slot 0's plain stream could have one"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("takes a queue of HIP's high-priority pool, one more HQD each"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("the reserve of 15 CUs no confined slot may use (25% asked)"),
		  std::string::npos) << t;
	EXPECT_EQ(t.find("libgpuslot refuses"), std::string::npos) << t;
}

TEST(SlotLayout, SizesWithAllAndPrioritiesGoIntoTheLayout)
{
	gpuslot::GpuSettings s;
	s.sizes = "all,25%,25%,25%";
	s.priorities = "5,0,0,0";
	gpuslot::ModuleLayout l;
	std::vector<std::string> notes;
	std::string err;
	ASSERT_TRUE(gpuslot::plan_nv_layout(h100(), 4, s, 0, &l, &notes, &err)) << err;
	EXPECT_TRUE(gpuslot::partition_is_whole(l.partitions[0]));
	EXPECT_EQ(l.priorities, (std::vector<unsigned int>{5, 0, 0, 0}));
	// 25% of 132 = 33 SMs, rounded to 32: three groups of 32.
	for (unsigned int j = 1; j < 4; j++)
		EXPECT_EQ(units(l.partitions[j]) * l.unit_size, 32u) << j;

	const auto gpu = radeon_vii();
	ASSERT_TRUE(gpuslot::plan_layout(gpu, gpuslot::uniform_shape(gpu), gpuslot::MaskAlgorithm::C,
					 4, s, 0, &l, &notes, &err))
		<< err;
	EXPECT_EQ(l.priorities, (std::vector<unsigned int>{5, 0, 0, 0})); // as asked, with a note
	EXPECT_NE(joined(notes).find("slot 0: HIP offers 1 priority level above the default for a "
				     "plain stream"),
		  std::string::npos) << joined(notes);
	// A confined slot at a priority: HIP has none for a CU-masked stream.
	s.sizes = "all,25%,25%,25%";
	s.priorities = "0,2,0,0";
	ASSERT_TRUE(gpuslot::plan_layout(gpu, gpuslot::uniform_shape(gpu), gpuslot::MaskAlgorithm::C,
					 4, s, 0, &l, &notes, &err))
		<< err;
	EXPECT_NE(joined(notes).find("slot 1: HIP makes no CU-masked stream at a priority"),
		  std::string::npos) << joined(notes);
	// Priorities alone, on equal partitions; for another k they are dropped
	// with a note, as sizes are.
	gpuslot::GpuSettings p;
	p.priorities = "0,2";
	notes.clear();
	ASSERT_TRUE(gpuslot::plan_nv_layout(h100(), 2, p, 0, &l, &notes, &err)) << err;
	EXPECT_EQ(l.priorities, (std::vector<unsigned int>{0, 2}));
	ASSERT_TRUE(gpuslot::plan_nv_layout(h100(), 3, p, 0, &l, &notes, &err)) << err;
	EXPECT_EQ(l.priorities, (std::vector<unsigned int>{0, 0, 0}));
	EXPECT_NE(joined(notes).find("priorities '0,2' are for k = 2, not 3: every slot at "
				     "priority 0"),
		  std::string::npos) << joined(notes);
	// Every slot on the whole GPU: k-exclusion with priorities.
	gpuslot::GpuSettings w;
	w.sizes = "all,all";
	ASSERT_TRUE(gpuslot::plan_nv_layout(h100(), 2, w, 0, &l, &notes, &err)) << err;
	EXPECT_TRUE(l.all_whole());
	EXPECT_GT(l.nr_units, 0u);
	// More than the GPU: refused with the reason.
	gpuslot::GpuSettings big;
	big.sizes = "all,100,100";
	EXPECT_FALSE(gpuslot::plan_nv_layout(h100(), 3, big, 0, &l, &notes, &err));
	EXPECT_NE(err.find("more than the 132"), std::string::npos) << err;
}

TEST(SlotLayout, TheConfinedSlotsNeverOverlapAtOnePriority)
{
	// Whatever the preset, k and reserve: what the planner hands the
	// module passes the module's overlap rule.
	const auto gpu = radeon_vii();
	for (unsigned int k = 2; k <= 8; k++)
		for (unsigned int r : {0u, 10u, 25u, 50u}) {
			gpuslot::ModuleLayout l;
			std::vector<std::string> notes;
			std::string err;
			for (bool nv : {false, true}) {
				const bool ok =
					nv ? gpuslot::plan_nv_layout(h100(), k, protect(r), 0, &l, &notes,
								     &err)
					   : gpuslot::plan_layout(gpu, gpuslot::uniform_shape(gpu),
								  gpuslot::MaskAlgorithm::C, k, protect(r),
								  0, &l, &notes, &err);
				if (!ok)
					continue; // too many slots for the GPU: refused, said
				const auto f = gpuslot::lint_priorities(
					l.partitions, l.priorities,
					{nv ? uint32_t(GPUSLOT_UNIT_NV_SM_GROUP)
					    : uint32_t(GPUSLOT_UNIT_AMD_CU),
					 128, "compute capability 9.0", false});
				for (const auto &x : f)
					EXPECT_NE(x.severity, gpuslot::LintFinding::kError)
						<< "k " << k << " reserve " << r << ": " << x.text();
			}
		}
}

TEST(LintPriorities, OverlapsThatProtectNothing)
{
	const gpuslot::PriorityLintGpu nv{GPUSLOT_UNIT_NV_SM_GROUP, 128, "compute capability 9.0",
					  false};
	gpuslot_partition whole{}, a{}, b{};
	a.units[0] = 0x3;
	b.units[0] = 0xc;
	// The whole GPU beside confined slots at its own priority.
	std::string t = joined(gpuslot::lint_priorities({whole, a, b}, {0, 0, 0}, nv));
	EXPECT_NE(t.find("warning: slots 0 and 1: slot 0 is the whole GPU and slot 1 shares its "
			 "SMs at the same priority 0: where they meet neither goes first, so the "
			 "overlap protects neither"),
		  std::string::npos) << t;
	// Two confined slots at one priority: the module refuses them.
	gpuslot_partition c{};
	c.units[0] = 0x6;
	t = joined(gpuslot::lint_priorities({a, c}, {1, 1}, nv));
	EXPECT_NE(t.find("error: slots 0 and 1: their partitions share units at the same priority 1"),
		  std::string::npos) << t;
	// At different priorities they may overlap.
	EXPECT_EQ(joined(gpuslot::lint_priorities({a, c}, {1, 0}, nv)), "");
	// A priority on a partition nobody shares orders nothing.
	t = joined(gpuslot::lint_priorities({a, b}, {5, 0}, nv));
	EXPECT_NE(t.find("warning: slot 0: priority 5 orders nothing: no slot of a lower priority "
			 "shares its SMs"),
		  std::string::npos) << t;
	// Every slot on the whole GPU at one priority: plain k-exclusion.
	EXPECT_EQ(joined(gpuslot::lint_priorities({whole, whole}, {0, 0}, nv)), "");
	// The protect layout itself is clean.
	EXPECT_EQ(joined(gpuslot::lint_priorities({whole, a, b}, {1, 0, 0}, nv)), "");
}

TEST(LintPriorities, SeedTwosTaskSlotsAndAmd)
{
	// A CC 6.1 GPU (GTX 1060, seed 002's) has 32 task slots.
	EXPECT_EQ(gpuslot::nv_task_slots(6, 1), 32u);
	EXPECT_EQ(gpuslot::nv_task_slots(9, 0), 128u);
	EXPECT_EQ(gpuslot::nv_task_slots(7, 2), 16u);
	EXPECT_EQ(gpuslot::nv_task_slots(0, 0), 0u);
	const gpuslot::PriorityLintGpu gtx{GPUSLOT_UNIT_NV_SM_GROUP, 32, "compute capability 6.1",
					   false};
	std::vector<gpuslot_partition> parts(40);
	std::vector<unsigned int> prios(40, 0);
	prios[0] = 3; // slot 0 whole, 39 more on the whole GPU too
	std::string t = joined(gpuslot::lint_priorities(parts, prios, gtx));
	EXPECT_NE(t.find("warning: layout: k = 40 slots can have 40 kernels pending at once (one "
			 "stream per slot, as libgpuslot makes them), 1 of them above the lowest "
			 "priority, more than the 32 task slots of a compute capability 6.1 GPU"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("seed 002, Fig. 12); use k <= 32 or one priority"), std::string::npos) << t;
	// One priority: no eviction, nothing to say.
	EXPECT_EQ(joined(gpuslot::lint_priorities(parts, std::vector<unsigned int>(40, 0), gtx)),
		  "");
	// AMD: a confined slot's priority other than 0 cannot be made, nor more
	// than one level above the default on the whole GPU; one level can.
	const gpuslot::PriorityLintGpu amd{GPUSLOT_UNIT_AMD_CU, 0, "gfx906", true};
	gpuslot_partition whole{}, a{};
	a.units[0] = 0xf;
	t = joined(gpuslot::lint_priorities({whole, a}, {0, 2}, amd));
	EXPECT_NE(t.find("warning: layout: confined slot(s) 1 have a priority other than 0 on an "
			 "AMD GPU: HIP makes no CU-masked stream at a priority"),
		  std::string::npos) << t;
	t = joined(gpuslot::lint_priorities({whole, a}, {2, 0}, amd));
	EXPECT_NE(t.find("warning: layout: slot(s) 0 on the whole GPU have a priority above 1 on "
			 "an AMD GPU: a plain HIP stream has 1 level above the default"),
		  std::string::npos) << t;
	EXPECT_EQ(joined(gpuslot::lint_priorities({whole, a}, {1, 0}, amd)), "");
}

// lint_masks: overlapping masks are an error only at one priority.
TEST(LintPriorities, MaskOverlapIsAnErrorOnlyAtOnePriority)
{
	const auto gpu = radeon_vii();
	const auto shape = gpuslot::uniform_shape(gpu);
	std::vector<uint32_t> a, b;
	ASSERT_TRUE(gpuslot::parse_mask("0xfffffffffffffff", &a));
	ASSERT_TRUE(gpuslot::parse_mask("0x111111111111111", &b));
	std::string t = joined(gpuslot::lint_masks(shape, gpuslot::MaskAlgorithm::C, {a, b}));
	EXPECT_NE(t.find("error: slots 0 and 1: they share bits 0, 4, 8, 12, ... at the same "
			 "priority 0"),
		  std::string::npos) << t;
	t = joined(gpuslot::lint_masks(shape, gpuslot::MaskAlgorithm::C, {a, b}, {1, 0}));
	EXPECT_EQ(t.find("share"), std::string::npos) << t;
}

} // namespace
