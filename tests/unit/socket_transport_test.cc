// SPDX-License-Identifier: GPL-2.0
// The socket transport on the host: gpuslotd's LockServer in a thread, and
// clients over libgpuslot's LockFile (the very code the library uses), with
// the module's expectations: FIFO with handoff, masks, try and timeout,
// death is release, signals, the asynchronous acquire, the HQD budget,
// k changes, and the errnos of bad messages.
#include <gtest/gtest.h>

#include <linux/gpuslot.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gpuslot.h"
#include "gpuslot.hpp"
#include "lock_file.hpp"
#include "lock_server.hpp"

namespace {

namespace fs = std::filesystem;
using gpuslot::LockFile;

class Socket : public testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/gpuslot-sock-XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr);
		dir_ = tmpl;
		start_server();
	}
	void TearDown() override
	{
		stop_server();
		fs::remove_all(dir_);
	}

	// A server of two domains on dir_, run by thread_, as gpuslotd runs it.
	void start_server()
	{
		gpuslot::LockServerOptions o;
		o.socket_dir = dir_;
		o.nr_domains = 2;
		server_ = std::make_unique<gpuslot::LockServer>(o);
		std::string error;
		ASSERT_EQ(server_->start(&error), 0) << error;
		thread_ = std::thread([this] {
			std::string e;
			server_->run(&e);
		});
	}
	void stop_server()
	{
		server_->stop();
		thread_.join();
		server_.reset();
	}

	// gpuslotd restarts: a new server on the same sockets.
	void restart()
	{
		stop_server();
		start_server();
	}

	std::unique_ptr<LockFile> file(unsigned int domain = 0)
	{
		std::unique_ptr<LockFile> f;
		std::string error;
		EXPECT_EQ(gpuslot::open_lock_file(gpuslot::Transport::socket, dir_, domain, &f,
						  &error),
			  0)
			<< error;
		return f;
	}

	// k with whole-GPU partitions, as SET_K does (needs an admin).
	void set_k(unsigned int k)
	{
		gpuslot_layout l{};
		l.size = sizeof(l);
		l.k = k;
		ASSERT_EQ(server_->set_layout(0, &l, nullptr), 0);
	}

	struct Acquired {
		int err;
		unsigned int slot;
	};
	static Acquired acquire(LockFile &f, uint32_t flags = 0, uint64_t timeout = 0,
				uint64_t mask = 0)
	{
		gpuslot_acquire a{};
		a.size = sizeof(a);
		a.flags = flags;
		a.timeout_ns = timeout;
		a.allowed_mask = mask;
		int err = f.call(GPUSLOT_IOC_ACQUIRE, &a);
		return {err, a.slot};
	}
	static int release(LockFile &f)
	{
		gpuslot_release r{};
		r.size = sizeof(r);
		return f.call(GPUSLOT_IOC_RELEASE, &r);
	}
	static gpuslot_domain_info info(LockFile &f)
	{
		gpuslot_domain_info i{};
		i.size = sizeof(i);
		EXPECT_EQ(f.call(GPUSLOT_IOC_DOMAIN_INFO, &i), 0);
		return i;
	}
	bool wait_waiters(LockFile &f, unsigned int n)
	{
		for (int i = 0; i < 5000; i++) {
			if (info(f).nr_waiters == n)
				return true;
			usleep(1000);
		}
		return false;
	}

	fs::path dir_;
	std::unique_ptr<gpuslot::LockServer> server_;
	std::thread thread_;
};

TEST_F(Socket, StrictFifoWithDirectHandoff)
{
	auto holder = file();
	ASSERT_EQ(acquire(*holder).err, 0);
	std::vector<std::unique_ptr<LockFile>> files;
	std::vector<std::thread> waiters;
	std::mutex order_lock;
	std::vector<int> order;
	for (int i = 0; i < 5; i++) {
		files.push_back(file());
		LockFile &f = *files.back();
		waiters.emplace_back([&, i, &f = f] {
			auto a = acquire(f);
			EXPECT_EQ(a.err, 0);
			{
				std::lock_guard<std::mutex> hold(order_lock);
				order.push_back(i);
			}
			usleep(2000);
			EXPECT_EQ(release(f), 0);
		});
		// Queue them in a known order.
		ASSERT_TRUE(wait_waiters(*holder, unsigned(i + 1)));
	}
	// A newcomer's TRY cannot barge in at the release.
	auto newcomer = file();
	ASSERT_EQ(release(*holder), 0);
	EXPECT_EQ(acquire(*newcomer, GPUSLOT_ACQUIRE_TRY).err, EAGAIN);
	for (auto &t : waiters)
		t.join();
	EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
	EXPECT_EQ(info(*holder).nr_holders, 0u);
}

