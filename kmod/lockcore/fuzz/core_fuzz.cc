// SPDX-License-Identifier: GPL-2.0
// libFuzzer target for the lock core (kmod/lockcore/core.c).
//
// Each input is a sequence of operations: acquire (try or queue, with a
// mask), cancel (a timeout or a signal), release, set k, and owner death
// (a client that holds or waits goes away). The core runs beside a
// reference model written from the specification alone, and every step
// checks: at most k holders among slots below k, no slot held twice, the
// core and the model agree on every grant (FIFO among eligible waiters),
// and no waiter is left queued while a slot it allows is free.
#define FUZZ_TARGET "core_fuzz"
#include "fuzz_check.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <vector>

extern "C" {
#include "core.h"
}

namespace {

using fuzz_check::total_ops;

// The specification, written plainly: a FIFO list of waiters and a map of
// held slots.
struct Model {
	struct Waiter {
		int id;
		uint64_t allowed;
	};
	unsigned int k = 1;
	std::map<unsigned int, int> held; // slot -> client
	std::deque<Waiter> queue;

	uint64_t valid() const { return k >= 64 ? ~0ULL : (1ULL << k) - 1; }
	bool is_held(unsigned int s) const { return held.count(s); }

	int lowest_free(uint64_t allowed) const
	{
		for (unsigned int s = 0; s < 64; s++)
			if ((valid() >> s & 1) && (allowed >> s & 1) && !is_held(s))
				return int(s);
		return -1;
	}

	// After k shrinks: waiters that allow no slot below k can never be
	// served and leave the queue (the module fails them with EINVAL).
	std::vector<int> fail_unservable()
	{
		std::vector<int> failed;
		for (auto it = queue.begin(); it != queue.end();) {
			if (it->allowed & valid()) {
				++it;
				continue;
			}
			failed.push_back(it->id);
			it = queue.erase(it);
		}
		return failed;
	}

	// Serve waiters in FIFO order, each the lowest free slot it allows.
	std::vector<std::pair<int, unsigned int>> serve()
	{
		std::vector<std::pair<int, unsigned int>> grants;
		for (auto it = queue.begin(); it != queue.end();) {
			int s = lowest_free(it->allowed);
			if (s < 0) {
				++it;
				continue;
			}
			held[s] = it->id;
			grants.push_back({it->id, unsigned(s)});
			it = queue.erase(it);
		}
		return grants;
	}
};

struct Client {
	std::unique_ptr<gpuslot_core_waiter> w; // set while queued
	int slot = -1;				 // held slot
};

class Harness {
public:
	Harness() { gpuslot_core_init(&core_, 1); }

	void acquire(int id, uint64_t allowed, bool queue_if_busy)
	{
		Client &c = clients_[id];
		if (c.w || c.slot >= 0)
			return; // one slot or one wait per client
		if (!(allowed & model_.valid()))
			return; // EINVAL: no slot below k in the mask
		// A newcomer may take a free slot only if no waiter allows it.
		int want = model_.lowest_free(allowed);
		for (auto &q : model_.queue)
			if (want >= 0 && (q.allowed >> want & 1))
				want = -1;
		int got = gpuslot_core_try_acquire(&core_, allowed);
		CHECK(got == want);
		if (got >= 0) {
			c.slot = got;
			model_.held[got] = id;
			return;
		}
		if (!queue_if_busy)
			return;
		c.w = std::make_unique<gpuslot_core_waiter>();
		gpuslot_core_enqueue(&core_, c.w.get(), allowed);
		model_.queue.push_back({id, allowed});
	}

	void cancel(int id)
	{
		Client &c = clients_[id];
		if (!c.w)
			return;
		gpuslot_core_cancel(&core_, c.w.get());
		c.w.reset();
		for (auto it = model_.queue.begin(); it != model_.queue.end(); ++it)
			if (it->id == id) {
				model_.queue.erase(it);
				break;
			}
	}

