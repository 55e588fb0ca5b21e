// SPDX-License-Identifier: LGPL-2.1-or-later
// libgpuslot-run.so at load: read what gpuslot-run set, take the lock
// through libgpuslot (backend none: the lock only, no driver call from
// here), and under --hold take the slot before the program runs a single
// instruction of its own.
#include "interposer.hpp"

#include <dlfcn.h>
#include <linux/gpuslot.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "gpuslot.h"
#include "run_env.hpp"

namespace gpuslot::run {
namespace {

// The interposer's own errors end the program as gpuslot-run's do: a
// program that asked for a slot never runs without it.
constexpr int kExitGpuslotRun = 125;

[[noreturn]] void fail(const std::string &what)
{
	std::fprintf(stderr, "gpuslot-run: %s\n", what.c_str());
	_exit(kExitGpuslotRun);
}

// A number 0 .. @max the launcher passed in @name, or @unset where it
// passed none; anything else ends the program. A plain number, not an
// optional: GCC 12 at -O2 takes an optional read far below its test for
// maybe-uninitialized.
unsigned long launcher_number(const char *name, unsigned long max, unsigned long unset)
{
	const char *text = std::getenv(name);
	if (!text)
		return unset;
	const auto n = parse_number(text, max);
	if (!n)
		fail(std::string(name) + " \"" + text + "\" is not a number 0 .. " +
		     std::to_string(max));
	return *n;
}

// The layout generation the program's streams were made for (0: none on a
// partition yet; set_partition_generation(), by the CUDA interposer).
std::atomic<uint64_t> partition_generation{0};

class LibgpuslotLock final : public SlotLock {
public:
	LibgpuslotLock(gpuslot_client *client, uint64_t mask) : client_(client), mask_(mask) {}