TEST_F(Socket, TryTimeoutAndMasks)
{
	set_k(2);
	auto a = file(), b = file(), c = file();
	ASSERT_EQ(acquire(*a, 0, 0, 1).slot, 0u);
	EXPECT_EQ(acquire(*b, GPUSLOT_ACQUIRE_TRY, 0, 1).err, EAGAIN);
	const auto t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(acquire(*b, GPUSLOT_ACQUIRE_TIMEOUT, 30'000'000, 1).err, ETIMEDOUT);
	EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(30));
	EXPECT_EQ(info(*a).nr_waiters, 0u);
	// A masked waiter waits while another slot is free.
	std::atomic<int> got{-1};
	std::thread w([&] { got = int(acquire(*b, 0, 0, 1).slot); });
	ASSERT_TRUE(wait_waiters(*a, 1));
	EXPECT_EQ(acquire(*c).slot, 1u);
	EXPECT_EQ(got.load(), -1);
	ASSERT_EQ(release(*a), 0);
	w.join();
	EXPECT_EQ(got.load(), 0);
	EXPECT_EQ(acquire(*b, 0, 0, 1ULL << 5).err, EDEADLK);
	EXPECT_EQ(acquire(*a, 0, 0, 1ULL << 5).err, EINVAL) << "no slot below k";
	EXPECT_EQ(release(*a), EPERM);
}

TEST_F(Socket, DeathIsRelease)
{
	// A connection serves one call at a time: the watcher asks.
	auto waiter = file(), watcher = file();
	int ready[2];
	ASSERT_EQ(pipe(ready), 0);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); // never outlive a failed test
		auto mine = file();
		if (acquire(*mine).err)
			_exit(1);
		char c = 1;
		(void)!write(ready[1], &c, 1);
		pause();
		_exit(0);
	}
	char c;
	ASSERT_EQ(read(ready[0], &c, 1), 1);
	std::atomic<int> got{-1};
	std::thread t([&] { got = acquire(*waiter).err; });
	ASSERT_TRUE(wait_waiters(*watcher, 1));
	EXPECT_EQ(got.load(), -1);
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	t.join();
	EXPECT_EQ(got.load(), 0) << "the killed holder's slot went to the waiter";
	close(ready[0]);
	close(ready[1]);
}

void on_signal(int) {}

TEST_F(Socket, ASignalEndsTheWaitAndLeavesNoTrace)
{
	auto holder = file(), waiter = file();
	ASSERT_EQ(acquire(*holder).err, 0);
	struct sigaction sa = {}, old;
	sa.sa_handler = on_signal;
	ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
	std::atomic<pid_t> tid{0};
	std::atomic<int> err{-1};
	std::thread t([&] {
		tid = pid_t(syscall(SYS_gettid));
		err = acquire(*waiter).err;
	});
	ASSERT_TRUE(wait_waiters(*holder, 1));
	// Queued is not yet asleep in recv(): signal until the wait ends.
	while (err.load() == -1) {
		syscall(SYS_tgkill, getpid(), tid.load(), SIGUSR1);
		usleep(5000);
	}
	t.join();
	sigaction(SIGUSR1, &old, nullptr);
	EXPECT_EQ(err.load(), EINTR);
	EXPECT_EQ(info(*holder).nr_waiters, 0u);
	// The connection works on.
	ASSERT_EQ(release(*holder), 0);
	EXPECT_EQ(acquire(*waiter).err, 0);
	EXPECT_EQ(release(*waiter), 0);
}

