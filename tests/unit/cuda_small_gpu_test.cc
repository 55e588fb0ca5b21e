// SPDX-License-Identifier: GPL-2.0
// libgpuslot's cuda backend on a Jetson-sized GPU (issue 37), against a
// test double of an Orin Nano's driver: 8 SMs, compute capability 8.7,
// splits rounded up to at least 4 SMs in multiples of 2 (CUDA 13.0's
// Green Contexts guideline for 8.x; no Orin was measured). The layout is
// the one gpuslotd plans for k = 2 (nv_small_gpu_test.cc): groups of 4,
// two of them. Also a driver of CUDA 12.4 to 12.6 (JetPack 6), which
// reports no co-scheduled alignment, and a layout planned for groups the
// driver does not make.
#include <gtest/gtest.h>

#include <linux/gpuslot.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "cuda_backend.hpp"

namespace {

struct OrinNanoDriver {
	static constexpr unsigned int kSms = 8, kMinSms = 4;
	static inline std::vector<std::string> calls;
	static inline unsigned int alignment = 2; // 0: a driver before CUDA 13.0
	static inline unsigned int group_sms = 0; // of the last split
	static inline uintptr_t next = 0x100;

	static void reset()
	{
		calls.clear();
		alignment = 2;
		group_sms = 0;
		next = 0x100;
	}

	static gpuslot::CudaApi api()
	{
		gpuslot::CudaApi a{};
		a.device_count = [](int *n) {
			*n = 1;
			return 0;
		};
		a.device_by_pci_bus_id = [](int *d, const char *) {
			*d = 0;
			return 0;
		};
		a.open_device = [](int) { return 0; };
		// Rounded up to the smallest partition, then to an even count.
		a.split = [](int, unsigned int g, gpuslot::CudaSplit *out) {
			calls.push_back("split " + std::to_string(g));
			group_sms = std::max(kMinSms, (g + 1) / 2 * 2);
			*out = {kSms / group_sms, group_sms, alignment};
			return 0;
		};
		a.green_stream = [](int, const unsigned int *idx, unsigned int n, int, void **s,
				    void **g, unsigned int *sms, unsigned int *coscheduled) {
			std::string c = "green";
			for (unsigned int i = 0; i < n; i++)
				c += " " + std::to_string(idx[i]);
			calls.push_back(c);
			*s = reinterpret_cast<void *>(next++);
			*g = reinterpret_cast<void *>(next++);
			*sms = n * group_sms;
			*coscheduled = alignment;
			return 0;
		};
		a.plain_stream = [](int, int, void **s) {
			calls.push_back("plain");
			*s = reinterpret_cast<void *>(next++);
			return 0;
		};
		a.priority_range = [](int, int *l, int *g) {
			*l = 0;
			*g = -5;
			return 0;
		};
		a.stream_priority = [](void *, int *p) {
			*p = 0;
			return 0;
		};
		a.stream_synchronize = [](void *) { return 0; };
		a.destroy = [](void *, void *) { return 0; };
		a.error_string = [](int) { return "invalid value"; };
		a.mps_running = [] { return true; };
		return a;
	}
};

gpuslot::SlotLayout groups_of(unsigned int unit_size, unsigned int nr_units,
			      std::vector<std::vector<uint32_t>> masks)
{
	gpuslot::SlotLayout l;
	l.k = unsigned(masks.size());
	l.unit_kind = GPUSLOT_UNIT_NV_SM_GROUP;
	l.unit_size = unit_size;
	l.nr_units = nr_units;
	l.masks = std::move(masks);
	return l;
}

gpuslot::DeviceChoice device0()
{
	gpuslot::DeviceChoice d;
	d.ordinal = 0;
	return d;
}

class CudaSmallGpu : public testing::Test {
protected:
	void SetUp() override { OrinNanoDriver::reset(); }
	gpuslot::StreamSet set;
	std::string error;
};

TEST_F(CudaSmallGpu, TwoPartitionsOfFourSms)
{
	gpuslot::CudaBackend b(OrinNanoDriver::api(), device0());
	ASSERT_EQ(b.build(groups_of(4, 2, {{0x1}, {0x2}}), 0x3, &set, &error), 0) << error;
	EXPECT_EQ(OrinNanoDriver::calls,
		  (std::vector<std::string>{"split 4", "green 0", "green 1"}));
	EXPECT_EQ(set.units, (std::vector<unsigned int>{4, 4}));
	EXPECT_EQ(set.slots, 0x3u);
	b.destroy(&set);

	// One slot of both groups beside one on the whole GPU.
	OrinNanoDriver::calls.clear();
	ASSERT_EQ(b.build(groups_of(4, 2, {{0x3}, {}}), 0x3, &set, &error), 0) << error;
	EXPECT_EQ(OrinNanoDriver::calls,
		  (std::vector<std::string>{"split 4", "green 0 1", "plain"}));
	EXPECT_EQ(set.units, (std::vector<unsigned int>{8, 0}));
}

// JetPack 6's driver reports no alignment for the device or a context:
// nothing to compare, and the partitions are built.
TEST_F(CudaSmallGpu, ADriverThatReportsNoAlignmentStillGetsItsPartitions)
{
	OrinNanoDriver::alignment = 0;
	gpuslot::CudaBackend b(OrinNanoDriver::api(), device0());
	ASSERT_EQ(b.build(groups_of(4, 2, {{0x1}, {0x2}}), 0x3, &set, &error), 0) << error;
	EXPECT_EQ(set.units, (std::vector<unsigned int>{4, 4}));
}

// Groups of 2 (planned for another GPU, or with IGNORE_SM_COSCHEDULING
// in mind) are below this driver's smallest partition: it makes groups
// of 4, and the layout is refused before any context is made.
TEST_F(CudaSmallGpu, GroupsBelowTheSmallestPartitionAreRefused)
{
	gpuslot::CudaBackend b(OrinNanoDriver::api(), device0());
	EXPECT_EQ(b.build(groups_of(2, 4, {{0x3}, {0xc}}), 0x3, &set, &error), -EIO);
	EXPECT_EQ(error, "the driver splits this GPU into 2 groups of 4 SMs when asked for 2 SMs, "
			 "the layout into 4 of 2 SMs: it was planned for another GPU or driver");
	EXPECT_EQ(OrinNanoDriver::calls, std::vector<std::string>{"split 2"});
	EXPECT_EQ(set.slots, 0u);
}

} // namespace
