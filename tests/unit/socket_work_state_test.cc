// SPDX-License-Identifier: GPL-2.0
// Preemptive slots on the socket transport (issue 40): gpuslotd's published
// work state. Only the server writes its memfd (every write path of a
// member's fails), a member reads it, only a slot's holder reports its
// work, a hold's end clears it before the slot's next grant, a k change
// retires the work of slots past k, the budget's expiry ends a preemption,
// the knobs are validated and an admin's; and libgpuslot's calls over it,
// across a SIGKILL and restart of gpuslotd; and libgpuslot's launch gate
// over it (gpuslot_launch_begin()). gpuslotd's LockServer runs in a
// thread of this process, or (to be killed) in socket_server_helper; other
// clients that must die run in socket_client_helper (no fork here).
#include <gtest/gtest.h>

#include <linux/falloc.h>
#include <linux/gpuslot.h>
#include <gpuslot_wire.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "client_internal.hpp"
#include "gpuslot.h"
#include "lock_file.hpp"
#include "lock_server.hpp"

namespace {

namespace fs = std::filesystem;
using gpuslot::LockFile;

// Slot 0 of priority 1 above slot 1 of priority 0: slot 1 yields while
// slot 0 preempts (preempt_level 2 > 0 + 1).
const std::vector<std::string> kPriorities = {"1", "0"};

// A program of ours, spawned (this process has threads: no fork), with its
// standard output a pipe (*@out) if @out is not null: its pid, or -1.
pid_t spawn(const char *program, const std::vector<std::string> &args, int *out = nullptr)
{
	std::vector<char *> argv{const_cast<char *>(program)};
	for (const auto &a : args)
		argv.push_back(const_cast<char *>(a.c_str()));
	argv.push_back(nullptr);
	int pipe_fds[2] = {-1, -1};
	posix_spawn_file_actions_t actions;
	posix_spawn_file_actions_init(&actions);
	if (out) {
		if (pipe2(pipe_fds, O_CLOEXEC))
			return -1;
		posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
	}
	pid_t pid;
	const int err = posix_spawn(&pid, program, &actions, nullptr, argv.data(), environ);
	posix_spawn_file_actions_destroy(&actions);
	if (out) {
		::close(pipe_fds[1]);
		*out = pipe_fds[0];
	}
	return err ? -1 : pid;
}

int wait_exit(pid_t pid)
{
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A connection to @dir's domain 0, or -1.
int connect_domain(const fs::path &dir)
{
	const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	strcpy(a.sun_path, gpuslot::domain_socket(dir, 0).c_str());
	if (connect(s, reinterpret_cast<sockaddr *>(&a), sizeof(a))) {
		::close(s);
		return -1;
	}
	// An answer that never comes fails the test, never hangs it.
	const timeval bound{10, 0};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
	return s;
}

// The memfd connection @s gets for GPUSLOT_WIRE_WORK_STATE, or -1 (with
// *@error the reply's error).
int ask_memfd(int s, int *error = nullptr, uint32_t flags = 0)
{
	struct {
		gpuslot_wire h;
		uint32_t flags;
	} m{};
	m.h.magic = GPUSLOT_WIRE_MAGIC;
	m.h.cmd = GPUSLOT_WIRE_WORK_STATE;
	m.h.size = sizeof(m.flags);
	m.h.seq = 7;
	m.flags = flags;
	int fd = -1;
	if (send(s, &m, sizeof(m), MSG_NOSIGNAL) == ssize_t(sizeof(m))) {
		gpuslot_wire r{};
		alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
		iovec iov{&r, sizeof(r)};
		msghdr mh{};
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = control;
		mh.msg_controllen = sizeof(control);
		if (recvmsg(s, &mh, MSG_CMSG_CLOEXEC) == ssize_t(sizeof(r))) {
			if (error)
				*error = r.error;
			for (cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
				if (cm->cmsg_type == SCM_RIGHTS)
					std::memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
		}
	}
	return fd;
}

// The memfd a new connection gets, as ask_memfd().
int request_memfd(const fs::path &dir, int *error = nullptr, uint32_t flags = 0)
{
	const int s = connect_domain(dir);
	if (s < 0)
		return -1;
	const int fd = ask_memfd(s, error, flags);
	::close(s);
	return fd;
}

// A consistent copy of a mapped state, by the uapi's seqcount protocol.
gpuslot_work_state read_state(const gpuslot_work_state *w)
{
	for (;;) {
		const uint32_t seq = __atomic_load_n(&w->seq, __ATOMIC_ACQUIRE);
		gpuslot_work_state copy;
		std::memcpy(&copy, const_cast<const gpuslot_work_state *>(w), sizeof(copy));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!(seq & 1) && __atomic_load_n(&w->seq, __ATOMIC_RELAXED) == seq)
			return copy;
	}
}

// Waits up to 5 s (generous: no speed is asserted) for @pred of the state.
template <class P> bool eventually(const gpuslot_work_state *w, P pred)
{
	for (int i = 0; i < 5000; i++) {
		if (pred(read_state(w)))
			return true;
		usleep(1000);
	}
	return pred(read_state(w));
}

int set_work(LockFile &f, uint32_t flags)
{
	struct gpuslot_set_work w{};
	w.size = sizeof(w);
	w.flags = flags;
	return f.call(GPUSLOT_IOC_SET_WORK, &w);
}

int acquire(LockFile &f, uint64_t mask)
{
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.allowed_mask = mask;
	return f.call(GPUSLOT_IOC_ACQUIRE, &a);
}

class WorkState : public testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/gpuslot-work-XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr);
		dir_ = tmpl;
		chmod(dir_.c_str(), 0711); // members connect (write-attr)
		gpuslot::LockServerOptions o;
		o.socket_dir = dir_;
		o.nr_domains = 1;
		o.mode = 0666;
		server_ = std::make_unique<gpuslot::LockServer>(o);
		std::string error;
		ASSERT_EQ(server_->start(&error), 0) << error;
		gpuslot_layout l{};
		l.size = sizeof(l);
		l.k = 2;
		l.unit_kind = GPUSLOT_UNIT_NONE;
		l.priority[0] = 1;
		ASSERT_EQ(server_->set_layout(0, &l, nullptr), 0);
		thread_ = std::thread([this] {
			std::string e;
			server_->run(&e);
		});
		memfd_ = request_memfd(dir_);
		ASSERT_GE(memfd_, 0);
		void *p = mmap(nullptr, GPUSLOT_WORK_STATE_SIZE, PROT_READ, MAP_SHARED, memfd_, 0);
		ASSERT_NE(p, MAP_FAILED);
		state_ = static_cast<const gpuslot_work_state *>(p);
	}
	void TearDown() override
	{
		if (state_)
			munmap(const_cast<gpuslot_work_state *>(state_), GPUSLOT_WORK_STATE_SIZE);
		if (memfd_ >= 0)
			::close(memfd_);
		server_->stop();
		if (thread_.joinable())
			thread_.join();
		server_.reset();
		fs::remove_all(dir_);
	}
	std::unique_ptr<LockFile> file()
	{
		std::unique_ptr<LockFile> f;
		std::string error;
		EXPECT_EQ(gpuslot::open_lock_file(gpuslot::Transport::socket, dir_, 0, &f, &error), 0)
			<< error;
		return f;
	}
	gpuslot_work_state now() const { return read_state(state_); }

	fs::path dir_;
	std::unique_ptr<gpuslot::LockServer> server_;
	std::thread thread_;
	int memfd_ = -1;
	const gpuslot_work_state *state_ = nullptr;
};

