// SPDX-License-Identifier: GPL-2.0
// The SCHED_FIFO boost around a hold: when a thread gets it back, nested
// holds, threads that share a file, the boost at handoff, max_hold_ms.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sched.h>
#include <time.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>

#include "device.h"

namespace gpuslot::test {
namespace {

std::string domain_file(const char *attr, unsigned int domain = 0)
{
	return read_attr(domain, attr);
}

bool same_sched(const Sched &a, const Sched &b)
{
	return a.policy == b.policy && a.priority == b.priority &&
	       a.nice == b.nice && a.flags == b.flags;
}

class Boost : public DomainTest {
protected:
	void SetUp() override
	{
		if (!boost_available())
			GTEST_SKIP() << "gpuslotd has no CAP_SYS_NICE here: no boost to test";
		DomainTest::SetUp();
		// What an earlier test spent (Lock.Stress*) must not leave this
		// one unboosted.
		refill_root_boost_budget();
	}
};

// Defect 1: a holder that changes its own priority while holding, then
// releases, gets its own attributes back unless it went above the boost.
int change_while_holding(uint32_t policy, uint32_t prio, int32_t nice,
			 bool expect_restore)
{
	CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 5) == 0);
	Sched before = get_sched();
	Dev d;
	CHILD_REQUIRE(d.acquire().err == 0);
	CHILD_REQUIRE(get_sched().policy == SCHED_FIFO);
	CHILD_REQUIRE(set_sched(policy, prio, nice) == 0);
	Sched changed = get_sched();
	CHILD_REQUIRE(d.release() == 0);
	Sched after = get_sched();
	CHILD_REQUIRE(same_sched(after, expect_restore ? before : changed));
	return 0;
}

TEST_F(Boost, AHolderThatLowersItsOwnPriorityIsStillRestored)
{
	// FIFO 50 -> 49, as any RT thread may do: back to SCHED_OTHER nice 5.
	// Where the boost is SCHED_FIFO 1 (boost_limited()), nothing real-time
	// is below it: 49 and RR 10 are above it, and left as set.
	const bool below = !boost_limited();
	expect_child_ok(spawn([below] {
		return change_while_holding(SCHED_FIFO, 49, 0, below);
	}));
	expect_child_ok(spawn([below] {
		return change_while_holding(SCHED_RR, 10, 0, below);
	}));
	expect_child_ok(spawn([] {
		return change_while_holding(SCHED_OTHER, 0, 3, true);
	}));
	// Above the boost: the thread took over; it is left as it set itself.
	expect_child_ok(spawn([] {
		return change_while_holding(SCHED_FIFO, 70, 0, false);
	}));
}

// Defect 4: one thread holding two slots (two files of one domain) keeps
// its boost until the last release.
TEST_F(Boost, NestedHoldsOfOneDomainKeepTheBoostUntilTheLast)
{
	ASSERT_EQ(write_attr(0, "k", "2"), 0);
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 5) == 0);
		Sched before = get_sched();
		Dev a, b;
		CHILD_REQUIRE(a.acquire().err == 0);
		CHILD_REQUIRE(b.acquire().err == 0);
		CHILD_REQUIRE(a.release() == 0);
		Sched mid = get_sched();
		CHILD_REQUIRE(mid.policy == SCHED_FIFO && mid.priority == default_boost_priority());
		CHILD_REQUIRE(b.release() == 0);
		CHILD_REQUIRE(same_sched(get_sched(), before));
		return 0;
	}));
}

// Defect 4 across GPUs with different boost priorities: the thread runs at
// the highest priority it holds, and ends at its own attributes.
TEST_F(Boost, NestedHoldsOfTwoDomainsRunAtTheHighestAndEndRestored)
{
	SKIP_WHERE_BOOST_LIMITED("no two boost priorities to nest");
	ASSERT_EQ(unload_module(), 0);
	ASSERT_EQ(load_module("domains=2"), 0);
	ASSERT_EQ(write_attr(0, "boost_priority", "30"), 0);
	ASSERT_EQ(write_attr(1, "boost_priority", "60"), 0);
	for (bool low_first : {true, false}) {
		for (bool release_low_first : {true, false}) {
			expect_child_ok(spawn([=] {
				CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 4) == 0);
				Sched before = get_sched();
				Dev low, high;
				CHILD_REQUIRE(high.attach(1) == 0);
				Dev &first = low_first ? low : high;
				Dev &second = low_first ? high : low;
				CHILD_REQUIRE(first.acquire().err == 0);
				CHILD_REQUIRE(second.acquire().err == 0);
				CHILD_REQUIRE(get_sched().priority == 60);
				Dev &out = release_low_first ? low : high;
				Dev &last = release_low_first ? high : low;
				CHILD_REQUIRE(out.release() == 0);
				Sched mid = get_sched();
				CHILD_REQUIRE(mid.policy == SCHED_FIFO);
				CHILD_REQUIRE(mid.priority == (release_low_first ? 60u : 30u));
				CHILD_REQUIRE(last.release() == 0);
				CHILD_REQUIRE(same_sched(get_sched(), before));
				return 0;
			}));
		}
	}
	ASSERT_EQ(unload_module(), 0);
	ASSERT_EQ(load_module(""), 0);
}

// Defects 2 and 3: threads A and B share one file. A waits; the slot is
// handed to the file while A cannot run (a FIFO 90 thread holds A's CPU);
// B releases that hold and takes a new one after a layout change. A must
// return its own grant, and each thread's boost must end with its hold.
TEST_F(Boost, ThreadsSharingAFileEachKeepTheirOwnHold)
{
	SKIP_WHERE_BOOST_LIMITED("a thread started by a boosted thread keeps SCHED_FIFO 1 (no reset-on-fork)");
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
		Sched own = get_sched();
		Dev holder, shared;
		CHILD_REQUIRE(holder.acquire().err == 0);
		uint64_t gen_at_grant = holder.info().generation;

		std::atomic<pid_t> a_tid{0};
		std::atomic<int> a_err{-1};
		std::atomic<unsigned int> a_slot{99};
		std::atomic<uint64_t> a_gen{0};
		std::thread a([&] {
			a_tid = gettid();
			if (pin_to_cpu(1))
				return;
			auto r = shared.acquire();
			a_slot = r.slot;
			a_gen = r.generation;
			a_err = r.err;
		});
		CHILD_REQUIRE(wait_waiters(1));
		CHILD_REQUIRE(pin_to_cpu(2) == 0);

		std::atomic<bool> stop{false};
		CpuHog hog(1, 90, stop, 3000);
		CHILD_REQUIRE(holder.release() == 0);
		// A has the slot, and its boost, before it runs.
		Sched a_granted = get_sched(a_tid);
		CHILD_REQUIRE(a_granted.policy == SCHED_FIFO);
		CHILD_REQUIRE(a_granted.priority == default_boost_priority());
		CHILD_REQUIRE(a_err == -1);

		// B ends A's hold: A's boost ends with it.
		CHILD_REQUIRE(write_attr(0, "k", "2") == 0);
		CHILD_REQUIRE(shared.release() == 0);
		CHILD_REQUIRE(same_sched(get_sched(a_tid), own));
		auto b = shared.try_acquire();
		CHILD_REQUIRE(b.err == 0);
		CHILD_REQUIRE(b.generation > gen_at_grant);
		CHILD_REQUIRE(get_sched().policy == SCHED_FIFO);

		stop = true;
		CHILD_REQUIRE(hog.join());
		a.join();
		// A's call returns the grant it got, not B's.
		CHILD_REQUIRE(a_err == 0);
		CHILD_REQUIRE(a_slot == 0);
		CHILD_REQUIRE(a_gen == gen_at_grant);
		// A's late return did not touch B's boost, nor take it over.
		Sched b_held = get_sched();
		CHILD_REQUIRE(b_held.policy == SCHED_FIFO && b_held.priority == default_boost_priority());
		CHILD_REQUIRE(shared.release() == 0);
		CHILD_REQUIRE(same_sched(get_sched(), own));
		return 0;
	}));
}

