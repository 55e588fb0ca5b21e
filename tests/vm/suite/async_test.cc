// SPDX-License-Identifier: GPL-2.0
// Asynchronous acquire (ACQUIRE_ASYNC, poll, ACQUIRE_COMPLETE,
// ACQUIRE_CANCEL): the FIFO place is the same as a sleeping ACQUIRE's, a
// grant makes the file readable, cancel and close leave the queue, a signal
// does not, and one epoll set serves many waiters in order.
#include <gtest/gtest.h>

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "device.h"

namespace gpuslot::test {
namespace {

std::string domain_file(const char *attr)
{
	return read_attr(0, attr);
}

// The words of the only line of holders.
std::vector<std::string> only_holder()
{
	auto lines = split_lines(domain_file("debug/holders"));
	return lines.size() == 1 ? split_words(lines[0]) : std::vector<std::string>{};
}

class Async : public DomainTest {};

TEST_F(Async, AFreeSlotIsGrantedAtOnceAndBoostedAtComplete)
{
	Dev d;
	gpuslot_version v{};
	v.size = sizeof(v);
	ASSERT_EQ(d.call(GPUSLOT_IOC_VERSION, &v), 0);
	EXPECT_TRUE(v.features & GPUSLOT_FEATURE_ASYNC);

	const Sched before = get_sched();
	EXPECT_FALSE(d.readable());
	ASSERT_EQ(d.acquire_async(), 0);
	EXPECT_TRUE(d.readable());
	// Held from the grant, not boosted until a thread completes it.
	auto h = only_holder();
	ASSERT_EQ(h.size(), 6u) << domain_file("debug/holders");
	EXPECT_EQ(h[0], "0");
	EXPECT_EQ(h[5], "pending");
	EXPECT_EQ(get_sched().policy, before.policy);

	std::thread t([&] {
		auto got = d.complete();
		EXPECT_EQ(got.err, 0);
		EXPECT_EQ(got.slot, 0u);
		EXPECT_EQ(got.generation, d.info().generation);
		const bool boost = boost_available();
		EXPECT_EQ(get_sched().policy, boost ? unsigned(SCHED_FIFO) : before.policy);
		auto held = only_holder();
		ASSERT_EQ(held.size(), 6u);
		// The completing thread is the holder now.
		EXPECT_EQ(held[2], std::to_string(syscall(SYS_gettid)));
		EXPECT_EQ(held[5], boost ? "boosted" : "unboosted");
		EXPECT_FALSE(d.readable());
		EXPECT_EQ(d.release(), 0);
		EXPECT_EQ(get_sched().policy, unsigned(SCHED_OTHER));
	});
	t.join();
	EXPECT_EQ(get_sched().policy, before.policy);
}

TEST_F(Async, AQueuedFileKeepsItsFifoPlaceAheadOfLaterSleepers)
{
	Dev holder, async, sleeper;
	ASSERT_EQ(holder.acquire().err, 0);
	ASSERT_EQ(async.acquire_async(), 0);
	ASSERT_TRUE(wait_waiters(1));
	EXPECT_FALSE(async.readable(20));
	EXPECT_EQ(async.complete().err, EAGAIN);

	std::atomic<int> sleeper_got{-1};
	std::thread s([&] { sleeper_got = sleeper.acquire().err; });
	ASSERT_TRUE(wait_waiters(2));
	ASSERT_EQ(holder.release(), 0);
	// The slot went to the older, asynchronous waiter.
	EXPECT_TRUE(async.readable(5000));
	EXPECT_EQ(sleeper_got.load(), -1);
	EXPECT_EQ(split_lines(domain_file("debug/waiters")).size(), 1u);
	auto got = async.complete();
	ASSERT_EQ(got.err, 0);
	EXPECT_EQ(got.slot, 0u);
	EXPECT_EQ(sleeper_got.load(), -1);
	ASSERT_EQ(async.release(), 0);
	s.join();
	EXPECT_EQ(sleeper_got.load(), 0);
	EXPECT_EQ(sleeper.release(), 0);
}

TEST_F(Async, CancelLeavesTheQueueOrHandsOnAGrantNotCompleted)
{
	Dev holder, async, sleeper;
	ASSERT_EQ(holder.acquire().err, 0);
	ASSERT_EQ(async.acquire_async(), 0);
	std::atomic<int> sleeper_got{-1};
	std::thread s([&] { sleeper_got = sleeper.acquire().err; });
	ASSERT_TRUE(wait_waiters(2));

	unsigned int slot = 0;
	ASSERT_EQ(async.cancel(&slot), 0);
	EXPECT_EQ(slot, GPUSLOT_NO_SLOT);
	EXPECT_EQ(split_lines(domain_file("debug/waiters")).size(), 1u);
	EXPECT_EQ(async.cancel(), EPERM);
	EXPECT_EQ(async.complete().err, EPERM);
	ASSERT_EQ(holder.release(), 0);
	s.join();
	ASSERT_EQ(sleeper_got.load(), 0);

	// Granted, not completed: cancel hands the slot to the next waiter.
	ASSERT_EQ(async.acquire_async(), 0);
	ASSERT_TRUE(wait_waiters(1));
	std::atomic<int> holder_got{-1};
	std::thread h([&] { holder_got = holder.acquire().err; });
	ASSERT_TRUE(wait_waiters(2));
	ASSERT_EQ(sleeper.release(), 0);
	ASSERT_TRUE(async.readable(5000));
	EXPECT_EQ(holder_got.load(), -1);
	ASSERT_EQ(async.cancel(&slot), 0);
	EXPECT_EQ(slot, 0u);
	h.join();
	EXPECT_EQ(holder_got.load(), 0);
	// A completed hold is ended by RELEASE, not by CANCEL.
	EXPECT_EQ(async.release(), EPERM);
	ASSERT_EQ(holder.release(), 0);
	ASSERT_EQ(async.acquire_async(), 0);
	ASSERT_EQ(async.complete().err, 0);
	EXPECT_EQ(async.cancel(), EPERM);
	EXPECT_EQ(async.release(), 0);
}

TEST_F(Async, ClosingAQueuedOrGrantedFileLeavesTheQueue)
{
	Dev holder, next;
	ASSERT_EQ(holder.acquire().err, 0);
	{
		Dev gone;
		ASSERT_EQ(gone.acquire_async(), 0);
		ASSERT_TRUE(wait_waiters(1));
	}
	EXPECT_EQ(domain_file("debug/waiters"), "");

	// A child queues, is granted and dies without completing.
	Pipe granted;
	pid_t pid = spawn([&] {
		Dev mine;
		CHILD_REQUIRE(mine.acquire_async() == 0);
		CHILD_REQUIRE(mine.readable(10000));
		granted.put(1);
		pause();
		return 0;
	});
	ASSERT_TRUE(wait_waiters(1));
	std::atomic<int> next_got{-1};
	std::thread n([&] { next_got = next.acquire().err; });
	ASSERT_TRUE(wait_waiters(2));
	ASSERT_EQ(holder.release(), 0);
	ASSERT_EQ(granted.get(), 1);
	EXPECT_EQ(only_holder().at(5), "pending");
	EXPECT_EQ(next_got.load(), -1);
	kill(pid, SIGKILL);
	EXPECT_EQ(wait_child(pid), 128 + SIGKILL);
	n.join();
	EXPECT_EQ(next_got.load(), 0);
	EXPECT_EQ(next.release(), 0);
}

void on_signal(int) {}

TEST_F(Async, ASignalInterruptsThePollNotTheWait)
{
	Dev holder, async;
	ASSERT_EQ(holder.acquire().err, 0);
	ASSERT_EQ(async.acquire_async(), 0);
	struct sigaction sa = {}, old;
	sa.sa_handler = on_signal;
	ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
	std::atomic<pid_t> tid{0};
	std::atomic<int> poll_ret{0}, poll_errno{0};
	std::thread t([&] {
		tid = pid_t(syscall(SYS_gettid));
		pollfd p = {async.fd(), POLLIN, 0};
		poll_ret = poll(&p, 1, 10000);
		poll_errno = errno;
	});
	ASSERT_TRUE(wait_until([&] { return tid.load() != 0; }));
	usleep(50 * 1000);
	syscall(SYS_tgkill, getpid(), tid.load(), SIGUSR1);
	t.join();
	sigaction(SIGUSR1, &old, nullptr);
	EXPECT_EQ(poll_ret.load(), -1);
	EXPECT_EQ(poll_errno.load(), EINTR);
	// Still queued, still first.
	EXPECT_EQ(split_lines(domain_file("debug/waiters")).size(), 1u);
	ASSERT_EQ(holder.release(), 0);
	EXPECT_TRUE(async.readable(5000));
	EXPECT_EQ(async.complete().err, 0);
	EXPECT_EQ(async.release(), 0);
}

TEST_F(Async, ManyWaitersInOneEpollSetAreServedInOrder)
{
	ASSERT_EQ(write_attr(0, "k", "2"), 0);
	Dev h0, h1;
	ASSERT_EQ(h0.acquire().err, 0);
	ASSERT_EQ(h1.acquire().err, 0);
	constexpr int kWaiters = 200;
	std::vector<std::unique_ptr<Dev>> files;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	ASSERT_GE(ep, 0);
	for (int i = 0; i < kWaiters; i++) {
		files.push_back(std::make_unique<Dev>());
		ASSERT_EQ(files.back()->acquire_async(), 0);
		epoll_event e = {};
		e.events = EPOLLIN;
		e.data.u32 = i;
		ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, files.back()->fd(), &e), 0);
	}
	EXPECT_EQ(h0.info().nr_waiters, unsigned(kWaiters));
	epoll_event ev[8];
	EXPECT_EQ(epoll_wait(ep, ev, 8, 0), 0);
	ASSERT_EQ(h0.release(), 0);
	ASSERT_EQ(h1.release(), 0);

