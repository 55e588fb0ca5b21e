// SPDX-License-Identifier: GPL-2.0
// Unit tests of the hardware-queue budget (kmod/lockcore/budget.c) in userspace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <list>
#include <memory>
#include <random>
#include <vector>

extern "C" {
#include "budget.h"
}

namespace {

class Budget {
public:
	explicit Budget(unsigned int limit) { gpuslot_budget_init(&b_, limit); }

	bool reserve(int id, unsigned int count, bool wait)
	{
		// The module refuses more than the limit before the budget
		// sees it (EINVAL): it could never be served.
		if (count > b_.limit)
			return false;
		if (gpuslot_budget_try_reserve(&b_, count)) {
			held_.push_back({id, count});
			return true;
		}
		if (wait) {
			auto w = std::make_unique<gpuslot_budget_waiter>();
			gpuslot_budget_enqueue(&b_, w.get(), count);
			queue_.push_back({id, std::move(w)});
		}
		return false;
	}

	std::vector<int> unreserve(size_t index)
	{
		unsigned int count = held_[index].count;
		held_.erase(held_.begin() + index);
		LIST_HEAD(granted);
		gpuslot_budget_unreserve(&b_, count, &granted);
		return collect(&granted);
	}

	std::vector<int> cancel(int id)
	{
		auto it = std::find_if(queue_.begin(), queue_.end(),
				       [id](auto &q) { return q.id == id; });
		EXPECT_NE(it, queue_.end());
		LIST_HEAD(granted);
		gpuslot_budget_cancel(&b_, it->w.get(), &granted);
		queue_.erase(it);
		return collect(&granted);
	}

	std::vector<int> set_limit(unsigned int limit)
	{
		LIST_HEAD(granted);
		gpuslot_budget_set_limit(&b_, limit, &granted);
		return collect(&granted);
	}

	const gpuslot_budget &raw() const { return b_; }
	unsigned int held_sum() const
	{
		unsigned int sum = 0;
		for (auto &h : held_)
			sum += h.count;
		return sum;
	}
	size_t holders() const { return held_.size(); }
	size_t queued() const { return queue_.size(); }
	unsigned int head_count() const { return queue_.front().w->count; }
	unsigned int queued_count(size_t i) const
	{
		auto it = queue_.begin();
		std::advance(it, i);
		return it->w->count;
	}
	int queued_id(size_t i) const
	{
		auto it = queue_.begin();
		std::advance(it, i);
		return it->id;
	}

private:
	// The ids granted, in order, and ~id for each request failed.
	std::vector<int> collect(list_head *granted)
	{
		std::vector<int> ids;
		while (!list_empty(granted)) {
			auto *w = container_of(granted->next,
					       gpuslot_budget_waiter, node);
			list_del_init(&w->node);
			EXPECT_TRUE(w->done);
			if (!w->granted) {
				EXPECT_EQ(w->error, -ENOSPC);
				EXPECT_GT(w->count, b_.limit);
				auto it = std::find_if(queue_.begin(), queue_.end(),
						       [w](auto &q) { return q.w.get() == w; });
				EXPECT_NE(it, queue_.end());
				ids.push_back(~it->id);
				queue_.erase(it);
				continue;
			}
			// Grants come off the head of the queue, in order.
			EXPECT_EQ(queue_.front().w.get(), w);
			held_.push_back({queue_.front().id, w->count});
			ids.push_back(queue_.front().id);
			queue_.pop_front();
		}
		return ids;
	}

