// SPDX-License-Identifier: GPL-2.0
// Unit tests of the boost ledger (kmod/lockcore/boost.c) over a fake scheduler
// (fake_sched.hpp, a test double of sched_setattr).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
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
	void TearDown() override
	{
		EXPECT_EQ(l_.nr_threads, 0u);
		gpuslot_boost_drain(&l_);
		EXPECT_EQ(l_.nr_members, 0u);
		EXPECT_EQ(fake_sched::members, 0);
		fake_sched::rearmed.clear();
		fake_sched::cpus = 0;
	}

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
	// The thread's record goes with its last hold; its member's account
	// (475 ms owed) is kept until it is full again, at 2100 ms.
	EXPECT_EQ(l_.nr_threads, 0u);
	EXPECT_EQ(t.refs, 0);
	EXPECT_EQ(l_.nr_members, 1u);
	fake_sched::clock_ns = 2099 * ms;
	gpuslot_boost_finish(&l_, &h, 3); // any ledger call prunes
	EXPECT_EQ(l_.nr_members, 1u);
	fake_sched::clock_ns = 2100 * ms;
	gpuslot_boost_finish(&l_, &h, 3);
	EXPECT_EQ(l_.nr_members, 0u);
}

TEST_F(Ledger, ABudgetIsPerMemberAndItsSmallestShareRules)
{
	task_struct a, b;
	b.uid = a.uid + 1; // another member
	gpuslot_boost_hold ha{}, hb{}, h2{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(ha, 1, a, 50, true, 50, &end));
	EXPECT_EQ(end, 1000 * ms);
	// Another member has its own budget.
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

// Issue 38: the budget is the member's (its uid), not the thread's. A
// member's threads hold in turn, or a new thread takes each hold; each
// hold is 90 ms of spinning, boosted while the ledger lets it, with the
// clock the ledger gives (as the module's expiry). Sampled every 1 ms for
// 20 s, the member's boosted CPU time in any interval of T ms stays within
// share x (T + 1 s) plus the step a cut lands in. Per thread (06afef7),
// two threads taking turns ran boosted twice that, a new thread per hold
// all the time.
class MemberBudget : public Ledger {
protected:
	static constexpr unsigned int kShare = 30;
	static constexpr uint64_t kStep = 1 * ms, kHold = 90 * ms, kRun = 20000 * ms;

	// Runs holds of @next_thread()'s threads back to back; at[i]: the
	// member ran boosted in step i.
	template <class Next> std::vector<bool> run(Next next_thread)
	{
		std::vector<bool> at;
		gpuslot_boost_hold h{};
		uint64_t seq = 0;
		for (uint64_t start = 0; start < kRun; start += kHold) {
			task_struct &t = next_thread();
			fake_sched::clock_ns = start;
			uint64_t end = 0;
			bool boosted = hold(h, ++seq, t, 50, true, kShare, &end);
			for (uint64_t now = start; now < start + kHold; now += kStep) {
				fake_sched::clock_ns = now;
				if (boosted && now >= end)
					boosted = !gpuslot_boost_expire(&l_, &h, seq, &end);
				at.push_back(boosted);
				t.cpu_ns += kStep; // it spins, boosted or not
			}
			fake_sched::clock_ns = start + kHold;
			unhold(h, seq);
		}
		return at;
	}

	static void expect_within_share(const std::vector<bool> &at)
	{
		for (size_t len : {10, 100, 1000, 5000, 20000}) {
			for (size_t i = 0; i + len <= at.size(); i += 7) {
				size_t on = size_t(std::count(at.begin() + long(i),
							      at.begin() + long(i + len), true));
				ASSERT_LE(on, (len + 1000) * kShare / 100 + 1) << len << " at " << i;
			}
		}
		// And the budget is used: about the share of the time.
		size_t total = size_t(std::count(at.begin(), at.end(), true));
		EXPECT_GE(total, at.size() * kShare / 100);
	}
};

TEST_F(MemberBudget, TwoThreadsTakingTurnsShareOneBudget)
{
	task_struct a, b;
	int turn = 0;
	expect_within_share(run([&]() -> task_struct & { return turn++ % 2 ? b : a; }));
}

TEST_F(MemberBudget, ANewThreadPerHoldGetsNoNewBudget)
{
	std::deque<task_struct> threads; // one per hold; addresses stay
	expect_within_share(run([&]() -> task_struct & {
		// The thread before has exited.
		if (!threads.empty())
			threads.back().exiting = true;
		return threads.emplace_back();
	}));
	for (const task_struct &t : threads)
		EXPECT_EQ(t.refs, 0);
}

// Two members drain their own budgets: one's spent budget costs the
// other nothing, and the spent one stays refused.
TEST_F(Ledger, TwoMembersAreIndependent)
{
	task_struct a, b;
	b.uid = a.uid + 1;
	gpuslot_boost_hold ha{}, hb{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(ha, 1, a, 50, true, 50, &end));
	fake_sched::clock_ns = a.cpu_ns = end;
	ASSERT_TRUE(gpuslot_boost_expire(&l_, &ha, 1, &end));
	unhold(ha, 1);
	ASSERT_TRUE(hold(hb, 1, b, 50, true, 50, &end));
	EXPECT_EQ(end, fake_sched::clock_ns + 1000 * ms); // a full budget
	unhold(hb, 1);
	task_struct a2; // a new thread of @a's member
	EXPECT_FALSE(hold(ha, 2, a2, 50, true, 50));
	EXPECT_TRUE(attrs_are(a2, SCHED_OTHER, 0, 0, false));
	unhold(ha, 2);
}

// Two threads of one member boosted at once, each on its own CPU, drain
// one budget twice as fast: the second boost brings the first hold's
// clock forward (ops->rearm), and at that time the budget is spent.
TEST_F(Ledger, ThreadsBoostedAtOnceDrainOneBudget)
{
	task_struct a, b;
	gpuslot_boost_hold ha{}, hb{};
	uint64_t end_a = 0, end_b = 0;
	ASSERT_TRUE(hold(ha, 1, a, 50, true, 50, &end_a));
	EXPECT_EQ(end_a, 1000 * ms);
	ASSERT_TRUE(hold(hb, 1, b, 50, true, 50, &end_b));
	// 500 ms at 2 - 0.5 ns per ns.
	EXPECT_EQ(end_b, 333 * ms + 333334); // rounded up
	ASSERT_EQ(fake_sched::rearmed.size(), 1u);
	EXPECT_EQ(fake_sched::rearmed[0].first, &ha);
	EXPECT_EQ(fake_sched::rearmed[0].second, end_b);
	fake_sched::clock_ns = a.cpu_ns = b.cpu_ns = end_b;
	EXPECT_TRUE(gpuslot_boost_expire(&l_, &ha, 1, &end_a));
	EXPECT_TRUE(gpuslot_boost_expire(&l_, &hb, 1, &end_b));
	EXPECT_TRUE(attrs_are(a, SCHED_OTHER, 0, 0, false));
	EXPECT_TRUE(attrs_are(b, SCHED_OTHER, 0, 0, false));
	unhold(ha, 1);
	unhold(hb, 1);
}

// Issue 38: payback earned while the budget was full cancels no later
// spending. A holder (max_hold_ms 0) sleeps @sleep ms, then spins; the
// ledger's clock is the only expiry, as in the module. From a full budget
// at share 50, spinning drains 0.5 ns per ns: 1 s of boost, whenever the
// spinning starts. 06afef7 settled the sleep's payback against the spin's
// charge and gave up to 1.5 s.
TEST_F(Ledger, PaybackWhileFullDoesNotPayForLaterSpinning)
{
	for (uint64_t sleep : {0 * ms, 250 * ms, 500 * ms, 750 * ms, 1000 * ms, 2500 * ms}) {
		SCOPED_TRACE(sleep / ms);
		task_struct t;
		gpuslot_boost_hold h{};
		const uint64_t t0 = fake_sched::clock_ns;
		uint64_t end = 0, boosted = 0;
		ASSERT_TRUE(hold(h, 1, t, 50, true, 50, &end));
		bool on = true;
		for (uint64_t now = t0; on && now < t0 + 10000 * ms; now += ms) {
			fake_sched::clock_ns = now;
			if (now >= end)
				on = !gpuslot_boost_expire(&l_, &h, 1, &end);
			if (on && now >= t0 + sleep) {
				t.cpu_ns += ms;
				boosted += ms;
			}
		}
		EXPECT_FALSE(on);
		// share x (T + 1 s) over the spin, T = boosted: 1 s, and one step.
		EXPECT_LE(boosted, 1001 * ms);
		EXPECT_GE(boosted, 999 * ms);
		unhold(h, 1);
		fake_sched::clock_ns += 10000 * ms; // full again
		gpuslot_boost_drain(&l_);
	}
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

// Review finding 7: a waiter lending its priority to a boosted hold raises
// it only within its member's budget. Spent (the hold's clock has not fired
// yet, or fires late), the hold's boost ends instead of rising.
TEST_F(Ledger, InheritanceEndsABoostedHoldWhoseBudgetIsSpent)
{
	task_struct t;
	gpuslot_boost_hold h{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(h, 1, t, 50, true, 50, &end));
	EXPECT_EQ(end, 1000 * ms);
	// It spins past the end before the expiry ran; then a waiter lends 80.
	fake_sched::clock_ns = t.cpu_ns = 1001 * ms;
	EXPECT_FALSE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 80, 50, &end));
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	EXPECT_EQ(l_.nr_threads, 0u);
	EXPECT_EQ(h.thread, nullptr);
	// The late expiry finds nothing to end, and nothing is boosted again.
	EXPECT_FALSE(gpuslot_boost_expire(&l_, &h, 1, &end));
	EXPECT_FALSE(gpuslot_boost_set_prio(&l_, &h, 1, &t, 90, 50, &end));
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	unhold(h, 1);
	gpuslot_boost_drain(&l_);
}

