// SPDX-License-Identifier: GPL-2.0
// Unit tests of the lock core (kmod/lockcore/core.c), compiled in userspace.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <vector>

extern "C" {
#include "core.h"
}

namespace {

// A core plus the bookkeeping a caller does: who holds what, who waits.
class Lock {
public:
	explicit Lock(unsigned int k) { gpuslot_core_init(&core_, k); }

	// Returns the slot taken at once, or -1 after queueing waiter @id, or
	// -2 for a mask with no slot below k (the module's EINVAL).
	int acquire(int id, uint64_t allowed = ~0ULL)
	{
		if (!(allowed & gpuslot_core_valid(&core_)))
			return -2;
		int slot = gpuslot_core_try_acquire(&core_, allowed);
		if (slot >= 0) {
			holder_[slot] = id;
			return slot;
		}
		auto w = std::make_unique<gpuslot_core_waiter>();
		gpuslot_core_enqueue(&core_, w.get(), allowed);
		queue_.push_back({id, std::move(w)});
		return -1;
	}

	bool try_acquire(int id, uint64_t allowed, int *slot)
	{
		*slot = gpuslot_core_try_acquire(&core_, allowed);
		if (*slot >= 0)
			holder_[*slot] = id;
		return *slot >= 0;
	}

	void cancel(int id)
	{
		auto it = find(id);
		ASSERT_NE(it, queue_.end());
		gpuslot_core_cancel(&core_, it->w.get());
		queue_.erase(it);
	}

	// Returns the ids granted, in grant order.
	std::vector<int> release(unsigned int slot)
	{
		holder_.erase(slot);
		LIST_HEAD(granted);
		gpuslot_core_release(&core_, slot, &granted);
		return collect(&granted);
	}

	std::vector<int> set_k(unsigned int k)
	{
		LIST_HEAD(granted);
		gpuslot_core_set_k(&core_, k, &granted);
		return collect(&granted);
	}

	int slot_of(int id) const
	{
		for (auto &[slot, h] : holder_)
			if (h == id)
				return static_cast<int>(slot);
		return -1;
	}

	const gpuslot_core &core() const { return core_; }
	const std::map<unsigned int, int> &holders() const { return holder_; }
	size_t queued() const { return queue_.size(); }

	struct Queued {
		int id;
		std::unique_ptr<gpuslot_core_waiter> w;
	};
	const std::list<Queued> &queue() const { return queue_; }

private:
	std::list<Queued>::iterator find(int id)
	{
		return std::find_if(queue_.begin(), queue_.end(),
				    [id](const Queued &q) { return q.id == id; });
	}

	// The ids granted, in grant order, and ~id for each waiter failed.
	std::vector<int> collect(list_head *granted)
	{
		std::vector<int> ids;
		while (!list_empty(granted)) {
			auto *cw = container_of(granted->next,
						gpuslot_core_waiter, node);
			list_del_init(&cw->node);
			auto it = std::find_if(queue_.begin(), queue_.end(),
					       [cw](const Queued &q) {
						       return q.w.get() == cw;
					       });
			EXPECT_NE(it, queue_.end());
			EXPECT_TRUE(cw->done);
			if (!cw->granted) {
				// Failed: no slot below k is acceptable to it.
				EXPECT_EQ(cw->error, -EINVAL);
				EXPECT_EQ(cw->allowed & gpuslot_core_valid(&core_), 0u);
				ids.push_back(~it->id);
				queue_.erase(it);
				continue;
			}
			EXPECT_GE(cw->slot, 0);
			EXPECT_EQ(holder_.count(cw->slot), 0u)
				<< "slot " << cw->slot << " granted twice";
			holder_[cw->slot] = it->id;
			ids.push_back(it->id);
			queue_.erase(it);
		}
		return ids;
	}

