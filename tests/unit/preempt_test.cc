// SPDX-License-Identifier: GPL-2.0
// Unit tests of the preemption budget (kmod/lockcore/preempt.c) in userspace:
// which slots have work, which may hold the lower slots back, for how long.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

extern "C" {
#include "preempt.h"
}

namespace {

constexpr u64 kMs = 1000000ULL;

// share 10 % of a 100 ms window: a bucket of 10 ms, net drain 0.9 while
// preempting, so a full bucket lasts ceil(10 ms * 100 / 90).
constexpr unsigned int kShare = 10;
constexpr unsigned int kWindowMs = 100;
constexpr u64 kCap = kWindowMs * kMs * kShare / 100;
constexpr u64 kFullRun = (kCap * 100 + (100 - kShare) - 1) / (100 - kShare);

class Preempt : public ::testing::Test {
protected:
	void SetUp() override
	{
		gpuslot_preempt_init(&p_, kShare, kWindowMs, 0);
		u8 prio[GPUSLOT_MAX_SLOTS] = {};
		prio[0] = 2;	// slot 0: the protected task
		prio[1] = 0;
		prio[2] = 1;
		gpuslot_preempt_set_layout(&p_, 3, prio, 0);
	}

	u64 preempting() const { return gpuslot_preempt_preempt_mask(&p_); }
	u64 work() const { return gpuslot_preempt_work_mask(&p_); }