// Review finding 7: when lending makes a boosted hold's budget end earlier
// than its clock was last set for, the hold's own clock is told too, not
// only its member's other holds'. Here @b (a member with RLIMIT_RTPRIO)
// moved itself above its boost, so it was not charged and its clock was
// set for @a's spinning alone; back below, a waiter's lending boosts it
// again, and two spinning threads drain the budget twice as fast.
TEST_F(Ledger, InheritanceBringsTheHoldsOwnClockForward)
{
	task_struct a, b;
	gpuslot_boost_hold ha{}, hb{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(ha, 1, a, 50, true, 50, &end));
	ASSERT_TRUE(hold(hb, 1, b, 50, true, 50, &end));
	b.attr = {SCHED_FIFO, 60, 0, false}; // its own, above the boost
	EXPECT_TRUE(gpuslot_boost_set_prio(&l_, &hb, 1, &b, 55, 50, &end));
	EXPECT_TRUE(attrs_are(b, SCHED_FIFO, 60, 0, false)); // left alone
	// @a spins 400 ms: 200 ms owed. @b's clock comes to 1000 ms, when the
	// budget ends if only @a runs.
	fake_sched::clock_ns = a.cpu_ns = 400 * ms;
	EXPECT_FALSE(gpuslot_boost_expire(&l_, &hb, 1, &end));
	EXPECT_EQ(end, 1000 * ms);
	// @b goes back to SCHED_OTHER; a FIFO-80 waiter lends to its hold.
	b.attr = {SCHED_OTHER, 0, 0, false};
	fake_sched::rearmed.clear();
	ASSERT_TRUE(gpuslot_boost_set_prio(&l_, &hb, 1, &b, 80, 50, &end));
	EXPECT_TRUE(attrs_are(b, SCHED_FIFO, 80, 0, true));
	// 300 ms left, drained at 1.5 ns per ns by two threads: 200 ms.
	EXPECT_EQ(end, 600 * ms);
	EXPECT_EQ(hb.budget_end_ns, 600 * ms);
	const auto told = std::find(fake_sched::rearmed.begin(), fake_sched::rearmed.end(),
				    std::make_pair(&hb, uint64_t(600 * ms)));
	EXPECT_NE(told, fake_sched::rearmed.end());
	unhold(ha, 1);
	unhold(hb, 1);
	gpuslot_boost_drain(&l_);
}