TEST_F(Socket, AsynchronousAcquire)
{
	auto holder = file(), async = file(), sleeper = file();
	ASSERT_EQ(acquire(*holder).err, 0);
	gpuslot_acquire a{};
	a.size = sizeof(a);
	ASSERT_EQ(async->call(GPUSLOT_IOC_ACQUIRE_ASYNC, &a), 0);
	pollfd p = {async->fd(), POLLIN, 0};
	EXPECT_EQ(poll(&p, 1, 20), 0);
	gpuslot_acquire done{};
	done.size = sizeof(done);
	EXPECT_EQ(async->call(GPUSLOT_IOC_ACQUIRE_COMPLETE, &done), EAGAIN);
	std::atomic<int> slept{-1};
	std::thread s([&] { slept = acquire(*sleeper).err; });
	ASSERT_TRUE(wait_waiters(*holder, 2));
	ASSERT_EQ(release(*holder), 0);
	ASSERT_EQ(poll(&p, 1, 5000), 1) << "the older async waiter is granted first";
	EXPECT_EQ(slept.load(), -1);
	ASSERT_EQ(async->call(GPUSLOT_IOC_ACQUIRE_COMPLETE, &done), 0);
	EXPECT_EQ(done.slot, 0u);
	EXPECT_EQ(poll(&p, 1, 0), 0) << "nothing left to read once completed";
	ASSERT_EQ(release(*async), 0);
	s.join();
	EXPECT_EQ(slept.load(), 0);
	// Cancel while queued, and a grant not completed goes on.
	ASSERT_EQ(async->call(GPUSLOT_IOC_ACQUIRE_ASYNC, &a), 0);
	gpuslot_release r{};
	r.size = sizeof(r);
	ASSERT_EQ(async->call(GPUSLOT_IOC_ACQUIRE_CANCEL, &r), 0);
	EXPECT_EQ(r.slot, GPUSLOT_NO_SLOT);
	EXPECT_EQ(info(*holder).nr_waiters, 0u);
	EXPECT_EQ(async->call(GPUSLOT_IOC_ACQUIRE_CANCEL, &r), EPERM);
	ASSERT_EQ(release(*sleeper), 0);
}

TEST_F(Socket, QueueBudgetAndClose)
{
	auto a = file(), b = file();
	gpuslot_reserve_queues r{};
	r.size = sizeof(r);
	r.count = 20;
	ASSERT_EQ(a->call(GPUSLOT_IOC_RESERVE_QUEUES, &r), 0);
	EXPECT_EQ(r.reserved, 20u);
	EXPECT_EQ(r.hqd_used, 20u);
	EXPECT_EQ(r.hqd_limit, 24u);
	r.count = 5;
	EXPECT_EQ(b->call(GPUSLOT_IOC_RESERVE_QUEUES, &r), ENOSPC);
	r.count = 25;
	EXPECT_EQ(b->call(GPUSLOT_IOC_RESERVE_QUEUES, &r), EINVAL) << "more than the limit";
	r.count = 5;
	r.flags = GPUSLOT_RESERVE_WAIT;
	std::atomic<int> got{-1};
	std::thread t([&] { got = b->call(GPUSLOT_IOC_RESERVE_QUEUES, &r); });
	usleep(20000);
	EXPECT_EQ(got.load(), -1);
	a.reset(); // close: its 20 queues return
	t.join();
	EXPECT_EQ(got.load(), 0);
	EXPECT_EQ(info(*b).hqd_used, 5u);
}

TEST_F(Socket, AdminsChangeKOthersGetEperm)
{
	auto f = file();
	gpuslot_set_k s{};
	s.size = sizeof(s);
	s.k = 3;
	const int err = f->call(GPUSLOT_IOC_SET_K, &s);
	if (getuid() == 0) {
		EXPECT_EQ(err, 0);
		EXPECT_EQ(info(*f).k, 3u);
	} else {
		EXPECT_EQ(err, EPERM);
		EXPECT_EQ(info(*f).k, 1u);
	}
	// The server-side admin path (gpuslotd's own planner).
	set_k(2);
	EXPECT_EQ(info(*f).k, 2u);
	gpuslot_layout l{};
	l.size = sizeof(l);
	l.k = 2;
	l.unit_kind = GPUSLOT_UNIT_AMD_CU;
	l.unit_size = 1;
	l.nr_units = 60;
	l.nr_partitions = 2;
	gpuslot_partition parts[2] = {};
	parts[0].units[0] = 0xf;
	parts[1].units[0] = 0xc; // overlaps slot 0
	EXPECT_EQ(server_->set_layout(0, &l, parts), EINVAL);
	parts[1].units[0] = 0xf0;
	ASSERT_EQ(server_->set_layout(0, &l, parts), 0);
	gpuslot_layout got{};
	got.size = sizeof(got);
	gpuslot_partition back[4] = {};
	got.nr_partitions = 4;
	got.partitions = uintptr_t(back);
	ASSERT_EQ(f->call(GPUSLOT_IOC_GET_LAYOUT, &got), 0);
	EXPECT_EQ(got.k, 2u);
	EXPECT_EQ(got.nr_units, 60u);
	EXPECT_EQ(back[0].units[0], 0xfu);
	EXPECT_EQ(back[1].units[0], 0xf0u);
	EXPECT_EQ(back[2].units[0], 0u);
}