// The boost at handoff: a SCHED_OTHER waiter whose CPU a FIFO 40 thread
// keeps busy still runs at once when it is granted, because the releasing
// thread boosts it to FIFO 50 before it wakes it.
TEST_F(Boost, AGrantedWaiterIsBoostedBeforeItIsWoken)
{
	SKIP_WHERE_BOOST_LIMITED("no real-time priority below the boost for a thread that keeps the waiter's CPU");
	expect_child_ok(spawn([] {
		Dev holder;
		CHILD_REQUIRE(holder.acquire().err == 0);
		std::atomic<bool> returned{false};
		std::atomic<uint32_t> policy{0};
		std::thread w([&] {
			if (pin_to_cpu(1) || set_sched(SCHED_OTHER, 0, 0))
				return;
			Dev d;
			if (d.acquire().err == 0) {
				policy = get_sched().policy;
				returned = true;
				d.release();
			}
		});
		CHILD_REQUIRE(wait_waiters(1));
		CHILD_REQUIRE(pin_to_cpu(2) == 0);
		bool by_flag;
		{
			CpuHog hog(1, 40, returned, 1500);
			CHILD_REQUIRE(holder.release() == 0);
			by_flag = hog.join();
		}
		w.join();
		CHILD_REQUIRE(returned);
		CHILD_REQUIRE(policy == SCHED_FIFO);
		// The waiter returned while the hog still had its CPU.
		CHILD_REQUIRE(by_flag);
		return 0;
	}));
}

void on_signal(int)
{
}

// The module boosts a thread that goes to sleep in ACQUIRE before it
// sleeps, so that the release hands the slot over with a wakeup only. A
// wait that then fails (timeout, signal, k shrinking below every slot it
// may take) must end that boost: the thread returns at its own attributes.
TEST_F(Boost, AWaiterWhoseWaitFailsReturnsAtItsOwnAttributes)
{
	SKIP_ON_SOCKET("gpuslotd boosts a holder at the grant, not while it waits");
	enum How { kTimeout, kSignal, kShrink };
	for (How how : {kTimeout, kSignal, kShrink}) {
		SCOPED_TRACE(how);
		ASSERT_EQ(write_attr(0, "k", "2"), 0);
		Dev h0, h1;
		ASSERT_EQ(h0.acquire(0, 0, 1).err, 0);
		ASSERT_EQ(h1.acquire(0, 0, 2).err, 0);
		auto *tid = shared_new<std::atomic<pid_t>>();
		pid_t w = spawn([how, tid] {
			struct sigaction sa = {};
			sa.sa_handler = on_signal;
			sigaction(SIGUSR1, &sa, nullptr);
			CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 3) == 0);
			Sched before = get_sched();
			*tid = gettid();
			Dev d;
			Dev::Acquired r{};
			if (how == kTimeout)
				r = d.acquire(GPUSLOT_ACQUIRE_DEADLINE, 500'000'000ULL, 2);
			else
				r = d.acquire(0, 0, 2);
			CHILD_REQUIRE(r.err == (how == kTimeout ? ETIMEDOUT :
						how == kSignal ? EINTR : EINVAL));
			CHILD_REQUIRE(same_sched(get_sched(), before));
			// The file is idle again, and its next hold is boosted
			// and restored as usual.
			CHILD_REQUIRE(d.acquire(GPUSLOT_ACQUIRE_DEADLINE,
						5'000'000'000ULL, 1).err == 0);
			Sched held = get_sched();
			CHILD_REQUIRE(held.policy == SCHED_FIFO && held.priority == default_boost_priority());
			CHILD_REQUIRE(d.release() == 0);
			CHILD_REQUIRE(same_sched(get_sched(), before));
			return 0;
		});
		ASSERT_TRUE(wait_waiters(1));
		// Asleep, already at the boost.
		Sched waiting = get_sched(*tid);
		EXPECT_EQ(waiting.policy, uint32_t(SCHED_FIFO));
		EXPECT_EQ(waiting.priority, default_boost_priority());
		if (how == kSignal)
			kill(w, SIGUSR1);
		if (how == kShrink) {
			ASSERT_EQ(write_attr(0, "k", "1"), 0);
		}
		// Slot 0 is free for the child's next acquire.
		ASSERT_EQ(h0.release(), 0);
		expect_child_ok(w);
		EXPECT_EQ(domain_file("debug/waiters"), "");
		ASSERT_EQ(h1.release(), 0);
	}
}

// A hold granted to a thread that boosted itself before it slept is a
// boosted hold like any other: flagged in holders, bounded by max_hold_ms.
TEST_F(Boost, AHoldGrantedAfterAWaitIsBoostedAndBounded)
{
	SKIP_WHERE_BOOST_LIMITED("a thread started by a boosted thread keeps SCHED_FIFO 1 (no reset-on-fork)");
	ASSERT_EQ(write_attr(0, "max_hold_ms", "300"), 0);
	Dev probe;
	uint64_t overruns = probe.stats().overruns;
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 1) == 0);
		Sched before = get_sched();
		Dev holder;
		CHILD_REQUIRE(holder.acquire().err == 0);
		std::atomic<int> phase{0};
		std::atomic<pid_t> tid{0};
		Sched own{}, granted{};
		std::thread w([&] {
			// Started by a boosted thread: SCHED_OTHER, nice 0.
			own = get_sched();
			tid = gettid();
			Dev d;
			if (d.acquire().err)
				return;
			granted = get_sched();
			phase = 1;
			while (phase != 2)
				usleep(1000);
			d.release();
			phase = 3;
		});
		CHILD_REQUIRE(wait_waiters(1));
		CHILD_REQUIRE(holder.release() == 0);
		CHILD_REQUIRE(same_sched(get_sched(), before));
		CHILD_REQUIRE(wait_until([&] { return phase == 1; }));
		CHILD_REQUIRE(granted.policy == SCHED_FIFO && granted.priority == default_boost_priority());
		auto line = split_words(domain_file("debug/holders"));
		bool boosted = line.size() == 6 && line[2] == std::to_string(tid) &&
			       line[5] == "boosted";
		// Past max_hold_ms the boost ends, the hold stays.
		bool over = wait_until([&] {
			auto l = split_words(domain_file("debug/holders"));
			return l.size() == 6 && l[5] == "overrun";
		}, 3000);
		// The work that flags the hold ends the boost just after.
		bool restored = wait_until([&] {
			return same_sched(get_sched(tid), own);
		}, 3000);
		phase = 2;
		w.join();
		CHILD_REQUIRE(phase == 3);
		CHILD_REQUIRE(boosted);
		CHILD_REQUIRE(over);
		CHILD_REQUIRE(restored);
		return 0;
	}));
	EXPECT_EQ(probe.stats().overruns, overruns + 1);
}

// max_hold_ms: a hold past it loses its boost, not its slot; it is
// flagged in holders and counted in stats.
TEST_F(Boost, MaxHoldEndsTheBoostButNotTheHold)
{
	EXPECT_EQ(domain_file("max_hold_ms"),
		  std::to_string(GPUSLOT_DEFAULT_MAX_HOLD_MS) + "\n");
	for (const char *bad : {"3600001", "-1", "x", "\n"})
		EXPECT_EQ(write_attr(0, "max_hold_ms", bad), EINVAL)
			<< bad;
	ASSERT_EQ(write_attr(0, "max_hold_ms", "100"), 0);
	Dev probe;
	uint64_t overruns = probe.stats().overruns;
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 2) == 0);
		Sched before = get_sched();
		Dev d;
		CHILD_REQUIRE(d.acquire().err == 0);
		CHILD_REQUIRE(get_sched().policy == SCHED_FIFO);
		auto boosted = split_words(domain_file("debug/holders"));
		CHILD_REQUIRE(boosted.size() == 6 && boosted[5] == "boosted");
		CHILD_REQUIRE(wait_until([&] {
			return same_sched(get_sched(), before);
		}, 3000));
		auto over = split_words(domain_file("debug/holders"));
		CHILD_REQUIRE(over.size() == 6 && over[5] == "overrun");
		CHILD_REQUIRE(d.info().nr_holders == 1);
		CHILD_REQUIRE(d.release() == 0);
		CHILD_REQUIRE(same_sched(get_sched(), before));
		return 0;
	}));
	EXPECT_EQ(probe.stats().overruns, overruns + 1);
	EXPECT_EQ(domain_file("stats/overruns"), std::to_string(overruns + 1) + "\n");

	// The layout carries it too; 0 turns the bound off.
	Layout l;
	ASSERT_EQ(probe.get_layout(l), 0);
	gpuslot_layout a{};
	a.size = sizeof(a);
	a.k = 1;
	a.flags = GPUSLOT_LAYOUT_MAX_HOLD;
	a.max_hold_ms = 0;
	EXPECT_EQ(probe.call(GPUSLOT_IOC_SET_LAYOUT, &a), 0);
	EXPECT_EQ(domain_file("max_hold_ms"), "0\n");
	a.flags = 0;
	a.max_hold_ms = 7; // without the flag: refused
	EXPECT_EQ(probe.call(GPUSLOT_IOC_SET_LAYOUT, &a), EINVAL);
	a.flags = GPUSLOT_LAYOUT_MAX_HOLD;
	a.max_hold_ms = GPUSLOT_MAX_MAX_HOLD_MS + 1;
	EXPECT_EQ(probe.call(GPUSLOT_IOC_SET_LAYOUT, &a), EINVAL);
	a.max_hold_ms = 250;
	EXPECT_EQ(probe.call(GPUSLOT_IOC_SET_LAYOUT, &a), 0);
	gpuslot_layout g{};
	g.size = sizeof(g);
	ASSERT_EQ(probe.call(GPUSLOT_IOC_GET_LAYOUT, &g), 0);
	EXPECT_EQ(g.max_hold_ms, 250u);
	// A layout set without the flag keeps the bound.
	a.flags = 0;
	a.max_hold_ms = 0;
	EXPECT_EQ(probe.call(GPUSLOT_IOC_SET_LAYOUT, &a), 0);
	EXPECT_EQ(domain_file("max_hold_ms"), "250\n");
	EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
}

