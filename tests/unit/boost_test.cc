// SPDX-License-Identifier: GPL-2.0
// Unit tests of the boost ledger (kmod/lockcore/boost.c) over a fake scheduler
// (fake_sched.hpp, a test double of sched_setattr).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "fake_sched.hpp"

namespace {

class Ledger : public testing::Test {
protected:
	void SetUp() override
	{
		fake_sched::clock_ns = 0;
		gpuslot_boost_ledger_init(&l_, &fake_sched::ops);
	}
	void TearDown() override { EXPECT_EQ(l_.nr_threads, 0u); }

	bool hold(gpuslot_boost_hold &h, uint64_t seq, task_struct &t,
		  unsigned int prio, bool live = true, unsigned int share = 100,
		  uint64_t *budget_end = nullptr)
	{
		return gpuslot_boost_begin(&l_, &h, seq, live, &t, prio, share, budget_end);
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

// Issue 28, item 12: the saved attributes belong to the thread's image and
// credentials at the boost. After an exec or a change of credentials the
// thread gets back no real-time policy and no negative nice.
TEST_F(Ledger, AThreadWhoseOwnerChangedGetsNoPrivilegeBack)
{
	struct Case {
		gpuslot_sched_attr before, after_change, unchanged;
	} cases[] = {
		{{SCHED_FIFO, 10, -5, false}, {SCHED_OTHER, 0, 0, false}, {SCHED_FIFO, 10, -5, false}},
		{{SCHED_RR, 20, 3, true}, {SCHED_OTHER, 0, 3, true}, {SCHED_RR, 20, 3, true}},
		{{SCHED_OTHER, 0, -10, false}, {SCHED_OTHER, 0, 0, false}, {SCHED_OTHER, 0, -10, false}},
		{{SCHED_BATCH, 0, 7, false}, {SCHED_BATCH, 0, 7, false}, {SCHED_BATCH, 0, 7, false}},
	};
	for (const Case &c : cases) {
		for (bool change : {true, false}) {
			task_struct t;
			t.attr = c.before;
			gpuslot_boost_hold h{};
			ASSERT_TRUE(hold(h, 1, t, 50));
			if (change)
				t.owner++;
			unhold(h, 1);
			const gpuslot_sched_attr &want = change ? c.after_change : c.unchanged;
			EXPECT_TRUE(attrs_are(t, want.policy, want.rt_priority, want.nice,
					      want.reset_on_fork))
				<< c.before.policy << " " << change;
			EXPECT_EQ(t.refs, 0);
		}
	}
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

// Issue 28, item 11: the boost budget. At max_boost_share 50 a thread may
// owe 500 ms of boost; boosted, it owes 0.5 ns more per ns, unboosted it
// pays back 0.5 ns per ns.
constexpr uint64_t ms = 1000000;

TEST_F(Ledger, ABoostEndsWhenItsThreadsBudgetIsSpent)
{
	task_struct t;
	gpuslot_boost_hold h{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(h, 1, t, 50, true, 50, &end));
	EXPECT_EQ(end, 1000 * ms); // 500 ms owed at 0.5 ns per ns
	// The thread spins: CPU time goes as the clock.
	fake_sched::clock_ns = t.cpu_ns = 400 * ms;
	EXPECT_FALSE(gpuslot_boost_expire(&l_, &h, 1, &end));
	EXPECT_EQ(end, 1000 * ms);
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 50, 0, true));
	fake_sched::clock_ns = t.cpu_ns = 1000 * ms;
	EXPECT_TRUE(gpuslot_boost_expire(&l_, &h, 1, &end));
	// Spent: back at its own attributes while it still holds.
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	unhold(h, 1); // nothing left to end
	// The next hold gets no boost while nothing is paid back...
	EXPECT_FALSE(hold(h, 2, t, 50, true, 50));
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	unhold(h, 2);
	// ...and 100 ms later, 50 ms of budget: 100 ms of boost.
	fake_sched::clock_ns = t.cpu_ns = 1100 * ms;
	ASSERT_TRUE(hold(h, 3, t, 50, true, 50, &end));
	EXPECT_EQ(end, 1200 * ms);
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 50, 0, true));
	fake_sched::clock_ns = t.cpu_ns = 1150 * ms;
	unhold(h, 3);
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	// Kept for its budget until it is full again, at most the window.
	EXPECT_EQ(l_.nr_threads, 1u);
	EXPECT_EQ(t.refs, 1);
	fake_sched::clock_ns = 2150 * ms;
	gpuslot_boost_finish(&l_, &h, 3); // any ledger call prunes
	EXPECT_EQ(l_.nr_threads, 0u);
	EXPECT_EQ(t.refs, 0);
}

