// SPDX-License-Identifier: LGPL-2.1-or-later
// What backs a slot's stream: the seam between the client (the lock, the
// layout, the queue budget) and a GPU runtime (HIP, CUDA green contexts).
#pragma once

#include <cerrno>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launch_throttle.hpp"

namespace gpuslot {

// The layout as a backend builds streams for it.
struct SlotLayout {
	unsigned int k = 1;
	uint32_t unit_kind = 0; // GPUSLOT_UNIT_*
	unsigned int nr_units = 0;
	unsigned int unit_size = 0;
	// Per slot, HIP flat-bit order, 32 per word; empty = the whole GPU.
	std::vector<std::vector<uint32_t>> masks;
	// Per slot, its stream priority, 0 .. GPUSLOT_MAX_SLOT_PRIORITY
	// levels above the default (missing entries: 0).
	std::vector<unsigned int> priorities;
	uint64_t generation = 0;

	unsigned int priority(unsigned int slot) const
	{
		return slot < priorities.size() ? priorities[slot] : 0;
	}
	std::string pci_bus_id; // the domain's GPU, DDDD:BB:DD.F; "" unknown
};

// The streams of one layout generation. Slots outside the set's slot mask
// have no stream (nullptr) and take no queue.
struct StreamSet {
	uint64_t generation = 0;
	uint64_t slots = 0; // the slots built
	std::vector<void *> streams;
	// Per slot, what the backend keeps beside the stream (a green context).
	std::vector<void *> contexts;
	// Per slot, the units the stream really has, read back where the
	// runtime can tell (0: not read back).
	std::vector<unsigned int> units;
	// Per slot, the priority its stream was made at (the layout's).
	std::vector<unsigned int> priorities;
	unsigned int queues = 0; // hardware queues its streams take
	// Per slot: handed out in a slot, so it lives until retired.
	std::vector<bool> handed_out;
	// Contexts of the union of several slots' partitions, lent to build
	// streams on (lend_context()); they live until the set is destroyed.
	struct Union {
		uint64_t slots;
		void *stream;
		void *context;
	};
	std::vector<Union> unions;

	// Empty, for @layout's k slots: what a backend's build() starts from.
	void start(const SlotLayout &layout)
	{
		generation = layout.generation;
		slots = 0;
		streams.assign(layout.k, nullptr);
		contexts.assign(layout.k, nullptr);
		units.assign(layout.k, 0);
		priorities.assign(layout.k, 0);
		handed_out.assign(layout.k, false);
	}
};

// Which runtime device is the domain's GPU.
struct DeviceChoice {
	std::string pci_bus_id; // "DDDD:BB:DD.F" from sysfs, "" unknown
	int ordinal = -1;       // >= 0: the caller named the runtime's device
	unsigned int domain = 0;
};

class Backend {
public:
	virtual ~Backend() = default;
	virtual const char *name() const = 0;
	// Queues the runtime takes for itself, once per process and GPU.
	virtual unsigned int runtime_queues() const { return 0; }
	// Queues a set of @layout's slots in @slots takes.
	virtual unsigned int set_queues(const SlotLayout &layout, uint64_t slots) const = 0;
	// Streams for @layout's slots in @slots into *set, whose queues the
	// caller reserved. On failure nothing is left created, *error says
	// what failed, and the result is -errno.
	virtual int build(const SlotLayout &layout, uint64_t slots, StreamSet *set,
			  std::string *error) = 0;
	// Wait for the work queued on @stream: 0, or -EIO with *error.
	virtual int synchronize(void *stream, std::string *error) = 0;
	// Synchronise and destroy slot @slot's stream of @set.
	virtual void destroy_slot(StreamSet *set, unsigned int slot) = 0;
	// A context of the union of the partitions of @layout's slots in
	// @slots (and a stream on it, which keeps it), for streams that must
	// serve any of those slots: 0, or -errno with *error.
	virtual int build_union(const SlotLayout &layout, uint64_t slots, StreamSet::Union *out,
				std::string *error)
	{
		(void)layout;
		(void)slots;
		(void)out;
		*error = std::string("the ") + name() + " backend builds no union of partitions";
		return -EOPNOTSUPP;
	}
	virtual void destroy_union(const StreamSet::Union &u) { (void)u; }
	// Something the user should know about the streams, or "".
	virtual std::string notice() const { return ""; }
	// The runtime's number of the GPU the streams are on; -1 none yet.
	virtual int device_ordinal() const { return -1; }
	// Completion markers for the commands sent on @stream, one of this
	// backend's streams (events without timing, made for that stream),
	// for gpuslot_launch_begin()'s bound; the caller serialises its calls
	// and frees it before the stream is destroyed. nullptr where the
	// backend has none: 0 with *markers null.
	virtual int make_markers(void *stream, std::unique_ptr<Markers> *markers,
				 std::string *error)
	{
		(void)stream;
		markers->reset();
		*error = std::string("the ") + name() +
			 " backend has no streams to mark (gpuslot-run throttles a program's own)";
		return -EOPNOTSUPP;
	}

	void destroy(StreamSet *set)
	{
		for (unsigned int s = 0; s < set->streams.size(); s++)
			if (set->slots >> s & 1)
				destroy_slot(set, s);
		set->slots = 0;
		for (const StreamSet::Union &u : set->unions)
			destroy_union(u);
		set->unions.clear();
	}
};

// A runtime's events as launch markers (make_event_markers()); int stands
// for CUresult or hipError_t (0: success), void * for events and streams.
struct EventOps {
	// An event without timing that @stream can record.
	std::function<int(void *stream, void **event)> create;
	std::function<int(void *event, void *stream)> record;
	// 0: the work before the event finished; not_ready: not yet.
	std::function<int(void *event)> query;
	std::function<int(void *event)> destroy;
	// *capturing: @stream is being captured into a graph.
	std::function<int(void *stream, bool *capturing)> capturing;
	int not_ready = 600; // CUDA_ERROR_NOT_READY, hipErrorNotReady
};

// Markers for the commands sent on @stream, events made for it and pooled;
// nullptr where @ops lacks an entry point.
std::unique_ptr<Markers> make_event_markers(const EventOps &ops, void *stream);

// The slots of @layout that @wanted (0: all) selects.
uint64_t layout_slots(const SlotLayout &layout, uint64_t wanted);

// @runtime_queues: hardware queues the process's runtime makes itself
// (gpuslot_options.runtime_queues), reserved once with the first set.
std::unique_ptr<Backend> make_none_backend(unsigned int runtime_queues = 0);

} // namespace gpuslot