// The lock server's thread, on the socket transport (main.cc); 0 on the
// module.
pid_t socket_server()
{
	const char *pid = getenv("GPUSLOT_TEST_SOCKET_SERVER_PID");
	return on_socket() && pid ? pid_t(atoi(pid)) : 0;
}

// RT throttling off (as on many real-time hosts) for the scope, and the
// socket transport's server put on @cpu, where the test's holder spins.
class RtHost {
public:
	explicit RtHost(int cpu)
	{
		saved_ = read_file("/proc/sys/kernel/sched_rt_runtime_us");
		ok_ = write_file("/proc/sys/kernel/sched_rt_runtime_us", "-1") == 0;
		if (pid_t server = socket_server()) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			ok_ = ok_ && !sched_setaffinity(server, sizeof(set), &set);
		}
	}
	~RtHost()
	{
		write_file("/proc/sys/kernel/sched_rt_runtime_us", saved_);
		if (pid_t server = socket_server()) {
			cpu_set_t set;
			CPU_ZERO(&set);
			for (int i = 0; i < CPU_SETSIZE; i++)
				CPU_SET(i, &set);
			sched_setaffinity(server, sizeof(set), &set);
		}
	}
	bool ok() const { return ok_; }

private:
	std::string saved_;
	bool ok_;
};

// Issue 28, items 10 and 7: with RT throttling off, a holder that spins at
// its boost on one CPU must still lose the boost at max_hold_ms. Whatever
// ends the boost (the module's expiry, gpuslotd's thread, here on the
// holder's CPU) must run above it. At boost_priority 60: above gpuslotd's
// old fixed 51; where the kernel boosts at SCHED_FIFO 1 only, at 1, with
// the expiry at SCHED_FIFO 50 (kmod/compat.h).
TEST_F(Boost, MaxHoldEndsTheBoostOfAHolderSpinningOnItsCpu)
{
	const int cpu = on_socket() ? 0 : 1;
	const unsigned int prio = boost_limited() ? 1 : 60;
	ASSERT_EQ(write_attr(0, "boost_priority", std::to_string(prio)), 0);
	ASSERT_EQ(write_attr(0, "max_hold_ms", "100"), 0);
	RtHost host(cpu);
	ASSERT_TRUE(host.ok());
	expect_child_ok(spawn([cpu, prio] {
		CHILD_REQUIRE(pin_to_cpu(cpu) == 0);
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
		Sched before = get_sched();
		Dev d;
		CHILD_REQUIRE(d.acquire().err == 0);
		Sched held = get_sched();
		CHILD_REQUIRE(held.policy == SCHED_FIFO && held.priority == prio);
		// Spin, as a holder stuck in a busy loop: no sleep, no yield.
		auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
		bool dropped = false;
		while (!dropped && std::chrono::steady_clock::now() < end)
			dropped = get_sched().policy != SCHED_FIFO;
		Sched spun = get_sched();
		CHILD_REQUIRE(d.release() == 0);
		CHILD_REQUIRE(dropped);
		CHILD_REQUIRE(same_sched(spun, before));
		return 0;
	}));
}

// Issue 28, item 7: what ends a boost runs at a fixed priority above it
// (the module's expiry thread at 99, gpuslotd's thread one above the
// highest boost it grants): a boost_priority it could not preempt is
// refused, as 0..98 is what there is.
TEST_F(Boost, ABoostPriorityNothingCouldPreemptIsRefused)
{
	if (boost_limited()) {
		// Only SCHED_FIFO 1 can be set below the expiry's 50 there.
		for (const char *bad : {"2", "49", "50", "98", "99"})
			EXPECT_EQ(write_attr(0, "boost_priority", bad), EINVAL) << bad;
		EXPECT_EQ(domain_file("boost_priority"), "1\n");
		ASSERT_EQ(write_attr(0, "boost_priority", "0"), 0);
		EXPECT_EQ(domain_file("boost_priority"), "0\n");
		ASSERT_EQ(write_attr(0, "boost_priority", "1"), 0);
		EXPECT_EQ(domain_file("boost_priority"), "1\n");
		EXPECT_EQ(read_file("/sys/class/misc/gpuslot/boost_priority_limit"), "1\n");
		return;
	}
	if (!on_socket()) {
		EXPECT_EQ(read_file("/sys/class/misc/gpuslot/boost_priority_limit"),
			  std::to_string(GPUSLOT_MAX_BOOST_PRIORITY) + "\n");
	}
	EXPECT_EQ(write_attr(0, "boost_priority", "99"), EINVAL);
	EXPECT_EQ(domain_file("boost_priority"), "50\n");
	ASSERT_EQ(write_attr(0, "boost_priority", "98"), 0);
	EXPECT_EQ(domain_file("boost_priority"), "98\n");
	if (pid_t server = socket_server()) {
		Sched s = get_sched(server);
		EXPECT_EQ(s.policy, uint32_t(SCHED_FIFO));
		EXPECT_EQ(s.priority, 99u);
		ASSERT_EQ(write_attr(0, "boost_priority", "60"), 0);
		s = get_sched(server);
		EXPECT_EQ(s.policy, uint32_t(SCHED_FIFO));
		EXPECT_EQ(s.priority, 61u);
	}
}

// The pid of the kernel thread named @comm, or 0.
pid_t kthread_named(const std::string &comm)
{
	DIR *dir = opendir("/proc");
	pid_t found = 0;
	if (!dir)
		return 0;
	while (dirent *e = readdir(dir)) {
		const pid_t pid = atoi(e->d_name);
		if (pid > 0 && read_file("/proc/" + std::string(e->d_name) + "/comm") == comm + "\n") {
			found = pid;
			break;
		}
	}
	closedir(dir);
	return found;
}

// Issue 38: the thread that ends boosts runs one above the highest
// boost_priority set since the module was loaded, not at 99: it lends its
// priority to whoever holds the ledger lock it takes. 51 with the default
// 50; up with boost_priority, never down (a holder boosted at the old
// priority may still run).
TEST_F(Boost, TheExpiryRunsOneAboveTheHighestBoost)
{
	SKIP_ON_SOCKET("the module's expiry thread; gpuslotd's is ABoostPriorityNothingCouldPreemptIsRefused");
	ASSERT_EQ(unload_module(), 0);
	ASSERT_EQ(load_module(""), 0);
	const pid_t expiry = kthread_named("gpuslot_expiry");
	ASSERT_GT(expiry, 0);
	Sched s = get_sched(expiry);
	EXPECT_EQ(s.policy, uint32_t(SCHED_FIFO));
	if (boost_limited()) {
		// SCHED_FIFO 50 (sched_set_fifo()), above the only boost, 1.
		EXPECT_EQ(s.priority, 50u);
		ASSERT_EQ(write_attr(0, "boost_priority", "0"), 0);
		ASSERT_EQ(write_attr(0, "boost_priority", "1"), 0);
		EXPECT_EQ(get_sched(expiry).priority, 50u);
		return;
	}
	EXPECT_EQ(s.priority, uint32_t(GPUSLOT_DEFAULT_BOOST_PRIORITY) + 1);
	ASSERT_EQ(write_attr(0, "boost_priority", "70"), 0);
	EXPECT_EQ(get_sched(expiry).priority, 71u);
	ASSERT_EQ(write_attr(0, "boost_priority", "60"), 0);
	EXPECT_EQ(get_sched(expiry).priority, 71u);
	ASSERT_EQ(write_attr(0, "boost_priority", "98"), 0);
	EXPECT_EQ(get_sched(expiry).priority, 99u);
}

