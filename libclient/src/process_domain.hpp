// SPDX-License-Identifier: LGPL-2.1-or-later
// A process's share of one GPU domain: what every client and thread of the
// process attached to the domain uses together, over either transport (the
// module's device or gpuslotd's socket: LockFile).
//
//  - one control file: the layout, and the hardware-queue
//    reservation, made once for the process (it goes when the file closes);
//  - the streams of each layout generation (StreamSets), built once;
//  - lanes: one open file per concurrent hold. The module keeps one hold
//    per open file, so N threads holding at once use N lanes; a lane is
//    reused by the next acquire once its hold ends.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.hpp"
#include "gpuslot.h"
#include "lock_file.hpp"
#include "stream_sets.hpp"
#include "work_state.hpp"

namespace gpuslot {

// Makes the backend once the layout (its unit kind) is known.
using BackendFactory = std::function<int(const SlotLayout &layout,
					 std::unique_ptr<Backend> *out, std::string *error)>;

class ProcessDomain {
public:
	struct Config {
		Transport transport = Transport::device;
		std::string device;	// /dev/gpuslot
		std::string socket_dir; // /run/gpuslot
		std::string sysfs_root;
		unsigned int domain = 0;
		uint64_t slot_mask = 0; // slots to build streams for; 0 all
		bool wait_for_queues = false;
	};

	// 0, or -errno with *error.
	static int open(const Config &config, const BackendFactory &make_backend,
			std::shared_ptr<ProcessDomain> *out, std::string *error);
	ProcessDomain(const ProcessDomain &) = delete;
	ProcessDomain &operator=(const ProcessDomain &) = delete;
	~ProcessDomain();

	pid_t owner_pid() const { return owner_pid_; }

	// The calls of gpuslot.h; @owner is the client, for close.
	int acquire(int64_t timeout_ns, uint64_t allowed, gpuslot_slot *slot, const void *owner,
		    std::string *error);
	int release(gpuslot_slot *slot, uint32_t flags, std::string *error);
	int start(uint64_t allowed, gpuslot_slot *slot, const void *owner, std::string *error);
	int complete(gpuslot_slot *slot, std::string *error);
	int cancel(gpuslot_slot *slot, std::string *error);
	int refresh(std::string *error);
	int retire(uint64_t generation, std::string *error);
	// Fills everything but the strings' storage: *notice keeps that one.
	void info(gpuslot_layout_info *out, std::string *notice);
	// The domain's attribute @name through the control file: 0 or -errno.
	int read_attr(const std::string &name, std::string *text);
	// Slot @slot's priority in the current layout, or -EINVAL.
	int slot_priority(unsigned int slot);
	// The context of slots @slots of the current streams
	// (StreamSets::lend_context()): 0, -EOPNOTSUPP (not the cuda
	// backend), -EINVAL (a slot not built), -EIO; *error says why.
	int slots_context(uint64_t slots, void **context, uint64_t *generation,
			  std::string *error);
	// Preemptive slots (issue 40): the holder of @slot reports its work
	// pending or drained (SET_WORK on the hold's own file); and the
	// domain's published state, lock-free after the first call
	// (WorkState). 0 or -errno with *error.
	int set_work(const gpuslot_slot *slot, bool pending, std::string *error);
	int work_snapshot(gpuslot_work_state *out, std::string *error)
	{
		return work_->snapshot(out, error);
	}
	// The launch gate of a hold (gpuslot_launch_begin()/_end()): before a
	// command on @slot's stream, wait as the throttle says (issue 40),
	// the hold's work reported pending first; after it, mark it where
	// there is a bound. 0 or -errno with *error.
	int launch_begin(const gpuslot_slot *slot, unsigned int inflight, std::string *error);
	int launch_end(const gpuslot_slot *slot, std::string *error);
	// End the holds and acquires of a client that closes.
	void drop_owner(const void *owner);

private:
	// reclaiming: holding, its hold being taken back from a restarted
	// gpuslotd by another thread (keep_holds()); lane_of() waits.
	enum class LaneState { idle, pending, holding, busy, reclaiming };
	// A hold's launch gate: made at its first gpuslot_launch_begin(),
	// dropped when the hold ends. Shared with a begin or end running on
	// another thread.
	struct LaunchGate {
		// Before the throttle, which gives its markers back at its end.
		std::unique_ptr<Markers> markers;
		std::unique_ptr<PreemptView> preempt;
		std::unique_ptr<LaunchThrottle> throttle;
		unsigned int inflight = 0; // as asked at the first begin
		void *stream = nullptr;
		// Begins without their end yet, oldest first.
		struct Begin {
			pthread_t thread;
			bool marked; // it took a place in the bound
		};
		std::mutex open_lock;
		std::vector<Begin> open;
	};
	struct Lane {
		std::unique_ptr<LockFile> file;
		unsigned int index = 0;
		uint32_t serial = 0; // bumped per use: stale handles fail
		LaneState state = LaneState::idle;
		const void *owner = nullptr;
		uint64_t generation = 0; // of the stream handed out
		void *stream = nullptr;
		uint64_t allowed = 0; // of a pending acquire, to queue it again
		// Its connection died with gpuslotd (and, holding, its hold
		// could not be taken back).
		bool lost = false;
		unsigned int slot_index = 0; // of the hold
		int32_t holder_tid = 0;	     // the thread the hold was granted to
		// Random, sent on each of its connections: after a restart of
		// gpuslotd only this lane reclaims the hold it left, not
		// another client of this process (GPUSLOT_WIRE_CLIENT_TOKEN).
		uint64_t token = 0;
		// The hold's slot priority, and whether a slot of the layout
		// has a higher one (the launch gate's bound applies).
		unsigned int priority = 0;
		bool outranked = false;
		// A slot is held on the lane (claimed, not yet released): what
		// the launch gate's calls accept.
		bool held = false;
		// The hold reported work pending, and no drain since; a thread
		// reports it now (the others wait on reported_).
		bool work_pending = false;
		bool reporting = false;
		std::shared_ptr<LaunchGate> gate;
	};

