// SPDX-License-Identifier: GPL-2.0
// Unit tests of the boost ledger (kmod/boost.c) over a fake scheduler
// (fake_sched.hpp, a test double of sched_setattr).
#include <gtest/gtest.h>

#include "fake_sched.hpp"

namespace {

class Ledger : public testing::Test {
protected:
	void SetUp() override { gpuslot_boost_ledger_init(&l_, &fake_sched::ops); }
	void TearDown() override { EXPECT_EQ(l_.nr_threads, 0u); }

	bool hold(gpuslot_boost_hold &h, uint64_t seq, task_struct &t,
		  unsigned int prio, bool live = true)
	{
		return gpuslot_boost_begin(&l_, &h, seq, live, &t, prio);
	}
	void unhold(gpuslot_boost_hold &h, uint64_t seq)
	{
		gpuslot_boost_finish(&l_, &h, seq);
	}
	static bool attrs_are(const task_struct &t, unsigned int policy,
			      unsigned int prio, int nice, bool reset)
	{
		return t.attr.policy == policy && t.attr.rt_priority == prio &&
		       t.attr.nice == nice && t.attr.reset_on_fork == reset;
	}

	gpuslot_boost_ledger l_{};
};

TEST_F(Ledger, BoostsAndRestoresExactly)
{
	task_struct t;
	t.attr = {SCHED_BATCH, 0, 7, false};
	gpuslot_boost_hold h{};
	EXPECT_TRUE(hold(h, 1, t, 50));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 50, 7, true));
	EXPECT_EQ(t.refs, 1);
	unhold(h, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_BATCH, 0, 7, false));
	EXPECT_EQ(t.refs, 0);
}

TEST_F(Ledger, ALoweredOrChangedThreadIsRestoredOneThatWentAboveIsNot)
{
	task_struct t;
	gpuslot_boost_hold h{};
	ASSERT_TRUE(hold(h, 1, t, 50));
	fake_sched::apply(&t, {SCHED_FIFO, 49, 0, false});
	unhold(h, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));

	ASSERT_TRUE(hold(h, 2, t, 50));
	fake_sched::apply(&t, {SCHED_OTHER, 0, 3, false});
	unhold(h, 2);
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));

	ASSERT_TRUE(hold(h, 3, t, 50));
	fake_sched::apply(&t, {SCHED_RR, 80, 0, false});
	unhold(h, 3);
	EXPECT_TRUE(attrs_are(t, SCHED_RR, 80, 0, false));

	t.attr = {SCHED_OTHER, 0, 0, false};
	ASSERT_TRUE(hold(h, 4, t, 50));
	fake_sched::apply(&t, {SCHED_DEADLINE, 0, 0, false});
	unhold(h, 4);
	EXPECT_EQ(t.attr.policy, unsigned(SCHED_DEADLINE));
}

TEST_F(Ledger, AThreadAlreadyAboveOrDeadlineGetsNoRecord)
{
	task_struct t;
	t.attr = {SCHED_FIFO, 60, 0, false};
	gpuslot_boost_hold h{};
	EXPECT_FALSE(hold(h, 1, t, 50));
	EXPECT_EQ(t.sets, 0u);
	unhold(h, 1);
	t.attr = {SCHED_DEADLINE, 0, 0, false};
	EXPECT_FALSE(hold(h, 2, t, 50));
	EXPECT_EQ(t.sets, 0u);
	EXPECT_FALSE(hold(h, 3, t, 0)); // boost off
}

TEST_F(Ledger, NestedHoldsRunAtTheHighestUntilTheLastEnds)
{
	task_struct t;
	t.attr = {SCHED_OTHER, 0, -2, false};
	gpuslot_boost_hold a{}, b{}, c{};
	ASSERT_TRUE(hold(a, 1, t, 30));
	ASSERT_TRUE(hold(b, 1, t, 60));
	ASSERT_TRUE(hold(c, 1, t, 60));
	EXPECT_EQ(l_.nr_threads, 1u);
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 60, -2, true));
	unhold(b, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 60, -2, true));
	unhold(c, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 30, -2, true));
	unhold(a, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, -2, false));
	EXPECT_EQ(t.refs, 0);
}

// Defects 2 and 3: hold 1 of a shared file is granted to A; B releases it
// and takes hold 2, boosted; then A's late boost for hold 1 arrives.
TEST_F(Ledger, ALateBoostOfAnOlderHoldChangesNothing)
{
	task_struct a, b;
	gpuslot_boost_hold h{};
	unhold(h, 1); // B's release of hold 1 before A was boosted
	ASSERT_TRUE(hold(h, 2, b, 50));
	EXPECT_FALSE(hold(h, 1, a, 50, false));
	EXPECT_FALSE(hold(h, 1, a, 50, true));
	EXPECT_TRUE(attrs_are(b, SCHED_FIFO, 50, 0, true));
	EXPECT_TRUE(attrs_are(a, SCHED_OTHER, 0, 0, false));
	EXPECT_EQ(a.refs, 0);
	// A late unboost of hold 1 leaves hold 2 alone too.
	unhold(h, 1);
	EXPECT_TRUE(attrs_are(b, SCHED_FIFO, 50, 0, true));
	unhold(h, 2);
	EXPECT_TRUE(attrs_are(b, SCHED_OTHER, 0, 0, false));
	EXPECT_EQ(b.refs, 0);
}

// A release that has not run yet when the next hold is boosted: the newer
// hold ends the older one's boost first.
TEST_F(Ledger, ANewerHoldEndsAnOlderBoostStillRecorded)
{
	task_struct a, b;
	gpuslot_boost_hold h{};
	ASSERT_TRUE(hold(h, 1, a, 50));
	ASSERT_TRUE(hold(h, 2, b, 50));
	EXPECT_TRUE(attrs_are(a, SCHED_OTHER, 0, 0, false));
	EXPECT_EQ(a.refs, 0);
	unhold(h, 1); // hold 1's release, late
	EXPECT_EQ(b.attr.policy, unsigned(SCHED_FIFO));
	unhold(h, 2);
	EXPECT_EQ(b.attr.policy, unsigned(SCHED_OTHER));
}

TEST_F(Ledger, AnExitingThreadIsNotTouched)
{
	task_struct t;
	gpuslot_boost_hold h{};
	ASSERT_TRUE(hold(h, 1, t, 50));
	unsigned long sets = t.sets;
	t.exiting = true;
	unhold(h, 1);
	EXPECT_EQ(t.sets, sets);
	EXPECT_EQ(t.refs, 0);
}

} // namespace
