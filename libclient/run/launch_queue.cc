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
	  throttle_(throttle),
	  held_(policy == Policy::hold)
{
}

LaunchQueue::~LaunchQueue() = default;

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

void LaunchQueue::submitted(StreamKey stream, bool marked)
{
	if (disabled_)
		return;
	throttle_.after(stream, marked);
	std::lock_guard guard(mutex_);
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
	throttle_.disable();
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
	return throttle_.overdue();
}

unsigned long long LaunchQueue::throttled() const
{
	return throttle_.throttled();
}

} // namespace gpuslot::run