	gpuslot_core core_{};
	std::map<unsigned int, int> holder_;
	std::list<Queued> queue_;
};

uint64_t bit(unsigned int slot) { return 1ULL << slot; }

TEST(Core, UncontendedTakesLowestSlots)
{
	Lock l(3);
	EXPECT_EQ(l.acquire(1), 0);
	EXPECT_EQ(l.acquire(2), 1);
	EXPECT_EQ(l.acquire(3), 2);
	EXPECT_EQ(l.acquire(4), -1);
	EXPECT_EQ(l.core().held, 0x7u);
	EXPECT_EQ(l.core().nr_waiters, 1u);
}

TEST(Core, ValidMaskCoversAllSixtyFourSlots)
{
	Lock l(64);
	EXPECT_EQ(gpuslot_core_valid(&l.core()), ~0ULL);
	for (int i = 0; i < 64; i++)
		EXPECT_EQ(l.acquire(i), i);
	EXPECT_EQ(l.acquire(64), -1);
}

TEST(Core, ReleaseHandsOffInFifoOrder)
{
	Lock l(1);
	ASSERT_EQ(l.acquire(0), 0);
	for (int id = 1; id <= 4; id++)
		ASSERT_EQ(l.acquire(id), -1);
	for (int id = 1; id <= 4; id++) {
		EXPECT_EQ(l.release(0), std::vector<int>{id});
		// Direct handoff: nothing is left free for a newcomer.
		int slot;
		EXPECT_FALSE(l.try_acquire(99, ~0ULL, &slot));
	}
	EXPECT_TRUE(l.release(0).empty());
	EXPECT_EQ(l.core().held, 0u);
}

TEST(Core, MaskedWaiterDoesNotBlockOthers)
{
	Lock l(3);
	ASSERT_EQ(l.acquire(1, bit(2)), 2);
	ASSERT_EQ(l.acquire(2, bit(2)), -1); // waits for slot 2 only
	// Slots 0 and 1 are free and unwanted by the waiter: a newcomer
	// takes them without overtaking anybody.
	EXPECT_EQ(l.acquire(3), 0);
	EXPECT_EQ(l.acquire(4), 1);
	EXPECT_EQ(l.release(0), std::vector<int>{});
	EXPECT_EQ(l.release(2), std::vector<int>{2});
	EXPECT_EQ(l.slot_of(2), 2);
}

TEST(Core, MixedMasksKeepFifoAmongEligible)
{
	Lock l(2);
	ASSERT_EQ(l.acquire(0), 0);
	ASSERT_EQ(l.acquire(1), 1);
	ASSERT_EQ(l.acquire(10, bit(1)), -1);
	ASSERT_EQ(l.acquire(11), -1);
	ASSERT_EQ(l.acquire(12, bit(0)), -1);
	EXPECT_EQ(l.release(0), std::vector<int>{11}); // 10 cannot use 0
	EXPECT_EQ(l.release(1), std::vector<int>{10});
	EXPECT_EQ(l.release(0), std::vector<int>{12});
}

TEST(Core, CancelLeavesQueueConsistent)
{
	Lock l(1);
	ASSERT_EQ(l.acquire(0), 0);
	ASSERT_EQ(l.acquire(1), -1);
	ASSERT_EQ(l.acquire(2), -1);
	ASSERT_EQ(l.acquire(3), -1);
	l.cancel(2);
	EXPECT_EQ(l.core().nr_waiters, 2u);
	EXPECT_EQ(l.release(0), std::vector<int>{1});
	EXPECT_EQ(l.release(0), std::vector<int>{3});
}

TEST(Core, GrowAdmitsWaitersAtOnceAndBumpsGeneration)
{
	Lock l(1);
	ASSERT_EQ(l.acquire(0), 0);
	ASSERT_EQ(l.acquire(1), -1);
	ASSERT_EQ(l.acquire(2), -1);
	ASSERT_EQ(l.acquire(3), -1);
	uint64_t gen = l.core().generation;
	EXPECT_EQ(l.set_k(3), (std::vector<int>{1, 2}));
	EXPECT_EQ(l.core().generation, gen + 1);
	EXPECT_EQ(l.slot_of(1), 1);
	EXPECT_EQ(l.slot_of(2), 2);
	// Setting the same k is no change.
	EXPECT_TRUE(l.set_k(3).empty());
	EXPECT_EQ(l.core().generation, gen + 1);
}

TEST(Core, ShrinkRetiresSlotsAsTheyAreReleased)
{
	Lock l(4);
	for (int id = 0; id < 4; id++)
		ASSERT_EQ(l.acquire(id), id);
	ASSERT_EQ(l.acquire(9), -1);
	EXPECT_TRUE(l.set_k(2).empty());
	EXPECT_EQ(l.core().held, 0xfu); // holders are not disturbed
	EXPECT_TRUE(l.release(3).empty()); // retired, not handed on
	EXPECT_TRUE(l.release(2).empty());
	EXPECT_EQ(l.core().held, 0x3u);
	EXPECT_EQ(l.release(1), std::vector<int>{9});
	EXPECT_EQ(l.slot_of(9), 1);
	int slot;
	EXPECT_FALSE(l.try_acquire(5, bit(3), &slot)); // slot 3 is gone
}

TEST(Core, ShrinkFailsWaitersThatAcceptNoSlotBelowK)
{
	Lock l(4);
	for (int id = 0; id < 4; id++)
		ASSERT_EQ(l.acquire(id), id);
	ASSERT_EQ(l.acquire(10, bit(3)), -1);
	ASSERT_EQ(l.acquire(11, bit(1) | bit(3)), -1);
	ASSERT_EQ(l.acquire(12, bit(2)), -1);
	ASSERT_EQ(l.acquire(13), -1);
	EXPECT_EQ(l.set_k(2), (std::vector<int>{~10, ~12}));
	EXPECT_EQ(l.queued(), 2u);
	EXPECT_EQ(l.core().nr_wanting[3], 1u); // 11's mask is still counted
	EXPECT_EQ(l.release(1), std::vector<int>{11});
	EXPECT_EQ(l.release(0), std::vector<int>{13});
}

// Properties checked after every step of the randomized run.
void check_invariants(const Lock &l)
{
	const gpuslot_core &c = l.core();
	uint64_t held = 0;
	for (auto &[slot, id] : l.holders()) {
		ASSERT_LT(slot, 64u);
		ASSERT_FALSE(held & bit(slot)) << "slot held twice";
		held |= bit(slot);
	}
	ASSERT_EQ(held, c.held);
	ASSERT_EQ(l.queued(), c.nr_waiters);
	uint64_t free_valid = gpuslot_core_valid(&c) & ~c.held;
	unsigned int any = 0, wanting[64] = {};
	for (auto &q : l.queue()) {
		ASSERT_EQ(q.w->allowed & free_valid, 0u)
			<< "waiter " << q.id << " skipped while a slot it allows is free";
		if (q.w->allowed == ~0ULL)
			any++;
		else
			for (unsigned int s = 0; s < 64; s++)
				wanting[s] += q.w->allowed >> s & 1;
	}
	ASSERT_EQ(c.nr_any, any);
	for (auto &q : l.queue())
		ASSERT_NE(q.w->allowed & gpuslot_core_valid(&c), 0u)
			<< "waiter " << q.id << " waits for slots that no longer exist";
	for (unsigned int s = 0; s < 64; s++)
		ASSERT_EQ(c.nr_wanting[s], wanting[s]) << "slot " << s;
}

TEST(Core, RandomizedOperationsKeepInvariants)
{
	std::mt19937_64 rng(12345);
	Lock l(3);
	int next_id = 0;

	for (int step = 0; step < 200000; step++) {
		unsigned int op = rng() % 100;
		if (op < 40) {
			uint64_t allowed = (rng() % 4) ? ~0ULL : (rng() & 0xff);
			if (!allowed)
				allowed = 1;
			l.acquire(next_id++, allowed);
		} else if (op < 75 && !l.holders().empty()) {
			auto it = l.holders().begin();
			std::advance(it, rng() % l.holders().size());
			unsigned int slot = it->first;
			uint64_t valid = gpuslot_core_valid(&l.core());
			// FIFO among eligible: the first queued waiter that
			// accepts the slot must be the one served.
			int expect = -1;
			if (valid & bit(slot))
				for (auto &q : l.queue())
					if (q.w->allowed & bit(slot)) {
						expect = q.id;
						break;
					}
			auto got = l.release(slot);
			if (expect < 0)
				ASSERT_TRUE(got.empty());
			else
				ASSERT_EQ(got, std::vector<int>{expect});
		} else if (op < 90 && l.queued()) {
			auto it = l.queue().begin();
			std::advance(it, rng() % l.queued());
			l.cancel(it->id);
		} else if (op >= 90) {
			l.set_k(1 + rng() % 8);
		}
		check_invariants(l);
		if (HasFatalFailure())
			FAIL() << "at step " << step;
	}
}

} // namespace
