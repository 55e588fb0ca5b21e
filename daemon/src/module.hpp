// SPDX-License-Identifier: GPL-2.0
// The gpuslot kernel module as userspace sees it: /dev/gpuslot for layouts
// and /sys/kernel/gpuslot/gpu<N>/ for state (see README.md, "sysfs").
#pragma once

#include <linux/gpuslot.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "domain_attrs.hpp"

namespace gpuslot {

// k, the partitions and the queue budget of one domain.
struct ModuleLayout {
	uint32_t k = 1;
	uint32_t unit_kind = GPUSLOT_UNIT_NONE;
	uint32_t unit_size = 0;
	uint32_t nr_units = 0;
	uint32_t hqd_limit = 0; // SET: 0 keeps the module's
	std::vector<gpuslot_partition> partitions; // one per slot, from 0
	uint64_t generation = 0;
	// SET: apply only over this generation (EAGAIN if someone changed
	// the layout since it was read); 0 applies over any.
	uint64_t expected_generation = 0;

	// Every slot uses the whole GPU: nobody has planned partitions for
	// this k (writing k resets them).
	bool all_whole() const;
};

// Planner masks (HIP flat bits, 32 per word) and module bitmaps.
gpuslot_partition partition_from_mask(const std::vector<uint32_t> &mask);
std::vector<uint32_t> mask_from_partition(const gpuslot_partition &p,
					  unsigned int nr_units);
bool partition_is_whole(const gpuslot_partition &p);
// "all", or "0x" and hex digits without leading zeros (sysfs's format).
std::string partition_text(const gpuslot_partition &p);
// The inverse of partition_text; false on bad text.
bool parse_partition(const std::string &text, gpuslot_partition *out);

const char *unit_kind_name(uint32_t kind); // "none", "amd-cu", ...

// One open file of /dev/gpuslot. Calls return 0 or an errno.
class Device {
public:
	Device() = default;
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;
	~Device();

	// 0 or errno; *error says what failed.
	int open(const std::string &path, std::string *error);
	int attach(unsigned int domain) const;
	int version(gpuslot_version *v) const;
	int set_layout(ModuleLayout *l) const; // fills l->generation
	int get_layout(ModuleLayout *l) const;
	int fd() const { return fd_; }

private:
	int fd_ = -1;
};

// A hold's SCHED_FIFO boost, as the holders table shows it.
enum class HoldBoost {
	unboosted, // boost_priority 0, or the thread already ran above it
	boosted,
	overrun, // held past max_hold_ms or its boost budget: the boost was taken away
};

struct Holder {
	unsigned int slot = 0;
	int pid = 0, tid = 0;
	std::string comm;
	uint64_t held_ns = 0;
	HoldBoost boost = HoldBoost::unboosted;
};

struct Waiter {
	int pid = 0, tid = 0;
	std::string comm;
	uint64_t waited_ns = 0;
	uint64_t allowed = 0;
};

struct QueueUser {
	int pid = 0;
	std::string comm;
	unsigned int reserved = 0;
};

// Everything /sys/kernel/gpuslot/gpu<N>/ shows.
struct DomainState {
	unsigned int domain = 0;
	unsigned int k = 0;
	uint64_t generation = 0;
	unsigned int boost_priority = 0;
	unsigned int max_hold_ms = 0;
	uint64_t overruns = 0; // stats: holds that outlived max_hold_ms
	// The rest of stats: counters since the domain was created.
	uint64_t acquisitions = 0, contended = 0, timeouts = 0, interrupted = 0;
	uint64_t total_wait_ns = 0, max_wait_ns = 0, max_hold_ns = 0;
	// wait_hist_log2_ns: [i] counts waits of [2^i, 2^(i+1)) ns, the last
	// one everything longer.
	std::vector<uint64_t> wait_hist;
	std::string pci_bus_id; // "" where none is recorded
	unsigned int hqd_limit = 0, hqd_used = 0, hqd_waiters = 0;
	uint32_t unit_kind = GPUSLOT_UNIT_NONE;
	unsigned int nr_units = 0, unit_size = 0;
	std::vector<gpuslot_partition> partitions; // slots 0 .. k - 1
	std::vector<Holder> holders;
	std::vector<Waiter> waiters;
	unsigned int more_waiters = 0; // "... N more"
	std::vector<QueueUser> queues;
};

// The domains under @root (/sys/kernel/gpuslot), in order.
std::vector<unsigned int> list_domains(const std::filesystem::path &root);
// Reads and parses gpu<domain>/; an error names the file and the line.
bool read_domain_state(const std::filesystem::path &root,
		       unsigned int domain, DomainState *out,
		       std::string *error);
// The same on either transport.
bool read_domain_state(const DomainAttrs &attrs, unsigned int domain, DomainState *out,
		       std::string *error);
std::filesystem::path domain_dir(const std::filesystem::path &root,
				 unsigned int domain);
// Write @text to gpu<domain>/<attr>: 0 or errno.
int write_domain_file(const std::filesystem::path &root, unsigned int domain,
		      const std::string &attr, const std::string &text);

} // namespace gpuslot