// Only the server writes the state: a member's memfd refuses write(),
// pwrite(), a writable shared mapping, mprotect() of a read-only one to
// writable, ftruncate(), fallocate(), new seals, and the same through a
// read-write reopen of it (/proc/self/fd). A private mapping's writes stay
// private. The server's own writes still arrive.
TEST_F(WorkState, OnlyTheServerWritesTheMemfd)
{
	const char byte = 1;
	EXPECT_LT(write(memfd_, &byte, 1), 0);
	EXPECT_LT(pwrite(memfd_, &byte, 1, 0), 0);
	EXPECT_EQ(mmap(nullptr, GPUSLOT_WORK_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_,
		       0),
		  MAP_FAILED);
	void *ro = mmap(nullptr, GPUSLOT_WORK_STATE_SIZE, PROT_READ, MAP_SHARED, memfd_, 0);
	ASSERT_NE(ro, MAP_FAILED);
	EXPECT_NE(mprotect(ro, GPUSLOT_WORK_STATE_SIZE, PROT_READ | PROT_WRITE), 0);
	munmap(ro, GPUSLOT_WORK_STATE_SIZE);
	EXPECT_NE(ftruncate(memfd_, 0), 0);
	EXPECT_NE(ftruncate(memfd_, 2 * GPUSLOT_WORK_STATE_SIZE), 0);
	EXPECT_NE(fcntl(memfd_, F_ADD_SEALS, F_SEAL_WRITE), 0);
	const int seals = fcntl(memfd_, F_GET_SEALS);
	EXPECT_EQ(seals, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL);

	// The file a member holds is one of its own to reopen read-write: the
	// seals are what refuse it then.
	const std::string self = "/proc/self/fd/" + std::to_string(memfd_);
	const int rw = ::open(self.c_str(), O_RDWR | O_CLOEXEC);
	ASSERT_GE(rw, 0) << strerror(errno);
	EXPECT_LT(write(rw, &byte, 1), 0);
	EXPECT_EQ(errno, EPERM);
	EXPECT_EQ(mmap(nullptr, GPUSLOT_WORK_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0),
		  MAP_FAILED);
	ro = mmap(nullptr, GPUSLOT_WORK_STATE_SIZE, PROT_READ, MAP_SHARED, rw, 0);
	ASSERT_NE(ro, MAP_FAILED);
	EXPECT_NE(mprotect(ro, GPUSLOT_WORK_STATE_SIZE, PROT_READ | PROT_WRITE), 0);
	munmap(ro, GPUSLOT_WORK_STATE_SIZE);
	EXPECT_NE(fallocate(rw, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
			    GPUSLOT_WORK_STATE_SIZE),
		  0);
	EXPECT_NE(ftruncate(rw, 0), 0);
	EXPECT_NE(fcntl(rw, F_ADD_SEALS, F_SEAL_WRITE), 0);
	// A private copy may be written: the shared page does not change.
	auto *priv = static_cast<gpuslot_work_state *>(mmap(nullptr, GPUSLOT_WORK_STATE_SIZE,
							    PROT_READ | PROT_WRITE, MAP_PRIVATE,
							    rw, 0));
	ASSERT_NE(priv, MAP_FAILED);
	priv->work_mask = ~0ULL;
	priv->seq = 2;
	EXPECT_EQ(now().work_mask, 0u);
	munmap(priv, GPUSLOT_WORK_STATE_SIZE);
	::close(rw);

	// What the server writes arrives.
	const gpuslot_work_state before = now();
	EXPECT_EQ(before.version, uint32_t(GPUSLOT_WORK_STATE_VERSION));
	auto holder = file();
	ASSERT_EQ(acquire(*holder, 1), 0);
	ASSERT_EQ(set_work(*holder, GPUSLOT_WORK_PENDING), 0);
	EXPECT_EQ(now().work_mask, 1u);
	EXPECT_GT(now().updates, before.updates);
}

// A member reads the state: what the holder reports, with the held mask,
// k, the priorities and the level a lower slot yields to. A connection
// that holds no slot, or only an asynchronous grant not completed, is
// refused (EPERM), as are unknown flags (EINVAL), changing nothing.
TEST_F(WorkState, AMemberReadsWhatTheHolderReportsAndNoOtherMaySetIt)
{
	auto high = file(), low = file(), idle = file(), pending = file();
	EXPECT_EQ(set_work(*idle, GPUSLOT_WORK_PENDING), EPERM);
	ASSERT_EQ(acquire(*high, 1), 0);
	ASSERT_EQ(acquire(*low, 2), 0);
	gpuslot_acquire a{};
	a.size = sizeof(a);
	ASSERT_EQ(pending->call(GPUSLOT_IOC_ACQUIRE_ASYNC, &a), 0); // queued: k = 2 held
	EXPECT_EQ(set_work(*pending, GPUSLOT_WORK_PENDING), EPERM);
	EXPECT_EQ(set_work(*idle, GPUSLOT_WORK_PENDING), EPERM);
	EXPECT_EQ(set_work(*high, GPUSLOT_WORK_PENDING | 2), EINVAL);
	gpuslot_work_state s = now();
	EXPECT_EQ(s.work_mask, 0u);
	EXPECT_EQ(s.preempt_level, 0u);
	EXPECT_EQ(s.held_mask, 3u);
	EXPECT_EQ(s.k, 2u);
	EXPECT_EQ(s.priority[0], 1u);
	EXPECT_EQ(s.priority[1], 0u);

	ASSERT_EQ(set_work(*high, GPUSLOT_WORK_PENDING), 0);
	s = now();
	EXPECT_EQ(s.work_mask, 1u);
	EXPECT_EQ(s.preempt_mask, 1u);
	EXPECT_EQ(s.preempt_level, 2u); // slot 1 (priority 0) yields: 2 > 0 + 1
	ASSERT_EQ(set_work(*low, GPUSLOT_WORK_PENDING), 0);
	EXPECT_EQ(now().work_mask, 3u);
	EXPECT_EQ(now().preempt_level, 2u);
	ASSERT_EQ(set_work(*high, 0), 0);
	s = now();
	EXPECT_EQ(s.work_mask, 2u);
	EXPECT_EQ(s.preempt_level, 1u); // slot 1 preempts nobody below it
	// A report that changes nothing publishes nothing.
	ASSERT_EQ(set_work(*low, GPUSLOT_WORK_PENDING), 0);
	EXPECT_EQ(now().updates, s.updates);
	// The async grant, once completed, is a hold that may report.
	gpuslot_release r{};
	r.size = sizeof(r);
	ASSERT_EQ(high->call(GPUSLOT_IOC_RELEASE, &r), 0);
	ASSERT_EQ(pending->call(GPUSLOT_IOC_ACQUIRE_COMPLETE, &a), 0);
	EXPECT_EQ(set_work(*pending, GPUSLOT_WORK_PENDING), 0);
	EXPECT_EQ(now().work_mask, 3u);
}

