// SPDX-License-Identifier: GPL-2.0
// The cuda backend against a test double of the driver-API steps it calls
// (CudaApi): which groups each slot's green context gets, the device it
// picks by PCI address (also when CUDA_VISIBLE_DEVICES renumbers), the
// check that the layout fits the driver's split, the MPS notice, and every
// error path.
#include <gtest/gtest.h>

#include <linux/gpuslot.h>

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cuda_backend.hpp"

namespace {

struct CudaDouble {
	static inline std::vector<std::string> calls;
	static inline int fail_open = 0, fail_green_at = -1, greens = 0;
	static inline unsigned int split_groups = 4, split_sms = 32;
	static inline unsigned int granted_short = 0, granted_coscheduled = 8;
	static inline bool mps = false;
	static inline uintptr_t next = 0x100;
	static inline std::vector<std::string> visible;
	// CUDA stream priorities: the device's range, what each stream was
	// made at (by handle), and a driver that clamps (gives @clamp_to).
	static inline int least = 0, greatest = -5, clamp_at = 1;
	static inline std::map<uintptr_t, int> priorities;

	static void reset()
	{
		visible = {"0000:19:00.0", "0000:3B:00.0", "0000:4C:00.0", "0000:5D:00.0"};
		calls.clear();
		fail_open = 0;
		fail_green_at = -1;
		greens = 0;
		split_groups = 4;
		split_sms = 32;
		granted_short = 0;
		granted_coscheduled = 8;
		mps = false;
		next = 0x100;
		least = 0;
		greatest = -5;
		clamp_at = 1;
		priorities.clear();
	}

	// A driver clamps out-of-range priorities silently; this one clamps
	// at @clamp_at (1: it does not), whatever range it reports.
	static int clamp(int priority)
	{
		return clamp_at != 1 && priority < clamp_at ? clamp_at : priority;
	}

	static gpuslot::CudaApi api()
	{
		gpuslot::CudaApi a;
		a.device_count = [](int *n) {
			*n = int(visible.size());
			return 0;
		};
		a.device_by_pci_bus_id = [](int *d, const char *id) {
			for (size_t i = 0; i < visible.size(); i++)
				if (strcasecmp(visible[i].c_str(), id) == 0) {
					*d = int(i);
					return 0;
				}
			return 101; // CUDA_ERROR_INVALID_DEVICE
		};
		a.open_device = [](int d) {
			calls.push_back("open " + std::to_string(d));
			return fail_open;
		};
		a.split = [](int, unsigned int g, gpuslot::CudaSplit *out) {
			calls.push_back("split " + std::to_string(g));
			*out = {split_groups, split_sms, 8};
			return 0;
		};
		a.green_stream = [](int, const unsigned int *idx, unsigned int n, int priority,
				    void **s, void **g, unsigned int *sms, unsigned int *coscheduled) {
			std::string c = "green";
			for (unsigned int i = 0; i < n; i++)
				c += " " + std::to_string(idx[i]);
			calls.push_back(priority ? c + " prio " + std::to_string(priority) : c);
			if (greens++ == fail_green_at)
				return 2; // CUDA_ERROR_OUT_OF_MEMORY
			priorities[next] = clamp(priority);
			*s = reinterpret_cast<void *>(next++);
			*g = reinterpret_cast<void *>(next++);
			*sms = 32 * n - granted_short;
			*coscheduled = granted_coscheduled;
			return 0;
		};
		a.plain_stream = [](int, int priority, void **s) {
			calls.push_back(priority ? "plain prio " + std::to_string(priority) : "plain");
			priorities[next] = clamp(priority);
			*s = reinterpret_cast<void *>(next++);
			return 0;
		};
		a.priority_range = [](int, int *l, int *g) {
			calls.push_back("range");
			*l = least;
			*g = greatest;
			return 0;
		};
		a.stream_priority = [](void *s, int *p) {
			*p = priorities.at(reinterpret_cast<uintptr_t>(s));
			return 0;
		};
		a.stream_synchronize = [](void *) { return 0; };
		a.destroy = [](void *s, void *g) {
			calls.push_back("destroy " + std::to_string(reinterpret_cast<uintptr_t>(s)) +
					(g ? " green" : ""));
			return 0;
		};
		a.error_string = [](int e) { return e == 2 ? "out of memory" : "invalid device"; };
		a.mps_running = [] { return mps; };
		return a;
	}
};

gpuslot::DeviceChoice ordinal(int n)
{
	gpuslot::DeviceChoice d;
	d.ordinal = n;
	return d;
}

gpuslot::SlotLayout groups(std::vector<std::vector<uint32_t>> masks, unsigned int nr = 4)
{
	gpuslot::SlotLayout l;
	l.k = masks.size();
	l.unit_kind = GPUSLOT_UNIT_NV_SM_GROUP;
	l.unit_size = 32;
	l.nr_units = nr;
	l.masks = std::move(masks);
	return l;
}

class CudaBackend : public testing::Test {
protected:
	void SetUp() override
	{
		CudaDouble::reset();
		unsetenv("CUDA_VISIBLE_DEVICES");
	}
	gpuslot::StreamSet set;
	std::vector<void *> &streams = set.streams;
	std::string error;
};

TEST_F(CudaBackend, OneGreenContextPerSlotFromItsGroups)
{
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(1));
	ASSERT_EQ(b.build(groups({{0x3}, {0x4}, {}, {0x8}}), 0xf, &set, &error), 0) << error;
	EXPECT_EQ(CudaDouble::calls, (std::vector<std::string>{"open 1", "split 32", "green 0 1",
							       "green 2", "plain", "green 3"}));
	EXPECT_EQ(streams.size(), 4u);
	// What the driver granted, read back.
	EXPECT_EQ(set.units, (std::vector<unsigned int>{64, 32, 0, 32}));
	EXPECT_EQ(b.set_queues(groups({{0x3}}), 0x1), 0u);
	EXPECT_NE(b.notice().find("nvidia-cuda-mps-control -d"), std::string::npos);

