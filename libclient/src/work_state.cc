// SPDX-License-Identifier: LGPL-2.1-or-later
#include "work_state.hpp"

#include <fcntl.h>
#include <gpuslot_wire.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

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

// A GPUSLOT_WIRE_WORK_STATE request on a connection of its own to @path,
// nothing waited for: the connection, or -1 (no server there now). A Unix
// socket connects at once or not at all (EAGAIN: its backlog is full).
int send_request(const std::string &path)
{
	sockaddr_un addr{};
	addr.sun_family = AF_UNIX;
	if (path.size() >= sizeof(addr.sun_path))
		return -1;
	std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
	const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	struct {
		gpuslot_wire h;
		uint32_t flags;
	} m{};
	m.h.magic = GPUSLOT_WIRE_MAGIC;
	m.h.cmd = GPUSLOT_WIRE_WORK_STATE;
	m.h.size = sizeof(m.flags);
	m.h.seq = 1;
	if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) ||
	    send(fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) != ssize_t(sizeof(m))) {
		close(fd);
		return -1;
	}
	return fd;
}

// The answer to send_request() on @fd, if it came: 0 with *@memfd, EAGAIN
// (not yet), or a positive errno (EOPNOTSUPP: a gpuslotd before the work
// state; ECONNRESET: it closed the connection, as a gsl1 one does).
int take_answer(int fd, int *memfd)
{
	gpuslot_wire r{};
	alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
	iovec iov{&r, sizeof(r)};
	msghdr mh{};
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = control;
	mh.msg_controllen = sizeof(control);
	const ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? EAGAIN : errno;
	// One descriptor, the memfd; any other number is none.
	int passed = -1;
	size_t nfds = 0;
	for (cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		const size_t here = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (!nfds && here == 1)
			std::memcpy(&passed, CMSG_DATA(cm), sizeof(passed));
		nfds += here;
	}
	if (nfds > 1) {
		close_passed_fds(&mh);
		passed = -1;
	}
	int err = n == 0				  ? ECONNRESET
		  : (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? EPROTO
		  : size_t(n) != sizeof(r) || r.magic != GPUSLOT_WIRE_MAGIC ||
				  r.cmd != GPUSLOT_WIRE_WORK_STATE || r.size
			  ? EPROTO
		  : r.error == ENOTTY ? EOPNOTSUPP
		  : r.error == EAGAIN ? EPROTO // not "not yet": this answer is read
		  : r.error	      ? r.error
		  : passed < 0	      ? EPROTO
				      : 0;
	if (err && passed >= 0)
		close(passed);
	if (!err)
		*memfd = passed;
	return err;
}

// Whether @memfd is a page to map: at least GPUSLOT_WORK_STATE_SIZE bytes
// and sealed against shrinking, so that no read of it can fault (SIGBUS on
// a launching thread). 0 or EPROTO.
int check_page(int memfd)
{
	struct stat st;
	const int seals = fcntl(memfd, F_GET_SEALS);
	return fstat(memfd, &st) == 0 && st.st_size >= off_t(GPUSLOT_WORK_STATE_SIZE) &&
			       seals >= 0 && (seals & F_SEAL_SHRINK)
		       ? 0
		       : EPROTO;
}

} // namespace

WorkState::WorkState(Transport transport, Opener open, std::string socket_path)
	: transport_(transport), open_(std::move(open)), socket_path_(std::move(socket_path))
{
}

WorkState::~WorkState()
{
	if (const gpuslot_work_state *p = page_.load())
		munmap(const_cast<gpuslot_work_state *>(p), GPUSLOT_WORK_STATE_SIZE);
	for (int fd : {conn_, pending_})
		if (fd >= 0)
			close(fd);
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
	if (int err = advance_locked(now, error))
		return err;
	// The answer, waited for this once (bounded: a gpuslotd that does not
	// answer leaves the state empty, and a later read takes the answer).
	const uint64_t until = now + uint64_t(kFirstWaitMs) * 1000000;
	for (uint64_t t = now; pending_ >= 0 && t < until; t = monotonic_ns()) {
		pollfd pf{pending_, POLLIN, 0};
		if (poll(&pf, 1, int((until - t + 999999) / 1000000)) < 0 && errno != EINTR)
			break;
		if (int err = advance_locked(monotonic_ns(), error))
			return err;
	}
	return 0;
}

int WorkState::advance_locked(uint64_t now, std::string *error)
{
	if (pending_ >= 0 && now - asked_ns_ >= kAnswerNs) {
		// Unanswered (an answer the server could not send is lost):
		// asked again.
		close(pending_);
		pending_ = -1;
	}
	if (pending_ < 0) {
		if (now < retry_ns_)
			return 0;
		retry_ns_ = now + kRetryNs;
		asked_ns_ = now;
		pending_ = send_request(socket_path_);
		if (pending_ < 0)
			return 0; // gone still: the state reads empty meanwhile
	}
	int memfd = -1;
	const int err = take_answer(pending_, &memfd);
	if (err == EAGAIN)
		return 0; // taken at a later check
	void *p = nullptr;
	int map_err = err ? err : check_page(memfd);
	if (!map_err)
		map_err = map_work_state_page(memfd, const_cast<gpuslot_work_state *>(page_.load()),
					      &p);
	if (memfd >= 0)
		close(memfd);
	if (map_err) {
		close(pending_);
		pending_ = -1;
		if (map_err == EOPNOTSUPP) {
			unsupported_ = map_err;
			unsupported_until_ = now + 1000000000;
			*error = "gpuslotd predates the work state (GPUSLOT_WIRE_WORK_STATE): upgrade it";
			return -map_err;
		}
		return 0; // gone again before it answered
	}
	if (conn_ >= 0)
		close(conn_);
	conn_ = pending_;
	pending_ = -1;
	unsupported_ = 0;
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
	if (!force && now - checked_ns_.load(std::memory_order_relaxed) < kCheckNs)
		return;
	std::unique_lock<std::mutex> hold(lock_, std::try_to_lock);
	if (!hold.owns_lock())
		return;
	checked_ns_.store(now, std::memory_order_relaxed);
	if (!stale_.load() && (conn_ < 0 || peer_hung_up(conn_))) {
		// From here the dead server's page holds no one back.
		stale_.store(true, std::memory_order_release);
		epoch_.fetch_add(1, std::memory_order_release);
		if (conn_ >= 0)
			close(conn_);
		conn_ = -1;
	}
	if (stale_.load()) {
		std::string ignored;
		advance_locked(now, &ignored);
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