// Defect the hook guards against: a holder killed with work pending left
// it set for the slot's next holder. Its death ends the hold, and the work
// is cleared before the slot is granted to the waiter: the waiter's grant
// never sees it.
TEST_F(WorkState, AHoldersDeathClearsItsWorkBeforeTheNextGrant)
{
	int out = -1;
	const pid_t helper = spawn(GPUSLOT_SOCKET_CLIENT_HELPER,
				   {"hold-with-work", dir_.string(), "0", "0"}, &out);
	ASSERT_GT(helper, 0);
	char buf[8] = {};
	ASSERT_EQ(read(out, buf, sizeof(buf)), 5) << "the helper did not hold";
	::close(out);
	EXPECT_EQ(now().work_mask, 1u);
	EXPECT_EQ(now().preempt_mask, 1u);
	// A waiter for slot 0, queued behind the helper.
	auto waiter = file();
	std::atomic<int> got{-1};
	std::atomic<uint64_t> work_at_grant{~0ULL};
	std::thread t([&] {
		got = acquire(*waiter, 1);
		work_at_grant = now().work_mask;
	});
	auto watcher = file();
	for (int i = 0; i < 5000; i++) {
		gpuslot_domain_info info{};
		info.size = sizeof(info);
		ASSERT_EQ(watcher->call(GPUSLOT_IOC_DOMAIN_INFO, &info), 0);
		if (info.nr_waiters == 1)
			break;
		usleep(1000);
	}
	kill(helper, SIGKILL);
	EXPECT_EQ(wait_exit(helper), 128 + SIGKILL);
	t.join();
	EXPECT_EQ(got.load(), 0);
	EXPECT_EQ(work_at_grant.load(), 0u) << "the dead holder's work was still published";
	EXPECT_EQ(now().preempt_level, 0u);
	EXPECT_EQ(now().held_mask, 1u);
}

// A k change retires the slots past k: their work is gone from the state
// (a retired slot's holder cannot report any), and the state says the new
// k and generation. A release clears the remaining holder's work.
TEST_F(WorkState, AKChangeRetiresTheWorkOfSlotsPastK)
{
	auto high = file(), low = file();
	ASSERT_EQ(acquire(*high, 1), 0);
	ASSERT_EQ(acquire(*low, 2), 0);
	ASSERT_EQ(set_work(*high, GPUSLOT_WORK_PENDING), 0);
	ASSERT_EQ(set_work(*low, GPUSLOT_WORK_PENDING), 0);
	const gpuslot_work_state before = now();
	ASSERT_EQ(before.work_mask, 3u);
	auto admin = file();
	ASSERT_EQ(admin->write_attr("k", "1"), 0);
	gpuslot_work_state s = now();
	EXPECT_EQ(s.k, 1u);
	EXPECT_GT(s.generation, before.generation);
	EXPECT_EQ(s.work_mask, 1u) << "slot 1, past k, kept its work";
	EXPECT_EQ(s.priority[0], 0u); // a k change resets the priorities
	// The retired slot's holder still holds it; what it reports is nothing.
	EXPECT_EQ(set_work(*low, GPUSLOT_WORK_PENDING), 0);
	EXPECT_EQ(now().work_mask, 1u);
	gpuslot_release r{};
	r.size = sizeof(r);
	ASSERT_EQ(high->call(GPUSLOT_IOC_RELEASE, &r), 0);
	EXPECT_EQ(now().work_mask, 0u);
	EXPECT_EQ(now().held_mask, 2u);
}

// The budget: with preempt_share 10 and preempt_window_ms 100, a slot
// that never drains preempts from a full bucket for about 11 ms, then the
// server's own timer ends its preemption: preempt_mask and the level flip
// while its work stays. (Generous bounds: 5 s; no speed is asserted.)
TEST_F(WorkState, TheBudgetsExpiryEndsThePreemption)
{
	auto admin = file();
	ASSERT_EQ(admin->write_attr("preempt_share", "10"), 0);
	ASSERT_EQ(admin->write_attr("preempt_window_ms", "100"), 0);
	auto high = file();
	ASSERT_EQ(acquire(*high, 1), 0);
	const uint64_t updates = now().updates;
	ASSERT_EQ(set_work(*high, GPUSLOT_WORK_PENDING), 0);
	// The report preempted (unless the expiry came before this read: the
	// updates count both).
	const gpuslot_work_state s = now();
	EXPECT_TRUE(s.preempt_mask == 1u || s.updates >= updates + 2);
	EXPECT_TRUE(eventually(state_, [](const gpuslot_work_state &w) {
		return w.preempt_mask == 0 && w.work_mask == 1;
	})) << "the budget never ran out";
	EXPECT_EQ(now().preempt_level, 0u);
	EXPECT_EQ(now().work_mask, 1u);
	// A second report of the same work changes nothing: the slot must
	// drain first.
	ASSERT_EQ(set_work(*high, GPUSLOT_WORK_PENDING), 0);
	EXPECT_EQ(now().preempt_mask, 0u);
}