	// Each release readies exactly the next file in queue order.
	std::vector<int> order;
	std::vector<int> held;
	while (int(order.size()) < kWaiters) {
		int n = epoll_wait(ep, ev, 8, 5000);
		ASSERT_GT(n, 0) << "nothing ready after " << order.size();
		// Files readied together come out of epoll in any order.
		std::vector<int> ready;
		for (int i = 0; i < n; i++)
			ready.push_back(int(ev[i].data.u32));
		std::sort(ready.begin(), ready.end());
		for (int w : ready) {
			auto got = files[w]->complete();
			ASSERT_EQ(got.err, 0) << w;
			order.push_back(w);
			held.push_back(w);
		}
		ASSERT_LE(held.size(), 2u);
		// Release the older hold: the next in line is granted.
		ASSERT_EQ(files[held.front()]->release(), 0);
		held.erase(held.begin());
	}
	for (int w : held)
		ASSERT_EQ(files[w]->release(), 0);
	for (int i = 0; i < kWaiters; i++)
		EXPECT_EQ(order[i], i);
	close(ep);
}

TEST_F(Async, BadUseIsRefusedAndAShrinkFailsTheWaitOnce)
{
	Dev d;
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.flags = GPUSLOT_ACQUIRE_TRY;
	EXPECT_EQ(d.call(GPUSLOT_IOC_ACQUIRE_ASYNC, &a), EINVAL);
	a.flags = 0;
	a.deadline_ns = 1;
	EXPECT_EQ(d.call(GPUSLOT_IOC_ACQUIRE_ASYNC, &a), EINVAL);
	EXPECT_EQ(d.acquire_async(1ULL << 5), EINVAL);
	EXPECT_EQ(d.complete().err, EPERM);
	EXPECT_EQ(d.cancel(), EPERM);

	ASSERT_EQ(d.acquire_async(), 0);
	EXPECT_EQ(d.acquire_async(), EBUSY);
	EXPECT_EQ(d.acquire().err, EBUSY);
	EXPECT_EQ(d.attach(0), EBUSY);
	ASSERT_EQ(d.complete().err, 0);
	EXPECT_EQ(d.acquire_async(), EDEADLK);
	ASSERT_EQ(d.release(), 0);

	// k = 2, slot 1 wanted, k back to 1: the wait fails, said once.
	ASSERT_EQ(write_attr(0, "k", "2"), 0);
	Dev h0, h1;
	ASSERT_EQ(h0.acquire().err, 0);
	ASSERT_EQ(h1.acquire().err, 0);
	ASSERT_EQ(d.acquire_async(1ULL << 1), 0);
	ASSERT_TRUE(wait_waiters(1));
	ASSERT_EQ(write_attr(0, "k", "1"), 0);
	EXPECT_TRUE(d.readable(5000));
	EXPECT_EQ(d.acquire_async(), EBUSY);
	EXPECT_EQ(d.complete().err, EINVAL);
	EXPECT_FALSE(d.readable());
	EXPECT_EQ(d.complete().err, EPERM);
	EXPECT_EQ(h0.release(), 0);
	EXPECT_EQ(h1.release(), 0);
}

