// SPDX-License-Identifier: LGPL-2.1-or-later
#include "launch_queue.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace gpuslot::run {

LaunchQueue::LaunchQueue(Policy policy, SlotLock *lock, std::function<bool(void *)> finished)
	: policy_(policy), lock_(lock), finished_(std::move(finished))
{
}

bool LaunchQueue::admit(StreamKey stream)
{
	if (policy_ != Policy::per_sync || disabled_)
		return true;
	std::unique_lock guard(mutex_);
	// Another thread is taking the slot: its commands wait for that
	// acquire rather than queue twice.
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
	if (std::find(job_.begin(), job_.end(), stream) == job_.end())
		job_.push_back(stream);
	submitting_++;
	return true;
}

void LaunchQueue::submitted()
{
	if (policy_ != Policy::per_sync || disabled_)
		return;
	std::lock_guard guard(mutex_);
	if (submitting_)
		submitting_--;
}

void LaunchQueue::synchronized(SyncKind kind)
{
	if (policy_ != Policy::per_sync || disabled_)
		return;
	std::lock_guard guard(mutex_);
	if (!held_ || submitting_)
		return;
	if (kind == SyncKind::stream) {
		if (unknown_work_)
			return;
		const pid_t self = pid_t(syscall(SYS_gettid));
		for (const StreamKey &s : job_) {
			// Another thread's per-thread stream cannot be asked
			// from here: its own synchronization will release.
			if (s.thread && s.thread != self)
				return;
			if (!finished_(s.stream))
				return;
		}
	}
	job_.clear();
	unknown_work_ = false;
	held_ = false;
	lock_->release();
}

void LaunchQueue::stream_destroyed(StreamKey stream)
{
	if (policy_ != Policy::per_sync || disabled_)
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

} // namespace gpuslot::run