// preempt_share (1..100) and preempt_window_ms (1..60000) are admin
// attributes: a bad value is EINVAL and changes nothing; a member's write
// is refused (EACCES: not an admin at connect).
TEST_F(WorkState, TheKnobsAreValidatedAndAnAdminsOnly)
{
	auto admin = file();
	std::string t;
	ASSERT_EQ(admin->read_attr("preempt_share", &t), 0);
	EXPECT_EQ(t, "25\n");
	ASSERT_EQ(admin->read_attr("preempt_window_ms", &t), 0);
	EXPECT_EQ(t, "1000\n");
	for (const char *bad : {"0", "101", "-1", "x", ""})
		EXPECT_EQ(admin->write_attr("preempt_share", bad), EINVAL) << bad;
	for (const char *bad : {"0", "60001", "4294967296", "1.5"})
		EXPECT_EQ(admin->write_attr("preempt_window_ms", bad), EINVAL) << bad;
	ASSERT_EQ(admin->read_attr("preempt_share", &t), 0);
	EXPECT_EQ(t, "25\n");
	ASSERT_EQ(admin->read_attr("preempt_window_ms", &t), 0);
	EXPECT_EQ(t, "1000\n");
	EXPECT_EQ(admin->write_attr("preempt_share", "100"), 0);
	EXPECT_EQ(admin->write_attr("preempt_window_ms", "60000"), 0);
	ASSERT_EQ(admin->read_attr("preempt_share", &t), 0);
	EXPECT_EQ(t, "100\n");
	ASSERT_EQ(admin->read_attr("preempt_window_ms", &t), 0);
	EXPECT_EQ(t, "60000\n");
	if (geteuid() != 0)
		GTEST_SKIP() << "a member's write needs root to become one";
	const pid_t p = spawn(GPUSLOT_SOCKET_CLIENT_HELPER,
			      {"write-attr", dir_.string(), "0", "65534", "preempt_share", "1"});
	ASSERT_GT(p, 0);
	EXPECT_EQ(wait_exit(p), EACCES);
	ASSERT_EQ(admin->read_attr("preempt_share", &t), 0);
	EXPECT_EQ(t, "100\n");
}

// A request for the memfd with a nonzero argument is EINVAL and carries no
// descriptor.
TEST_F(WorkState, AWorkStateRequestWithFlagsIsRefused)
{
	int error = 0;
	EXPECT_EQ(request_memfd(dir_, &error, 1), -1);
	EXPECT_EQ(error, EINVAL);
}

// Defect guarded against: each request sent the memfd once more, and a
// member that never read its socket left any number in flight, charged to
// gpuslotd's user. A connection gets it once; a second request is EBUSY,
// with no descriptor. A refused request sent none and leaves the ask.
TEST_F(WorkState, AConnectionGetsTheMemfdOnce)
{
	const int s = connect_domain(dir_);
	ASSERT_GE(s, 0);
	int error = -1;
	EXPECT_EQ(ask_memfd(s, &error, 1), -1);
	EXPECT_EQ(error, EINVAL);
	const int fd = ask_memfd(s, &error);
	EXPECT_GE(fd, 0);
	EXPECT_EQ(error, 0);
	EXPECT_EQ(ask_memfd(s, &error), -1);
	EXPECT_EQ(error, EBUSY);
	if (fd >= 0)
		::close(fd);
	::close(s);
	// Another connection still gets it.
	const int other = request_memfd(dir_, &error);
	EXPECT_GE(other, 0);
	if (other >= 0)
		::close(other);
}

gpuslot_client *open_client(const fs::path &dir)
{
	setenv("GPUSLOT_TRANSPORT", "socket", 1);
	setenv("GPUSLOT_SOCKET_DIR", dir.c_str(), 1);
	gpuslot_options o{};
	o.size = sizeof(o);
	o.backend = GPUSLOT_BACKEND_NONE;
	gpuslot_client *c = nullptr;
	EXPECT_EQ(gpuslot_open(&o, &c), 0) << gpuslot_last_error();
	return c;
}

gpuslot_work_info info_of(gpuslot_client *c)
{
	gpuslot_work_info i{};
	i.size = sizeof(i);
	EXPECT_EQ(gpuslot_work_snapshot(c, &i), 0) << gpuslot_last_error();
	return i;
}

// libgpuslot's calls: the holder reports through gpuslot_set_work(), every
// client reads through gpuslot_work_snapshot() and gpuslot_work_preempts();
// a slot not held is -EINVAL; a release clears the work.
TEST_F(WorkState, LibgpuslotReportsAndReadsIt)
{
	gpuslot_client *c = open_client(dir_);
	ASSERT_NE(c, nullptr);
	gpuslot_slot high{}, low{};
	high.size = low.size = sizeof(gpuslot_slot);
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 1, &high), 0) << gpuslot_last_error();
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 2, &low), 0) << gpuslot_last_error();
	EXPECT_EQ(gpuslot_work_preempts(c, 0), 0);
	ASSERT_EQ(gpuslot_set_work(c, &high, 1), 0) << gpuslot_last_error();
	gpuslot_work_info i = info_of(c);
	EXPECT_EQ(i.k, 2u);
	EXPECT_EQ(i.held_mask, 3u);
	EXPECT_EQ(i.work_mask, 1u);
	EXPECT_EQ(i.preempt_mask, 1u);
	EXPECT_EQ(i.preempt_level, 2u);
	EXPECT_EQ(gpuslot_work_preempts(c, 0), 1); // slot 1's priority
	EXPECT_EQ(gpuslot_work_preempts(c, 1), 0); // slot 0's own
	// A struct too small is refused; a larger one's tail is zeroed.
	gpuslot_work_info small{};
	small.size = GPUSLOT_WORK_INFO_SIZE_VER0 - 8;
	EXPECT_EQ(gpuslot_work_snapshot(c, &small), -EINVAL);
	EXPECT_EQ(gpuslot_set_work(c, nullptr, 1), -EINVAL);
	ASSERT_EQ(gpuslot_release_slot(c, &high, 0), 0) << gpuslot_last_error();
	EXPECT_EQ(gpuslot_set_work(c, &high, 1), -EINVAL) << "a released slot reported work";
	EXPECT_EQ(info_of(c).work_mask, 0u);
	EXPECT_EQ(gpuslot_work_preempts(c, 0), 0);
	ASSERT_EQ(gpuslot_set_work(c, &low, 1), 0) << gpuslot_last_error();
	EXPECT_EQ(info_of(c).work_mask, 2u);
	EXPECT_EQ(gpuslot_set_work(c, &low, 0), 0) << gpuslot_last_error();
	EXPECT_EQ(info_of(c).work_mask, 0u);
	ASSERT_EQ(gpuslot_release_slot(c, &low, 0), 0);
	gpuslot_close(c);
	unsetenv("GPUSLOT_TRANSPORT");
	unsetenv("GPUSLOT_SOCKET_DIR");
}

