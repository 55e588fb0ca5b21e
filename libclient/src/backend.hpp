// SPDX-License-Identifier: LGPL-2.1-or-later
// What backs a slot's stream: the seam between the client (the lock, the
// layout) and a GPU runtime (HIP now, CUDA green contexts later).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpuslot {

// The layout as a backend builds streams for it.
struct SlotLayout {
	unsigned int k = 1;
	uint32_t unit_kind = 0; // GPUSLOT_UNIT_*
	unsigned int nr_units = 0;
	unsigned int unit_size = 0;
	// Per slot, HIP flat-bit order, 32 per word; empty = the whole GPU.
	std::vector<std::vector<uint32_t>> masks;
	uint64_t generation = 0;
};

// The module's hardware-queue budget, as a backend reserves from it.
class QueueBudget {
public:
	virtual ~QueueBudget() = default;
	// 0, or -errno with *error saying why (ENOSPC names the holders).
	virtual int reserve(unsigned int count, std::string *error) = 0;
	virtual void unreserve(unsigned int count) = 0;
};

class Backend {
public:
	virtual ~Backend() = default;
	virtual const char *name() const = 0;
	// One stream per slot of @layout into *streams, after reserving the
	// queues they need from @budget. On failure nothing is left created
	// and *error says what failed; returns 0 or -errno.
	virtual int build(const SlotLayout &layout, QueueBudget &budget,
			  std::vector<void *> *streams, std::string *error) = 0;
	// Synchronise and destroy *streams (the reservation stays for the
	// next build, which adjusts it).
	virtual void destroy(std::vector<void *> *streams) = 0;
	// Queues reserved now.
	virtual unsigned int reserved() const = 0;
	// Something the user should know about the streams, or "".
	virtual const char *notice() const { return ""; }
};

std::unique_ptr<Backend> make_none_backend();

} // namespace gpuslot