	CudaDouble::calls.clear();
	b.destroy(&set);
	EXPECT_EQ(CudaDouble::calls.size(), 4u);
	EXPECT_EQ(CudaDouble::calls[0], "destroy 256 green");
	EXPECT_EQ(CudaDouble::calls[2], "destroy 260");
}

// Issue 32: each slot's stream at its priority, p levels above the default
// being CUDA's least - p, read back from the stream.
TEST_F(CudaBackend, EachStreamIsMadeAtItsSlotsPriority)
{
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(1));
	auto l = groups({{}, {0x4}, {0x8}});
	l.priorities = {5, 1, 0};
	ASSERT_EQ(b.build(l, 0x7, &set, &error), 0) << error;
	EXPECT_EQ(CudaDouble::calls,
		  (std::vector<std::string>{"open 1", "split 32", "range", "plain prio -5",
					    "green 2 prio -1", "green 3"}));
	EXPECT_EQ(set.priorities, (std::vector<unsigned int>{5, 1, 0}));
	for (unsigned int s = 0; s < 3; s++)
		EXPECT_EQ(CudaDouble::priorities.at(reinterpret_cast<uintptr_t>(streams[s])),
			  -int(l.priorities[s]));

	// A device whose default is not 0: levels count from its least.
	b.destroy(&set);
	CudaDouble::calls.clear();
	CudaDouble::least = 2;
	CudaDouble::greatest = -1;
	l.priorities = {3, 0, 0};
	ASSERT_EQ(b.build(l, 0x1, &set, &error), 0) << error;
	EXPECT_EQ(CudaDouble::calls, (std::vector<std::string>{"range", "plain prio -1"}));
}