// Issue 28, item 13: max_hold_ms is read when the slot is granted; a
// change during the hold is for the next one, up or down.
TEST_F(Boost, MaxHoldIsReadWhenTheSlotIsGranted)
{
	for (const char *later : {"0", "3600000"}) {
		SCOPED_TRACE(later);
		ASSERT_EQ(write_attr(0, "max_hold_ms", "200"), 0);
		auto *go = shared_new<std::atomic<int>>();
		pid_t child = spawn([go] {
			CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
			Sched before = get_sched();
			Dev d;
			CHILD_REQUIRE(d.acquire().err == 0);
			CHILD_REQUIRE(get_sched().policy == SCHED_FIFO);
			*go = 1;
			CHILD_REQUIRE(wait_until([] {
				return get_sched().policy != SCHED_FIFO;
			}, 5000));
			CHILD_REQUIRE(same_sched(get_sched(), before));
			CHILD_REQUIRE(d.release() == 0);
			return 0;
		});
		ASSERT_TRUE(wait_until([go] { return go->load() == 1; }));
		ASSERT_EQ(write_attr(0, "max_hold_ms", later), 0);
		expect_child_ok(child);
	}
}

// Issue 28, item 12: the saved attributes are the thread's as it was when
// boosted. A thread that dropped its privilege while holding (here: root
// at SCHED_FIFO 10, then setuid to nobody) does not get back what only its
// old credentials allowed: it returns at SCHED_OTHER, nice 0 or above.
TEST_F(Boost, AThreadWhoseCredentialsChangedGetsNoPrivilegeBack)
{
	// Where the boost is SCHED_FIFO 1, a thread at FIFO 10 is above it:
	// what root may have and nobody may not is a nice below 0 there.
	const bool limited = boost_limited();
	for (int nice : {-5, 0}) {
		SCOPED_TRACE(nice);
		expect_child_ok(spawn([nice, limited] {
			CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, nice) == 0);
			if (!limited)
				CHILD_REQUIRE(set_sched(SCHED_FIFO, 10, 0) == 0);
			Dev d;
			CHILD_REQUIRE(d.acquire().err == 0);
			Sched held = get_sched();
			CHILD_REQUIRE(held.policy == SCHED_FIFO && held.priority == default_boost_priority());
			// nobody: no CAP_SYS_NICE, RLIMIT_RTPRIO 0 for it.
			CHILD_REQUIRE(setresgid(65534, 65534, 65534) == 0);
			CHILD_REQUIRE(setresuid(65534, 65534, 65534) == 0);
			CHILD_REQUIRE(d.release() == 0);
			Sched after = get_sched();
			CHILD_REQUIRE(after.policy == SCHED_OTHER);
			CHILD_REQUIRE(after.priority == 0);
			CHILD_REQUIRE(after.nice == 0);
			return 0;
		}));
	}
	// Unchanged credentials: the saved attributes exactly, as always.
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(set_sched(SCHED_FIFO, 10, 0) == 0);
		Sched before = get_sched();
		Dev d;
		CHILD_REQUIRE(d.acquire().err == 0);
		CHILD_REQUIRE(d.release() == 0);
		CHILD_REQUIRE(same_sched(get_sched(), before));
		return 0;
	}));
}

// Issue 28, item 11: a thread that takes the slot again and again, each
// hold just under max_hold_ms, runs boosted only within its budget: over
// any interval T at most max_boost_share x (T + 1 s). The lock is not
// affected: every acquire is granted.
TEST_F(Boost, ABoostHasABudgetAcrossHolds)
{
	EXPECT_EQ(domain_file("max_boost_share"),
		  std::to_string(GPUSLOT_DEFAULT_MAX_BOOST_SHARE) + "\n");
	for (const char *bad : {"0", "101", "-1", "x"})
		EXPECT_EQ(write_attr(0, "max_boost_share", bad), EINVAL) << bad;
	ASSERT_EQ(write_attr(0, "max_hold_ms", "100"), 0);
	ASSERT_EQ(write_attr(0, "max_boost_share", "25"), 0);
	EXPECT_EQ(domain_file("max_boost_share"), "25\n");
	auto *boosted_ms = shared_new<std::atomic<long>>();
	expect_child_ok(spawn([boosted_ms] {
		using clock = std::chrono::steady_clock;
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
		Sched before = get_sched();
		Dev d;
		clock::duration boosted{};
		long cuts = 0; // boosts the budget ended within a hold
		const auto start = clock::now();
		while (clock::now() - start < std::chrono::seconds(3)) {
			CHILD_REQUIRE(d.acquire().err == 0);
			auto last = clock::now();
			const auto end = last + std::chrono::milliseconds(90);
			bool was_fifo = false;
			for (auto t = last; t < end; last = t) {
				const bool fifo = get_sched().policy == SCHED_FIFO;
				t = clock::now();
				if (fifo)
					boosted += t - last;
				cuts += was_fifo && !fifo;
				was_fifo = fifo;
			}
			CHILD_REQUIRE(d.release() == 0);
			CHILD_REQUIRE(same_sched(get_sched(), before));
		}
		const auto total = clock::now() - start;
		*boosted_ms = long(std::chrono::duration_cast<std::chrono::milliseconds>(boosted).count());
		// 25 % of (T + 1 s), T about 3 s: 1 s at most, plus for each boost
		// the budget ended the expiry thread's wake-up (docs/device.md:
		// microseconds on a host, a few ms in this TCG VM on a loaded
		// machine; 5 ms each), and 50 ms for the end of a boost seen a few
		// system calls late.
		const long bound = long(std::chrono::duration_cast<std::chrono::milliseconds>(
						total + std::chrono::seconds(1)).count()) / 4;
		std::printf("boost budget: %ld ms boosted, bound %ld ms, %ld boosts ended by it\n",
			    boosted_ms->load(), bound, cuts);
		CHILD_REQUIRE(*boosted_ms <= bound + 50 + 5 * cuts);
		// The budget is used, not withheld: a quarter of the time and more.
		CHILD_REQUIRE(*boosted_ms >= 500);
		return 0;
	}));
	std::printf("boosted %ld ms of about 3000\n", boosted_ms->load());
}

// The number in a domain's stats/<name>.
uint64_t stat_of(const char *name)
{
	return std::stoull("0" + domain_file((std::string("stats/") + name).c_str()));
}

// Issue 38: the boost is the opener's. A thread of another uid that has
// the file (here: root opened it, then the process became nobody, as a
// file passed by SCM_RIGHTS or inherited by a setuid child would be) takes
// the slot, but is not made RT: it has no CAP_SYS_NICE of its own. The
// refusal is counted and fdinfo says why; the next hold of the opener's
// own uid is boosted as always.
TEST_F(Boost, AFileUsedByAnotherUserGivesTheSlotButNoBoost)
{
	SKIP_ON_SOCKET("the module's rule for passed files; gpuslotd boosts the connection's thread");
	const uint64_t refused = stat_of("boosts_refused");
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
		Dev d;
		CHILD_REQUIRE(setresgid(65534, 65534, 65534) == 0);
		CHILD_REQUIRE(setresuid(65534, 65534, 65534) == 0);
		// Its own /proc/self/fdinfo (5.10 lets no undumpable task read it).
		CHILD_REQUIRE(prctl(PR_SET_DUMPABLE, 1) == 0);
		Sched before = get_sched();
		auto r = d.acquire();
		CHILD_REQUIRE(r.err == 0 && r.slot == 0);
		CHILD_REQUIRE(get_sched().policy == SCHED_OTHER);
		CHILD_REQUIRE(d.fdinfo()["gpuslot-state"] == "held");
		CHILD_REQUIRE(d.fdinfo()["gpuslot-boost-refused"] == "not-the-openers-user");
		CHILD_REQUIRE(d.release() == 0);
		CHILD_REQUIRE(same_sched(get_sched(), before));
		CHILD_REQUIRE(d.fdinfo()["gpuslot-boost-refused"] == "-");
		return 0;
	}));
	EXPECT_EQ(stat_of("boosts_refused"), refused + 1);
	EXPECT_TRUE(kernel_log_problems().empty());
	// The opener's own threads: boosted, nothing refused.
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
		Dev d;
		CHILD_REQUIRE(d.acquire().err == 0);
		CHILD_REQUIRE(get_sched().policy == SCHED_FIFO);
		CHILD_REQUIRE(d.fdinfo()["gpuslot-boost-refused"] == "-");
		CHILD_REQUIRE(d.release() == 0);
		return 0;
	}));
	EXPECT_EQ(stat_of("boosts_refused"), refused + 1);
}