	explicit ProcessDomain(const Config &config);
	int open_file(std::unique_ptr<LockFile> *file, std::string *error) const;
	// A file for a lane with token @token, sent (an older gpuslotd's
	// ENOTTY is no error).
	int open_lane_file(uint64_t token, std::unique_ptr<LockFile> *file,
			   std::string *error) const;
	// gpuslotd restarted (socket transport): every connection, and the
	// holds and reservations on it, ended. Marks @lane (if any) and the
	// control file for reconnection and says so in *error.
	int connection_lost(Lane *lane, const char *what, std::string *error);
	// A new control file after connection_lost(), with the queues the
	// streams need reserved again.
	int reconnect(std::string *error);
	int read_layout(SlotLayout *out, std::string *error) const;
	// A lane for one acquire, marked busy: the calling thread owns it,
	// and may use it without lock_, until it puts it back.
	int take_lane(const void *owner, Lane **lane, std::string *error);
	void put_lane(Lane *lane);
	// The lane @slot names, if in state @from; marked busy. -EINVAL
	// otherwise.
	int lane_of(const gpuslot_slot *slot, LaneState from, Lane **lane, std::string *error);
	// Under lock_: the lane of @slot's hold (holding, or busy with
	// another call of it), its state unchanged; nullptr if not held.
	Lane *held_lane(const gpuslot_slot *slot);
	// The hold of @lane ends (release, close): no launch_begin() from now.
	void end_launches(Lane *lane);
	// Under lock_: @lane's launch gate, or a new one for a bound of
	// @inflight (the hold's once a begin succeeds): 0 or -errno with *error.
	int launch_gate(Lane *lane, unsigned int inflight, std::shared_ptr<LaunchGate> *gate,
			std::string *error);
	// The allowed mask restricted to the slots with streams.
	int effective_mask(uint64_t allowed, uint64_t *mask, std::string *error);
	// What every acquire (sleeping or asynchronous) starts with: the
	// connection back after a restart of gpuslotd, the slots it may take,
	// and a lane.
	int begin_acquire(uint64_t allowed, const void *owner, uint64_t *mask, Lane **lane,
			  std::string *error);
	// The grant of @slot_index in @generation on lane @index, if the
	// current streams serve it: fills *slot, lane holding. A grant of a
	// newer generation whose layout is the streams' (a restart of
	// gpuslotd; a change undone) renumbers them (renumber()) and is served.
	bool claim(Lane *lane, unsigned int slot_index, uint64_t generation, gpuslot_slot *slot);
	// If the layout at @generation (newer than the streams') is the one
	// the streams were built for, they take its number: true. Reads the
	// layout, builds nothing (a hold may wait on it); false also where a
	// build runs now.
	bool renumber(uint64_t generation);
	// A grant the streams cannot serve: give it back, rebuild if it came
	// from a newer layout (streams are never built under a hold).
	int regrant(Lane *lane, uint64_t generation, std::string *error);
	// gpuslotd restarted under holds of this process: every holding lane
	// whose connection ended takes its hold back (keep_hold()), so that
	// no one else is granted the slot after the grace period in which
	// gpuslotd keeps it. Called at each acquire, release and refresh.
	void keep_holds();
	// Lane @lane (holding, its connection ended; the caller's) connects
	// again with its token and asks for its slot, which the new gpuslotd
	// kept for it: 0 (the lane holds it on the new connection, its stream
	// and generation unchanged), or -errno with the lane lost.
	int keep_hold(Lane *lane, std::string *error);
	// Under build_lock_: reconnect() with that lock held.
	int reconnect_locked(std::string *error);
	// ACQUIRE_ASYNC with lane->allowed; the lane is pending after it.
	int queue_async(Lane *lane, std::string *error);
	static int file_release(LockFile &file);

	Config config_;
	pid_t owner_pid_;
	std::unique_ptr<LockFile> control_;
	std::atomic<bool> control_lost_{false};
	std::unique_ptr<QueueBudget> budget_;
	std::unique_ptr<Backend> backend_;

	// Serialises building streams; never held with lock_ while building.
	std::mutex build_lock_;
	// Lanes and streams: short sections only.
	std::mutex lock_;
	std::deque<Lane> lanes_; // stable addresses; never shrinks
	std::vector<unsigned int> free_lanes_;
	// A lane left state reclaiming.
	std::condition_variable reclaimed_;
	// A lane's work report (launch_begin()) was told, or its hold ended.
	std::condition_variable reported_;
	std::unique_ptr<StreamSets> sets_;
	std::unique_ptr<WorkState> work_;
};

} // namespace gpuslot
