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
//
// Readers are launching threads (gpuslot-run's launch queue asks before
// each command), so after the first read nothing here waits for gpuslotd:
// the new server is asked on a connection of its own, without blocking,
// and its answer taken by a later check when it has come (asked again if
// none came in kAnswerNs; a memfd too short or not sealed against
// shrinking is refused, as a read of it could fault). Only the first
// read waits for the answer, at most kFirstWaitMs (the caller's first word
// with this gpuslotd: its state is not known before).
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
	// Opens a file of the domain (ProcessDomain::open_file()): the device.
	using Opener = std::function<int(std::unique_ptr<LockFile> *, std::string *)>;
	// How often a reader asks whether gpuslotd's connection is gone, or
	// whether a new one's answer came.
	static constexpr uint64_t kCheckNs = 2000000;
	// How often a gone gpuslotd is looked for again.
	static constexpr uint64_t kRetryNs = 50000000;
	// How long the first read waits for gpuslotd's answer.
	static constexpr int kFirstWaitMs = 5000;
	// How long a request waits for its answer before it is made again.
	static constexpr uint64_t kAnswerNs = 1000000000;

	// @socket_path: the domain's socket (socket transport only).
	WorkState(Transport transport, Opener open, std::string socket_path);
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
	// reads empty) and, gone, a step towards the new server's memfd.
	// @force: whatever the time since the last check. Under lock_ only
	// if it can be had at once: another thread checks meanwhile.
	void check_server(uint64_t now, bool force);
	// Socket, under lock_, never blocking: a request to the server sent
	// (at most every kRetryNs), or its answer taken and the memfd mapped
	// over the page. 0, or -EOPNOTSUPP with *error (a gpuslotd before the
	// work state); anything else leaves the state empty until a later try.
	int advance_locked(uint64_t now, std::string *error);

	const Transport transport_;
	const Opener open_;
	const std::string socket_path_;
	std::mutex lock_; // the slow paths
	int conn_ = -1;	   // socket: the mapped memfd's connection (under lock_)
	int pending_ = -1; // socket: a request's connection, unanswered yet (under lock_)
	std::atomic<const gpuslot_work_state *> page_{nullptr};
	// Bumped as the page goes stale and again once it is mapped anew: a
	// read across either is retried.
	std::atomic<uint32_t> epoch_{0};
	std::atomic<bool> stale_{false};
	std::atomic<uint64_t> checked_ns_{0};
	uint64_t retry_ns_ = 0; // under lock_
	uint64_t asked_ns_ = 0; // under lock_: when pending_ was sent
	// A lock before the work state: its error, asked again at most every
	// second on the socket (gpuslotd may be upgraded), never on the device.
	std::atomic<int> unsupported_{0};
	uint64_t unsupported_until_ = 0; // under lock_
};

} // namespace gpuslot