// A cgroup v1 hierarchy of the cpu controller, mounted for one test.
class CpuCgroup {
public:
	CpuCgroup()
	{
		if (mkdir(kDir, 0755) && errno != EEXIST)
			return;
		if (mount("gpuslot-cpu", kDir, "cgroup", 0, "cpu")) {
			error_ = errno;
			rmdir(kDir);
			return;
		}
		mounted_ = true;
	}
	~CpuCgroup()
	{
		if (!mounted_)
			return;
		rmdir(group_.c_str());
		umount(kDir);
		rmdir(kDir);
	}
	bool mounted() const { return mounted_; }
	int error() const { return error_; }
	std::string path(const std::string &file) const
	{
		return std::string(kDir) + "/" + file;
	}
	// A child group: 0 or errno.
	int make_group(const std::string &name)
	{
		group_ = path(name);
		return mkdir(group_.c_str(), 0755) ? errno : 0;
	}

private:
	static constexpr const char *kDir = "/tmp/gpuslot-cpu-cgroup";
	bool mounted_ = false;
	int error_ = 0;
	std::string group_;
};

// Issue 38: with CONFIG_RT_GROUP_SCHED, a task group without RT runtime
// cannot run an RT task at all; the scheduler refuses to make one RT there
// (sched_setattr() says EPERM, even with CAP_SYS_NICE), and so does the
// boost: the holder gets its slot, stays SCHED_OTHER, and can be killed.
// The refusal is counted and said in fdinfo. Only the debug kernel has
// RT group scheduling; elsewhere the test says so and skips.
TEST_F(Boost, AHolderInAnRtGroupWithoutRuntimeIsNotMadeRt)
{
	SKIP_ON_SOCKET("needs the VM's debug kernel (CONFIG_RT_GROUP_SCHED); the host's has none");
	CpuCgroup cg;
	if (!cg.mounted())
		GTEST_SKIP() << "cannot mount the cpu controller (cgroup v1): " << strerror(cg.error());
	if (access(cg.path("cpu.rt_runtime_us").c_str(), F_OK))
		GTEST_SKIP() << "this kernel has no RT group scheduling (CONFIG_RT_GROUP_SCHED): "
				"nothing to refuse";
	ASSERT_EQ(cg.make_group("no-rt-runtime"), 0);
	const std::string group = cg.path("no-rt-runtime/");
	ASSERT_EQ(write_file(group + "cpu.rt_runtime_us", "0"), 0);
	ASSERT_EQ(read_file(group + "cpu.rt_runtime_us"), "0\n");
	const uint64_t refused = stat_of("boosts_refused");

	Pipe holding;
	pid_t holder = spawn([&] {
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
		CHILD_REQUIRE(write_file(group + "tasks", std::to_string(getpid())) == 0);
		// What the scheduler itself says to this task, root as it is.
		CHILD_REQUIRE(set_sched(SCHED_FIFO, 10, 0) == EPERM);
		Dev d;
		CHILD_REQUIRE(d.acquire().err == 0);
		CHILD_REQUIRE(get_sched().policy == SCHED_OTHER);
		CHILD_REQUIRE(d.fdinfo()["gpuslot-boost-refused"] == "rt-group-without-runtime");
		holding.put(1);
		for (;;)
			; // holds and spins until killed
	});
	const int held = holding.get(10000);
	const Sched s = get_sched(holder);
	EXPECT_EQ(held, 1) << "line " << *child_failed_line();
	EXPECT_EQ(s.policy, uint32_t(SCHED_OTHER));
	EXPECT_EQ(stat_of("boosts_refused"), refused + 1);
	ASSERT_EQ(kill(holder, SIGKILL), 0);
	int status = 0;
	const bool died = wait_until([&] { return waitpid(holder, &status, WNOHANG) == holder; }, 10000);
	EXPECT_TRUE(died) << "a holder made RT in a group without runtime never runs again";
	if (!died) {
		// Give the group runtime so that the RT holder can die.
		write_file(group + "cpu.rt_runtime_us", "10000");
		waitpid(holder, &status, 0);
	}
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	// Its close gave the slot back.
	EXPECT_TRUE(wait_until([] { return read_attr(0, "nr_holders") == "0\n"; }));
}

// Issue 38: the budget is the member's, not the thread's. Threads of one
// member take the slot in turn (@new_thread_per_hold: a new thread for
// each hold, the one before gone), each hold 90 ms of spinning, for 3 s,
// at max_boost_share 25 and max_hold_ms 100. Each thread counts its own
// CPU time (CLOCK_THREAD_CPUTIME_ID) while sched_getattr() says
// SCHED_FIFO; the member's total must stay within 25 % of (T + 1 s). The
// threads run as nobody (RLIMIT_RTPRIO 0: only gpuslot can make them
// SCHED_FIFO), the member: on the module the thread's uid at the boost, on
// the socket the connection's. On 06afef7
// each thread had a budget of its own: two threads taking turns ran
// boosted about twice the bound, a new thread per hold nearly all the time.
struct MemberRun {
	std::atomic<long> boosted_us{0}; // the member's CPU time at SCHED_FIFO
	std::atomic<long> total_ms{0};   // T
	std::atomic<long> cuts{0};       // boosts the budget ended within a hold
};

uint64_t thread_cpu_ns()
{
	timespec ts{};
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
}

int spin_holds_as_member(bool new_thread_per_hold, MemberRun *out)
{
	using clock = std::chrono::steady_clock;
	CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
	const Sched before = get_sched();
	// The member opens its files itself: the module boosts only threads
	// of the opener's uid (a file passed to another user gives slots, no
	// boost), and gpuslotd only threads of the connection's (the test
	// body opens /dev/gpuslot to nobody for the run).
	CHILD_REQUIRE(setresgid(65534, 65534, 65534) == 0);
	CHILD_REQUIRE(setresuid(65534, 65534, 65534) == 0);
	CHILD_REQUIRE(set_sched(SCHED_FIFO, 1, 0) == EPERM);
	auto fa = std::make_unique<Dev>(), fb = std::make_unique<Dev>();
	const Dev &a = *fa, &b = *fb;
	std::atomic<long> boosted_ns{0}, cuts{0};
	std::atomic<int> failed{0};
	// One hold of @d, spun for 90 ms on this thread.
	auto one_hold = [&](const Dev &d) {
		if (d.acquire().err) {
			failed = __LINE__;
			return;
		}
		const auto end = clock::now() + std::chrono::milliseconds(90);
		uint64_t last = thread_cpu_ns();
		bool was_fifo = false;
		while (clock::now() < end) {
			// The CPU time since the last sample counts at the policy
			// it had then (a sample is a system call: microseconds).
			const bool fifo = get_sched().policy == SCHED_FIFO;
			const uint64_t now = thread_cpu_ns();
			if (was_fifo)
				boosted_ns += long(now - last);
			cuts += was_fifo && !fifo;
			was_fifo = fifo;
			last = now;
		}
		if (was_fifo)
			boosted_ns += long(thread_cpu_ns() - last);
		if (d.release())
			failed = __LINE__;
		else if (!same_sched(get_sched(), before))
			failed = __LINE__;
	};
	const auto start = clock::now();
	const auto run_for = std::chrono::seconds(3);
	if (new_thread_per_hold) {
		while (!failed && clock::now() - start < run_for)
			std::thread([&] { one_hold(a); }).join();
	} else {
		std::atomic<int> turn{0};
		std::atomic<bool> stop{false};
		auto taker = [&](int me, const Dev &d) {
			while (!stop) {
				if (turn != me) {
					usleep(100);
					continue;
				}
				if (failed || clock::now() - start >= run_for) {
					stop = true;
					break;
				}
				one_hold(d);
				turn = 1 - me;
			}
		};
		std::thread ta(taker, 0, std::cref(a)), tb(taker, 1, std::cref(b));
		ta.join();
		tb.join();
	}
	out->total_ms = long(std::chrono::duration_cast<std::chrono::milliseconds>(
				     clock::now() - start).count());
	out->boosted_us = boosted_ns / 1000;
	out->cuts = cuts.load();
	if (failed) { // the line of the first failure, in a thread
		*child_failed_line() = failed;
		return 1;
	}
	return 0;
}