// The mappings of gpuslotd's memfd in this process: "start inode" each.
std::vector<std::pair<std::string, std::string>> memfd_mappings()
{
	std::vector<std::pair<std::string, std::string>> found;
	std::ifstream maps("/proc/self/maps");
	for (std::string line; std::getline(maps, line);) {
		if (line.find("memfd:gpuslot-work-gpu0") == std::string::npos)
			continue;
		std::istringstream in(line);
		std::string range, perms, offset, dev, inode;
		in >> range >> perms >> offset >> dev >> inode;
		found.emplace_back(range.substr(0, range.find('-')), inode);
	}
	return found;
}

// socket_server_helper serving @dir's domain 0 at kPriorities, with
// preempt_share 100 (see below): its pid, or -1.
pid_t serve_unbounded(const fs::path &dir)
{
	std::vector<std::string> args{dir.string()};
	args.insert(args.end(), kPriorities.begin(), kPriorities.end());
	// A killed server's socket stays: wait for the new one's.
	fs::remove(gpuslot::domain_socket(dir, 0));
	const pid_t p = spawn(GPUSLOT_SOCKET_SERVER_HELPER, args);
	for (int i = 0; i < 5000 && !fs::exists(gpuslot::domain_socket(dir, 0)); i++)
		usleep(1000);
	std::unique_ptr<LockFile> admin;
	std::string error;
	EXPECT_EQ(gpuslot::open_lock_file(gpuslot::Transport::socket, dir, 0, &admin, &error), 0)
		<< error;
	if (admin) {
		EXPECT_EQ(admin->write_attr("preempt_share", "100"), 0);
	}
	return p;
}

// A client of socket_server_helper in @dir holding slot 0 (priority 1)
// with work pending, read as preempting (its page's one mapping in
// *@mapped); then the server SIGKILLed and the state read empty. The
// client, or null after a failure.
gpuslot_client *preempting_client_of_a_killed_server(const fs::path &dir,
						     std::vector<std::pair<std::string, std::string>> *mapped,
						     gpuslot_slot *high)
{
	const pid_t server = serve_unbounded(dir);
	EXPECT_GT(server, 0);
	if (server <= 0)
		return nullptr;
	gpuslot_client *c = open_client(dir);
	EXPECT_NE(c, nullptr);
	high->size = sizeof(*high);
	bool ok = c && gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 1, high) == 0 &&
		  gpuslot_set_work(c, high, 1) == 0;
	EXPECT_TRUE(ok) << gpuslot_last_error();
	EXPECT_EQ(ok ? gpuslot_work_preempts(c, 0) : -1, 1);
	*mapped = memfd_mappings();
	EXPECT_EQ(mapped->size(), 1u);
	kill(server, SIGKILL);
	EXPECT_EQ(wait_exit(server), 128 + SIGKILL);
	int preempts = 1;
	for (int i = 0; ok && i < 5000 && (preempts = gpuslot_work_preempts(c, 0)) != 0; i++)
		usleep(1000);
	EXPECT_EQ(preempts, 0) << "a dead gpuslotd's page still held slot 1 back";
	if (!ok || preempts != 0 || mapped->size() != 1) {
		if (c)
			gpuslot_close(c);
		return nullptr;
	}
	return c;
}

// Defect guarded against: a gpuslotd killed while a slot preempts left its
// page saying so forever. Once libgpuslot sees the connection gone the
// state reads empty; the restarted gpuslotd's memfd is mapped over the old
// one at the same address (one mapping, a new inode), and the holder's
// next report (it takes its hold back) reaches it.
//
// Each server's preempt_share is 100 (no bound): with the default (25 % of
// 1000 ms) a report preempts for 250 ms only, and the first read maps the
// page through a connection of its own, which took longer than that under
// qemu-user with ASan on a loaded CI machine (it read 0 before any restart).
TEST(WorkStateRestart, AKilledServersPageHoldsNoOneBackAndTheNewOneIsMappedInItsPlace)
{
	char tmpl[] = "/tmp/gpuslot-work-restart-XXXXXX";
	ASSERT_NE(mkdtemp(tmpl), nullptr);
	const fs::path dir = tmpl;
	std::vector<std::pair<std::string, std::string>> before;
	gpuslot_slot high{};
	gpuslot_client *c = preempting_client_of_a_killed_server(dir, &before, &high);
	ASSERT_NE(c, nullptr);
	EXPECT_EQ(info_of(c).work_mask, 0u);

	const pid_t server = serve_unbounded(dir);
	ASSERT_GT(server, 0);
	int preempts = 0;
	// The holder's report takes its hold back and reaches the new server.
	ASSERT_EQ(gpuslot_set_work(c, &high, 1), 0) << gpuslot_last_error();
	for (int i = 0; i < 5000 && (preempts = gpuslot_work_preempts(c, 0)) != 1; i++)
		usleep(1000);
	EXPECT_EQ(preempts, 1) << "the new gpuslotd's state was never mapped";
	const auto after = memfd_mappings();
	ASSERT_EQ(after.size(), 1u);
	EXPECT_EQ(after[0].first, before[0].first) << "mapped at another address";
	EXPECT_NE(after[0].second, before[0].second) << "still the old server's memfd";
	EXPECT_EQ(gpuslot_release_slot(c, &high, 0), 0) << gpuslot_last_error();
	EXPECT_EQ(info_of(c).work_mask, 0u);
	gpuslot_close(c);
	kill(server, SIGKILL);
	wait_exit(server);
	unsetenv("GPUSLOT_TRANSPORT");
	unsetenv("GPUSLOT_SOCKET_DIR");
	fs::remove_all(dir);
}