// Issue 28 item 13: a forked child that completes a grant its parent
// queued is the holder, the process and the thread of it: the holders
// table names the child as pid and tid, never the parent's pid with the
// child's tid, which no process has.
TEST_F(Async, AForkedChildThatCompletesIsTheHolderProcessAndThread)
{
	Dev d;
	ASSERT_EQ(d.acquire_async(), 0);
	auto pending = only_holder();
	ASSERT_EQ(pending.size(), 6u) << domain_file("debug/holders");
	EXPECT_EQ(pending[1], std::to_string(getpid()));
	EXPECT_EQ(pending[5], "pending");

	Pipe completed, go;
	pid_t child = spawn([&] {
		CHILD_REQUIRE(d.complete().err == 0);
		completed.put(1);
		CHILD_REQUIRE(go.get() == 1);
		CHILD_REQUIRE(d.release() == 0);
		return 0;
	});
	ASSERT_EQ(completed.get(), 1);
	auto held = only_holder();
	ASSERT_EQ(held.size(), 6u) << domain_file("debug/holders");
	EXPECT_EQ(held[1], std::to_string(child)) << domain_file("debug/holders");
	EXPECT_EQ(held[2], std::to_string(child)) << domain_file("debug/holders");
	go.put(1);
	expect_child_ok(child);
}

