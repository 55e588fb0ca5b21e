// SPDX-License-Identifier: GPL-2.0
// The cuda backend against a test double of the driver-API steps it calls
// (CudaApi): which groups each slot's green context gets, the check that
// the layout fits the driver's split, the MPS notice, and every error path.
#include <gtest/gtest.h>

#include <linux/gpuslot.h>

#include <cerrno>
#include <string>
#include <vector>

#include "cuda_backend.hpp"

namespace {

struct CudaDouble {
	static inline std::vector<std::string> calls;
	static inline int fail_open = 0, fail_green_at = -1, greens = 0;
	static inline unsigned int split_groups = 4;
	static inline bool mps = false;
	static inline uintptr_t next = 0x100;

	static void reset()
	{
		calls.clear();
		fail_open = 0;
		fail_green_at = -1;
		greens = 0;
		split_groups = 4;
		mps = false;
		next = 0x100;
	}

	static gpuslot::CudaApi api()
	{
		gpuslot::CudaApi a;
		a.open_device = [](int d) {
			calls.push_back("open " + std::to_string(d));
			return fail_open;
		};
		a.split = [](int, unsigned int g, unsigned int *n) {
			calls.push_back("split " + std::to_string(g));
			*n = split_groups;
			return 0;
		};
		a.green_stream = [](int, const unsigned int *idx, unsigned int n, void **s,
				    void **g, unsigned int *sms) {
			std::string c = "green";
			for (unsigned int i = 0; i < n; i++)
				c += " " + std::to_string(idx[i]);
			calls.push_back(c);
			if (greens++ == fail_green_at)
				return 2; // CUDA_ERROR_OUT_OF_MEMORY
			*s = reinterpret_cast<void *>(next++);
			*g = reinterpret_cast<void *>(next++);
			*sms = 32 * n - 2; // the driver may grant fewer than asked
			return 0;
		};
		a.plain_stream = [](int, void **s) {
			calls.push_back("plain");
			*s = reinterpret_cast<void *>(next++);
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

class NullBudget : public gpuslot::QueueBudget {
public:
	int reserve(unsigned int, std::string *) override { return 0; }
	void unreserve(unsigned int) override {}
};

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
	void SetUp() override { CudaDouble::reset(); }
	NullBudget budget;
	std::vector<void *> streams;
	std::string error;
};

TEST_F(CudaBackend, OneGreenContextPerSlotFromItsGroups)
{
	gpuslot::CudaBackend b(CudaDouble::api(), 1);
	ASSERT_EQ(b.build(groups({{0x3}, {0x4}, {}, {0x8}}), budget, &streams, &error), 0)
		<< error;
	EXPECT_EQ(CudaDouble::calls, (std::vector<std::string>{"open 1", "split 32", "green 0 1",
							       "green 2", "plain", "green 3"}));
	EXPECT_EQ(streams.size(), 4u);
	// What the driver granted, read back.
	EXPECT_EQ(b.slot_sms(), (std::vector<unsigned int>{62, 30, 0, 30}));
	EXPECT_EQ(b.reserved(), 0u);
	EXPECT_NE(std::string(b.notice()).find("nvidia-cuda-mps-control -d"), std::string::npos);

	CudaDouble::calls.clear();
	b.destroy(&streams);
	EXPECT_EQ(CudaDouble::calls.size(), 4u);
	EXPECT_EQ(CudaDouble::calls[0], "destroy 256 green");
	EXPECT_EQ(CudaDouble::calls[2], "destroy 260");
}

TEST_F(CudaBackend, UnderMpsThereIsNothingToSay)
{
	CudaDouble::mps = true;
	gpuslot::CudaBackend b(CudaDouble::api(), 0);
	ASSERT_EQ(b.build(groups({{0x1}, {0x2}}), budget, &streams, &error), 0);
	EXPECT_STREQ(b.notice(), "");
}

TEST_F(CudaBackend, ALayoutForAnotherGpuIsRefused)
{
	CudaDouble::split_groups = 8;
	gpuslot::CudaBackend b(CudaDouble::api(), 0);
	EXPECT_EQ(b.build(groups({{0x1}, {0x2}}), budget, &streams, &error), -EIO);
	EXPECT_EQ(error, "the driver splits this GPU into 8 groups of 32 SMs, the layout into 4: "
			 "it was planned for another GPU");
	EXPECT_TRUE(streams.empty());
}

TEST_F(CudaBackend, AFailedContextUndoesTheOnesBeforeIt)
{
	CudaDouble::fail_green_at = 1;
	gpuslot::CudaBackend b(CudaDouble::api(), 0);
	EXPECT_EQ(b.build(groups({{0x1}, {0x2}}), budget, &streams, &error), -EIO);
	EXPECT_EQ(error, "a green context for slot 1: out of memory");
	EXPECT_EQ(CudaDouble::calls.back(), "destroy 256 green");
	EXPECT_TRUE(streams.empty());
}

TEST_F(CudaBackend, NoDeviceAndForeignUnits)
{
	CudaDouble::fail_open = 101;
	gpuslot::CudaBackend b(CudaDouble::api(), 3);
	EXPECT_EQ(b.build(groups({{0x1}}), budget, &streams, &error), -ENODEV);
	EXPECT_EQ(error, "CUDA device 3: invalid device");

	CudaDouble::reset();
	auto l = groups({{0x1}});
	l.unit_kind = GPUSLOT_UNIT_AMD_CU;
	EXPECT_EQ(b.build(l, budget, &streams, &error), -EOPNOTSUPP);
	EXPECT_TRUE(CudaDouble::calls.empty());

	// No partitions: plain streams, no split, no MPS notice.
	gpuslot::SlotLayout none;
	none.k = 2;
	none.masks = {{}, {}};
	ASSERT_EQ(b.build(none, budget, &streams, &error), 0);
	EXPECT_EQ(CudaDouble::calls, (std::vector<std::string>{"open 3", "plain", "plain"}));
	EXPECT_STREQ(b.notice(), "");
}

} // namespace