	gpuslot_preempt p_;
};

TEST_F(Preempt, PeriodicWorkWithinTheSharePreemptsEveryJob)
{
	// 5 ms of work every 100 ms: 5 %, under the 10 % share.
	for (u64 job = 0; job < 50; job++) {
		u64 start = job * 100 * kMs;

		gpuslot_preempt_set_work(&p_, 0, true, start);
		ASSERT_EQ(preempting(), 1ULL) << "job " << job;
		EXPECT_EQ(gpuslot_preempt_level(&p_), 3U);
		gpuslot_preempt_tick(&p_, start + 5 * kMs);
		ASSERT_EQ(preempting(), 1ULL) << "job " << job << " cut short";
		EXPECT_GT(gpuslot_preempt_next_expiry(&p_), start + 5 * kMs);
		gpuslot_preempt_set_work(&p_, 0, false, start + 5 * kMs);
		EXPECT_EQ(work(), 0ULL);
		EXPECT_EQ(gpuslot_preempt_level(&p_), 0U);
	}
}

TEST_F(Preempt, WorkThatNeverDrainsPreemptsForTheShareThenStops)
{
	gpuslot_preempt_set_work(&p_, 0, true, 0);
	EXPECT_EQ(gpuslot_preempt_next_expiry(&p_), kFullRun);
	gpuslot_preempt_tick(&p_, kFullRun - 1);
	EXPECT_EQ(preempting(), 1ULL);
	gpuslot_preempt_tick(&p_, kFullRun);
	EXPECT_EQ(preempting(), 0ULL);
	EXPECT_EQ(work(), 1ULL);	// it still has work
	EXPECT_EQ(gpuslot_preempt_level(&p_), 0U);
	EXPECT_EQ(gpuslot_preempt_next_expiry(&p_), U64_MAX);
	// Reporting the same work again does not restart it, however long.
	gpuslot_preempt_set_work(&p_, 0, true, kFullRun + 10 * kWindowMs * kMs);
	EXPECT_EQ(preempting(), 0ULL);
}

TEST_F(Preempt, AnEmptiedBucketPreemptsAgainAfterDrainingAndRefill)
{
	gpuslot_preempt_set_work(&p_, 0, true, 0);
	gpuslot_preempt_tick(&p_, kFullRun);
	ASSERT_EQ(preempting(), 0ULL);
	// Drained at once: the bucket is empty, the next job does not preempt.
	gpuslot_preempt_set_work(&p_, 0, false, kFullRun);
	gpuslot_preempt_set_work(&p_, 0, true, kFullRun);
	EXPECT_EQ(preempting(), 0ULL);
	EXPECT_EQ(work(), 1ULL);
	gpuslot_preempt_set_work(&p_, 0, false, kFullRun);
	// 20 ms later 2 ms have refilled: it preempts for 2 ms / 0.9.
	u64 t = kFullRun + 20 * kMs;
	gpuslot_preempt_set_work(&p_, 0, true, t);
	EXPECT_EQ(preempting(), 1ULL);
	EXPECT_EQ(p_.slot[0].tokens_ns, 2 * kMs);
	EXPECT_EQ(gpuslot_preempt_next_expiry(&p_), t + (2 * kMs * 100 + 89) / 90);
	gpuslot_preempt_set_work(&p_, 0, false, t + kMs);
	// A whole window refills it to the capacity, no more.
	gpuslot_preempt_tick(&p_, t + 10 * kWindowMs * kMs);
	EXPECT_EQ(p_.slot[0].tokens_ns, kCap);
}

TEST_F(Preempt, LevelIsOnePlusTheHighestPreemptingPriority)
{
	EXPECT_EQ(gpuslot_preempt_level(&p_), 0U);
	gpuslot_preempt_set_work(&p_, 1, true, 0);
	EXPECT_EQ(gpuslot_preempt_level(&p_), 1U);
	gpuslot_preempt_set_work(&p_, 2, true, 0);
	EXPECT_EQ(gpuslot_preempt_level(&p_), 2U);
	gpuslot_preempt_set_work(&p_, 0, true, 0);
	EXPECT_EQ(gpuslot_preempt_level(&p_), 3U);
	EXPECT_EQ(preempting(), 7ULL);
	gpuslot_preempt_hold_ended(&p_, 0, kMs);
	EXPECT_EQ(gpuslot_preempt_level(&p_), 2U);
	EXPECT_EQ(work(), 6ULL);
}

TEST_F(Preempt, HoldEndedAndLayoutShrinkClearWork)
{
	gpuslot_preempt_set_work(&p_, 0, true, 0);
	gpuslot_preempt_set_work(&p_, 2, true, 0);
	gpuslot_preempt_hold_ended(&p_, 0, kMs);
	EXPECT_EQ(work(), 4ULL);
	EXPECT_EQ(preempting(), 4ULL);
	// k 3 -> 2 retires slot 2, and the new priorities apply.
	u8 prio[GPUSLOT_MAX_SLOTS] = {};
	prio[1] = 5;
	gpuslot_preempt_set_work(&p_, 1, true, kMs);
	gpuslot_preempt_set_layout(&p_, 2, prio, 2 * kMs);
	EXPECT_EQ(work(), 2ULL);
	EXPECT_EQ(preempting(), 2ULL);
	EXPECT_EQ(gpuslot_preempt_level(&p_), 6U);
	EXPECT_EQ(p_.k, 2U);
	EXPECT_EQ(p_.priority[2], 0);
	// A slot outside k cannot report work.
	gpuslot_preempt_set_work(&p_, 2, true, 3 * kMs);
	EXPECT_EQ(work(), 2ULL);
}

TEST_F(Preempt, BadKnobsAreRefusedAndChangeNothing)
{
	gpuslot_preempt_set_work(&p_, 0, true, 0);
	gpuslot_preempt saved;
	memcpy(&saved, &p_, sizeof(saved));
	EXPECT_EQ(gpuslot_preempt_set_budget(&p_, 0, 100, kMs), -EINVAL);
	EXPECT_EQ(gpuslot_preempt_set_budget(&p_, 101, 100, kMs), -EINVAL);
	EXPECT_EQ(gpuslot_preempt_set_budget(&p_, 10, 0, kMs), -EINVAL);
	EXPECT_EQ(gpuslot_preempt_set_budget(&p_, 10, GPUSLOT_MAX_PREEMPT_WINDOW_MS + 1, kMs),
		  -EINVAL);
	EXPECT_EQ(memcmp(&saved, &p_, sizeof(saved)), 0);
	EXPECT_EQ(gpuslot_preempt_set_budget(&p_, 20, GPUSLOT_MAX_PREEMPT_WINDOW_MS, kMs), 0);
	EXPECT_EQ(p_.share, 20U);
	EXPECT_EQ(p_.window_ns, GPUSLOT_MAX_PREEMPT_WINDOW_MS * kMs);
}

TEST_F(Preempt, LoweredCapacityClampsTheBucket)
{
	// 10 ms in the bucket; share 1 % of 100 ms leaves 1 ms, lasting 1 ms / 0.99.
	ASSERT_EQ(gpuslot_preempt_set_budget(&p_, 1, 100, 0), 0);
	gpuslot_preempt_set_work(&p_, 0, true, 0);
	EXPECT_EQ(gpuslot_preempt_next_expiry(&p_), (kMs * 100 + 98) / 99);
}

TEST_F(Preempt, ShareOneHundredIsNoBound)
{
	ASSERT_EQ(gpuslot_preempt_set_budget(&p_, 100, 100, 0), 0);
	gpuslot_preempt_set_work(&p_, 0, true, 0);
	EXPECT_EQ(gpuslot_preempt_next_expiry(&p_), U64_MAX);
	gpuslot_preempt_tick(&p_, 3600ULL * 1000 * kMs);
	EXPECT_EQ(preempting(), 1ULL);
}

TEST_F(Preempt, NextExpiryIsTheEarliestPreemptingSlot)
{
	EXPECT_EQ(gpuslot_preempt_next_expiry(&p_), U64_MAX);
	gpuslot_preempt_set_work(&p_, 0, true, 0);
	gpuslot_preempt_set_work(&p_, 1, true, 3 * kMs);
	// Slot 1 started later with the same bucket: slot 0 runs out first.
	EXPECT_EQ(gpuslot_preempt_next_expiry(&p_), kFullRun);
	gpuslot_preempt_tick(&p_, kFullRun);
	EXPECT_EQ(preempting(), 2ULL);
	EXPECT_EQ(gpuslot_preempt_next_expiry(&p_), 3 * kMs + kFullRun);
	// A late tick (the timer fired late) still stops it.
	gpuslot_preempt_tick(&p_, 3 * kMs + kFullRun + 50 * kMs);
	EXPECT_EQ(preempting(), 0ULL);
	EXPECT_EQ(gpuslot_preempt_next_expiry(&p_), U64_MAX);
}

TEST_F(Preempt, PublishWritesTheFieldsWithAnEvenSeq)
{
	gpuslot_work_state out;
	memset(&out, 0xa5, sizeof(out));
	out.seq = 6;
	out.updates = 41;
	gpuslot_preempt_set_work(&p_, 2, true, 0);
	gpuslot_preempt_set_work(&p_, 1, true, 0);
	gpuslot_preempt_publish(&p_, &out, 77, 0x7);
	EXPECT_EQ(out.seq, 8U);
	EXPECT_EQ(out.version, (u32)GPUSLOT_WORK_STATE_VERSION);
	EXPECT_EQ(out.generation, 77ULL);
	EXPECT_EQ(out.k, 3U);
	EXPECT_EQ(out.held_mask, 0x7ULL);
	EXPECT_EQ(out.work_mask, 6ULL);
	EXPECT_EQ(out.preempt_mask, 6ULL);
	EXPECT_EQ(out.preempt_level, 2U);
	EXPECT_EQ(out.updates, 42ULL);
	EXPECT_EQ(out.priority[0], 2);
	EXPECT_EQ(out.priority[1], 0);
	EXPECT_EQ(out.priority[2], 1);
	EXPECT_EQ(out.priority[3], 0);
	gpuslot_preempt_hold_ended(&p_, 2, kMs);
	gpuslot_preempt_publish(&p_, &out, 77, 0x3);
	EXPECT_EQ(out.seq, 10U);
	EXPECT_EQ(out.preempt_level, 1U);
	EXPECT_EQ(out.work_mask, 2ULL);
	EXPECT_EQ(out.updates, 43ULL);
}

} // namespace