TEST_F(Socket, BadMessagesGetTheIoctlsErrnos)
{
	auto f = file();
	gpuslot_acquire a{};
	a.size = GPUSLOT_ACQUIRE_SIZE_VER0 - 8;
	EXPECT_EQ(f->call(GPUSLOT_IOC_ACQUIRE, &a), EINVAL);
	a.size = sizeof(a);
	a.__reserved = 1;
	EXPECT_EQ(f->call(GPUSLOT_IOC_ACQUIRE, &a), EINVAL);
	a.__reserved = 0;
	a.flags = GPUSLOT_ACQUIRE_TRY | GPUSLOT_ACQUIRE_TIMEOUT;
	EXPECT_EQ(f->call(GPUSLOT_IOC_ACQUIRE, &a), EINVAL);
	struct {
		gpuslot_acquire a;
		uint64_t newer;
	} big{};
	big.a.size = sizeof(big);
	big.a.flags = GPUSLOT_ACQUIRE_TRY;
	big.newer = 1;
	EXPECT_EQ(f->call(GPUSLOT_IOC_ACQUIRE, &big), E2BIG);
	big.newer = 0;
	EXPECT_EQ(f->call(GPUSLOT_IOC_ACQUIRE, &big), 0);
	EXPECT_EQ(release(*f), 0);
	struct gpuslot_version v{};
	v.size = sizeof(v);
	EXPECT_EQ(f->call(_IO(GPUSLOT_IOC_MAGIC, 0x40), &v), ENOTTY);
	ASSERT_EQ(f->call(GPUSLOT_IOC_VERSION, &v), 0);
	EXPECT_EQ(v.nr_domains, 2u);
	EXPECT_TRUE(v.features & GPUSLOT_FEATURE_ASYNC);
	// Garbage on the wire: the server drops that connection only.
	int raw = f->fd();
	const char junk[] = "not a gpuslot message";
	ASSERT_GT(send(raw, junk, sizeof(junk), MSG_NOSIGNAL), 0);
	char buf[64];
	EXPECT_EQ(recv(raw, buf, sizeof(buf), 0), 0) << "closed by the server";
	auto g = file();
	EXPECT_EQ(acquire(*g).err, 0);
	// A domain the server does not have.
	std::unique_ptr<LockFile> none;
	std::string error;
	EXPECT_EQ(gpuslot::open_lock_file(gpuslot::Transport::socket, dir_, 7, &none, &error),
		  -EINVAL);
	EXPECT_NE(error.find("no GPU domain 7"), std::string::npos) << error;
}

// libgpuslot's whole client over the socket: many threads, one client.
TEST_F(Socket, LibgpuslotClientsUseItUnchanged)
{
	set_k(2);
	setenv("GPUSLOT_TRANSPORT", "socket", 1);
	setenv("GPUSLOT_SOCKET_DIR", dir_.c_str(), 1);
	gpuslot_options o{};
	o.size = sizeof(o);
	o.backend = GPUSLOT_BACKEND_NONE;
	gpuslot_client *c;
	ASSERT_EQ(gpuslot_open(&o, &c), 0) << gpuslot_last_error();
	std::atomic<int> owner[2] = {}, overlaps{0}, failures{0};
	std::vector<std::thread> threads;
	for (int t = 0; t < 6; t++)
		threads.emplace_back([&, t] {
			for (int j = 0; j < 100; j++) {
				gpuslot_slot s{};
				s.size = sizeof(s);
				if (gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s)) {
					failures++;
					continue;
				}
				if (owner[s.index].exchange(t + 1))
					overlaps++;
				usleep(100);
				owner[s.index] = 0;
				if (gpuslot_release_slot(c, &s, 0))
					failures++;
			}
		});
	for (auto &t : threads)
		t.join();
	EXPECT_EQ(failures.load(), 0) << gpuslot_last_error();
	EXPECT_EQ(overlaps.load(), 0);
	// Asynchronous, through the library.
	gpuslot_slot s{};
	s.size = sizeof(s);
	ASSERT_EQ(gpuslot_acquire_start(c, 0, &s), 0) << gpuslot_last_error();
	pollfd p = {gpuslot_acquire_fd(&s), POLLIN, 0};
	ASSERT_EQ(poll(&p, 1, 5000), 1);
	ASSERT_EQ(gpuslot_acquire_complete(c, &s), 0) << gpuslot_last_error();
	EXPECT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	gpuslot_close(c);
	setenv("GPUSLOT_TRANSPORT", "bogus", 1);
	EXPECT_EQ(gpuslot_open(&o, &c), -EINVAL);
	EXPECT_NE(std::string(gpuslot_last_error()).find("use device or socket"), std::string::npos);
	unsetenv("GPUSLOT_TRANSPORT");
	unsetenv("GPUSLOT_SOCKET_DIR");
}