TEST_F(CudaBackend, APriorityBeyondTheDevicesRangeIsRefused)
{
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(0));
	auto l = groups({{0x1}, {0x2}});
	l.priorities = {6, 0};
	EXPECT_EQ(b.build(l, 0x3, &set, &error), -EOPNOTSUPP);
	EXPECT_NE(error.find("slot 0's priority 6 is beyond this GPU's stream priorities"),
		  std::string::npos)
		<< error;
	EXPECT_NE(error.find("CUDA offers 5 levels above the default (priorities 0 .. -5)"),
		  std::string::npos)
		<< error;
	// Nothing was created.
	EXPECT_EQ(std::count_if(CudaDouble::calls.begin(), CudaDouble::calls.end(),
				[](const std::string &c) { return c.rfind("green", 0) == 0; }),
		  0);
	// A slot left out of the set does not count.
	EXPECT_EQ(b.build(l, 0x2, &set, &error), 0) << error;
}

TEST_F(CudaBackend, AStreamWhosePriorityReadsBackOtherwiseIsRefused)
{
	// A driver that clamps -3 to -2 while it says it offers 0 .. -5.
	CudaDouble::clamp_at = -2;
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(0));
	auto l = groups({{0x1}, {0x2}});
	l.priorities = {1, 3};
	EXPECT_EQ(b.build(l, 0x3, &set, &error), -EIO);
	EXPECT_NE(error.find("slot 1's stream has CUDA priority -2; its layout says 3 levels above "
			     "the default, CUDA priority -3"),
		  std::string::npos)
		<< error;
	// Slot 0's stream, made first, is undone, and so is slot 1's.
	EXPECT_EQ(CudaDouble::calls.back(), "destroy 256 green") << "the first slot's is undone";
	EXPECT_EQ(std::count(CudaDouble::calls.begin(), CudaDouble::calls.end(), "destroy 258 green"),
		  1);
}

TEST_F(CudaBackend, UnderMpsThereIsNothingToSay)
{
	CudaDouble::mps = true;
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(0));
	ASSERT_EQ(b.build(groups({{0x1}, {0x2}}), 0x3, &set, &error), 0);
	EXPECT_EQ(b.notice(), "");
}

TEST_F(CudaBackend, ALayoutForAnotherGpuIsRefused)
{
	CudaDouble::split_groups = 8;
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(0));
	EXPECT_EQ(b.build(groups({{0x1}, {0x2}}), 0x3, &set, &error), -EIO);
	EXPECT_EQ(error, "the driver splits this GPU into 8 groups of 32 SMs when asked for 32 SMs, "
			 "the layout into 4 of 32 SMs: it was planned for another GPU or driver");
	EXPECT_EQ(set.slots, 0u);

	// Same count, other group size (a driver that rounds the request up).
	CudaDouble::reset();
	CudaDouble::split_sms = 40;
	EXPECT_EQ(b.build(groups({{0x1}, {0x2}}), 0x3, &set, &error), -EIO);
	EXPECT_NE(error.find("4 groups of 40 SMs when asked for 32"), std::string::npos) << error;
	CudaDouble::split_sms = 0; // groups of different sizes
	EXPECT_EQ(b.build(groups({{0x1}, {0x2}}), 0x3, &set, &error), -EIO);
	EXPECT_NE(error.find("4 groups of unequal SMs"), std::string::npos) << error;
	EXPECT_EQ(set.slots, 0u);
	EXPECT_EQ(std::count_if(CudaDouble::calls.begin(), CudaDouble::calls.end(),
				[](auto &c) { return c.starts_with("green"); }),
		  0);
}

// What a green context really has is checked against the layout; a slot
// that differs is an error, and nothing built stays behind.
TEST_F(CudaBackend, AContextThatIsNotTheLayoutsPartitionIsRefused)
{
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(0));
	CudaDouble::granted_short = 2;
	EXPECT_EQ(b.build(groups({{0x3}, {0x4}}), 0x3, &set, &error), -EIO);
	EXPECT_EQ(error, "slot 0's green context has 62 SMs co-scheduled in groups of 8; its "
			 "layout says 64 SMs in groups of 8");
	EXPECT_EQ(CudaDouble::calls.back(), "destroy 256 green");
	EXPECT_EQ(set.slots, 0u);

}

