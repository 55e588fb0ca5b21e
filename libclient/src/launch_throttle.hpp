// SPDX-License-Identifier: LGPL-2.1-or-later
// The throttle of issue 40 (docs/preemption.md), XSched's Level 1 in the
// thread that submits: shared by gpuslot-run's launch queue
// (libclient/run/launch_queue.cc) and libgpuslot's own launch gate
// (gpuslot_launch_begin()/_end(), process_domain.cc), compiled into each.
// Nothing here knows CUDA, HIP or the lock: streams are opaque, preemption
// is asked of a PreemptView, completion of Markers (events).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace gpuslot {

// Whether a slot of higher priority than the one held preempts now
// (gpuslot_work_preempts()). Asked before every command: must be cheap.
class PreemptView {
public:
	virtual ~PreemptView() = default;
	virtual bool preempted() = 0;
};

// Completion markers: one recorded after a command on its stream has been
// reached once the command finished (an event without timing). Called
// with the throttle's mutex held, from the submitting thread for record().
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

// @suspend: while a slot of higher priority preempts, no command goes;
// each waits in the thread that sends it until the preemption ends
// (false: nothing is held back). What is already in the GPU's queues
// still runs: no launch-side throttle can recall it.
//
// @inflight bounds that: at most @inflight commands are unfinished at any
// time (XSched's threshold, its "4 in flight" on Hopper), so that a
// preemption finds at most that many ahead of the higher slot's work, not
// the whole frame sent before it began. Set where another slot of the
// domain outranks the sender's; 0: no bound. Only with @suspend.
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
	// stream's oldest markers and at the preemption (launch_throttle.cc).
	unsigned int poll_us = 50;
};

// A stream as the throttle keys it. The per-thread default stream is one
// handle for every thread but a different stream in each: it carries the
// thread that used it (0 for every other stream).
struct StreamKey {
	void *stream;
	pid_t thread;
	bool operator==(const StreamKey &o) const = default;
};

class LaunchThrottle {
public:
	// Without both a PreemptView and Markers, a throttle that holds
	// nothing back.
	explicit LaunchThrottle(Throttle throttle);
	~LaunchThrottle();
	LaunchThrottle(const LaunchThrottle &) = delete;
	LaunchThrottle &operator=(const LaunchThrottle &) = delete;

	// Before a command on @stream: returns when it may go. true: it took
	// a place in the bound, and after() must be told so once it was sent.
	bool before(StreamKey stream);
	// The command before() admitted was sent (or failed to be); @marked:
	// what before() returned.
	void after(StreamKey stream, bool marked);
	// In a forked child: the markers are the parent's; nothing is held
	// back or recycled any more.
	void disable();

	const Throttle &settings() const { return throttle_; }
	// Commands that waited, and those that went after max_wait_ms.
	unsigned long long throttled() const;
	unsigned long long overdue() const;

private:
	struct Marker {
		StreamKey stream;
		void *marker;
	};
	void reap();

	const Throttle throttle_;
	mutable std::mutex mutex_;
	// Set in a forked child, where the mutex may be held by a thread
	// that does not exist there: read without it.
	std::atomic<bool> disabled_ = false;
	// Markers of the unfinished commands, oldest first; places taken by
	// commands being sent; waiting commands in arrival order (tickets),
	// which go in that order.
	std::vector<Marker> markers_;
	unsigned int reserved_ = 0;
	std::vector<unsigned long long> waiting_;
	unsigned long long next_ticket_ = 0;
	unsigned long long throttled_ = 0;
	unsigned long long overdue_ = 0;
};

} // namespace gpuslot