// Under ASan: a C++ Slot released after its Client is gone (moved and
// move-assigned first) is no use-after-free; the slot is really released.
TEST_F(Socket, ACppSlotOutlivesItsClient)
{
	setenv("GPUSLOT_TRANSPORT", "socket", 1);
	setenv("GPUSLOT_SOCKET_DIR", dir_.c_str(), 1);
	gpuslot::Options opts;
	opts.backend = GPUSLOT_BACKEND_NONE;
	std::optional<gpuslot::Slot> slot;
	{
		gpuslot::Client client(opts);
		gpuslot::Client moved(std::move(client));
		gpuslot::Client assigned(opts);
		assigned = std::move(moved);
		slot = assigned.acquire();
	}
	auto watcher = file();
	EXPECT_EQ(info(*watcher).nr_holders, 1u);
	EXPECT_EQ(slot->release(), 0);
	EXPECT_EQ(info(*watcher).nr_holders, 0u);
	unsetenv("GPUSLOT_TRANSPORT");
	unsetenv("GPUSLOT_SOCKET_DIR");
}

// A restart of gpuslotd ends the holds of the socket transport: the next
// call says so (no hang), the one after reconnects, with the reservation
// made again, and a generation the client has never seen.
TEST_F(Socket, ARestartEndsHoldsAndTheClientReconnects)
{
	setenv("GPUSLOT_TRANSPORT", "socket", 1);
	setenv("GPUSLOT_SOCKET_DIR", dir_.c_str(), 1);
	gpuslot_options o{};
	o.size = sizeof(o);
	o.backend = GPUSLOT_BACKEND_NONE;
	gpuslot_client *c;
	ASSERT_EQ(gpuslot_open(&o, &c), 0) << gpuslot_last_error();
	gpuslot_slot s{};
	s.size = sizeof(s);
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), 0);
	const uint64_t before = s.generation;
	restart();
	EXPECT_EQ(gpuslot_release_slot(c, &s, 0), -ECONNRESET);
	EXPECT_NE(std::string(gpuslot_last_error()).find("gpuslotd went away"), std::string::npos)
		<< gpuslot_last_error();
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s), 0) << gpuslot_last_error();
	EXPECT_GT(s.generation, before);
	auto watcher = file();
	EXPECT_EQ(info(*watcher).nr_holders, 1u);
	EXPECT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	// A waiter blocked when gpuslotd goes away gets an error, not a hang.
	auto holder = file();
	ASSERT_EQ(acquire(*holder).err, 0);
	std::atomic<int> err{1};
	std::thread t([&] {
		gpuslot_slot w{};
		w.size = sizeof(w);
		err = gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &w);
	});
	ASSERT_TRUE(wait_waiters(*watcher, 1));
	restart();
	t.join();
	EXPECT_EQ(err.load(), -ECONNRESET);
	gpuslot_close(c);
	unsetenv("GPUSLOT_TRANSPORT");
	unsetenv("GPUSLOT_SOCKET_DIR");
}

struct Policy {
	int policy;
	int priority;
	int nice;
};

Policy policy_of(pid_t tid = 0)
{
	sched_param p{};
	sched_getparam(tid, &p);
	errno = 0;
	return {sched_getscheduler(tid) & ~SCHED_RESET_ON_FORK, p.sched_priority,
		getpriority(PRIO_PROCESS, id_t(tid ? tid : syscall(SYS_gettid)))};
}

