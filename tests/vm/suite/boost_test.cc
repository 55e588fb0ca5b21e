// SPDX-License-Identifier: GPL-2.0
// The SCHED_FIFO boost around a hold: when a thread gets it back, nested
// holds, threads that share a file, the boost at handoff, max_hold_ms.
#include <gtest/gtest.h>

#include <sched.h>
#include <time.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

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
		// The boost budget is the member's: root's, for every test. One
		// boosted hold at share 100 (no budget) settles root's account
		// to full, so that what an earlier test spent (Lock.Stress*)
		// does not leave this one unboosted.
		ASSERT_EQ(write_attr(0, "max_boost_share", "100"), 0);
		{
			Dev d;
			ASSERT_EQ(d.acquire().err, 0);
			ASSERT_EQ(d.release(), 0);
		}
		ASSERT_EQ(write_attr(0, "max_boost_share",
				     std::to_string(GPUSLOT_DEFAULT_MAX_BOOST_SHARE).c_str()), 0);
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
	expect_child_ok(spawn([] {
		return change_while_holding(SCHED_FIFO, 49, 0, true);
	}));
	expect_child_ok(spawn([] {
		return change_while_holding(SCHED_RR, 10, 0, true);
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
		CHILD_REQUIRE(mid.policy == SCHED_FIFO && mid.priority == 50);
		CHILD_REQUIRE(b.release() == 0);
		CHILD_REQUIRE(same_sched(get_sched(), before));
		return 0;
	}));
}

// Defect 4 across GPUs with different boost priorities: the thread runs at
// the highest priority it holds, and ends at its own attributes.
TEST_F(Boost, NestedHoldsOfTwoDomainsRunAtTheHighestAndEndRestored)
{
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
		CHILD_REQUIRE(a_granted.priority == 50);
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
		CHILD_REQUIRE(b_held.policy == SCHED_FIFO && b_held.priority == 50);
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
			CHILD_REQUIRE(held.policy == SCHED_FIFO && held.priority == 50);
			CHILD_REQUIRE(d.release() == 0);
			CHILD_REQUIRE(same_sched(get_sched(), before));
			return 0;
		});
		ASSERT_TRUE(wait_waiters(1));
		// Asleep, already at the boost.
		Sched waiting = get_sched(*tid);
		EXPECT_EQ(waiting.policy, uint32_t(SCHED_FIFO));
		EXPECT_EQ(waiting.priority, 50u);
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
		CHILD_REQUIRE(granted.policy == SCHED_FIFO && granted.priority == 50);
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
// old fixed 51.
TEST_F(Boost, MaxHoldEndsTheBoostOfAHolderSpinningOnItsCpu)
{
	const int cpu = on_socket() ? 0 : 1;
	ASSERT_EQ(write_attr(0, "boost_priority", "60"), 0);
	ASSERT_EQ(write_attr(0, "max_hold_ms", "100"), 0);
	RtHost host(cpu);
	ASSERT_TRUE(host.ok());
	expect_child_ok(spawn([cpu] {
		CHILD_REQUIRE(pin_to_cpu(cpu) == 0);
		CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, 0) == 0);
		Sched before = get_sched();
		Dev d;
		CHILD_REQUIRE(d.acquire().err == 0);
		Sched held = get_sched();
		CHILD_REQUIRE(held.policy == SCHED_FIFO && held.priority == 60);
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
	for (int nice : {-5, 0}) {
		SCOPED_TRACE(nice);
		expect_child_ok(spawn([nice] {
			CHILD_REQUIRE(set_sched(SCHED_OTHER, 0, nice) == 0);
			CHILD_REQUIRE(set_sched(SCHED_FIFO, 10, 0) == 0);
			Dev d;
			CHILD_REQUIRE(d.acquire().err == 0);
			Sched held = get_sched();
			CHILD_REQUIRE(held.policy == SCHED_FIFO && held.priority == 50);
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
	// /dev/gpuslot is root's in the VM: opened first, as the other suites
	// do. On the socket nobody connects as itself: gpuslotd boosts only
	// threads of a process whose uid is the connection's.
	std::unique_ptr<Dev> fa, fb;
	if (!on_socket()) {
		fa = std::make_unique<Dev>();
		fb = std::make_unique<Dev>();
	}
	CHILD_REQUIRE(setresgid(65534, 65534, 65534) == 0);
	CHILD_REQUIRE(setresuid(65534, 65534, 65534) == 0);
	CHILD_REQUIRE(set_sched(SCHED_FIFO, 1, 0) == EPERM);
	if (on_socket()) {
		fa = std::make_unique<Dev>();
		fb = std::make_unique<Dev>();
	}
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

void expect_member_within_share(const MemberRun *run)
{
	const long boosted_ms = run->boosted_us / 1000, cuts = run->cuts;
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
	expect_child_ok(spawn([run] { return spin_holds_as_member(false, run); }));
	expect_member_within_share(run);
}

TEST_F(Boost, ABudgetIsTheMembersForANewThreadPerHold)
{
	ASSERT_EQ(write_attr(0, "max_hold_ms", "100"), 0);
	ASSERT_EQ(write_attr(0, "max_boost_share", "25"), 0);
	auto *run = shared_new<MemberRun>();
	expect_child_ok(spawn([run] { return spin_holds_as_member(true, run); }));
	expect_member_within_share(run);
}

} // namespace
} // namespace gpuslot::test