// A context whose SMs are not co-scheduled as the device's are loses
// thread-block clusters, on which cuDNN and cuBLAS kernels fail (contexts
// of IGNORE_SM_COSCHEDULING groups on an H100 read back 2, not 8).
TEST_F(CudaBackend, AContextThatLostCoSchedulingIsRefused)
{
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(0));
	CudaDouble::granted_coscheduled = 2;
	EXPECT_EQ(b.build(groups({{0x1}, {0x2}}), 0x3, &set, &error), -EIO);
	EXPECT_EQ(error, "slot 0's green context has 32 SMs co-scheduled in groups of 2; its "
			 "layout says 32 SMs in groups of 8");
	EXPECT_EQ(CudaDouble::calls.back(), "destroy 256 green");
	EXPECT_EQ(set.slots, 0u);
}

TEST_F(CudaBackend, AFailedContextUndoesTheOnesBeforeIt)
{
	CudaDouble::fail_green_at = 1;
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(0));
	EXPECT_EQ(b.build(groups({{0x1}, {0x2}}), 0x3, &set, &error), -EIO);
	EXPECT_EQ(error, "a green context for slot 1: out of memory");
	EXPECT_EQ(CudaDouble::calls.back(), "destroy 256 green");
	EXPECT_EQ(set.slots, 0u);
}

TEST_F(CudaBackend, TheDomainsGpuIsFoundByItsPciAddress)
{
	gpuslot::DeviceChoice d;
	d.domain = 2;
	d.pci_bus_id = "0000:4c:00.0";
	gpuslot::CudaBackend b(CudaDouble::api(), d);
	ASSERT_EQ(b.build(groups({{0x1}}), 0x1, &set, &error), 0) << error;
	EXPECT_EQ(CudaDouble::calls[0], "open 2");

	// CUDA_VISIBLE_DEVICES=2,3 renumbers: it is CUDA's device 0 now.
	CudaDouble::reset();
	setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
	CudaDouble::visible = {"0000:4C:00.0", "0000:5D:00.0"};
	gpuslot::CudaBackend renumbered(CudaDouble::api(), d);
	ASSERT_EQ(renumbered.build(groups({{0x1}}), 0x1, &set, &error), 0) << error;
	EXPECT_EQ(CudaDouble::calls[0], "open 0");
	EXPECT_EQ(renumbered.device_ordinal(), 0);

	// ... and hidden: an error, never another GPU.
	CudaDouble::reset();
	setenv("CUDA_VISIBLE_DEVICES", "3", 1);
	CudaDouble::visible = {"0000:5D:00.0"};
	gpuslot::CudaBackend hidden(CudaDouble::api(), d);
	EXPECT_EQ(hidden.build(groups({{0x1}}), 0x1, &set, &error), -ENODEV);
	EXPECT_EQ(error, "domain 2's GPU 0000:4c:00.0 is not visible to CUDA in this process "
			 "(CUDA_VISIBLE_DEVICES=3 hides it?)");
	EXPECT_TRUE(CudaDouble::calls.empty());
}

TEST_F(CudaBackend, NoDeviceAndForeignUnits)
{
	CudaDouble::fail_open = 101;
	gpuslot::CudaBackend failing(CudaDouble::api(), ordinal(3));
	EXPECT_EQ(failing.build(groups({{0x1}}), 0x1, &set, &error), -ENODEV);
	EXPECT_EQ(error, "CUDA device 3: invalid device");

	CudaDouble::reset();
	gpuslot::CudaBackend b(CudaDouble::api(), ordinal(3));
	auto l = groups({{0x1}});
	l.unit_kind = GPUSLOT_UNIT_AMD_CU;
	EXPECT_EQ(b.build(l, 0x1, &set, &error), -EOPNOTSUPP);
	EXPECT_TRUE(CudaDouble::calls.empty());

	// No partitions: plain streams, no split, no MPS notice.
	gpuslot::SlotLayout none;
	none.k = 2;
	none.masks = {{}, {}};
	ASSERT_EQ(b.build(none, 0x3, &set, &error), 0);
	EXPECT_EQ(CudaDouble::calls, (std::vector<std::string>{"open 3", "plain", "plain"}));
	EXPECT_EQ(b.notice(), "");
}

} // namespace
