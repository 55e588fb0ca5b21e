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

namespace gpuslot::run {

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

// Whether a slot of higher priority than the one held preempts now
// (gpuslot_work_preempts()). Asked before every command: must be cheap.
class PreemptView {
public:
	virtual ~PreemptView() = default;
	virtual bool preempted() = 0;
};

// Completion markers: one recorded after a command on its stream has been
// reached once the command finished (a CUDA event without timing). Called
// with the queue's mutex held, from the submitting thread for record().
class Markers {
public:
	virtual ~Markers() = default;
	// Whether @stream is being captured into a graph: its commands do not
	// run now, so they are neither held back nor marked.
	virtual bool capturing(void *stream) = 0;
	// A marker after the work queued on @stream so far, or nullptr where
	// none could be made (the command is then not counted).
	virtual void *record(void *stream) = 0;
	// Whether the work before @marker has finished (an error: yes).
	virtual bool reached(void *marker) = 0;
	// @marker is not asked again (back to the pool).
	virtual void recycle(void *marker) = 0;
};

// The throttle (issue 40), XSched's Level 1 in the submitting thread:
//
// @suspend: while a slot of higher priority preempts, the program sends no
// command; each waits in the thread that sends it until the preemption
// ends (gpuslot-run; false: --no-preempt, nothing is held back). What is
// already in the GPU's queues still runs: no launch-side throttle can
// recall it.
//
// @inflight bounds that: at most @inflight of the program's commands are
// unfinished at any time (XSched's threshold, its "4 in flight" on
// Hopper), so that a preemption finds at most that many ahead of the
// higher slot's work, not the whole frame the program sent before it
// began. Set where another slot of the domain outranks the program's
// (gpuslot-run --inflight); 0: no bound. Only with @suspend.
//
// @max_wait_ms bounds how long one command waits: a program whose queued
// GPU work waits for host progress that the waiting thread would make
// later (a kernel spinning on a flag the host writes after its next
// launch) would otherwise never go on. Past the limit the command goes,
// past the bound too, and is counted (overdue()); where there is a bound it
// is marked, so that the commands after it count it. The default is the
// lock's default preemption window (preempt_window_ms, 1000 ms): a
// preemption within its budget never lasts longer.
struct Throttle {
	bool suspend = false;
	unsigned int inflight = 0;
	PreemptView *preempt = nullptr;
	Markers *markers = nullptr;
	unsigned int max_wait_ms = 1000;
	// How long a held-back command sleeps between two looks at its
	// stream's oldest markers and at the preemption (launch_queue.cc).
	unsigned int poll_us = 50;
};

// A stream as the queue keys it. The per-thread default stream is one
// handle for every thread but a different stream in each: it carries the
// thread that used it (0 for every other stream).
struct StreamKey {
	void *stream;
	pid_t thread;
	bool operator==(const StreamKey &o) const = default;
};

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
		const bool marked = throttle(stream);
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
	struct Marker {
		StreamKey stream;
		void *marker;
	};

	bool admit(StreamKey stream);
	bool throttle(StreamKey stream);
	void submitted(StreamKey stream, bool marked);
	void reap();
	void drained();

	const Policy policy_;
	SlotLock *const lock_;
	const std::function<bool(void *)> finished_;
	const Throttle throttle_;
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
	// The throttle: markers of the unfinished commands, oldest first;
	// places taken by commands being sent; throttled commands in arrival
	// order (tickets), which go in that order.
	std::vector<Marker> markers_;
	unsigned int reserved_ = 0;
	std::vector<unsigned long long> waiting_;
	unsigned long long next_ticket_ = 0;
	unsigned long long throttled_ = 0;
	unsigned long long overdue_ = 0;
};

} // namespace gpuslot::run
