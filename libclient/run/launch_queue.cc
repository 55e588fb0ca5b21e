// SPDX-License-Identifier: LGPL-2.1-or-later
#include "launch_queue.hpp"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace gpuslot::run {

LaunchQueue::LaunchQueue(Policy policy, SlotLock *lock, std::function<bool(void *)> finished,
			 Throttle throttle)
	: policy_(policy), lock_(lock), finished_(std::move(finished)),
	  throttle_(throttle.preempt && throttle.markers ? throttle : Throttle{}),
	  held_(policy == Policy::hold)
{
}

LaunchQueue::~LaunchQueue()
{
	if (disabled_)
		return;
	for (const Marker &m : markers_)
		throttle_.markers->recycle(m.marker);
}

bool LaunchQueue::admit(StreamKey stream)
{
	if (disabled_)
		return true;
	std::unique_lock guard(mutex_);
	// Another thread is taking the slot: its commands wait for that
	// acquire rather than queue twice.
	if (policy_ == Policy::per_sync)
		acquired_.wait(guard, [this] { return held_ || !acquiring_; });
	if (!held_) {
		// Taken without the mutex: a synchronization or a stream's
		// destruction on another thread must not wait for the slot
		// (it may be what the slot's holder elsewhere waits for).
		acquiring_ = true;
		guard.unlock();
		const int err = lock_->acquire();
		guard.lock();
		acquiring_ = false;
		acquired_.notify_all();
		if (err) {
			if (!refused_told_)
				std::fprintf(stderr,
					     "gpuslot-run: the slot could not be taken (%s): "
					     "GPU commands fail with CUDA_ERROR_NOT_PERMITTED\n",
					     std::strerror(-err));
			refused_told_ = true;
			return false;
		}
		held_ = true;
		acquires_++;
	}
	// The job's first command: its work edge, once per job. Told with
	// the mutex held, so that it cannot pass the drained edge of the
	// job before (a synchronization on another thread).
	if (!work_) {
		work_ = true;
		lock_->set_work(true);
	}
	if (std::find(job_.begin(), job_.end(), stream) == job_.end())
		job_.push_back(stream);
	submitting_++;
	return true;
}

// The markers of finished commands go: per stream, commands finish in
// order, so a stream's first unreached marker ends the look at it.
void LaunchQueue::reap()
{
	std::vector<StreamKey> unfinished;
	std::erase_if(markers_, [&](const Marker &m) {
		if (std::find(unfinished.begin(), unfinished.end(), m.stream) != unfinished.end())
			return false;
		if (!throttle_.markers->reached(m.marker)) {
			unfinished.push_back(m.stream);
			return false;
		}
		throttle_.markers->recycle(m.marker);
		return true;
	});
}