// A hold in a domain with max_boost_share 100 needs no budget there, but
// does not forgive what its member owes from holds elsewhere: the debt is
// kept, and paid back at the share it was earned under.
TEST_F(Ledger, AShareOf100ForgivesNoDebt)
{
	task_struct t;
	gpuslot_boost_hold h50{}, h100{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(h50, 1, t, 50, true, 50, &end));
	fake_sched::clock_ns = t.cpu_ns = 1000 * ms;
	ASSERT_TRUE(gpuslot_boost_expire(&l_, &h50, 1, &end)); // 500 ms owed
	unhold(h50, 1);
	// A hold on a GPU with share 100: boosted all the same, no clock.
	ASSERT_TRUE(hold(h100, 1, t, 50, true, 100, &end));
	EXPECT_EQ(end, UINT64_MAX);
	// It spins 100 ms there: not charged, and 50 ms paid back.
	fake_sched::clock_ns = t.cpu_ns = 1100 * ms;
	unhold(h100, 1);
	EXPECT_TRUE(attrs_are(t, SCHED_OTHER, 0, 0, false));
	// Still owing 450 ms: the account is kept...
	EXPECT_EQ(l_.nr_members, 1u);
	// ...and a hold at share 50 has 50 ms of budget: 100 ms of boost.
	ASSERT_TRUE(hold(h50, 2, t, 50, true, 50, &end));
	EXPECT_EQ(end, 1200 * ms);
	unhold(h50, 2);
	// Idle, the account pays back at 50 % and goes once full (1100 ms +
	// 450 ms x 2).
	fake_sched::clock_ns = 1999 * ms;
	gpuslot_boost_finish(&l_, &h50, 2);
	EXPECT_EQ(l_.nr_members, 1u);
	fake_sched::clock_ns = 2000 * ms;
	gpuslot_boost_finish(&l_, &h50, 2);
	EXPECT_EQ(l_.nr_members, 0u);
}

