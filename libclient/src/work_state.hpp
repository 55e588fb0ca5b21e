// SPDX-License-Identifier: LGPL-2.1-or-later
// A process's view of one domain's work state (issue 40; struct
// gpuslot_work_state in <linux/gpuslot.h>): the module's read-only page of
// a /dev/gpuslot file, or gpuslotd's sealed memfd, mapped once and read
// with the seqcount protocol, lock-free, from any thread, with no system
// call in the common case.
//
// On the socket transport the server may die (a SIGKILL mid-write
// included) and come back: its page then says nothing. The connection the
// memfd came over is checked (a poll for its hang-up) at most every
// kCheckNs, and whenever a read finds the page mid-write for long; once
// it is gone the state reads empty, and the new server's memfd is mapped
// over the old one at the same address (MAP_FIXED), so that a caller
// holding the address reads the new server's page.
#pragma once

#include <linux/gpuslot.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "lock_file.hpp"

namespace gpuslot {

class WorkState {
public:
	// Opens a file of the domain (ProcessDomain::open_file()).
	using Opener = std::function<int(std::unique_ptr<LockFile> *, std::string *)>;
	// How often a reader asks whether gpuslotd's connection is gone.
	static constexpr uint64_t kCheckNs = 2000000;
	// How often a gone gpuslotd is looked for again.
	static constexpr uint64_t kRetryNs = 50000000;

	WorkState(Transport transport, Opener open);
	~WorkState();
	WorkState(const WorkState &) = delete;
	WorkState &operator=(const WorkState &) = delete;

	// A consistent copy of the state, all zero while gpuslotd is gone:
	// 0, or -errno with *error (-EOPNOTSUPP: the module or gpuslotd
	// predates it).
	int snapshot(gpuslot_work_state *out, std::string *error);

private:
	// The first call: the page mapped (on the socket: an empty page
	// reserved at the address first, the server's mapped over it).
	int map_first(std::string *error);
	// Socket: whether the server's connection is gone (the state then
	// reads empty) and, gone, the new server's memfd mapped over it.
	// @force: whatever the time since the last check. Under lock_ only
	// if it can be had at once: another thread checks meanwhile.
	void check_server(uint64_t now, bool force);
	int remap_locked(std::string *error);

	const Transport transport_;
	const Opener open_;
	std::mutex lock_; // the slow paths
	std::unique_ptr<LockFile> file_; // socket: the memfd's connection
	std::atomic<const gpuslot_work_state *> page_{nullptr};
	// Bumped as the page goes stale and again once it is mapped anew: a
	// read across either is retried.
	std::atomic<uint32_t> epoch_{0};
	std::atomic<bool> stale_{false};
	std::atomic<uint64_t> checked_ns_{0};
	uint64_t retry_ns_ = 0; // under lock_
	// A lock before the work state: its error, asked again at most every
	// second on the socket (gpuslotd may be upgraded), never on the device.
	std::atomic<int> unsupported_{0};
	uint64_t unsupported_until_ = 0; // under lock_
};

} // namespace gpuslot
