// SPDX-License-Identifier: LGPL-2.1-or-later
// The launch path of gpuslot-run's interposer: every command the program
// sends to the GPU passes LaunchQueue::submit(), which decides when it may
// go to the driver and may hold it back: under --per-sync until the slot is
// held, while a slot of higher priority preempts (issue 40), and where the
// program's slot is outranked, while N of its commands are in flight. It
// reports the job's work edges to the lock. Synchronizations report their
// return.
// Nothing here knows CUDA or libgpuslot: streams are opaque, whether one has
// finished is asked of the caller's probe (cuStreamQuery), preemption of a
// PreemptView, completion of Markers (CUDA events).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "launch_throttle.hpp"

namespace gpuslot::run {

using gpuslot::LaunchThrottle;

enum class Policy {
	hold,	  // the slot is taken at load and kept to exit
	per_sync, // the work between two synchronizations is one job
};

// The lock: libgpuslot in the interposer, a double in tests.
class SlotLock {
public:
	virtual ~SlotLock() = default;
	// Blocks until a slot is held: 0, or -errno with nothing held.
	virtual int acquire() = 0;
	virtual void release() = 0;
	// The held slot has GPU work pending (true: a job's first command is
	// being sent) or has drained (false: its streams finished).
	virtual void set_work(bool pending) = 0;
};

// The throttle is libgpuslot's too (../src/launch_throttle.hpp).
using gpuslot::Markers;
using gpuslot::PreemptView;
using gpuslot::StreamKey;
using gpuslot::Throttle;

enum class SyncKind {
	context, // cuCtxSynchronize: every stream of the context finished
	stream,	 // a stream, an event or a blocking copy: ask each stream
};

class LaunchQueue {
public:
	// @finished(stream) says whether the work queued on @stream has
	// finished (called from the thread that used a per-thread stream).
	// Under --hold the slot is held from the start (the interposer took
	// it before the program ran).
	LaunchQueue(Policy policy, SlotLock *lock, std::function<bool(void *)> finished,
		    Throttle throttle = {});
	~LaunchQueue();
	LaunchQueue(const LaunchQueue &) = delete;
	LaunchQueue &operator=(const LaunchQueue &) = delete;

	// Run @command, in the calling thread, when the policy and the
	// throttle admit it. Returns @command's result, or @refused when the
	// slot could not be taken (the command was not run; the lock's error
	// is in the message printed once).
	template <class Command>
	auto submit(StreamKey stream, Command &&command, decltype(command()) refused)
	{
		if (!admit(stream))
			return refused;
		const bool marked = throttle_.before(stream);
		auto result = command();
		submitted(stream, marked);
		return result;
	}

	// A synchronization returned: under --per-sync, release the slot if
	// the job's work has finished and no command is being submitted.
	void synchronized(SyncKind kind);
	// @stream is being destroyed: it leaves the job (if it still had
	// work, the slot stays held until a context synchronization).
	void stream_destroyed(StreamKey stream);
	// In a forked child: the lock's client is the parent's; pass every
	// command through.
	void disable();

	bool held() const;
	unsigned long long acquires() const;
	// Commands that waited for the throttle, so far.
	unsigned long long throttled() const;
	// Commands that went after waiting Throttle::max_wait_ms, so far.
	unsigned long long overdue() const;

private:
	bool admit(StreamKey stream);
	void submitted(StreamKey stream, bool marked);
	void drained();

	const Policy policy_;
	SlotLock *const lock_;
	const std::function<bool(void *)> finished_;
	LaunchThrottle throttle_;
	mutable std::mutex mutex_;
	// Set in a forked child, where the mutex may be held by a thread
	// that does not exist there: read without it.
	std::atomic<bool> disabled_ = false;
	bool held_ = false;
	// One thread takes the slot at a time, without mutex_ held: the
	// others' commands wait on acquired_, their synchronizations and
	// stream destructions go on.
	bool acquiring_ = false;
	std::condition_variable acquired_;
	bool refused_told_ = false;
	// The streams of the current job, a stream destroyed with work left.
	std::vector<StreamKey> job_;
	bool unknown_work_ = false;
	unsigned int submitting_ = 0;
	unsigned long long acquires_ = 0;
	// The lock was told that the job has work pending.
	bool work_ = false;
};

} // namespace gpuslot::run