	void release(int id)
	{
		Client &c = clients_[id];
		if (c.slot < 0)
			return;
		LIST_HEAD(granted);
		gpuslot_core_release(&core_, c.slot, &granted);
		model_.held.erase(c.slot);
		c.slot = -1;
		absorb(&granted, model_.serve());
	}

	void set_k(unsigned int k)
	{
		LIST_HEAD(granted);
		uint64_t gen = core_.generation;
		bool changed = gpuslot_core_set_k(&core_, k, &granted);
		CHECK(changed == (k != model_.k));
		CHECK(core_.generation == gen + (changed ? 1 : 0));
		model_.k = k;
		auto failed = model_.fail_unservable();
		absorb(&granted, model_.serve(), failed);
	}

	// A client dies: it leaves the queue or gives its slot back.
	void die(int id)
	{
		cancel(id);
		release(id);
	}

	void check() const
	{
		uint64_t held = 0;
		unsigned int below_k = 0;
		for (auto &[slot, id] : model_.held) {
			CHECK(!(held >> slot & 1));
			held |= 1ULL << slot;
			if (model_.valid() >> slot & 1)
				below_k++;
			CHECK(clients_.at(id).slot == int(slot));
		}
		CHECK(core_.held == held);
		CHECK(below_k <= model_.k);
		CHECK(core_.k == model_.k);
		CHECK(core_.nr_waiters == model_.queue.size());
		uint64_t free_valid = model_.valid() & ~held;
		unsigned int any = 0, wanting[64] = {};
		for (auto &q : model_.queue) {
			CHECK(!(q.allowed & free_valid));
			if (q.allowed == ~0ULL)
				any++;
			else
				for (unsigned int s = 0; s < 64; s++)
					wanting[s] += q.allowed >> s & 1;
		}
		CHECK(core_.nr_any == any);
		for (auto &q : model_.queue)
			CHECK(q.allowed & model_.valid());
		for (unsigned int s = 0; s < 64; s++)
			CHECK(core_.nr_wanting[s] == wanting[s]);
	}

	void drain()
	{
		for (auto &[id, c] : clients_)
			if (c.w)
				cancel(id);
	}

private:
	// The core's grants must be the model's, in the same order, after
	// the waiters it failed (@failed, in queue order).
	void absorb(list_head *granted,
		    const std::vector<std::pair<int, unsigned int>> &expected,
		    const std::vector<int> &failed = {})
	{
		size_t i = 0, f = 0;
		while (!list_empty(granted)) {
			auto *w = container_of(granted->next, gpuslot_core_waiter,
					       node);
			list_del_init(&w->node);
			if (!w->granted) {
				CHECK(f < failed.size());
				Client &c = clients_[failed[f]];
				CHECK(c.w.get() == w);
				CHECK(w->done && w->error == -EINVAL);
				c.w.reset();
				f++;
				continue;
			}
			CHECK(i < expected.size());
			Client &c = clients_[expected[i].first];
			CHECK(c.w.get() == w);
			CHECK(w->slot == int(expected[i].second));
			CHECK(w->granted);
			c.slot = w->slot;
			c.w.reset();
			i++;
		}
		CHECK(i == expected.size());
		CHECK(f == failed.size());
	}

	gpuslot_core core_{};
	Model model_;
	std::map<int, Client> clients_;
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	std::atexit(fuzz_check::report_total);
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Harness h;
	for (size_t i = 0; i + 2 <= size; i += 2) {
		uint8_t op = data[i], arg = data[i + 1];
		int id = arg & 15; // 16 clients
		// Any slot, or one or two of the slots 0..7.
		uint64_t mask = (op & 0x20) ? ~0ULL :
			(1ULL << ((arg >> 4) % 8)) | (1ULL << (op & 7));
		switch (op >> 6) {
		case 0:
			h.acquire(id, mask, op & 0x10);
			break;
		case 1:
			h.release(id);
			break;
		case 2:
			if (op & 0x20)
				h.set_k(1 + arg % 64);
			else
				h.cancel(id); // a timeout or a signal
			break;
		default:
			h.die(id);
			break;
		}
		h.check();
		total_ops++;
	}
	h.drain();
	return 0;
}
