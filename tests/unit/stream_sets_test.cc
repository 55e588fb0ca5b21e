// SPDX-License-Identifier: GPL-2.0
// StreamSets over a test double of a backend and of the queue budget: queues
// are reserved before any stream exists, the runtime's once; a new layout
// keeps the streams handed out and drops the rest; retiring waits for the
// holds; the same layout at a newer generation is renumbered, not built; a
// refused reservation or a failed build changes nothing.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "stream_sets.hpp"

namespace {

std::vector<std::string> calls;

class BackendDouble : public gpuslot::Backend {
public:
	int fail_build = 0;
	uintptr_t next = 0x10;
	const char *name() const override { return "double"; }
	unsigned int runtime_queues() const override { return 3; }
	unsigned int set_queues(const gpuslot::SlotLayout &l, uint64_t slots) const override
	{
		unsigned int n = 0;
		for (unsigned int s = 0; s < l.k; s++)
			n += (slots >> s & 1) && !l.masks[s].empty();
		return n;
	}
	int build(const gpuslot::SlotLayout &l, uint64_t slots, gpuslot::StreamSet *set,
		  std::string *error) override
	{
		calls.push_back("build " + std::to_string(l.generation));
		if (fail_build) {
			*error = "no streams today";
			return fail_build;
		}
		set->start(l);
		set->slots = slots;
		for (unsigned int s = 0; s < l.k; s++)
			if (slots >> s & 1)
				set->streams[s] = reinterpret_cast<void *>(next++);
		return 0;
	}
	int synchronize(void *, std::string *) override { return 0; }
	int build_union(const gpuslot::SlotLayout &, uint64_t slots, gpuslot::StreamSet::Union *u,
			std::string *) override
	{
		calls.push_back("union " + std::to_string(slots));
		*u = {slots, reinterpret_cast<void *>(next++), reinterpret_cast<void *>(next++)};
		return 0;
	}
	void destroy_union(const gpuslot::StreamSet::Union &u) override
	{
		calls.push_back("destroy union " + std::to_string(u.slots));
	}
	void destroy_slot(gpuslot::StreamSet *set, unsigned int slot) override
	{
		calls.push_back("destroy " +
				std::to_string(reinterpret_cast<uintptr_t>(set->streams[slot])));
		set->streams[slot] = nullptr;
		set->slots &= ~(1ULL << slot);
	}
};

class BudgetDouble : public gpuslot::QueueBudget {
public:
	int refuse = 0;
	unsigned int used = 0;
	int reserve(unsigned int n, std::string *error) override
	{
		calls.push_back("reserve " + std::to_string(n));
		if (refuse) {
			*error = "budget exhausted";
			return -refuse;
		}
		used += n;
		return 0;
	}
	void unreserve(unsigned int n) override
	{
		calls.push_back("unreserve " + std::to_string(n));
		used -= n;
	}
};

gpuslot::SlotLayout layout(uint64_t generation, unsigned int k)
{
	gpuslot::SlotLayout l;
	l.k = k;
	l.unit_kind = 1;
	l.nr_units = 60;
	l.generation = generation;
	for (unsigned int s = 0; s < k; s++)
		l.masks.push_back({1u << s});
	return l;
}

class StreamSets : public testing::Test {
protected:
	void SetUp() override { calls.clear(); }
	BackendDouble backend;
	BudgetDouble budget;
	std::string error;
};

TEST_F(StreamSets, ReservesFirstAndTheRuntimeOnce)
{
	gpuslot::StreamSets sets(backend, budget, 0);
	ASSERT_EQ(sets.update(layout(1, 4), &error), 1);
	EXPECT_EQ(calls, (std::vector<std::string>{"reserve 7", "build 1"}));
	EXPECT_EQ(sets.reserved(), 7u);
	EXPECT_EQ(sets.update(layout(1, 4), &error), 0) << "the same generation again";
	calls.clear();
	ASSERT_EQ(sets.update(layout(2, 2), &error), 1);
	// 2 new queues, then the 4 old streams (none handed out) go.
	EXPECT_EQ(calls, (std::vector<std::string>{"reserve 2", "build 2", "destroy 16",
						   "unreserve 1", "destroy 17", "unreserve 1",
						   "destroy 18", "unreserve 1", "destroy 19",
						   "unreserve 1"}));
	EXPECT_EQ(sets.reserved(), 5u);
	EXPECT_EQ(budget.used, 5u);
	EXPECT_EQ(sets.live_sets(), 1u);
}

TEST_F(StreamSets, HandedOutStreamsLiveUntilRetiredAndHoldsBlockRetiring)
{
	gpuslot::StreamSets sets(backend, budget, 0);
	ASSERT_EQ(sets.update(layout(1, 2), &error), 1);
	gpuslot::StreamSets::Handout h;
	ASSERT_TRUE(sets.hand_out(1, &h));
	EXPECT_EQ(h.stream, reinterpret_cast<void *>(0x11));
	EXPECT_EQ(h.generation, 1u);
	EXPECT_EQ(h.units, 1u);
	EXPECT_FALSE(sets.hand_out(2, &h)) << "no slot 2 at k = 2";
	calls.clear();
	gpuslot::SlotLayout two = layout(2, 2);
	two.masks[1] = {0x4}; // slot 1 moved: a new layout
	ASSERT_EQ(sets.update(two, &error), 1);
	EXPECT_EQ(calls, (std::vector<std::string>{"reserve 2", "build 2", "destroy 16",
						   "unreserve 1"}));
	EXPECT_EQ(sets.live_sets(), 2u);
	EXPECT_EQ(sets.retire(1), -EBUSY) << "slot 1 of generation 1 is still held";
	sets.hold_ended(1);
	calls.clear();
	EXPECT_EQ(sets.retire(1), 0);
	EXPECT_EQ(calls, (std::vector<std::string>{"destroy 17", "unreserve 1"}));
	EXPECT_EQ(sets.live_sets(), 1u);
	EXPECT_EQ(sets.retire(2), 0) << "the current set is never retired";
	EXPECT_EQ(sets.live_sets(), 1u);
	EXPECT_EQ(budget.used, 5u);
}

// A lent context (gpuslot_slots_context()): one slot's, or one partition's
// shared by several slots, keeps that slot's stream past a layout change,
// as a handout does; a union of partitions is built once per set and goes
// with its set; a whole-GPU slot lends none; a slot not built is refused.
TEST_F(StreamSets, LentContextsLiveWithTheirSetAndUnionsAreBuiltOnce)
{
	gpuslot::StreamSets sets(backend, budget, 0);
	gpuslot::SlotLayout l = layout(1, 4);
	l.masks[3] = l.masks[2]; // slots 2 and 3 share a partition
	ASSERT_EQ(sets.update(l, &error), 1);
	void *ctx = reinterpret_cast<void *>(1);
	uint64_t gen = 0;
	calls.clear();
	EXPECT_EQ(sets.lend_context(0x3, &ctx, &gen, &error), 0);
	EXPECT_EQ(sets.lend_context(0x3, &ctx, &gen, &error), 0);
	EXPECT_EQ(gen, 1u);
	EXPECT_EQ(calls, std::vector<std::string>{"union 3"}) << "built once";
	EXPECT_EQ(sets.lend_context(0xc, &ctx, &gen, &error), 0);
	EXPECT_EQ(calls.size(), 1u) << "one partition: no union";
	EXPECT_EQ(sets.lend_context(0x10, &ctx, &gen, &error), -EINVAL) << "no slot 4";
	EXPECT_EQ(sets.lend_context(0, &ctx, &gen, &error), -EINVAL);
	calls.clear();
	gpuslot::SlotLayout two = layout(2, 4);
	two.masks[0] = {}; // slot 0 the whole GPU now
	ASSERT_EQ(sets.update(two, &error), 1);
	// Slots 0, 1 and 3 of the old set go; slot 2's stream was lent.
	for (const std::string &c : calls)
		EXPECT_NE(c, "destroy 18") << "slot 2's context was lent";
	ctx = reinterpret_cast<void *>(1);
	EXPECT_EQ(sets.lend_context(0x3, &ctx, &gen, &error), 0);
	EXPECT_EQ(ctx, nullptr) << "slot 0 is the whole GPU";
	calls.clear();
	EXPECT_EQ(sets.retire(1), 0);
	EXPECT_EQ(calls, (std::vector<std::string>{"destroy 18", "destroy union 3",
						   "unreserve 1"}));
}

// A union lent alone keeps its set past a layout change, though none of
// the set's streams was handed out, until its generation is retired.
TEST_F(StreamSets, AUnionLentAloneLivesUntilRetired)
{
	gpuslot::StreamSets sets(backend, budget, 0);
	ASSERT_EQ(sets.update(layout(1, 2), &error), 1);
	void *ctx = nullptr;
	uint64_t gen = 0;
	ASSERT_EQ(sets.lend_context(0x3, &ctx, &gen, &error), 0);
	calls.clear();
	ASSERT_EQ(sets.update(layout(2, 3), &error), 1);
	for (const std::string &c : calls)
		EXPECT_NE(c, "destroy union 3") << "destroyed with its streams";
	EXPECT_EQ(sets.live_sets(), 2u);
	calls.clear();
	EXPECT_EQ(sets.retire(1), 0);
	EXPECT_EQ(calls, std::vector<std::string>{"destroy union 3"});
	EXPECT_EQ(sets.live_sets(), 1u);
}

// A newer generation of the same layout (gpuslotd restarted; a change
// undone) is no new layout: the current set takes its number, nothing is
// built or destroyed, and a hold under either number ends. A changed
// priority is a change. A renumbered set goes with its newest number.
TEST_F(StreamSets, AnUnchangedLayoutAtANewerGenerationIsRenumberedNotBuilt)
{
	gpuslot::StreamSets sets(backend, budget, 0);
	ASSERT_EQ(sets.update(layout(1, 2), &error), 1);
	gpuslot::StreamSets::Handout h;
	ASSERT_TRUE(sets.hand_out(1, &h)); // a hold of generation 1
	calls.clear();
	EXPECT_EQ(sets.update(layout(5, 2), &error), 0) << "renumbered, nothing built";
	EXPECT_EQ(calls, std::vector<std::string>{});
	EXPECT_EQ(sets.layout()->generation, 5u);
	EXPECT_EQ(sets.builds(), 1u);
	EXPECT_EQ(sets.live_sets(), 1u);
	EXPECT_FALSE(sets.newer(5));
	gpuslot::StreamSets::Handout h5;
	ASSERT_TRUE(sets.hand_out(1, &h5));
	EXPECT_EQ(h5.stream, h.stream);
	EXPECT_EQ(h5.generation, 5u);

	gpuslot::SlotLayout prio = layout(6, 2);
	prio.priorities = {0, 1};
	EXPECT_FALSE(sets.renumber(prio));
	ASSERT_EQ(sets.update(prio, &error), 1);
	EXPECT_EQ(sets.builds(), 2u);
	EXPECT_EQ(sets.live_sets(), 2u);
	EXPECT_EQ(sets.retire(5), -EBUSY);
	sets.hold_ended(1);
	EXPECT_EQ(sets.retire(5), -EBUSY) << "the hold of generation 5 is not over";
	sets.hold_ended(5);
	EXPECT_EQ(sets.retire(1), 0);
	EXPECT_EQ(sets.live_sets(), 2u) << "its streams were handed out under 5 too";
	EXPECT_EQ(sets.retire(5), 0);
	EXPECT_EQ(sets.live_sets(), 1u);
}

TEST_F(StreamSets, ARefusalOrAFailedBuildChangesNothing)
{
	gpuslot::StreamSets sets(backend, budget, 0x1);
	budget.refuse = ENOSPC;
	EXPECT_EQ(sets.update(layout(1, 2), &error), -ENOSPC);
	EXPECT_EQ(error, "budget exhausted");
	EXPECT_EQ(calls, std::vector<std::string>{"reserve 4"});
	EXPECT_EQ(sets.current(), nullptr);
	budget.refuse = 0;
	backend.fail_build = -EIO;
	calls.clear();
	EXPECT_EQ(sets.update(layout(1, 2), &error), -EIO);
	EXPECT_EQ(calls, (std::vector<std::string>{"reserve 4", "build 1", "unreserve 4"}));
	EXPECT_EQ(budget.used, 0u);
	backend.fail_build = 0;
	ASSERT_EQ(sets.update(layout(1, 2), &error), 1);
	EXPECT_EQ(sets.current()->slots, 0x1u) << "only the slots asked for";
}
} // namespace
