// SPDX-License-Identifier: GPL-2.0
// The gpuslot kernel module as userspace sees it: /dev/gpuslot for layouts,
// /sys/class/gpuslot/gpu<N>/ for state (one value per file) and
// /sys/kernel/debug/gpuslot/gpu<N>/ for the tables (root only); see
// docs/device.md, "sysfs" and "debugfs".
#pragma once

#include <linux/gpuslot.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "device/domain_attrs.hpp"

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
	// Each slot's GPU stream priority, 0 .. GPUSLOT_MAX_SLOT_PRIORITY
	// (more is more urgent); missing entries are 0.
	std::vector<unsigned int> priorities;

	// Every slot uses the whole GPU at priority 0: nobody has planned
	// partitions for this k (writing k resets them and the priorities).
	bool all_whole() const;
	unsigned int priority(unsigned int slot) const
	{
		return slot < priorities.size() ? priorities[slot] : 0;
	}
};

// Planner masks (HIP flat bits, 32 per word) and module bitmaps.
gpuslot_partition partition_from_mask(const std::vector<uint32_t> &mask);
std::vector<uint32_t> mask_from_partition(const gpuslot_partition &p,
					  unsigned int nr_units);
bool partition_is_whole(const gpuslot_partition &p);
// "all", or "0x" and hex digits without leading zeros: how people (and
// gpuslotctl's arguments) write a partition.
std::string partition_text(const gpuslot_partition &p);
// The inverse of partition_text; false on bad text.
bool parse_partition(const std::string &text, gpuslot_partition *out);
// A slot<i>/units file's text: "all", or the kernel's "%*pb" bitmap over
// @nr_units bits (32-bit hex chunks, most significant first, separated by
// commas, as cpumask files are: "fffffff,ffffffff" for 60 units).
std::string partition_bitmap_text(const gpuslot_partition &p, unsigned int nr_units);
// Its inverse: "all", or comma-separated chunks of at most 8 hex digits
// (as bitmap_parse() reads them); false on anything else.
bool parse_partition_bitmap(const std::string &text, gpuslot_partition *out);

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

// Everything a domain shows: the one-value files of
// /sys/class/gpuslot/gpu<N>/ (or the socket's attributes of the same
// names), and, where this reader may read them, the debug/ tables.
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
	std::vector<unsigned int> priorities;	    // slots 0 .. k - 1
	// Counts anyone may read (nr_holders, nr_waiters, held_mask).
	unsigned int nr_holders = 0, nr_waiters = 0;
	uint64_t held_mask = 0;
	// The debug/ tables (holders, waiters, queues, wait_hist): root's
	// only (debugfs 0400; the socket answers EACCES to members). When
	// they cannot be read, tables_note says why and the vectors are
	// empty (wait_hist too).
	bool tables = false;
	std::string tables_note;
	std::vector<Holder> holders;
	std::vector<Waiter> waiters;
	std::vector<QueueUser> queues;
};

// The module's default places.
inline constexpr char kSysfsRoot[] = "/sys/class/gpuslot";
inline constexpr char kDebugfsRoot[] = "/sys/kernel/debug/gpuslot";

// The domains under @root (/sys/class/gpuslot), in order.
std::vector<unsigned int> list_domains(const std::filesystem::path &root);
// Reads and parses gpu<domain>/ under @root and, for the tables,
// @debugfs_root; an error names the file and the line.
bool read_domain_state(const std::filesystem::path &root,
		       unsigned int domain, DomainState *out,
		       std::string *error,
		       const std::filesystem::path &debugfs_root = kDebugfsRoot);
// The same on either transport. The one-value files must be there; the
// debug/ tables are read where the reader may (see DomainState::tables).
bool read_domain_state(const DomainAttrs &attrs, unsigned int domain, DomainState *out,
		       std::string *error);
std::filesystem::path domain_dir(const std::filesystem::path &root,
				 unsigned int domain);
// Write @text to gpu<domain>/<attr>: 0 or errno.
int write_domain_file(const std::filesystem::path &root, unsigned int domain,
		      const std::string &attr, const std::string &text);

} // namespace gpuslot
