// SPDX-License-Identifier: LGPL-2.1-or-later
#include "work_state.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include <cerrno>
#include <cstring>

namespace gpuslot {
namespace {

// CLOCK_MONOTONIC through the vDSO: no system call.
uint64_t monotonic_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
}

template <class T> T load(const T &field)
{
	return __atomic_load_n(&field, __ATOMIC_RELAXED);
}

// One read of @w by the seqcount protocol of <linux/gpuslot.h>: true with
// *@out consistent, false if it was written meanwhile.
bool read_once(const gpuslot_work_state *w, gpuslot_work_state *out)
{
	const uint32_t seq = __atomic_load_n(&w->seq, __ATOMIC_ACQUIRE);
	if (seq & 1)
		return false;
	out->seq = seq;
	out->version = load(w->version);
	out->generation = load(w->generation);
	out->k = load(w->k);
	out->preempt_level = load(w->preempt_level);
	out->held_mask = load(w->held_mask);
	out->work_mask = load(w->work_mask);
	out->preempt_mask = load(w->preempt_mask);
	out->updates = load(w->updates);
	for (size_t i = 0; i < sizeof(out->priority); i++)
		out->priority[i] = load(w->priority[i]);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&w->seq, __ATOMIC_RELAXED) == seq;
}

} // namespace

WorkState::WorkState(Transport transport, Opener open)
	: transport_(transport), open_(std::move(open))
{
}

WorkState::~WorkState()
{
	if (const gpuslot_work_state *p = page_.load())
		munmap(const_cast<gpuslot_work_state *>(p), GPUSLOT_WORK_STATE_SIZE);
}

int WorkState::map_first(std::string *error)
{
	const uint64_t now = monotonic_ns();
	if (int err = unsupported_.load(); err && now < unsupported_until_) {
		*error = "the lock predates the work state (GPUSLOT_FEATURE_WORK): upgrade it";
		return -err;
	}
	if (page_.load())
		return 0;
	if (transport_ == Transport::device) {
		std::unique_ptr<LockFile> f;
		if (int err = open_(&f, error))
			return err;
		void *p;
		if (int err = f->map_work_state(nullptr, &p)) {
			if (err == EOPNOTSUPP) {
				unsupported_ = err;
				unsupported_until_ = UINT64_MAX; // a module stays what it is
			}
			*error = err == EOPNOTSUPP ? "the gpuslot module predates the work state page: "
						     "upgrade it (gpuslot-dkms)"
						   : std::string("mapping the work state: ") + strerror(err);
			return -err;
		}
		// The mapping keeps its domain; the file is not needed.
		page_.store(static_cast<const gpuslot_work_state *>(p), std::memory_order_release);
		return 0;
	}
	// The socket: the address first, empty until a server's page is over it.
	void *p = mmap(nullptr, GPUSLOT_WORK_STATE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		*error = std::string("mmap: ") + strerror(errno);
		return -errno;
	}
	stale_.store(true);
	page_.store(static_cast<const gpuslot_work_state *>(p), std::memory_order_release);
	return remap_locked(error);
}

int WorkState::remap_locked(std::string *error)
{
	const uint64_t now = monotonic_ns();
	retry_ns_ = now + kRetryNs;
	std::unique_ptr<LockFile> f;
	if (open_(&f, error))
		return 0; // gone still: the state reads empty meanwhile
	void *at = const_cast<gpuslot_work_state *>(page_.load()), *p;
	if (int err = f->map_work_state(at, &p)) {
		if (err == EOPNOTSUPP) {
			unsupported_ = err;
			unsupported_until_ = now + 1000000000;
			*error = "gpuslotd predates the work state (GPUSLOT_WIRE_WORK_STATE): upgrade it";
			return -err;
		}
		return 0; // gone again before it answered
	}
	unsupported_ = 0;
	file_ = std::move(f);
	checked_ns_.store(now, std::memory_order_relaxed);
	// Readers that began before the new page retry; then it is valid.
	epoch_.fetch_add(1, std::memory_order_release);
	stale_.store(false, std::memory_order_release);
	return 0;
}

void WorkState::check_server(uint64_t now, bool force)
{
	if (transport_ != Transport::socket)
		return;
	if (!force && now - checked_ns_.load(std::memory_order_relaxed) < kCheckNs &&
	    !stale_.load(std::memory_order_relaxed))
		return;
	std::unique_lock<std::mutex> hold(lock_, std::try_to_lock);
	if (!hold.owns_lock())
		return;
	checked_ns_.store(now, std::memory_order_relaxed);
	if (!stale_.load() && (!file_ || file_->gone())) {
		// From here the dead server's page holds no one back.
		stale_.store(true, std::memory_order_release);
		epoch_.fetch_add(1, std::memory_order_release);
		file_.reset();
	}
	if (stale_.load() && now >= retry_ns_) {
		std::string ignored;
		remap_locked(&ignored);
	}
}

int WorkState::snapshot(gpuslot_work_state *out, std::string *error)
{
	const gpuslot_work_state *p = page_.load(std::memory_order_acquire);
	if (!p) {
		std::lock_guard<std::mutex> hold(lock_);
		if (int err = map_first(error))
			return err;
		p = page_.load(std::memory_order_acquire);
	} else if (int err = unsupported_.load(std::memory_order_relaxed)) {
		std::lock_guard<std::mutex> hold(lock_);
		if (monotonic_ns() < unsupported_until_) {
			*error = "the lock predates the work state: upgrade it";
			return -err;
		}
		unsupported_ = 0;
		retry_ns_ = 0;
	}
	check_server(transport_ == Transport::socket ? monotonic_ns() : 0, false);
	for (unsigned int tries = 1;; tries++) {
		const uint32_t epoch = epoch_.load(std::memory_order_acquire);
		if (stale_.load(std::memory_order_acquire)) {
			std::memset(out, 0, sizeof(*out));
			return 0;
		}
		if (read_once(p, out) && epoch_.load(std::memory_order_acquire) == epoch)
			return 0;
		// Written meanwhile; for long only by a server that died
		// mid-write, or a writer preempted mid-write by this thread
		// (a gpuslotd at a lower priority than a FIFO reader on its
		// CPU): sched_yield() gives the CPU to no lower priority, so
		// a short sleep does.
		if (tries % 64 == 0) {
			check_server(monotonic_ns(), true);
			const timespec pause = {0, 50 * 1000};
			nanosleep(&pause, nullptr);
		}
	}
}

} // namespace gpuslot
