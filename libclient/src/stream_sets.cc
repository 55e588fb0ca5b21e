// SPDX-License-Identifier: LGPL-2.1-or-later
#include "stream_sets.hpp"

#include <bit>
#include <cerrno>

namespace gpuslot {

unsigned int slot_units(const SlotLayout &l, unsigned int slot)
{
	if (slot >= l.masks.size() || l.masks[slot].empty())
		return l.nr_units;
	unsigned int n = 0;
	for (uint32_t w : l.masks[slot])
		n += std::popcount(w);
	return n;
}

bool same_layout(const SlotLayout &a, const SlotLayout &b)
{
	if (a.k != b.k || a.unit_kind != b.unit_kind || a.nr_units != b.nr_units ||
	    a.unit_size != b.unit_size || a.pci_bus_id != b.pci_bus_id)
		return false;
	for (unsigned int slot = 0; slot < a.k; slot++) {
		const auto &ma = slot < a.masks.size() ? a.masks[slot] : std::vector<uint32_t>{};
		const auto &mb = slot < b.masks.size() ? b.masks[slot] : std::vector<uint32_t>{};
		if (ma != mb || a.priority(slot) != b.priority(slot))
			return false;
	}
	return true;
}

StreamSets::~StreamSets()
{
	for (auto &g : gens_)
		destroy(g);
	if (reserved_)
		budget_.unreserve(reserved_);
}

int StreamSets::build(const SlotLayout &layout, Generation *g, std::string *error)
{
	const uint64_t slots = layout_slots(layout, wanted_);
	unsigned int need = backend_.set_queues(layout, slots);
	const bool runtime = !runtime_reserved_;
	if (runtime)
		need += backend_.runtime_queues();
	// Reserve before creating anything.
	if (need) {
		if (int err = budget_.reserve(need, error)) {
			if (err == -ENOSPC && gens_.size() > 1)
				*error += "; the streams of " + std::to_string(gens_.size() - 1) +
					  " older layout generation(s) still hold queues: retire "
					  "them with gpuslot_retire_generation()";
			return err;
		}
	}
	g->layout = layout;
	g->built_for = layout.generation;
	if (int err = backend_.build(layout, slots, &g->set, error)) {
		if (need)
			budget_.unreserve(need);
		return err;
	}
	g->set.queues = need - (runtime ? backend_.runtime_queues() : 0);
	g->reserved = need;
	runtime_reserved_ = true;
	return 0;
}

void StreamSets::install(Generation &&g)
{
	reserved_ += g.reserved;
	builds_++;
	if (!gens_.empty()) {
		trim(gens_.back());
		// A set that nobody got a stream or a context of is gone at
		// once.
		if (!gens_.back().set.slots && !gens_.back().holds &&
		    gens_.back().set.unions.empty()) {
			destroy(gens_.back());
			gens_.pop_back();
		}
	}
	gens_.push_back(std::move(g));
}

bool StreamSets::renumber(const SlotLayout &layout)
{
	if (gens_.empty())
		return false;
	SlotLayout &current = gens_.back().layout;
	if (!newer(layout.generation))
		return current.generation == layout.generation;
	if (!same_layout(current, layout))
		return false;
	current.generation = layout.generation;
	gens_.back().set.generation = layout.generation;
	return true;
}

int StreamSets::update(const SlotLayout &layout, std::string *error)
{
	if (!newer(layout.generation) || renumber(layout))
		return 0;
	Generation g;
	if (int err = build(layout, &g, error))
		return err;
	install(std::move(g));
	return 1;
}

void StreamSets::trim(Generation &g)
{
	for (unsigned int s = 0; s < g.set.streams.size(); s++) {
		if (!(g.set.slots >> s & 1) || g.set.handed_out[s])
			continue;
		const unsigned int q = backend_.set_queues(g.layout, 1ULL << s);
		backend_.destroy_slot(&g.set, s);
		g.set.queues -= q;
		reserved_ -= q;
		if (q)
			budget_.unreserve(q);
	}
}

void StreamSets::destroy(Generation &g)
{
	backend_.destroy(&g.set);
	if (g.set.queues) {
		reserved_ -= g.set.queues;
		budget_.unreserve(g.set.queues);
		g.set.queues = 0;
	}
}

bool StreamSets::hand_out(unsigned int slot, Handout *out)
{
	if (gens_.empty())
		return false;
	Generation &g = gens_.back();
	if (slot >= g.layout.k || !(g.set.slots >> slot & 1))
		return false;
	g.set.handed_out[slot] = true;
	g.holds++;
	*out = {g.set.streams[slot], g.layout.generation, slot_units(g.layout, slot),
		g.set.priorities.size() > slot ? g.set.priorities[slot] : g.layout.priority(slot)};
	return true;
}

int StreamSets::lend_context(uint64_t slots, void **context, uint64_t *generation,
			     std::string *error)
{
	if (gens_.empty() || !slots) {
		*error = "no streams are built for these slots";
		return -EINVAL;
	}
	Generation &g = gens_.back();
	unsigned int first = 64;
	bool whole = false, same = true;
	for (unsigned int s = 0; s < 64; s++) {
		if (!(slots >> s & 1))
			continue;
		if (s >= g.layout.k || !(g.set.slots >> s & 1)) {
			*error = "slot " + std::to_string(s) + " has no stream in the client's layout "
				 "(not in its slot_mask, or not 0 .. k - 1)";
			return -EINVAL;
		}
		whole |= g.layout.masks[s].empty();
		if (first == 64)
			first = s;
		else
			same &= g.layout.masks[s] == g.layout.masks[first];
	}
	*generation = g.layout.generation;
	if (whole) {
		*context = nullptr; // a stream of the primary context serves it
		return 0;
	}
	if (same) {
		// Streams made on the context outlive any hold: trim() must
		// not destroy it when the layout changes.
		g.set.handed_out[first] = true;
		*context = g.set.contexts[first];
		return 0;
	}
	for (const StreamSet::Union &u : g.set.unions)
		if (u.slots == slots) {
			*context = u.context;
			return 0;
		}
	StreamSet::Union u;
	if (int err = backend_.build_union(g.layout, slots, &u, error))
		return err;
	g.set.unions.push_back(u);
	*context = u.context;
	return 0;
}

void StreamSets::hold_ended(uint64_t generation)
{
	for (auto &g : gens_)
		if (g.built_for <= generation && generation <= g.layout.generation && g.holds) {
			g.holds--;
			return;
		}
}

int StreamSets::retire(uint64_t generation)
{
	if (gens_.empty())
		return 0;
	const auto current = std::prev(gens_.end());
	for (auto it = gens_.begin(); it != current; ++it)
		if (it->layout.generation <= generation && it->holds)
			return -EBUSY;
	for (auto it = gens_.begin(); it != current;) {
		if (it->layout.generation <= generation) {
			destroy(*it);
			it = gens_.erase(it);
		} else {
			++it;
		}
	}
	return 0;
}

} // namespace gpuslot