// Defect guarded against: after a gpuslotd restart libgpuslot mapped the
// new memfd with a connect and a request on the reading thread (the
// launching thread under gpuslot-run) and waited for the answer with no
// bound. Here a fake server: every read returns (empty) while a request
// waits; a request unanswered is made again; an answer whose memfd is not
// sealed against shrinking (a read of it could fault) is refused; a good
// answer is taken by a later read and mapped in the old page's place. A
// watchdog closes the fake after 20 s, which would free a blocked read
// (the test then fails, never hangs); the fake's own waits are bounded.
TEST(WorkStateRestart, NoReadWaitsForARestartedServersAnswer)
{
	char tmpl[] = "/tmp/gpuslot-work-silent-XXXXXX";
	ASSERT_NE(mkdtemp(tmpl), nullptr);
	const fs::path dir = tmpl;
	std::vector<std::pair<std::string, std::string>> before;
	gpuslot_slot high{};
	gpuslot_client *c = preempting_client_of_a_killed_server(dir, &before, &high);
	ASSERT_NE(c, nullptr);
	int preempts = 0;

	// The fake server: connections wait in its backlog until it takes them.
	const std::string path = gpuslot::domain_socket(dir, 0);
	fs::remove(path);
	std::atomic<int> listener{socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)};
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	strcpy(a.sun_path, path.c_str());
	ASSERT_EQ(::bind(listener.load(), reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	ASSERT_EQ(::listen(listener.load(), 8), 0);
	std::atomic<bool> done{false}, rescued{false};
	std::thread watchdog([&] {
		for (int i = 0; i < 20000 && !done; i++)
			usleep(1000);
		if (!done) {
			// Closing it resets the connections a read waits on.
			rescued = true;
			if (int fd = listener.exchange(-1); fd >= 0)
				::close(fd);
		}
	});
	// Reads (each returning, empty) until a request is in the backlog
	// (10 s at most); it is taken and read: its connection, or -1.
	auto next_request = [&]() -> int {
		pollfd pf{listener.load(), POLLIN, 0};
		for (int i = 0; i < 10000 && poll(&pf, 1, 0) == 0; i++) {
			EXPECT_EQ(gpuslot_work_preempts(c, 0), 0);
			usleep(1000);
		}
		EXPECT_FALSE(rescued) << "a read waited for the fake server";
		if (rescued || poll(&pf, 1, 0) != 1)
			return -1;
		const int fd = accept4(listener.load(), nullptr, nullptr, SOCK_CLOEXEC);
		if (fd < 0)
			return -1;
		const timeval bound{10, 0};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
		struct {
			gpuslot_wire h;
			uint32_t flags;
		} req{};
		if (recv(fd, &req, sizeof(req), 0) != ssize_t(sizeof(req)) ||
		    req.h.magic != GPUSLOT_WIRE_MAGIC || req.h.cmd != GPUSLOT_WIRE_WORK_STATE) {
			::close(fd);
			return -1;
		}
		return fd;
	};
	// A page in which slot 0 (priority 1) preempts, sealed against
	// shrinking (as gpuslotd's) or not.
	auto page = [](bool sealed) {
		const int fd = memfd_create(sealed ? "gpuslot-work-gpu0" : "gpuslot-work-unsealed",
					    MFD_CLOEXEC | MFD_ALLOW_SEALING);
		gpuslot_work_state st{};
		st.seq = 2;
		st.version = GPUSLOT_WORK_STATE_VERSION;
		st.k = 2;
		st.priority[0] = 1;
		st.held_mask = st.work_mask = st.preempt_mask = 1;
		st.preempt_level = 2;
		st.updates = 1;
		if (fd < 0 || ftruncate(fd, GPUSLOT_WORK_STATE_SIZE) ||
		    pwrite(fd, &st, sizeof(st), 0) != ssize_t(sizeof(st)) ||
		    (sealed && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW))) {
			ADD_FAILURE() << "the fake's page: " << strerror(errno);
			if (fd >= 0)
				::close(fd);
			return -1;
		}
		return fd;
	};
	// The answer: @memfd over SCM_RIGHTS.
	auto answer = [](int fd, int memfd) {
		gpuslot_wire r{};
		r.magic = GPUSLOT_WIRE_MAGIC;
		r.cmd = GPUSLOT_WIRE_WORK_STATE;
		r.seq = 1;
		iovec iov{&r, sizeof(r)};
		alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
		msghdr m{};
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = control;
		m.msg_controllen = sizeof(control);
		cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(cm), &memfd, sizeof(int));
		return sendmsg(fd, &m, MSG_NOSIGNAL) == ssize_t(sizeof(r));
	};

	// A request, not answered: reads return, and after a while the
	// request is made again.
	const int first = next_request();
	ASSERT_GE(first, 0) << "no request came";
	const int second = next_request();
	::close(first);
	ASSERT_GE(second, 0) << "an unanswered request was not made again";
	// A memfd that could shrink under a reader is refused, and asked
	// again (unless that answer came after the request's time was up:
	// then it was never read, and the next request comes all the same).
	const int unsealed = page(false);
	ASSERT_GE(unsealed, 0);
	EXPECT_TRUE(answer(second, unsealed));
	::close(unsealed);
	const int third = next_request();
	::close(second);
	ASSERT_GE(third, 0) << "no request after a refused answer";
	const int memfd = page(true);
	ASSERT_GE(memfd, 0);
	ASSERT_TRUE(answer(third, memfd));
	for (int i = 0; i < 5000 && (preempts = gpuslot_work_preempts(c, 0)) != 1; i++)
		usleep(1000);
	EXPECT_EQ(preempts, 1) << "the answer was never taken";
	const auto after = memfd_mappings();
	ASSERT_EQ(after.size(), 1u);
	EXPECT_EQ(after[0].first, before[0].first) << "mapped at another address";
	EXPECT_NE(after[0].second, before[0].second) << "still the old server's memfd";
	// The fake hangs up: its page holds no one back either.
	::close(third);
	for (int i = 0; i < 5000 && (preempts = gpuslot_work_preempts(c, 0)) != 0; i++)
		usleep(1000);
	EXPECT_EQ(preempts, 0);
	done = true;
	watchdog.join();
	if (int fd = listener.exchange(-1); fd >= 0)
		::close(fd);
	::close(memfd);
	gpuslot_close(c);
	unsetenv("GPUSLOT_TRANSPORT");
	unsetenv("GPUSLOT_SOCKET_DIR");
	fs::remove_all(dir);
}


// libgpuslot's own launch gate (gpuslot_launch_begin()/_end(), 1.7): the
// throttle of gpuslot-run for commands sent on a slot's stream. The lock
// and its published state are the real ones (the fixture's server); the
// GPU is a double: a backend whose streams count the commands sent on them
// and finish them when the test says, with markers over those counts.
class TestGpu {
public:
	void sent(void *stream)
	{
		std::lock_guard g(m_);
		sent_[stream]++;
	}
	// The oldest @n unfinished commands of @stream finish.
	void finish(void *stream, unsigned int n)
	{
		std::lock_guard g(m_);
		finished_[stream] = std::min(finished_[stream] + n, sent_[stream]);
	}
	unsigned int unfinished(void *stream)
	{
		std::lock_guard g(m_);
		return unsigned(sent_[stream] - finished_[stream]);
	}
	uint64_t sent_count(void *stream)
	{
		std::lock_guard g(m_);
		return sent_[stream];
	}
	bool reached(void *stream, uint64_t at)
	{
		std::lock_guard g(m_);
		return finished_[stream] >= at;
	}
	std::atomic<bool> capturing{false};
	std::atomic<int> markers_alive{0};
	std::atomic<int> markers_recorded{0};

private:
	std::mutex m_;
	std::map<void *, uint64_t> sent_, finished_;
};