	struct Held {
		int id;
		unsigned int count;
	};
	struct Queued {
		int id;
		std::unique_ptr<gpuslot_budget_waiter> w;
	};
	gpuslot_budget b_{};
	std::vector<Held> held_;
	std::list<Queued> queue_;
};

TEST(Budget, ReservationsAddUpToTheLimit)
{
	Budget b(24);
	EXPECT_TRUE(b.reserve(1, 8, false));
	EXPECT_TRUE(b.reserve(2, 8, false));
	EXPECT_TRUE(b.reserve(3, 8, false));
	EXPECT_FALSE(b.reserve(4, 1, false));
	EXPECT_EQ(b.raw().used, 24u);
	EXPECT_TRUE(b.unreserve(0).empty());
	EXPECT_TRUE(b.reserve(4, 8, false));
}

TEST(Budget, WaitersAreServedInFifoOrderWithoutOvertaking)
{
	Budget b(10);
	ASSERT_TRUE(b.reserve(0, 10, false));
	EXPECT_FALSE(b.reserve(1, 6, true));
	EXPECT_FALSE(b.reserve(2, 2, true));
	// A request that does not wait never overtakes a waiting one.
	EXPECT_FALSE(b.reserve(3, 1, false));
	EXPECT_EQ(b.unreserve(0), (std::vector<int>{1, 2}));
	EXPECT_EQ(b.raw().used, 8u);
}

TEST(Budget, HeadOfLineIsNotStarvedBySmallRequests)
{
	Budget b(4);
	ASSERT_TRUE(b.reserve(0, 2, false));
	ASSERT_TRUE(b.reserve(1, 2, false));
	EXPECT_FALSE(b.reserve(2, 4, true)); // needs everything
	EXPECT_FALSE(b.reserve(3, 1, true));
	EXPECT_TRUE(b.unreserve(0).empty()); // 2 free: the head needs 4
	EXPECT_EQ(b.unreserve(0), (std::vector<int>{2}));
	EXPECT_EQ(b.raw().used, 4u);
}

TEST(Budget, CancelOfTheHeadServesTheNext)
{
	Budget b(4);
	ASSERT_TRUE(b.reserve(0, 3, false));
	EXPECT_FALSE(b.reserve(1, 4, true));
	EXPECT_FALSE(b.reserve(2, 1, true));
	EXPECT_EQ(b.cancel(1), std::vector<int>{2});
}

TEST(Budget, LoweringTheLimitRevokesNothing)
{
	Budget b(24);
	ASSERT_TRUE(b.reserve(0, 20, false));
	EXPECT_TRUE(b.set_limit(10).empty());
	EXPECT_EQ(b.raw().used, 20u); // over the limit, nothing revoked
	EXPECT_FALSE(b.reserve(1, 1, false));
	EXPECT_FALSE(b.reserve(2, 1, true));
	EXPECT_EQ(b.unreserve(0), std::vector<int>{2}); // the waiter fits
	EXPECT_EQ(b.raw().used, 1u);
	EXPECT_FALSE(b.reserve(3, 10, true));
	EXPECT_EQ(b.set_limit(11), std::vector<int>{3});
}

TEST(Budget, ALoweredLimitFailsTheRequestsItCanNeverHold)
{
	Budget b(24);
	ASSERT_TRUE(b.reserve(0, 20, false));
	EXPECT_FALSE(b.reserve(1, 10, true));
	EXPECT_FALSE(b.reserve(2, 4, true));
	EXPECT_FALSE(b.reserve(3, 9, true));
	// 10 and 9 can never fit under 8; 4 waits for the holder.
	EXPECT_EQ(b.set_limit(8), (std::vector<int>{~1, ~3}));
	EXPECT_EQ(b.queued(), 1u);
	EXPECT_EQ(b.unreserve(0), std::vector<int>{2});
	// More than the limit is never queued.
	EXPECT_FALSE(b.reserve(4, 9, true));
	EXPECT_EQ(b.queued(), 0u);
}

TEST(Budget, RandomizedOperationsKeepInvariants)
{
	std::mt19937 rng(777);
	Budget b(24);
	int id = 0;
	for (int step = 0; step < 200000; step++) {
		unsigned int op = rng() % 100;
		if (op < 45) {
			b.reserve(id++, 1 + rng() % 8, rng() % 2);
		} else if (op < 80 && b.holders()) {
			b.unreserve(rng() % b.holders());
		} else if (op < 92 && b.queued()) {
			b.cancel(b.queued_id(rng() % b.queued()));
		} else if (op >= 92) {
			b.set_limit(1 + rng() % 32);
		}
		const gpuslot_budget &r = b.raw();
		ASSERT_EQ(r.used, b.held_sum());
		ASSERT_EQ(r.nr_waiters, b.queued());
		for (size_t i = 0; i < b.queued(); i++)
			ASSERT_LE(b.queued_count(i), r.limit);
		// Nobody waits while the head would fit.
		if (b.queued()) {
			ASSERT_TRUE(r.used > r.limit ||
				    b.head_count() > r.limit - r.used);
		}
		if (HasFailure())
			FAIL() << "at step " << step;
	}
}

} // namespace
