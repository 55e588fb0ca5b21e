// SPDX-License-Identifier: LGPL-2.1-or-later
#include "launch_throttle.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>

namespace gpuslot {

LaunchThrottle::LaunchThrottle(Throttle throttle)
	: throttle_(throttle.preempt && throttle.markers ? throttle : Throttle{})
{
}

LaunchThrottle::~LaunchThrottle()
{
	if (disabled_)
		return;
	for (const Marker &m : markers_)
		throttle_.markers->recycle(m.marker);
}

// The markers of finished commands go: per stream, commands finish in
// order, so a stream's first unreached marker ends the look at it.
void LaunchThrottle::reap()
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
// preempts, no command goes; where the sender is outranked, at most
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
// Without a bound (a sender nobody outranks, or inflight 0), no command is
// marked: with nothing preempting a command costs one look at the
// published state (a few loads) and no driver call.
bool LaunchThrottle::before(StreamKey stream)
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

void LaunchThrottle::after(StreamKey stream, bool marked)
{
	if (!marked || disabled_)
		return;
	std::lock_guard guard(mutex_);
	reserved_--;
	if (void *m = throttle_.markers->record(stream.stream))
		markers_.push_back({stream, m});
}

void LaunchThrottle::disable()
{
	disabled_ = true;
}

unsigned long long LaunchThrottle::throttled() const
{
	std::lock_guard guard(mutex_);
	return throttled_;
}

unsigned long long LaunchThrottle::overdue() const
{
	std::lock_guard guard(mutex_);
	return overdue_;
}

} // namespace gpuslot