class TestGpuMarkers final : public gpuslot::Markers {
public:
	TestGpuMarkers(TestGpu *gpu, void *stream) : gpu_(gpu), stream_(stream)
	{
		gpu_->markers_alive++;
	}
	~TestGpuMarkers() override { gpu_->markers_alive--; }
	bool capturing(void *) override { return gpu_->capturing; }
	void *record(void *stream) override
	{
		EXPECT_EQ(stream, stream_);
		gpu_->markers_recorded++;
		// A marker: the count of commands it follows, plus one (0 is
		// no marker).
		return reinterpret_cast<void *>(uintptr_t(gpu_->sent_count(stream_) + 1));
	}
	bool reached(void *marker) override
	{
		return gpu_->reached(stream_, uint64_t(reinterpret_cast<uintptr_t>(marker)) - 1);
	}
	void recycle(void *) override {}

private:
	TestGpu *const gpu_;
	void *const stream_;
};

class TestGpuBackend final : public gpuslot::Backend {
public:
	explicit TestGpuBackend(TestGpu *gpu) : gpu_(gpu) {}
	const char *name() const override { return "test"; }
	unsigned int set_queues(const gpuslot::SlotLayout &, uint64_t) const override { return 0; }
	int build(const gpuslot::SlotLayout &layout, uint64_t slots, gpuslot::StreamSet *set,
		  std::string *) override
	{
		set->start(layout);
		set->slots = slots;
		for (unsigned int s = 0; s < layout.k; s++) {
			set->streams[s] = reinterpret_cast<void *>(uintptr_t(0x1000 + s));
			set->priorities[s] = layout.priority(s);
		}
		return 0;
	}
	int synchronize(void *stream, std::string *) override
	{
		gpu_->finish(stream, ~0u);
		return 0;
	}
	void destroy_slot(gpuslot::StreamSet *set, unsigned int slot) override
	{
		set->slots &= ~(1ULL << slot);
	}
	int make_markers(void *stream, std::unique_ptr<gpuslot::Markers> *markers,
			 std::string *) override
	{
		*markers = std::make_unique<TestGpuMarkers>(gpu_, stream);
		return 0;
	}

private:
	TestGpu *const gpu_;
};

class LaunchGate : public WorkState {
protected:
	void SetUp() override
	{
		WorkState::SetUp();
		// No budget: a preemption lasts as long as its work (the
		// default would end one 250 ms in).
		std::unique_ptr<LockFile> admin = file();
		ASSERT_TRUE(admin);
		ASSERT_EQ(admin->write_attr("preempt_share", "100"), 0);
		setenv("GPUSLOT_TRANSPORT", "socket", 1);
		setenv("GPUSLOT_SOCKET_DIR", dir_.c_str(), 1);
		gpuslot_options o{};
		o.size = sizeof(o);
		const gpuslot::BackendFactory backends = [this](const gpuslot::SlotLayout &,
								 std::unique_ptr<gpuslot::Backend> *out,
								 std::string *) {
			*out = std::make_unique<TestGpuBackend>(&gpu_);
			return 0;
		};
		ASSERT_EQ(gpuslot::open_client(&o, &backends, &c_), 0) << gpuslot_last_error();
		high_.size = low_.size = sizeof(gpuslot_slot);
		ASSERT_EQ(gpuslot_acquire_slot(c_, GPUSLOT_WAIT_FOREVER, 1, &high_), 0);
		ASSERT_EQ(gpuslot_acquire_slot(c_, GPUSLOT_WAIT_FOREVER, 2, &low_), 0);
		ASSERT_EQ(high_.priority, 1u);
		ASSERT_EQ(low_.priority, 0u);
	}
	void TearDown() override
	{
		if (c_)
			gpuslot_close(c_);
		unsetenv("GPUSLOT_TRANSPORT");
		unsetenv("GPUSLOT_SOCKET_DIR");
		WorkState::TearDown();
	}
	// One command through the gate: begin, sent, end.
	void send(gpuslot_slot *slot, uint32_t inflight = GPUSLOT_LAUNCH_INFLIGHT_DEFAULT)
	{
		ASSERT_EQ(gpuslot_launch_begin(c_, slot, inflight), 0) << gpuslot_last_error();
		gpu_.sent(slot->stream);
		ASSERT_EQ(gpuslot_launch_end(c_, slot), 0) << gpuslot_last_error();
	}
	// A command sent on another thread; *@began once its begin returned.
	std::thread send_later(gpuslot_slot *slot, std::atomic<bool> *began,
			       uint32_t inflight = GPUSLOT_LAUNCH_INFLIGHT_DEFAULT)
	{
		return std::thread([this, slot, began, inflight] {
			EXPECT_EQ(gpuslot_launch_begin(c_, slot, inflight), 0) << gpuslot_last_error();
			*began = true;
			gpu_.sent(slot->stream);
			EXPECT_EQ(gpuslot_launch_end(c_, slot), 0) << gpuslot_last_error();
		});
	}

	TestGpu gpu_;
	gpuslot_client *c_ = nullptr;
	gpuslot_slot high_{}, low_{};
};

// Waits up to 5 s for @done; no speed is asserted.
bool within_5s(const std::atomic<bool> &done)
{
	for (int i = 0; i < 5000 && !done; i++)
		usleep(1000);
	return done;
}

// The first command of a hold reports its work, as gpuslot_set_work(1): again
// after a report of drained; the hold's end clears it.
TEST_F(LaunchGate, TheFirstCommandReportsTheHoldsWork)
{
	EXPECT_EQ(now().work_mask, 0u);
	send(&low_);
	EXPECT_EQ(now().work_mask, 2u);
	send(&low_);
	ASSERT_EQ(gpuslot_set_work(c_, &low_, 0), 0);
	EXPECT_EQ(now().work_mask, 0u);
	send(&low_);
	EXPECT_EQ(now().work_mask, 2u) << "a command after a drain did not report work again";
	send(&high_);
	EXPECT_EQ(now().work_mask, 3u);
	EXPECT_EQ(now().preempt_level, 2u);
	ASSERT_EQ(gpuslot_release_slot(c_, &high_, 0), 0);
	EXPECT_EQ(now().work_mask, 2u);
}