TEST_F(Ledger, ABudgetIsPerThreadAndItsSmallestShareRules)
{
	task_struct a, b;
	gpuslot_boost_hold ha{}, hb{}, h2{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(ha, 1, a, 50, true, 50, &end));
	EXPECT_EQ(end, 1000 * ms);
	// Another thread has its own budget.
	fake_sched::clock_ns = a.cpu_ns = 500 * ms;
	ASSERT_TRUE(hold(hb, 1, b, 50, true, 50, &end));
	EXPECT_EQ(end, 1500 * ms);
	// A second hold of @a, on a GPU with share 20: @a owes 250 ms, more
	// than 20 % of a second: no boost for it, @a's other stays.
	EXPECT_FALSE(hold(h2, 1, a, 60, true, 20, &end));
	EXPECT_TRUE(attrs_are(a, SCHED_FIFO, 50, 0, true));
	unhold(ha, 1);
	unhold(hb, 1);
	// 100: no budget at all.
	ASSERT_TRUE(hold(h2, 2, b, 40, true, 100, &end));
	EXPECT_EQ(end, UINT64_MAX);
	fake_sched::clock_ns = 100000 * ms;
	EXPECT_FALSE(gpuslot_boost_expire(&l_, &h2, 2, &end));
	EXPECT_TRUE(attrs_are(b, SCHED_FIFO, 40, 0, true));
	unhold(h2, 2);
	EXPECT_TRUE(attrs_are(b, SCHED_OTHER, 0, 0, false));
	gpuslot_boost_drain(&l_);
}

// The budget counts CPU time: a holder that sleeps boosted (waiting for its
// GPU work, or in the queue) keeps its boost; one that runs half the time
// at share 50 never runs out.
TEST_F(Ledger, ASleepingHolderSpendsNoBudget)
{
	task_struct t;
	gpuslot_boost_hold h{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(h, 1, t, 50, true, 50, &end));
	EXPECT_EQ(end, 1000 * ms); // were it to run all the time
	fake_sched::clock_ns = 1000 * ms;
	EXPECT_FALSE(gpuslot_boost_expire(&l_, &h, 1, &end));
	EXPECT_EQ(end, 2000 * ms);
	for (uint64_t now = 1000 * ms; now < 10000 * ms; now += 100 * ms) {
		fake_sched::clock_ns = now;
		t.cpu_ns += 50 * ms;
		ASSERT_FALSE(gpuslot_boost_expire(&l_, &h, 1, &end));
	}
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 50, 0, true));
	unhold(h, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	gpuslot_boost_drain(&l_);
}

// Over any interval of length T a thread runs boosted at most
// share x (T + 1 s): a thread that holds all the time and is boosted
// whenever its budget allows, sampled every 10 ms for 20 s.
TEST_F(Ledger, BoostedTimeStaysWithinShareOfTPlusAWindow)
{
	task_struct t;
	gpuslot_boost_hold h{};
	uint64_t seq = 0, end = UINT64_MAX;
	bool boosted = false;
	std::vector<bool> at; // boosted in each 10 ms step
	for (uint64_t now = 0; now < 20000 * ms; now += 10 * ms) {
		fake_sched::clock_ns = t.cpu_ns = now; // it spins throughout
		if (boosted && now >= end) {
			boosted = !gpuslot_boost_expire(&l_, &h, seq, &end);
		}
		if (!boosted) { // a new hold every step until one is boosted
			unhold(h, seq);
			boosted = hold(h, ++seq, t, 50, true, 30, &end);
		}
		at.push_back(boosted);
	}
	unhold(h, seq);
	for (size_t len : {10, 100, 500, 2000}) {
		for (size_t i = 0; i + len <= at.size(); i++) {
			size_t on = size_t(std::count(at.begin() + i, at.begin() + i + len, true));
			// In steps: 30 % of (len + 100), plus the step a cut lands in.
			ASSERT_LE(on * 10, (len * 10 + 1000) * 30 / 100 + 10) << len << " " << i;
		}
	}
	size_t total = size_t(std::count(at.begin(), at.end(), true));
	EXPECT_GE(total * 10, 20000u * 30 / 100); // and it is used
	gpuslot_boost_drain(&l_);
}