	int acquire() override
	{
		slot_ = gpuslot_slot{};
		slot_.size = sizeof(slot_);
		int err;
		int told = 0; // the error said last: once each
		for (;;) {
			err = gpuslot_acquire_slot(client_, GPUSLOT_WAIT_FOREVER, mask_, &slot_);
			if (err == -EINTR)
				continue;
			// gpuslotd restarting (socket transport): libgpuslot
			// connects again at the next call, and reserves the
			// program's hardware queues again (-ENOSPC while a
			// newcomer took the budget; also a full lock queue).
			// The job waits for its slot as it would behind a
			// holder; it never runs ungated.
			if (err != -ECONNRESET && err != -ECONNREFUSED && err != -ENOENT &&
			    err != -ENOSPC)
				break;
			if (told != err)
				std::fprintf(stderr, "gpuslot-run: %s; waiting for %s\n",
					     gpuslot_last_error(),
					     err == -ENOSPC ? "room (hardware queues or the lock's queue)"
							    : "gpuslotd");
			told = err;
			usleep(100000);
		}
		if (err) {
			std::fprintf(stderr, "gpuslot-run: %s\n", gpuslot_last_error());
			return err;
		}
		priority_.store(slot_.priority, std::memory_order_relaxed);
		// The program's streams keep the partition they were made on.
		const uint64_t made_for = partition_generation.load(std::memory_order_relaxed);
		if (made_for && slot_.generation != made_for && !layout_change_told_) {
			layout_change_told_ = true;
			std::fprintf(stderr,
				     "gpuslot-run: the layout changed (generation %llu) since the "
				     "program's streams were made on generation %llu's partition: "
				     "they stay there, and may overlap another slot's partition now\n",
				     (unsigned long long)slot_.generation,
				     (unsigned long long)made_for);
		}
		return 0;
	}
	void release() override
	{
		// The queue released only once the job's streams finished.
		if (gpuslot_release_slot(client_, &slot_, GPUSLOT_RELEASE_NO_SYNC))
			std::fprintf(stderr, "gpuslot-run: %s\n", gpuslot_last_error());
	}
	// Called by the queue with its mutex held: twice per job.
	void set_work(bool pending) override
	{
		if (!work_supported_)
			return;
		const int err = gpuslot_set_work(client_, &slot_, pending);
		if (err == -EOPNOTSUPP || err == -ECHILD) {
			// An older module or gpuslotd: nothing to tell, ever.
			work_supported_ = false;
			return;
		}
		if (err && !work_error_told_) {
			std::fprintf(stderr, "gpuslot-run: the slot's work state: %s\n",
				     gpuslot_last_error());
			work_error_told_ = true;
		}
	}
	// The held slot's priority (gpuslot_slot::priority).
	uint32_t priority() const { return priority_.load(std::memory_order_relaxed); }

private:
	gpuslot_client *const client_;
	const uint64_t mask_;
	gpuslot_slot slot_{};
	std::atomic<uint32_t> priority_{0};
	bool work_supported_ = true;
	bool work_error_told_ = false;
	bool layout_change_told_ = false;
};

// Whether a slot above the held one preempts: the domain's published work
// state, a few loads per look once mapped (gpuslot_work_preempts()).
class LibgpuslotPreempt final : public PreemptView {
public:
	LibgpuslotPreempt(gpuslot_client *client, const LibgpuslotLock *lock)
		: client_(client), lock_(lock)
	{
	}
	bool preempted() override
	{
		if (!supported_.load(std::memory_order_relaxed))
			return false;
		const int r = gpuslot_work_preempts(client_, lock_->priority());
		if (r >= 0)
			return r > 0;
		// The lock publishes no work state (an older module or
		// gpuslotd), or this is a forked child: never throttle, and
		// stop asking. Other errors: not preempted this time.
		if ((r == -EOPNOTSUPP || r == -ECHILD) && supported_.exchange(false))
			std::fprintf(stderr,
				     "gpuslot-run: the lock publishes no work state (%s): "
				     "commands are not held back for higher slots' work\n",
				     std::strerror(-r));
		return false;
	}

private:
	gpuslot_client *const client_;
	const LibgpuslotLock *const lock_;
	std::atomic<bool> supported_{true};
};

struct State {
	gpuslot_client *client = nullptr;
	uint64_t slot_mask = 0;
	uint32_t domain = 0;
	LibgpuslotLock *lock = nullptr;
	LibgpuslotPreempt *preempt = nullptr;
	LaunchQueue *queue = nullptr;
	pid_t loader_pid = 0; // the process that loaded the interposer
	Policy policy = Policy::per_sync;
	unsigned int priority_levels = 0;
};
State state;

// Children do not inherit the slot: the library leaves LD_PRELOAD, and
// its variables go, so a process the program starts cannot wait for the
// slot its parent holds.
void leave_environment()
{
	Dl_info self{};
	const char *preload = std::getenv("LD_PRELOAD");
	char *me = nullptr;
	if (dladdr(reinterpret_cast<void *>(&leave_environment), &self) && self.dli_fname)
		me = realpath(self.dli_fname, nullptr);
	if (preload && me) {
		// ld.so splits LD_PRELOAD at spaces and colons.
		std::string kept;
		const std::string list = preload;
		for (size_t at = 0; at <= list.size();) {
			size_t end = list.find_first_of(": ", at);
			if (end == std::string::npos)
				end = list.size();
			const std::string item = list.substr(at, end - at);
			char *path = item.empty() ? nullptr : realpath(item.c_str(), nullptr);
			if (!item.empty() && !(path && !std::strcmp(path, me)))
				kept += (kept.empty() ? "" : ":") + item;
			std::free(path);
			at = end + 1;
		}
		if (kept.empty())
			unsetenv("LD_PRELOAD");
		else
			setenv("LD_PRELOAD", kept.c_str(), 1);
	}
	std::free(me);
	unsetenv(kEnvDomain);
	unsetenv(kEnvSlots);
	unsetenv(kEnvPolicy);
	unsetenv(kEnvInflight);
	unsetenv(kEnvPreempt);
	unsetenv(kEnvPollUs);
	unsetenv(kEnvQueues);
	unsetenv(kEnvLevels);
}

void forked_child()
{
	if (state.queue)
		state.queue->disable();
}

// Exit frees a hold as death does; releasing first lets the next waiter in
// before the process's files are closed. The client is not closed: other
// threads may still be in a call.
void release_at_exit()
{
	state.lock->release();
}

// GPUSLOT_RUN_STATS=1: what the queue did, on stderr at exit (the
// acquires and the commands the throttle held back), for a harness to
// check that a layout did what it says.
void print_stats_at_exit()
{
	// Not in a forked child: its queue is disabled, and its mutex may be
	// held by a thread that does not exist there.
	if (getpid() != state.loader_pid)
		return;
	unsigned long confined, whole;
	stream_counts(&confined, &whole);
	std::fprintf(stderr,
		     "gpuslot-run: pid %d: %llu acquires, %llu commands held back (%llu after "
		     "the 1000 ms wait limit), %lu streams on the slot's partition, %lu on the whole GPU\n",
		     int(getpid()), state.queue->acquires(), state.queue->throttled(),
		     state.queue->overdue(), confined, whole);
}

__attribute__((constructor)) void load()
{
	const char *domain_text = std::getenv(kEnvDomain);
	const char *slots_text = std::getenv(kEnvSlots);
	const char *policy_text = std::getenv(kEnvPolicy);
	const char *preempt_text = std::getenv(kEnvPreempt);
	const char *poll_text = std::getenv(kEnvPollUs);
	if (!slots_text)
		return; // loaded by hand, without gpuslot-run: pass through
	std::string error;
	const auto mask = parse_slot_list(slots_text, &error);
	const auto domain = parse_number(domain_text ? domain_text : "0", 1u << 20);
	if (!mask)
		fail(std::string(kEnvSlots) + ": " + error);
	if (!domain)
		fail(std::string(kEnvDomain) + " \"" + domain_text + "\" is not a domain number");
	const std::string policy = policy_text ? policy_text : "per-sync";
	if (policy == "hold")
		state.policy = Policy::hold;
	else if (policy != "per-sync")
		fail(std::string(kEnvPolicy) + " \"" + policy + "\" is neither hold nor per-sync");
	const unsigned inflight = unsigned(launcher_number(kEnvInflight, kMaxInflight,
							   kDefaultInflight));
	Throttle throttle;
	if (poll_text) {
		const auto poll = parse_number(poll_text, kMaxPollUs);
		if (!poll || *poll < kMinPollUs)
			fail(std::string(kEnvPollUs) + " \"" + poll_text + "\" is not a number " +
			     std::to_string(kMinPollUs) + " .. " + std::to_string(kMaxPollUs));
		throttle.poll_us = unsigned(*poll);
	}
	// The launcher's count of the slot's priority levels; UINT_MAX where
	// it did not count (then the interposer's own read stands).
	const unsigned launcher_levels = unsigned(launcher_number(kEnvLevels,
								  GPUSLOT_MAX_SLOT_PRIORITY, UINT_MAX));
	const unsigned queues = unsigned(launcher_number(kEnvQueues, GPUSLOT_MAX_HQD, 0));
	// runtime_queues is libgpuslot 1.6's; an older one would refuse the
	// options as a nonzero reserved field.
	if (queues && gpuslot_lib_version() < GPUSLOT_VERSION_NUMBER(1, 6, 0))
		fail("the libgpuslot loaded is " + std::to_string(gpuslot_lib_version() >> 16) + "." +
		     std::to_string(gpuslot_lib_version() >> 8 & 0xff) +
		     ", older than 1.6: it cannot reserve the program's hardware queues; install "
		     "the libgpuslot of this gpuslot-run");
	const std::string preempt = preempt_text ? preempt_text : "1";
	if (preempt != "0" && preempt != "1")
		fail(std::string(kEnvPreempt) + " \"" + preempt + "\" is neither 0 nor 1");
	leave_environment();

	gpuslot_options o{};
	o.size = sizeof(o);
	o.domain = uint32_t(*domain);
	state.domain = o.domain;
	state.slot_mask = *mask;
	o.backend = GPUSLOT_BACKEND_NONE;
	o.slot_mask = *mask;
	// AMD: the program's HIP makes its own queues; they are counted in the
	// domain's hardware-queue budget from before its first GPU call until
	// it exits (the client's file holds them).
	o.runtime_queues = queues;
	if (gpuslot_open(&o, &state.client) < 0)
		fail(std::string("domain ") + std::to_string(*domain) + ": " + gpuslot_last_error());
	// A stream's priority is fixed when it is made, and the program's
	// streams outlive any one hold: the lowest priority of the slots it
	// may hold. Where the launcher read it (and counted the program's
	// queues by it), the lower of its read and this one: no stream above
	// its slot, and no pool beyond those counted.
	if (!streams_priority_levels(state.client, *mask, &state.priority_levels, &error))
		fail(error);
	if (launcher_levels < state.priority_levels)
		state.priority_levels = launcher_levels;
	// The bound on what is in flight applies where another slot of the
	// domain outranks the program's (the layout at start: a program
	// outranked later is held back while preempted, with no bound on
	// what it sent before).
	// Only slots the program may not hold count: its own slots of
	// different priorities do not outrank it.
	bool outranked = false;
	gpuslot_layout_info layout{};
	layout.size = sizeof(layout);
	if (gpuslot_client_layout(state.client, &layout) == 0)
		for (unsigned int s = 0; s < layout.k && s < 64; s++) {
			if (*mask >> s & 1)
				continue;
			const int p = gpuslot_slot_priority(state.client, s);
			if (p >= 0 && unsigned(p) > state.priority_levels)
				outranked = true;
		}
	state.lock = new LibgpuslotLock(state.client, *mask);
	state.preempt = new LibgpuslotPreempt(state.client, state.lock);
	throttle.suspend = preempt == "1";
	throttle.inflight = outranked ? inflight : 0u;
	throttle.preempt = state.preempt;
	throttle.markers = api_markers();
	state.queue = new LaunchQueue(state.policy, state.lock, stream_finished, throttle);
	pthread_atfork(nullptr, nullptr, forked_child);
	state.loader_pid = getpid();
	if (const char *stats = std::getenv("GPUSLOT_RUN_STATS"); stats && !std::strcmp(stats, "1"))
		std::atexit(print_stats_at_exit);
	if (state.policy == Policy::hold) {
		if (state.lock->acquire())
			fail("the slot could not be taken");
		// Registered after libgpuslot's own exit handlers, so it runs
		// before them (a destructor of this library would run after).
		std::atexit(release_at_exit);
	}
}

} // namespace

LaunchQueue *launch_queue()
{
	return state.queue;
}

RunState run_state()
{
	return {state.client, state.domain, state.slot_mask};
}

bool in_loader_process()
{
	return getpid() == state.loader_pid;
}

void set_partition_generation(uint64_t generation)
{
	partition_generation.store(generation, std::memory_order_relaxed);
}

int priority_in_range(unsigned int levels, int least, int greatest)
{
	const long p = long(least) - long(levels);
	return int(p < greatest ? greatest : p);
}

bool stream_priority_levels(unsigned int *levels)
{
	if (!state.queue)
		return false;
	*levels = state.priority_levels;
	return true;
}

} // namespace gpuslot::run