// A command captured into a graph does not run now: a hold whose first
// commands are captured reports no work; its first real one does.
TEST_F(LaunchGate, ACapturedCommandReportsNoWork)
{
	gpu_.capturing = true;
	send(&low_);
	send(&low_);
	gpu_.capturing = false;
	EXPECT_EQ(now().work_mask, 0u) << "a captured command reported work";
	send(&low_);
	EXPECT_EQ(now().work_mask, 2u);
}

// While the higher slot's work is pending, the lower slot's next command
// waits in begin; it goes once that work drains. The higher slot's own
// commands are not held back.
TEST_F(LaunchGate, ALowerSlotsCommandWaitsWhileAHigherSlotPreempts)
{
	send(&high_);
	ASSERT_EQ(now().preempt_level, 2u);
	for (int i = 0; i < 10; i++)
		send(&high_);
	std::atomic<bool> began{false};
	std::thread low = send_later(&low_, &began);
	// Well under the 1000 ms after which a waiting command goes anyway.
	usleep(200 * 1000);
	EXPECT_FALSE(began) << "the lower slot's command went while the higher slot preempted";
	ASSERT_EQ(gpuslot_set_work(c_, &high_, 0), 0);
	EXPECT_TRUE(within_5s(began)) << "the lower slot's command still waits after the drain";
	low.join();
	EXPECT_EQ(gpu_.sent_count(low_.stream), 1u);
}

// Where a slot outranks the holder's, at most @inflight of its commands are
// unfinished: the next waits until the GPU finishes one. The top slot has
// no bound. A command captured into a graph is neither held back nor
// counted.
TEST_F(LaunchGate, AnOutrankedHoldKeepsItsBound)
{
	for (int i = 0; i < 3; i++)
		send(&low_, 3);
	EXPECT_EQ(gpu_.unfinished(low_.stream), 3u);
	std::atomic<bool> began{false};
	std::thread fourth = send_later(&low_, &began, 3);
	usleep(200 * 1000);
	EXPECT_FALSE(began) << "a fourth command went with 3 unfinished";
	// Captured: neither held back (a held-back one would go only past
	// the throttle's 1000 ms, and then marked) nor counted.
	const int recorded = gpu_.markers_recorded;
	gpu_.capturing = true;
	send(&low_, 3);
	gpu_.capturing = false;
	EXPECT_EQ(gpu_.markers_recorded, recorded) << "a captured command was counted";
	gpu_.finish(low_.stream, 1);
	EXPECT_TRUE(within_5s(began)) << "the fourth command still waits with one finished";
	fourth.join();
	const int marked = gpu_.markers_recorded;
	for (int i = 0; i < 20; i++)
		send(&high_, 3); // nothing outranks slot 0
	EXPECT_EQ(gpu_.unfinished(high_.stream), 20u);
	EXPECT_EQ(gpu_.markers_recorded, marked) << "the top slot's commands were counted";
}

// Threads of one hold send at once: every begin succeeds (one reports the
// work, the others wait for that report), each end marks its own thread's
// command, and the bound holds for them together.
TEST_F(LaunchGate, ThreadsOfOneHoldShareItsGate)
{
	constexpr int kThreads = 8, kSends = 50;
	std::atomic<int> ready{0}, failures{0}, over{0};
	std::atomic<bool> done{false};
	// The GPU finishes what is sent, now and then: the bound lets
	// everything through in the end.
	std::thread gpu([&] {
		while (!done) {
			if (gpu_.unfinished(low_.stream) > 4)
				over++;
			gpu_.finish(low_.stream, 1);
			usleep(100);
		}
	});
	std::vector<std::thread> threads;
	for (int t = 0; t < kThreads; t++)
		threads.emplace_back([&] {
			ready++;
			while (ready < kThreads)
				;
			for (int i = 0; i < kSends; i++) {
				if (gpuslot_launch_begin(c_, &low_, 4)) {
					failures++;
					continue;
				}
				gpu_.sent(low_.stream);
				if (gpuslot_launch_end(c_, &low_))
					failures++;
			}
		});
	for (auto &t : threads)
		t.join();
	done = true;
	gpu.join();
	EXPECT_EQ(failures.load(), 0) << gpuslot_last_error();
	EXPECT_EQ(gpu_.sent_count(low_.stream), uint64_t(kThreads * kSends));
	EXPECT_EQ(now().work_mask, 2u);
	// Past the bound only by a send between a begin and its end.
	EXPECT_EQ(over.load(), 0) << "more than 4 commands were unfinished";
}

// Bad calls change nothing: another bound within a hold, an end without a
// begin, a slot not held (released), a client without streams.
TEST_F(LaunchGate, BadCallsAreRefused)
{
	EXPECT_EQ(gpuslot_launch_end(c_, &low_), -EINVAL);
	EXPECT_EQ(now().work_mask, 0u);
	EXPECT_EQ(gpuslot_launch_begin(nullptr, &low_, 4), -EINVAL);
	EXPECT_EQ(gpuslot_launch_begin(c_, nullptr, 4), -EINVAL);
	send(&low_, 4);
	EXPECT_EQ(gpuslot_launch_end(c_, &low_), -EINVAL) << "an end without its begin";
	EXPECT_EQ(gpuslot_launch_begin(c_, &low_, 2), -EINVAL) << "a second bound in one hold";
	gpuslot_slot gone = low_;
	ASSERT_EQ(gpuslot_release_slot(c_, &low_, 0), 0);
	EXPECT_EQ(gpuslot_launch_begin(c_, &gone, 4), -EINVAL);
	EXPECT_EQ(gpuslot_launch_end(c_, &gone), -EINVAL);
	EXPECT_EQ(now().work_mask, 0u);
	EXPECT_EQ(gpu_.markers_alive, 0) << "the released hold's markers were kept";

	gpuslot_client *none = open_client(dir_);
	ASSERT_NE(none, nullptr);
	gpuslot_slot s{};
	s.size = sizeof(s);
	ASSERT_EQ(gpuslot_acquire_slot(none, GPUSLOT_WAIT_FOREVER, 2, &s), 0);
	EXPECT_EQ(gpuslot_launch_begin(none, &s, 4), -EOPNOTSUPP);
	EXPECT_NE(std::string(gpuslot_last_error()).find("no stream"), std::string::npos)
		<< gpuslot_last_error();
	EXPECT_EQ(now().work_mask, 0u) << "a refused begin reported work";
	gpuslot_close(none);
}

} // namespace
