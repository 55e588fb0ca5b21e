// SPDX-License-Identifier: LGPL-2.1-or-later
// The streams of a client across layout generations.
//
// The current set serves new holds. A set replaced by a newer layout keeps
// every stream it handed out (callers built BLAS handles, graphs, framework
// streams on them) until the caller retires its generation; streams it
// never handed out go at once. Queues are reserved before any stream is
// created and returned when streams go: past the budget the firmware
// time-slices every queue on the GPU.
//
// A layout may come back at a newer generation unchanged (gpuslotd
// restarted and planned the same partitions; a change was undone): the
// current set then takes the new number and builds nothing, so a hold
// that spans the change keeps its stream and nothing is rebuilt that was
// not changed.
//
// Building is split from installing, so that the slow part (creating
// streams) runs without the lock that holders take: build() needs only
// that builds are serialised; every other call needs the caller's lock.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "backend.hpp"

namespace gpuslot {

// The module's hardware-queue budget, as a client reserves from it.
class QueueBudget {
public:
	virtual ~QueueBudget() = default;
	// 0, or -errno with *error saying why (ENOSPC names the holders).
	virtual int reserve(unsigned int count, std::string *error) = 0;
	virtual void unreserve(unsigned int count) = 0;
};

class StreamSets {
public:
	// Streams for the slots in @wanted (0: all) of each layout.
	StreamSets(Backend &backend, QueueBudget &budget, uint64_t wanted)
		: backend_(backend), budget_(budget), wanted_(wanted)
	{
	}
	StreamSets(const StreamSets &) = delete;
	StreamSets &operator=(const StreamSets &) = delete;
	~StreamSets();

	struct Generation {
		SlotLayout layout; // its generation the set's newest number
		// The generation the set was built for; it served every
		// generation from there to layout.generation (renumber()).
		uint64_t built_for = 0;
		StreamSet set;
		unsigned int holds = 0;	  // holds not ended
		unsigned int reserved = 0; // queues reserved for it, runtime's too
	};

	// True if @generation is newer than the current set's.
	bool newer(uint64_t generation) const
	{
		return gens_.empty() || gens_.back().layout.generation < generation;
	}
	// Reserve queues for and build the set of @layout into *g: 0, or
	// -errno with *error (nothing reserved or built).
	int build(const SlotLayout &layout, Generation *g, std::string *error);
	// Make @g current (it must be newer); the old current set keeps the
	// streams it handed out.
	void install(Generation &&g);
	// If @layout is the current set's layout (everything but the
	// generation: k, units, partitions, priorities, the GPU) at a newer
	// generation, the current set takes that number: nothing is built, and
	// holds and streams handed out under the old number stay as they are.
	// True if the current set serves @layout's generation now.
	bool renumber(const SlotLayout &layout);
	// build() and install() unless renumber() does: 1 built, 0 current
	// already (or renumbered), or -errno.
	int update(const SlotLayout &layout, std::string *error);

	// The current set and its layout; nullptr before the first update().
	const StreamSet *current() const { return gens_.empty() ? nullptr : &gens_.back().set; }
	const SlotLayout *layout() const { return gens_.empty() ? nullptr : &gens_.back().layout; }

	// Hand out slot @slot's stream of the current set for a hold: false
	// if that set has no stream for @slot.
	struct Handout {
		void *stream;
		uint64_t generation;
		unsigned int units; // of the layout's partition
		unsigned int priority; // the slot's, which its stream was made at
	};
	bool hand_out(unsigned int slot, Handout *out);
	// Lend the current set's context of the slots in @slots (a green
	// context; nullptr where one of them is the whole GPU) to build more
	// streams on: the set keeps it until its generation is retired, as a
	// handed-out stream. One slot, or slots of one partition: that slot's
	// context; slots of several: a context of the union of their
	// partitions, built once (the backend's build_union()). 0, -EINVAL
	// (a slot the set has no stream for), or the backend's -errno.
	int lend_context(uint64_t slots, void **context, uint64_t *generation,
			 std::string *error);
	// A hold of generation @generation ended.
	void hold_ended(uint64_t generation);

	// Destroy the sets of generations <= @generation, except the current
	// one: 0, or -EBUSY (nothing changed) if one of them is still held. A
	// renumbered set goes once its newest number is retired: its streams
	// may have been handed out under that one too.
	int retire(uint64_t generation);

	unsigned int reserved() const { return reserved_; }
	unsigned int live_sets() const { return unsigned(gens_.size()); }
	uint64_t builds() const { return builds_; }

private:
	void destroy(Generation &g);
	// Drop the never-handed-out streams of a set that is no longer current.
	void trim(Generation &g);

	Backend &backend_;
	QueueBudget &budget_;
	uint64_t wanted_;
	std::list<Generation> gens_; // oldest first; the last is current
	unsigned int reserved_ = 0;
	bool runtime_reserved_ = false;
	uint64_t builds_ = 0;
};

// @a and @b describe the same streams: equal in everything but their
// generations.
bool same_layout(const SlotLayout &a, const SlotLayout &b);

// The units of slot @slot's partition in @layout.
unsigned int slot_units(const SlotLayout &layout, unsigned int slot);

} // namespace gpuslot