// The boost on the socket transport: the module's ledger in gpuslotd,
// when it has CAP_SYS_NICE (root here); without, none and it says so.
TEST_F(Socket, HoldersAreBoostedAndRestoredExactly)
{
	auto watcher = file();
	if (info(*watcher).boost_priority == 0) {
		GTEST_SKIP() << "gpuslotd's lock server has no CAP_SYS_NICE here: no boost";
	}
	EXPECT_EQ(info(*watcher).boost_priority, unsigned(GPUSLOT_DEFAULT_BOOST_PRIORITY));
	std::thread t([&] {
		ASSERT_EQ(setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), 3), 0);
		auto f = file();
		ASSERT_EQ(acquire(*f).err, 0);
		Policy held = policy_of();
		EXPECT_EQ(held.policy, SCHED_FIFO);
		EXPECT_EQ(held.priority, GPUSLOT_DEFAULT_BOOST_PRIORITY);
		// Lowering itself does not escape the restore.
		sched_param lower{GPUSLOT_DEFAULT_BOOST_PRIORITY - 1};
		ASSERT_EQ(sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &lower), 0);
		ASSERT_EQ(release(*f), 0);
		Policy after = policy_of();
		EXPECT_EQ(after.policy, SCHED_OTHER);
		EXPECT_EQ(after.nice, 3);
		// A queued waiter is boosted before its ACQUIRE returns.
		auto holder = file();
		ASSERT_EQ(acquire(*holder).err, 0);
		std::atomic<int> policy_at_return{-1};
		std::thread w([&] {
			auto mine = file();
			EXPECT_EQ(acquire(*mine).err, 0);
			policy_at_return = policy_of().policy;
			EXPECT_EQ(release(*mine), 0);
			EXPECT_EQ(policy_of().policy, SCHED_OTHER);
		});
		ASSERT_TRUE(wait_waiters(*watcher, 1));
		ASSERT_EQ(release(*holder), 0);
		w.join();
		EXPECT_EQ(policy_at_return.load(), SCHED_FIFO);
		// Closing the connection ends the boost, as closing the file does.
		ASSERT_EQ(acquire(*holder).err, 0);
		EXPECT_EQ(policy_of().policy, SCHED_FIFO);
		holder.reset();
		for (int i = 0; i < 1000 && policy_of().policy != SCHED_OTHER; i++)
			usleep(1000);
		EXPECT_EQ(policy_of().policy, SCHED_OTHER);
		EXPECT_EQ(policy_of().nice, 3);
	});
	t.join();
}

TEST_F(Socket, AThreadIdOfAnotherProcessIsNotBoosted)
{
	// A child stands for another process; its main thread's id is its pid.
	int ready[2];
	ASSERT_EQ(pipe(ready), 0);
	pid_t child = fork();
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		char c = 1;
		(void)!write(ready[1], &c, 1);
		pause();
		_exit(0);
	}
	char c;
	ASSERT_EQ(read(ready[0], &c, 1), 1);
	const Policy before = policy_of(child);
	auto f = file();
	struct {
		gpuslot_wire h;
		gpuslot_acquire a;
	} m{};
	m.h.magic = GPUSLOT_WIRE_MAGIC;
	m.h.cmd = _IOC_NR(GPUSLOT_IOC_ACQUIRE);
	m.h.size = sizeof(m.a);
	m.h.tid = child; // not a thread of the peer (this process)
	m.a.size = sizeof(m.a);
	ASSERT_EQ(send(f->fd(), &m, sizeof(m), MSG_NOSIGNAL), ssize_t(sizeof(m)));
	char reply[256];
	ASSERT_GT(recv(f->fd(), reply, sizeof(reply), 0), 0);
	gpuslot_wire h;
	std::memcpy(&h, reply, sizeof(h));
	EXPECT_EQ(h.error, 0) << "granted, but nobody else is boosted";
	EXPECT_EQ(policy_of(child).policy, before.policy);
	EXPECT_EQ(policy_of().policy, SCHED_OTHER);
	EXPECT_EQ(release(*f), 0);
	kill(child, SIGKILL);
	waitpid(child, nullptr, 0);
	close(ready[0]);
	close(ready[1]);
}

} // namespace