// XSched's Level 1, in the thread that submits: while a higher slot
// preempts, no command goes; where the program is outranked, at most
// inflight commands are unfinished at any time, so that a preemption finds
// no more than that ahead of the higher slot's work (XSched's threshold).
// The command that may not go waits here, in the thread that submits it,
// so that nothing is reordered, lost or sent twice, and a synchronization
// of the program's finds its commands sent as it sent them.
//
// Keeping N in flight while preempted, instead of none, protects nothing
// on a GPU that N large kernels per process fill: the first H100 run
// (docs/results-ch6.md, issue 40) kept camera-130's front camera where
// stream priorities left it with 4 and with 1 in flight.
//
// Without a bound (a program nobody outranks, or --inflight 0), no
// command is marked: with nothing preempting a command costs one look at
// the published state (a few loads) and no driver call.
bool LaunchQueue::throttle(StreamKey stream)
{
	if (!throttle_.suspend || disabled_)
		return false;
	bool preempted = throttle_.preempt->preempted();
	if (!preempted && !throttle_.inflight)
		return false;
	std::unique_lock guard(mutex_);
	// A captured command does not run now: holding it back would protect
	// nothing, and a marker would join the graph.
	if (throttle_.markers->capturing(stream.stream))
		return false;
	const unsigned long long ticket = next_ticket_++;
	waiting_.push_back(ticket);
	bool waited = false, place = true;
	std::chrono::steady_clock::time_point deadline;
	for (;;) {
		reap();
		if (!preempted) {
			if (!throttle_.inflight) {
				place = false; // the preemption ended, no bound
				break;
			}
			if (waiting_.front() == ticket &&
			    markers_.size() + reserved_ < throttle_.inflight)
				break;
		}
		if (!waited) {
			throttled_++;
			deadline = std::chrono::steady_clock::now() +
				   std::chrono::milliseconds(throttle_.max_wait_ms);
		} else if (std::chrono::steady_clock::now() >= deadline) {
			// Waited long enough: at once, past the bound, but
			// marked where there is one, so that the commands
			// after it count it as unfinished.
			overdue_++;
			place = throttle_.inflight > 0;
			break;
		}
		waited = true;
		guard.unlock();
		// Polled, not waited for: the wait ends on either of two
		// things, a marker reached on the GPU or the preemption's end
		// in the lock's published state, and neither can wake a
		// thread. 50 us is a few launches' worth of time on an H100
		// (a launch takes ~2-5 us), well under the kernels that make
		// a preemption worth having (tens of us and up), and is about
		// the default timer slack of a normal thread, below which a
		// shorter sleep buys nothing; each look costs a few loads and
		// an event query per stream.
		const timespec poll = {long(throttle_.poll_us / 1000000),
				       long(throttle_.poll_us % 1000000) * 1000};
		nanosleep(&poll, nullptr);
		preempted = throttle_.preempt->preempted();
		guard.lock();
	}
	waiting_.erase(std::find(waiting_.begin(), waiting_.end(), ticket));
	if (place)
		reserved_++;
	return place;
}

void LaunchQueue::submitted(StreamKey stream, bool marked)
{
	if (disabled_)
		return;
	std::lock_guard guard(mutex_);
	if (marked) {
		reserved_--;
		if (void *m = throttle_.markers->record(stream.stream))
			markers_.push_back({stream, m});
	}
	if (submitting_)
		submitting_--;
}

// The job's work has finished: its drained edge, and under --per-sync the
// end of the hold.
void LaunchQueue::drained()
{
	job_.clear();
	unknown_work_ = false;
	if (work_) {
		work_ = false;
		lock_->set_work(false);
	}
	if (policy_ == Policy::per_sync) {
		held_ = false;
		lock_->release();
	}
}

void LaunchQueue::synchronized(SyncKind kind)
{
	if (disabled_)
		return;
	std::lock_guard guard(mutex_);
	// No job open (--hold between jobs), or a command being sent, which
	// belongs to the job.
	if (!held_ || !work_ || submitting_)
		return;
	if (kind == SyncKind::stream) {
		if (unknown_work_)
			return;
		const pid_t self = pid_t(syscall(SYS_gettid));
		for (const StreamKey &s : job_) {
			// Another thread's per-thread stream cannot be asked
			// from here: its own synchronization will drain it.
			if (s.thread && s.thread != self)
				return;
			if (!finished_(s.stream))
				return;
		}
	}
	drained();
}

void LaunchQueue::stream_destroyed(StreamKey stream)
{
	if (disabled_)
		return;
	std::lock_guard guard(mutex_);
	auto it = std::find(job_.begin(), job_.end(), stream);
	if (it == job_.end())
		return;
	if (!finished_(stream.stream))
		unknown_work_ = true;
	job_.erase(it);
}

void LaunchQueue::disable()
{
	disabled_ = true;
}

bool LaunchQueue::held() const
{
	std::lock_guard guard(mutex_);
	return held_ && !disabled_;
}

unsigned long long LaunchQueue::acquires() const
{
	std::lock_guard guard(mutex_);
	return acquires_;
}

unsigned long long LaunchQueue::overdue() const
{
	std::lock_guard guard(mutex_);
	return overdue_;
}

unsigned long long LaunchQueue::throttled() const
{
	std::lock_guard guard(mutex_);
	return throttled_;
}

} // namespace gpuslot::run