// /dev/gpuslot is root's (0600) in the VM: open to every user while it
// lives, as the udev rule opens it to the gpuslot group on a host.
class DeviceOpenToAll {
public:
	DeviceOpenToAll()
	{
		struct stat st {};
		if (on_socket() || stat("/dev/gpuslot", &st))
			return;
		mode_ = st.st_mode & 07777;
		EXPECT_EQ(chmod("/dev/gpuslot", 0666), 0);
	}
	~DeviceOpenToAll()
	{
		if (mode_ >= 0) {
			EXPECT_EQ(chmod("/dev/gpuslot", mode_t(mode_)), 0);
		}
	}
	DeviceOpenToAll(const DeviceOpenToAll &) = delete;
	DeviceOpenToAll &operator=(const DeviceOpenToAll &) = delete;

private:
	int mode_ = -1;
};

void expect_member_within_share(const MemberRun *run, uint64_t refused_before)
{
	const long boosted_ms = run->boosted_us / 1000, cuts = run->cuts;
	// Where the boost is SCHED_FIFO 1 it goes only to threads with
	// CAP_SYS_NICE (kmod/compat.h: a child forked while boosted would keep
	// it): the member's holds are all refused, and counted.
	if (boost_limited()) {
		std::printf("member budget: this kernel boosts no member: %ld ms boosted of %ld ms\n",
			    boosted_ms, run->total_ms.load());
		EXPECT_EQ(run->boosted_us, 0);
		EXPECT_GT(stat_of("boosts_refused"), refused_before);
		return;
	}
	// 25 % of (T + 1 s): about 1 s for T about 3 s. Plus, as
	// ABoostHasABudgetAcrossHolds allows, 5 ms for each boost the budget
	// ended (the expiry's wake-up in this TCG VM, and a tick of CPU time
	// not yet counted) and 50 ms for the end of a boost seen a few system
	// calls late. Per thread the member got about 2 s and 3 s.
	const long bound = (run->total_ms + 1000) / 4;
	std::printf("member budget: %ld ms boosted of %ld ms, bound %ld ms, %ld boosts ended by it\n",
		    boosted_ms, run->total_ms.load(), bound, cuts);
	EXPECT_LE(boosted_ms, bound + 50 + 5 * cuts);
	// The budget is used, not withheld: at least half the share of T.
	EXPECT_GE(boosted_ms, run->total_ms / 8);
}

TEST_F(Boost, ABudgetIsTheMembersForThreadsTakingTurns)
{
	ASSERT_EQ(write_attr(0, "max_hold_ms", "100"), 0);
	ASSERT_EQ(write_attr(0, "max_boost_share", "25"), 0);
	auto *run = shared_new<MemberRun>();
	const uint64_t refused = stat_of("boosts_refused");
	DeviceOpenToAll open;
	expect_child_ok(spawn([run] { return spin_holds_as_member(false, run); }));
	expect_member_within_share(run, refused);
}

TEST_F(Boost, ABudgetIsTheMembersForANewThreadPerHold)
{
	ASSERT_EQ(write_attr(0, "max_hold_ms", "100"), 0);
	ASSERT_EQ(write_attr(0, "max_boost_share", "25"), 0);
	auto *run = shared_new<MemberRun>();
	const uint64_t refused = stat_of("boosts_refused");
	DeviceOpenToAll open;
	expect_child_ok(spawn([run] { return spin_holds_as_member(true, run); }));
	expect_member_within_share(run, refused);
}

int64_t ms_since(std::chrono::steady_clock::time_point t)
{
	return std::chrono::duration_cast<std::chrono::milliseconds>(
		       std::chrono::steady_clock::now() - t)
		.count();
}

// Issue 38, priority inheritance, the acceptance: a FIFO-80 waiter behind a
// FIFO-60 holder, with a FIFO-70 spinner on the holder's CPU, waits no
// longer than the holder's own work. Holder, spinner and waiter share CPU
// 1; the holder is above boost_priority 50, so only inheritance can raise
// it. Without it the holder does not run until the spinner stops (4 s)
// and the waiter waits that long.
TEST_F(Boost, AWaiterLendsItsPriorityToTheHolderItWaitsFor)
{
	SKIP_WHERE_BOOST_LIMITED("waiters lend nothing above SCHED_FIFO 1, which every RT holder has");
	SKIP_ON_SOCKET("gpuslotd's thread, on this 2-core host, is no measure of a holder's latency");
	// Inheritance ends with the boost at max_hold_ms: none here, so that
	// a slow VM cannot end it before the holder's work does.
	ASSERT_EQ(write_attr(0, "max_hold_ms", "0"), 0);
	expect_child_ok(spawn([] {
		constexpr uint64_t kWorkNs = 300'000'000; // the holder's CPU work
		CHILD_REQUIRE(pin_to_cpu(3) == 0);
		std::atomic<bool> holding{false}, waiter_started{false};
		std::atomic<bool> waiter_done{false}, holder_ok{false};
		std::atomic<uint32_t> holder_max_prio{0};
		std::atomic<uint64_t> holder_cpu_ns{0};
		std::atomic<bool> holder_restored{false};
		std::thread holder([&] {
			if (pin_to_cpu(1) || set_sched(SCHED_FIFO, 60, 0))
				return;
			Sched own = get_sched();
			Dev d;
			if (d.acquire().err)
				return;
			holding = true;
			// The work starts once the waiter is on its way (asleep
			// meanwhile, so that the spinner can move to this CPU):
			// the spinner has preempted it by then.
			const auto t0 = std::chrono::steady_clock::now();
			while (!waiter_started && ms_since(t0) < 10000)
				usleep(1000);
			// A fixed amount of CPU work.
			const uint64_t cpu0 = thread_cpu_ns();
			uint32_t top = 0;
			while (thread_cpu_ns() - cpu0 < kWorkNs)
				top = std::max(top, get_sched().priority);
			holder_cpu_ns = thread_cpu_ns() - cpu0;
			holder_max_prio = top;
			holder_ok = d.release() == 0;
			holder_restored = same_sched(get_sched(), own);
		});
		CHILD_REQUIRE(wait_until([&] { return holding.load(); }, 5000));
		std::atomic<int> waiter_err{-1};
		std::atomic<int64_t> wait_ms{-1};
		bool waiter_by_flag;
		{
			// Takes the holder's CPU; RT throttling is off meanwhile.
			CpuHog hog(1, 70, waiter_done, 4000);
			std::thread waiter([&] {
				if (set_sched(SCHED_FIFO, 80, 0) || pin_to_cpu(1))
					return;
				Dev d;
				waiter_started = true;
				const auto t0 = std::chrono::steady_clock::now();
				auto r = d.acquire();
				wait_ms = ms_since(t0);
				waiter_err = r.err;
				waiter_done = true;
				if (r.err == 0)
					d.release();
			});
			waiter.join();
			waiter_by_flag = hog.join();
		}
		holder.join();
		std::printf("inheritance: waited %lld ms behind %llu ms of the holder's work; the holder ran at %u at most\n",
			    (long long)wait_ms.load(),
			    (unsigned long long)(holder_cpu_ns / 1000000),
			    holder_max_prio.load());
		CHILD_REQUIRE(waiter_err == 0);
		CHILD_REQUIRE(holder_ok);
		// The holder ran at the waiter's priority while it waited...
		CHILD_REQUIRE(holder_max_prio == 80);
		// ...and got its own FIFO 60 back exactly.
		CHILD_REQUIRE(holder_restored);
		// The wait ended while the spinner still ran, within the
		// holder's own work and a generous margin (TCG, a loaded host).
		CHILD_REQUIRE(waiter_by_flag);
		CHILD_REQUIRE(wait_ms >= 0 &&
			      uint64_t(wait_ms) <= holder_cpu_ns / 1000000 + 1500);
		return 0;
	}));
}