// Issue 29: COMPLETE records the completing thread and its own process.
// The record outlives the thread (the file keeps the slot), but not the
// thread's number: once the thread exits, the number is free, and the
// kernel may give it to another process. The table must then not name it.
TEST_F(Async, TheHolderRecordNeverNamesAThreadOfAnotherProcess)
{
	Dev d;
	ASSERT_EQ(d.acquire_async(), 0);
	pid_t completer = 0;
	int err = -1;
	std::thread t([&] {
		err = d.complete().err;
		completer = pid_t(syscall(SYS_gettid));
	});
	t.join();
	ASSERT_EQ(err, 0);
	// join() returns when the thread's exit clears its tid futex, before
	// the kernel releases the task: until then its number is still its
	// own, and the table rightly names it. Wait for the release, which
	// takes /proc/self/task/<tid> away at the same moment.
	const std::string task_dir = "/proc/self/task/" + std::to_string(completer);
	ASSERT_TRUE(wait_until([&] { return access(task_dir.c_str(), F_OK) != 0; }))
		<< task_dir << " is still there";
	// The completing thread's process is this one, whatever thread queued.
	auto held = only_holder();
	ASSERT_EQ(held.size(), 6u) << domain_file("holders");
	EXPECT_EQ(held[1], std::to_string(getpid()));
	// The completing thread has exited: 0 on either transport.
	EXPECT_EQ(held[2], "0") << domain_file("debug/holders");
	if (on_socket()) {
		EXPECT_EQ(d.release(), 0);
		GTEST_SKIP() << "socket transport: the rest steers the module host's PID "
				"allocation (ns_last_pid)";
	}

	// The next process gets the exited thread's number: ns_last_pid
	// exists only with CONFIG_CHECKPOINT_RESTORE (the debug kernel has
	// none).
	if (access("/proc/sys/kernel/ns_last_pid", W_OK) != 0)
		GTEST_SKIP() << "no /proc/sys/kernel/ns_last_pid (CONFIG_CHECKPOINT_RESTORE off): "
				"cannot hand the exited thread's number to another process";
	ASSERT_EQ(write_file("/proc/sys/kernel/ns_last_pid", std::to_string(completer - 1)), 0);
	Pipe go;
	pid_t other = spawn([&go] { return go.get() == 1 ? 0 : 1; });
	held = only_holder();
	go.put(1);
	expect_child_ok(other);
	if (other != completer)
		GTEST_SKIP() << "pid " << completer << " went to another process first";
	ASSERT_EQ(held.size(), 6u) << domain_file("holders");
	EXPECT_EQ(held[1], std::to_string(getpid()));
	EXPECT_NE(held[2], std::to_string(other)) << "the holder's tid is another process's pid";
	// A thread that is gone: 0, as for one the reader cannot see.
	EXPECT_EQ(held[2], "0");
	EXPECT_EQ(d.release(), 0);
}

} // namespace
} // namespace gpuslot::test
