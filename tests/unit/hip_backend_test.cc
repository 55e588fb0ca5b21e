// SPDX-License-Identifier: GPL-2.0
// The hip backend against a test double of the HIP entry points it calls
// (HipApi): the masks it passes, that it reserves hardware queues before
// it creates any, and every error path.
#include <gtest/gtest.h>

#include <linux/gpuslot.h>

#include <cerrno>
#include <string>
#include <vector>

#include "hip_backend.hpp"

namespace {

// The test double: records every call; fails where told to.
struct HipDouble {
	static inline std::vector<std::string> calls;
	static inline int fail_set_device = 0;
	static inline int fail_create_at = -1; // the n-th create fails
	static inline int creates = 0;
	static inline uintptr_t next_stream = 0x1000;

	static void reset()
	{
		calls.clear();
		fail_set_device = 0;
		fail_create_at = -1;
		creates = 0;
		next_stream = 0x1000;
	}

	static std::string hex(const uint32_t *m, uint32_t n)
	{
		std::string s;
		char buf[16];
		for (uint32_t i = n; i-- > 0;) {
			snprintf(buf, sizeof(buf), "%08x", m[i]);
			s += buf;
		}
		return s;
	}

	static gpuslot::HipApi api()
	{
		gpuslot::HipApi a;
		a.set_device = [](int d) {
			calls.push_back("set_device " + std::to_string(d));
			return fail_set_device;
		};
		a.stream_create = [](void **s) {
			calls.push_back("create");
			if (creates++ == fail_create_at)
				return 101; // hipErrorInvalidValue's neighbour
			*s = reinterpret_cast<void *>(next_stream++);
			return 0;
		};
		a.stream_create_with_cu_mask = [](void **s, uint32_t n, const uint32_t *m) {
			calls.push_back("create_masked " + hex(m, n));
			if (creates++ == fail_create_at)
				return 2; // hipErrorOutOfMemory
			*s = reinterpret_cast<void *>(next_stream++);
			return 0;
		};
		a.stream_synchronize = [](void *s) {
			calls.push_back("sync " + std::to_string(reinterpret_cast<uintptr_t>(s)));
			return 0;
		};
		a.stream_destroy = [](void *s) {
			calls.push_back("destroy " + std::to_string(reinterpret_cast<uintptr_t>(s)));
			return 0;
		};
		a.error_string = [](int e) { return e == 2 ? "hipErrorOutOfMemory" : "hipErrorUnknown"; };
		return a;
	}
};

// The module's budget as a fake: records the order next to HIP's calls.
class FakeBudget : public gpuslot::QueueBudget {
public:
	int refuse = 0;
	int reserve(unsigned int count, std::string *error) override
	{
		HipDouble::calls.push_back("reserve " + std::to_string(count));
		if (refuse) {
			*error = "budget exhausted";
			return -refuse;
		}
		return 0;
	}
	void unreserve(unsigned int count) override
	{
		HipDouble::calls.push_back("unreserve " + std::to_string(count));
	}
};

gpuslot::SlotLayout layout(std::vector<std::vector<uint32_t>> masks)
{
	gpuslot::SlotLayout l;
	l.k = masks.size();
	l.unit_kind = GPUSLOT_UNIT_AMD_CU;
	l.unit_size = 1;
	l.nr_units = 60;
	l.masks = std::move(masks);
	return l;
}

class HipBackend : public testing::Test {
protected:
	void SetUp() override { HipDouble::reset(); }
	FakeBudget budget;
	std::vector<void *> streams;
	std::string error;
};

TEST_F(HipBackend, ReservesFirstThenOneMaskedStreamPerSlot)
{
	auto b = gpuslot::make_hip_backend(HipDouble::api(), 1);
	// Radeon VII k = 2: SEs 0-1 and 2-3.
	ASSERT_EQ(b->build(layout({{0x33333333, 0x3333333}, {0xcccccccc, 0xccccccc}}),
			   budget, &streams, &error), 0) << error;
	EXPECT_EQ(HipDouble::calls,
		  (std::vector<std::string>{"reserve 5", "set_device 1",
					    "create_masked 0333333333333333",
					    "create_masked 0ccccccccccccccc"}));
	EXPECT_EQ(streams.size(), 2u);
	EXPECT_EQ(b->reserved(), 2u + gpuslot::kHipDefaultPool + gpuslot::kHipRuntimeQueues);
}

TEST_F(HipBackend, WholeGpuSlotsUsePlainStreamsAndNoQueueOfTheirOwn)
{
	auto b = gpuslot::make_hip_backend(HipDouble::api(), 0);
	ASSERT_EQ(b->build(layout({{}, {0xf, 0}, {}}), budget, &streams, &error), 0);
	EXPECT_EQ(HipDouble::calls,
		  (std::vector<std::string>{"reserve 4", "set_device 0", "create",
					    "create_masked 000000000000000f", "create"}));
}

TEST_F(HipBackend, ARefusedReservationCreatesNothing)
{
	auto b = gpuslot::make_hip_backend(HipDouble::api(), 0);
	budget.refuse = ENOSPC;
	EXPECT_EQ(b->build(layout({{0xf}}), budget, &streams, &error), -ENOSPC);
	EXPECT_EQ(error, "budget exhausted");
	EXPECT_EQ(HipDouble::calls, std::vector<std::string>{"reserve 4"});
	EXPECT_TRUE(streams.empty());
	EXPECT_EQ(b->reserved(), 0u);
}

TEST_F(HipBackend, AFailedStreamDestroysTheOnesBeforeIt)
{
	auto b = gpuslot::make_hip_backend(HipDouble::api(), 0);
	HipDouble::fail_create_at = 2;
	EXPECT_EQ(b->build(layout({{0xf}, {0xf0}, {0xf00}}), budget, &streams, &error), -EIO);
	EXPECT_EQ(error, "hipExtStreamCreateWithCUMask for slot 2: hipErrorOutOfMemory");
	EXPECT_TRUE(streams.empty());
	const std::vector<std::string> tail(HipDouble::calls.end() - 4, HipDouble::calls.end());
	EXPECT_EQ(tail, (std::vector<std::string>{"sync 4096", "destroy 4096", "sync 4097",
						  "destroy 4097"}));
}

TEST_F(HipBackend, NoDeviceAndForeignUnitsAreErrors)
{
	auto b = gpuslot::make_hip_backend(HipDouble::api(), 3);
	HipDouble::fail_set_device = 101;
	EXPECT_EQ(b->build(layout({{0xf}}), budget, &streams, &error), -ENODEV);
	EXPECT_EQ(error, "hipSetDevice(3): hipErrorUnknown");

	HipDouble::reset();
	auto l = layout({{0xf}});
	l.unit_kind = GPUSLOT_UNIT_NV_SM_GROUP;
	EXPECT_EQ(b->build(l, budget, &streams, &error), -EOPNOTSUPP);
	EXPECT_TRUE(HipDouble::calls.empty());
}

TEST_F(HipBackend, RebuildsAdjustTheReservation)
{
	auto b = gpuslot::make_hip_backend(HipDouble::api(), 0);
	ASSERT_EQ(b->build(layout({{0xf}, {0xf0}}), budget, &streams, &error), 0);
	// Four partitions: two more queues, reserved before creating.
	HipDouble::calls.clear();
	b->destroy(&streams);
	ASSERT_EQ(b->build(layout({{0xf}, {0xf0}, {0xf00}, {0xf000}}), budget, &streams,
			   &error), 0);
	EXPECT_EQ(HipDouble::calls[4], "reserve 2");
	EXPECT_EQ(HipDouble::calls[5], "set_device 0");
	// One partition: three fewer, given back after the new streams exist.
	HipDouble::calls.clear();
	b->destroy(&streams);
	ASSERT_EQ(b->build(layout({{0xff}}), budget, &streams, &error), 0);
	EXPECT_EQ(HipDouble::calls.back(), "unreserve 3");
	EXPECT_EQ(b->reserved(), 1u + gpuslot::kHipDefaultPool + gpuslot::kHipRuntimeQueues);
}

} // namespace