// Issue 38, k-exclusion: a waiter lends its priority to the holder of every
// slot it accepts, and to no other; when it leaves (here a timeout) they
// get their own priority back.
TEST_F(Boost, AWaiterLendsToTheHoldersOfTheSlotsItAcceptsUntilItLeaves)
{
	SKIP_WHERE_BOOST_LIMITED("waiters lend nothing above SCHED_FIFO 1, which every RT holder has");
	ASSERT_EQ(write_attr(0, "k", "3"), 0);
	expect_child_ok(spawn([] {
		std::atomic<pid_t> tids[3] = {};
		std::atomic<bool> release{false};
		std::atomic<int> held{0};
		std::vector<std::thread> holders;
		for (unsigned int i = 0; i < 3; i++) {
			holders.emplace_back([&, i] {
				tids[i] = gettid();
				if (set_sched(SCHED_FIFO, 60, 0))
					return;
				Dev d;
				if (d.acquire(0, 0, 1ULL << i).err)
					return;
				held++;
				while (!release)
					usleep(1000);
				d.release();
			});
		}
		CHILD_REQUIRE(wait_until([&] { return held == 3; }, 5000));
		auto prio = [&](unsigned int i) { return get_sched(tids[i]).priority; };
		std::atomic<int> err{-1};
		std::thread waiter([&] {
			if (set_sched(SCHED_FIFO, 80, 0))
				return;
			Dev d;
			// Slots 0 and 2, for up to 1 s.
			err = d.acquire(GPUSLOT_ACQUIRE_DEADLINE, 1'000'000'000ULL, 5).err;
		});
		bool lent = wait_until([&] { return prio(0) == 80 && prio(2) == 80; }, 900);
		uint32_t other = prio(1);
		waiter.join();
		bool back = wait_until([&] {
			return prio(0) == 60 && prio(1) == 60 && prio(2) == 60;
		}, 2000);
		release = true;
		for (auto &t : holders)
			t.join();
		CHILD_REQUIRE(lent);
		CHILD_REQUIRE(other == 60);
		CHILD_REQUIRE(err == ETIMEDOUT);
		CHILD_REQUIRE(back);
		return 0;
	}));
}

// Review finding 7: priority inheritance begins no boost for a hold past
// max_hold_ms. A FIFO-60 holder is above boost_priority (50): its hold is
// not boosted. After it has held for longer than max_hold_ms, a FIFO-80
// waiter lends it nothing: the hold stays unboosted and no overrun is
// counted. It used to be raised to 80, for as long as the expiry thread
// took to end that (at once: the clock had run out), counting an overrun.
// (The module only: the socket transport does not check this yet.)
TEST_F(Boost, InheritanceBeginsNoBoostForAHoldPastMaxHold)
{
	ASSERT_EQ(write_attr(0, "max_hold_ms", "100"), 0);
	const uint64_t overruns = stat_of("overruns");
	expect_child_ok(spawn([] {
		std::atomic<pid_t> tid{0};
		std::atomic<bool> release{false};
		std::atomic<int> held{0};
		std::thread holder([&] {
			tid = gettid();
			if (set_sched(SCHED_FIFO, 60, 0) == 0) {
				Dev d;
				if (d.acquire().err == 0) {
					held = 1;
					while (!release)
						usleep(1000);
					d.release();
				}
			}
			held = held ? 1 : -1;
		});
		const bool got = wait_until([&] { return held != 0; }, 5000) && held == 1;
		usleep(250'000); // past max_hold_ms
		std::atomic<int> err{-1};
		std::thread waiter([&] {
			if (set_sched(SCHED_FIFO, 80, 0))
				return;
			Dev d;
			err = d.acquire(GPUSLOT_ACQUIRE_DEADLINE, 300'000'000ULL).err;
		});
		waiter.join();
		const auto row = split_words(domain_file("debug/holders"));
		const uint32_t prio = get_sched(tid).priority;
		release = true;
		holder.join();
		CHILD_REQUIRE(got);
		CHILD_REQUIRE(err == ETIMEDOUT);
		CHILD_REQUIRE(row.size() == 6 && row[5] == "unboosted");
		CHILD_REQUIRE(prio == 60);
		return 0;
	}));
	EXPECT_EQ(stat_of("overruns"), overruns);
	EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
}

// Issue 38, a handoff without a window. Growing k grants an asynchronous
// acquire, whose FIFO-70 poller shares the granter's CPU, and a FIFO-80
// waiter on another CPU. The poller's wake-up preempts the SCHED_OTHER
// granter as it leaves d->lock, and the poller then spins. The new holder
// must not wait for its granter to run again: it used to sleep, in D
// state, until the granter boosted and woke it, here until the spinner
// stopped (2 s).
TEST_F(Boost, ANewHolderDoesNotWaitForItsPreemptedGranter)
{
	SKIP_ON_SOCKET("gpuslotd grants, boosts and answers from its own thread, above every boost: no window");
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(pin_to_cpu(3) == 0);
		RtHost host(1); // a spinner that RT throttling would not stop
		CHILD_REQUIRE(host.ok());
		Dev holder, async;
		CHILD_REQUIRE(holder.acquire().err == 0);
		CHILD_REQUIRE(async.acquire_async() == 0);
		std::atomic<bool> returned{false}, polling{false};
		std::atomic<int> err{-1};
		std::thread waiter([&] {
			if (set_sched(SCHED_FIFO, 80, 0) || pin_to_cpu(2))
				return;
			Dev d;
			err = d.acquire().err;
			returned = true;
			if (err == 0)
				d.release();
		});
		CHILD_REQUIRE(wait_waiters(2));
		std::atomic<bool> readable{false}, by_flag{false};
		std::thread poller([&] {
			if (set_sched(SCHED_FIFO, 70, 0) || pin_to_cpu(1))
				return;
			polling = true;
			readable = async.readable(5000);
			const auto t0 = std::chrono::steady_clock::now();
			while (ms_since(t0) < 2000)
				if (returned) {
					by_flag = true;
					break;
				}
		});
		CHILD_REQUIRE(wait_until([&] { return polling.load(); }, 5000));
		usleep(50000); // the poller sleeps in poll()
		std::atomic<int> set_err{-1};
		std::thread granter([&] {
			if (set_sched(SCHED_OTHER, 0, 0) || pin_to_cpu(1))
				return;
			set_err = write_attr(0, "k", "3");
		});
		granter.join();
		poller.join();
		waiter.join();
		CHILD_REQUIRE(set_err == 0);
		CHILD_REQUIRE(readable);
		CHILD_REQUIRE(err == 0);
		// The new holder returned while the spinner held its granter's CPU.
		CHILD_REQUIRE(by_flag);
		CHILD_REQUIRE(async.complete().err == 0);
		CHILD_REQUIRE(async.release() == 0);
		CHILD_REQUIRE(holder.release() == 0);
		return 0;
	}));
}