// Idle after a hold at share 100, an account that owes still pays back at
// the share it owes at, and is kept until full.
TEST_F(Ledger, AnAccountLastHeldAtShare100KeepsItsDebt)
{
	task_struct t;
	gpuslot_boost_hold h50{}, h100{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(h50, 1, t, 50, true, 50, &end));
	fake_sched::clock_ns = t.cpu_ns = 1000 * ms;
	ASSERT_TRUE(gpuslot_boost_expire(&l_, &h50, 1, &end)); // 500 ms owed
	unhold(h50, 1);
	ASSERT_TRUE(hold(h100, 1, t, 50, true, 100, &end));
	unhold(h100, 1); // no time passed: still 500 ms owed
	EXPECT_EQ(l_.nr_members, 1u);
	EXPECT_FALSE(hold(h50, 2, t, 50, true, 50, &end));
	unhold(h50, 2);
	fake_sched::clock_ns = 1999 * ms;
	gpuslot_boost_finish(&l_, &h50, 2);
	EXPECT_EQ(l_.nr_members, 1u);
	fake_sched::clock_ns = 2000 * ms;
	gpuslot_boost_finish(&l_, &h50, 2);
	EXPECT_EQ(l_.nr_members, 0u);
}

// A member's waiters sleep boosted (the module boosts a waiter before it
// sleeps, so that it wakes so), and each counts as a boosted thread. The
// budget's end was computed as if all of them ran at once: with 100 of
// them a holder's clock was set 5 ms ahead, not 143 ms, and brought
// forward for every hold at every new waiter. On a host of 4 CPUs at most
// 4 run at once.
TEST_F(Ledger, ThreadsAsleepBoostedDrainNoMoreThanTheCPUs)
{
	fake_sched::cpus = 4;
	task_struct holder;
	gpuslot_boost_hold h{};
	uint64_t end = 0;
	ASSERT_TRUE(hold(h, 1, holder, 50, true, 50, &end));
	EXPECT_EQ(end, 1000 * ms);
	std::vector<task_struct> waiters(100);
	std::vector<gpuslot_boost_hold> wh(waiters.size());
	for (size_t i = 0; i < waiters.size(); i++)
		ASSERT_TRUE(hold(wh[i], 1, waiters[i], 50, true, 50, &end));
	// 500 ms drained by 4 CPUs, refilled at 0.5: 142.86 ms.
	EXPECT_EQ(end, 142857143u);
	EXPECT_EQ(h.budget_end_ns, end);
	// Clocks came forward only while fewer threads than CPUs were boosted.
	EXPECT_EQ(fake_sched::rearmed.size(), 1u + 2 + 3);
	// The holder spins 100 ms alone. Its CPU time is taken to have come
	// last, on 4 CPUs at once (25 ms, not 1 ms as from 101 threads): 100 ms
	// charged less 12.5 ms refilled meanwhile, 412.5 ms left, drained at
	// 3.5 ns per ns: 117.86 ms more.
	fake_sched::clock_ns = holder.cpu_ns = 100 * ms;
	EXPECT_FALSE(gpuslot_boost_expire(&l_, &h, 1, &end));
	EXPECT_EQ(end, 217857143u);
	unhold(h, 1);
	for (size_t i = 0; i < waiters.size(); i++)
		unhold(wh[i], 1);
	gpuslot_boost_drain(&l_);
}