// Issue 38: priority inheritance changes a hold's priority through
// gpuslot_boost_set_prio(); the thread's attributes come back exactly.
TEST_F(Ledger, InheritanceRaisesAndLowersABoostedHoldAndRestoresExactly)
{
	task_struct t;
	t.attr = {SCHED_BATCH, 0, 3, false};
	gpuslot_boost_hold h{};
	ASSERT_TRUE(hold(h, 1, t, 50));
	EXPECT_TRUE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 80, 100, nullptr));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 80, 3, true));
	// The waiter left: back to the boost.
	EXPECT_TRUE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 50, 100, nullptr));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 50, 3, true));
	unhold(h, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_BATCH, 0, 3, false));
	EXPECT_EQ(t.refs, 0);
}

// A FIFO-60 holder is above boost_priority 50: no boost, no record. A
// FIFO-80 waiter raises it to 80; when the waiter goes, the holder gets its
// own FIFO 60 back exactly (never the boost's 50, below its own).
TEST_F(Ledger, AHolderAboveTheBoostIsRaisedOnlyByInheritance)
{
	task_struct t;
	t.attr = {SCHED_FIFO, 60, 0, false};
	gpuslot_boost_hold h{};
	EXPECT_FALSE(hold(h, 1, t, 50));
	EXPECT_EQ(l_.nr_threads, 0u);
	EXPECT_TRUE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 80, 100, nullptr));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 80, 0, true));
	EXPECT_FALSE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 50, 100, nullptr));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 60, 0, false));
	EXPECT_EQ(l_.nr_threads, 0u);
	// Another waiter at 70 comes, and the hold ends.
	EXPECT_TRUE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 70, 100, nullptr));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 70, 0, true));
	unhold(h, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 60, 0, false));
	EXPECT_EQ(t.refs, 0);
	// Nothing at or below the thread's own priority.
	EXPECT_FALSE(gpuslot_boost_set_prio(&l_, &h, 2, &t, 60, 100, nullptr));
	EXPECT_EQ(t.sets, 4u);
}

TEST_F(Ledger, InheritanceForAnOlderHoldChangesNothing)
{
	task_struct t;
	gpuslot_boost_hold h{};
	ASSERT_TRUE(hold(h, 2, t, 50));
	EXPECT_FALSE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 80, 100, nullptr));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 50, 0, true));
	unhold(h, 2);
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
}

// The inheritance may come before the new holder's own boost: it begins
// the hold, and the late boost of the same hold changes nothing.
TEST_F(Ledger, InheritanceBeforeTheBoostBeginsTheHold)
{
	task_struct t;
	gpuslot_boost_hold h{};
	uint64_t end = 0;
	EXPECT_TRUE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 80, 50, &end));
	EXPECT_EQ(end, 1000 * ms);
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 80, 0, true));
	EXPECT_FALSE(hold(h, 1, t, 50));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 80, 0, true));
	unhold(h, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	gpuslot_boost_drain(&l_);
}

// A thread runs at the highest of its holds: lowering one hold's
// inheritance leaves it at another's.
TEST_F(Ledger, InheritanceComposesWithTheThreadsOtherHolds)
{
	task_struct t;
	gpuslot_boost_hold a{}, b{};
	ASSERT_TRUE(hold(a, 1, t, 50));
	ASSERT_TRUE(hold(b, 1, t, 60));
	EXPECT_TRUE(gpuslot_boost_set_prio(&l_, &a, 1, &t, 90, 100, nullptr));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 90, 0, true));
	EXPECT_FALSE(gpuslot_boost_set_prio(&l_, &a, 1, &t, 0, 100, nullptr));
	EXPECT_TRUE(attrs_are(t, SCHED_FIFO, 60, 0, true));
	unhold(b, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	unhold(a, 1);
	EXPECT_EQ(t.refs, 0);
}

// Inheritance is under the same budget as the boost: a thread whose budget
// is spent is not raised.
TEST_F(Ledger, InheritanceIsUnderTheBudget)
{
	task_struct t;
	gpuslot_boost_hold h{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(h, 1, t, 50, true, 50, &end));
	fake_sched::clock_ns = t.cpu_ns = 1000 * ms;
	ASSERT_TRUE(gpuslot_boost_expire(&l_, &h, 1, &end));
	EXPECT_FALSE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 80, 50, &end));
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	unhold(h, 1);
	gpuslot_boost_drain(&l_);
}

} // namespace