// Issue 37: where the kernel does not export sched_setattr_nocheck()
// (5.10), the module can set SCHED_FIFO 1 and 50 and SCHED_NORMAL at a
// nice, each without reset-on-fork, and nothing else (kmod/compat.h). The
// boost then goes only where the thread's own policy comes back exactly,
// and only to a thread with CAP_SYS_NICE: the rest is refused, counted,
// and left at its own policy. Elsewhere each of these threads is boosted
// and gets its own policy back exactly, reset-on-fork included.
TEST_F(Boost, AThreadIsBoostedOnlyWhereItsOwnPolicyComesBackExactly)
{
	SKIP_ON_SOCKET("the module's kernel calls; gpuslotd sets any policy");
	const bool limited = boost_limited();
	struct Case {
		const char *what;
		uint32_t policy;
		int32_t nice;
		uint64_t flags;
		bool drop_to_nobody;
		bool boosted_where_limited;
	};
	constexpr uint64_t kResetOnFork = 0x01; // SCHED_FLAG_RESET_ON_FORK
	const Case cases[] = {
		{"SCHED_OTHER nice 7", SCHED_OTHER, 7, 0, false, true},
		{"SCHED_OTHER nice -3", SCHED_OTHER, -3, 0, false, true},
		{"SCHED_BATCH", SCHED_BATCH, 0, 0, false, false},
		{"SCHED_IDLE", SCHED_IDLE, 0, 0, false, false},
		{"SCHED_OTHER with reset-on-fork", SCHED_OTHER, 2, kResetOnFork, false, false},
		{"a member without CAP_SYS_NICE", SCHED_OTHER, 0, 0, true, false},
	};
	// No budget: the member's account may still owe from the budget tests.
	ASSERT_EQ(write_attr(0, "max_boost_share", "100"), 0);
	DeviceOpenToAll open;
	for (const Case &c : cases) {
		SCOPED_TRACE(c.what);
		const bool boosted = !limited || c.boosted_where_limited;
		const uint64_t refused = stat_of("boosts_refused");
		expect_child_ok(spawn([&c, boosted] {
			if (c.drop_to_nobody) {
				CHILD_REQUIRE(setresgid(65534, 65534, 65534) == 0);
				CHILD_REQUIRE(setresuid(65534, 65534, 65534) == 0);
				// Its own fdinfo (5.10: not for an undumpable task).
				CHILD_REQUIRE(prctl(PR_SET_DUMPABLE, 1) == 0);
			}
			CHILD_REQUIRE(set_sched(c.policy, 0, c.nice, c.flags) == 0);
			const Sched before = get_sched();
			Dev d; // opened by the thread's own uid
			CHILD_REQUIRE(d.acquire().err == 0);
			const Sched held = get_sched();
			if (boosted) {
				CHILD_REQUIRE(held.policy == SCHED_FIFO);
				CHILD_REQUIRE(held.priority == default_boost_priority());
				CHILD_REQUIRE(d.fdinfo()["gpuslot-boost-refused"] == "-");
			} else {
				CHILD_REQUIRE(same_sched(held, before));
				CHILD_REQUIRE(d.fdinfo()["gpuslot-boost-refused"] == "kernel-cannot-restore");
			}
			CHILD_REQUIRE(d.release() == 0);
			CHILD_REQUIRE(same_sched(get_sched(), before));
			return 0;
		}));
		EXPECT_EQ(stat_of("boosts_refused"), refused + (boosted ? 0 : 1));
	}
	EXPECT_TRUE(kernel_log_problems().empty());
}


// Full preemption while it lives, where the kernel can switch to it
// (PREEMPT_DYNAMIC: debugfs sched/preempt) or has it (PREEMPT, PREEMPT_RT;
// the debug kernel is PREEMPT): a thread
// whose priority drops below a runnable one is preempted where it is, in a
// system call too, not at its return.
class FullPreemption {
public:
	FullPreemption()
	{
		const std::string now = read_file(kMode);
		const auto open = now.find('('), close = now.find(')');
		if (open != std::string::npos && close != std::string::npos) {
			saved_ = now.substr(open + 1, close - open - 1);
			ok_ = write_file(kMode, "full") == 0;
			return;
		}
		// Fixed at build time: "PREEMPT" or "PREEMPT_RT" in the version.
		utsname u{};
		if (uname(&u) == 0) {
			for (const std::string &word : split_words(u.version))
				ok_ = ok_ || word == "PREEMPT" || word == "PREEMPT_RT";
		}
	}
	~FullPreemption()
	{
		if (!saved_.empty()) {
			EXPECT_EQ(write_file(kMode, saved_), 0);
		}
	}
	FullPreemption(const FullPreemption &) = delete;
	FullPreemption &operator=(const FullPreemption &) = delete;
	bool ok() const { return ok_; }

private:
	static constexpr const char *kMode = "/sys/kernel/debug/sched/preempt";
	std::string saved_;
	bool ok_ = false;
};

struct MemberA {
	std::atomic<bool> holding{false}, release_now{false}, released{false};
};

// Member A: hold a slot of GPU 0 boosted on CPU 1, asleep, until told to
// release it.
int hold_on_cpu1_until_told(MemberA *a)
{
	CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
	CHILD_REQUIRE(pin_to_cpu(1) == 0);
	CHILD_REQUIRE(setresgid(4242, 4242, 4242) == 0);
	CHILD_REQUIRE(setresuid(4242, 4242, 4242) == 0);
	Dev d; // its own file: the boost is the opener's
	CHILD_REQUIRE(d.acquire().err == 0);
	CHILD_REQUIRE(get_sched().policy == SCHED_FIFO);
	a->holding = true;
	CHILD_REQUIRE(wait_until([a] { return a->release_now.load(); }, 20000));
	const int err = d.release();
	a->released = true;
	CHILD_REQUIRE(err == 0);
	CHILD_REQUIRE(get_sched().policy == SCHED_OTHER);
	return 0;
}

// Issue 38, a ledger per member: no member's boost waits for another
// member's ledger call. Member A (uid 4242) releases its boosted hold of GPU
// 0 on CPU 1, where a FIFO-40 spinner waits below the boost: the restore to
// SCHED_OTHER in A's ledger call lets the spinner preempt it there, before
// the call ends. Member B (root) then takes and gives back a slot of GPU 1
// from CPU 2, boosted, 20 times. With one ledger lock for every GPU and
// member (up to af519ac), B's first boost waited for A's call, until the
// spinner stopped (6 s); with a ledger per member B is done while A is still
// held up.
TEST_F(Boost, AMembersBoostWaitsForNoOtherMembersLedgerCall)
{
	SKIP_ON_SOCKET("gpuslotd makes every member's ledger call on its one thread");
	SKIP_WHERE_BOOST_LIMITED("a member without CAP_SYS_NICE gets no boost here");
	FullPreemption full;
	if (!full.ok())
		GTEST_SKIP() << "this kernel preempts no thread inside a system call: no member can be caught in a ledger call";
	ASSERT_EQ(unload_module(), 0);
	ASSERT_EQ(load_module("domains=2"), 0);
	// A's hold lasts as long as the test needs, boosted (no budget).
	ASSERT_EQ(write_attr(0, "max_hold_ms", "0"), 0);
	ASSERT_EQ(write_attr(0, "max_boost_share", "100"), 0);
	{
		DeviceOpenToAll open;
		expect_child_ok(spawn([] {
			CHILD_REQUIRE(pin_to_cpu(3) == 0);
			auto *a = shared_new<MemberA>();
			const pid_t member_a = spawn([a] { return hold_on_cpu1_until_told(a); });
			if (!wait_until([a] { return a->holding.load(); }, 10000)) {
				kill(member_a, SIGKILL);
				wait_child(member_a);
				CHILD_REQUIRE(false);
			}
			Dev b;
			CHILD_REQUIRE(b.attach(1) == 0);
			std::atomic<bool> b_done{false};
			int64_t slowest_ms = 0;
			int b_errors = 0, b_unboosted = 0;
			bool a_held_up = false, by_flag = false;
			{
				CpuHog hog(1, 40, b_done, 6000);
				a->release_now = true;
				// A wakes above the spinner and releases; once its
				// restore runs, only the spinner's end lets it go on.
				CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
				CHILD_REQUIRE(pin_to_cpu(2) == 0);
				usleep(100000);
				for (int i = 0; i < 20; i++) {
					const auto t0 = std::chrono::steady_clock::now();
					if (b.acquire().err) {
						b_errors++;
						continue;
					}
					b_unboosted += get_sched().policy != SCHED_FIFO;
					b_errors += b.release() != 0;
					slowest_ms = std::max(slowest_ms, ms_since(t0));
				}
				a_held_up = !a->released;
				b_done = true;
				by_flag = hog.join();
			}
			const int a_status = wait_child(member_a);
			std::printf("ledgers: member B's slowest boosted acquire and release took %lld ms while member A was held up in its release\n",
				    (long long)slowest_ms);
			CHILD_REQUIRE(a_status == 0);
			CHILD_REQUIRE(b_errors == 0);
			CHILD_REQUIRE(b_unboosted == 0);
			// B was done before the spinner's 6 s ran out...
			CHILD_REQUIRE(slowest_ms < 3000);
			CHILD_REQUIRE(by_flag);
			// ...while the spinner still held A up.
			CHILD_REQUIRE(a_held_up);
			return 0;
		}));
	}
	EXPECT_TRUE(kernel_log_problems().empty());
	ASSERT_EQ(unload_module(), 0);
	ASSERT_EQ(load_module(""), 0);
}

} // namespace
} // namespace gpuslot::test