// The ledger's lock (kmod/boost_sched.c) is one for every GPU; what it
// guards must be short and bounded. The longest walk is of one member's
// records: the worst case the per-uid limits allow is 16 GPUs x (256
// waiters asleep boosted + 64 holders), 5120 threads of one uid, each with
// its own hold. A ledger call visits each of that member's records a
// bounded number of times (the budget's settling reads each one's CPU
// time once) and no record of another member. Counted here; the time is
// printed (this host, the fake scheduler: a measurement, not asserted).
TEST_F(Ledger, OneMembersWorstCaseIsBoundedWork)
{
	constexpr size_t kRecords = 16 * (256 + 64);
	fake_sched::cpus = 4;
	auto tasks = std::make_unique<task_struct[]>(kRecords);
	auto holds = std::make_unique<gpuslot_boost_hold[]>(kRecords);
	task_struct other; // another member, boosted too
	other.uid = tasks[0].uid + 1;
	gpuslot_boost_hold oh{};
	ASSERT_TRUE(hold(oh, 1, other, 50, true, 50));
	for (size_t i = 0; i + 1 < kRecords; i++)
		ASSERT_TRUE(hold(holds[i], 1, tasks[i], 50, true, 50));
	fake_sched::clock_ns = 10 * ms;
	fake_sched::cputime_calls = 0;
	fake_sched::rearmed.clear();
	const auto t0 = std::chrono::steady_clock::now();
	ASSERT_TRUE(hold(holds[kRecords - 1], 1, tasks[kRecords - 1], 50, true, 50));
	const auto t1 = std::chrono::steady_clock::now();
	// Each record of the member once, and the new thread's own.
	EXPECT_EQ(fake_sched::cputime_calls, kRecords);
	EXPECT_TRUE(fake_sched::rearmed.empty()); // 4 CPUs were busy already
	uint64_t end;
	fake_sched::cputime_calls = 0;
	const auto t2 = std::chrono::steady_clock::now();
	EXPECT_FALSE(gpuslot_boost_expire(&l_, &holds[0], 1, &end));
	const auto t3 = std::chrono::steady_clock::now();
	EXPECT_EQ(fake_sched::cputime_calls, kRecords);
	fake_sched::cputime_calls = 0;
	const auto t4 = std::chrono::steady_clock::now();
	unhold(holds[kRecords - 1], 1);
	const auto t5 = std::chrono::steady_clock::now();
	EXPECT_EQ(fake_sched::cputime_calls, kRecords);
	using us = std::chrono::duration<double, std::micro>;
	std::printf("ledger, %zu records of one member: begin %.1f us, expire %.1f us, "
		    "finish %.1f us (this host, fake scheduler)\n",
		    kRecords, us(t1 - t0).count(), us(t3 - t2).count(), us(t5 - t4).count());
	for (size_t i = 0; i + 1 < kRecords; i++)
		unhold(holds[i], 1);
	unhold(oh, 1);
	gpuslot_boost_drain(&l_);
}

} // namespace
