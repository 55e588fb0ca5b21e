// SPDX-License-Identifier: GPL-2.0
// Preemptive slots (issue 40) on the module: GPUSLOT_IOC_SET_WORK, the work
// state page every member maps read-only, and the preemption budget.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>

#include "device.h"

using namespace gpuslot::test;

namespace {

// GPUSLOT_DEFAULT_PREEMPT_SHARE and _WINDOW_MS in kmod/lockcore/preempt.h.
constexpr unsigned int kDefaultPreemptShare = 25;
constexpr unsigned int kDefaultPreemptWindowMs = 1000;
constexpr unsigned int kMaxPreemptWindowMs = 60000;

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

int set_work(const Dev &d, uint32_t flags)
{
	gpuslot_set_work w{};
	w.size = sizeof(w);
	w.flags = flags;
	return ioctl_errno(d.fd(), GPUSLOT_IOC_SET_WORK, &w);
}

// CAP_SYS_ADMIN out of every set of this thread, the uids as they are.
int drop_cap_sys_admin()
{
	if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0))
		return errno;
	__user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
	__user_cap_data_struct d[2]{};
	if (syscall(SYS_capget, &h, d))
		return errno;
	const uint32_t bit = 1u << (CAP_SYS_ADMIN % 32);
	d[CAP_SYS_ADMIN / 32].effective &= ~bit;
	d[CAP_SYS_ADMIN / 32].permitted &= ~bit;
	d[CAP_SYS_ADMIN / 32].inheritable &= ~bit;
	return syscall(SYS_capset, &h, d) ? errno : 0;
}

uint64_t stat_of(const char *name)
{
	return std::stoull(read_attr(0, std::string("stats/") + name));
}

// One read-only mapping of a file's work state page, read with its seqcount.
class WorkPage {
public:
	explicit WorkPage(const Dev &d)
	{
		p_ = mmap(nullptr, GPUSLOT_WORK_STATE_SIZE, PROT_READ, MAP_SHARED, d.fd(), 0);
		err_ = p_ == MAP_FAILED ? errno : 0;
	}
	~WorkPage()
	{
		if (p_ != MAP_FAILED)
			munmap(p_, GPUSLOT_WORK_STATE_SIZE);
	}
	int err() const { return err_; }
	void *addr() const { return p_; }

	gpuslot_work_state read() const
	{
		auto *s = static_cast<gpuslot_work_state *>(p_);
		for (;;) {
			uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
			if (seq & 1)
				continue;
			gpuslot_work_state copy;
			std::memcpy(&copy, s, sizeof(copy));
			std::atomic_thread_fence(std::memory_order_acquire);
			if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq)
				return copy;
		}
	}

private:
	void *p_;
	int err_;
};

class Work : public DomainTest {
protected:
	void SetUp() override
	{
		DomainTest::SetUp();
		if (on_socket())
			GTEST_SKIP() << "socket transport: gpuslotd's work state has tests of its own";
		reset_budget();
	}
	void TearDown() override
	{
		if (!on_socket())
			reset_budget();
		DomainTest::TearDown();
	}
	static void reset_budget()
	{
		ASSERT_EQ(write_attr(0, "preempt_share", std::to_string(kDefaultPreemptShare)), 0);
		ASSERT_EQ(write_attr(0, "preempt_window_ms", std::to_string(kDefaultPreemptWindowMs)), 0);
	}
};

// Any member maps the page; nobody, root included, maps it writable or
// makes it so later, and the kernel's forced writes (ptrace,
// /proc/pid/mem) do not go through either.
TEST_F(Work, TheStatePageIsReadOnlyForEveryone)
{
	Dev d;
	gpuslot_version v{};
	v.size = sizeof(v);
	ASSERT_EQ(ioctl_errno(d.fd(), GPUSLOT_IOC_VERSION, &v), 0);
	EXPECT_TRUE(v.features & GPUSLOT_FEATURE_WORK);

	WorkPage page(d);
	ASSERT_EQ(page.err(), 0);
	gpuslot_work_state s = page.read();
	EXPECT_EQ(s.version, uint32_t(GPUSLOT_WORK_STATE_VERSION));
	EXPECT_EQ(s.seq % 2, 0u);
	EXPECT_EQ(s.k, 1u);
	EXPECT_EQ(s.generation, d.info().generation);
	EXPECT_EQ(s.held_mask, 0u);
	EXPECT_EQ(s.work_mask, 0u);
	EXPECT_EQ(s.preempt_mask, 0u);
	EXPECT_EQ(s.preempt_level, 0u);

	const size_t size = GPUSLOT_WORK_STATE_SIZE;
	for (int flags : {MAP_SHARED, MAP_PRIVATE}) {
		void *w = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, d.fd(), 0);
		EXPECT_EQ(w, MAP_FAILED) << flags;
		EXPECT_EQ(errno, EPERM) << flags;
	}
	EXPECT_EQ(mprotect(page.addr(), size, PROT_READ | PROT_WRITE), -1);
	EXPECT_EQ(errno, EACCES);
	// Nor executable (review): a data page, never code.
	void *x = mmap(nullptr, size, PROT_READ | PROT_EXEC, MAP_SHARED, d.fd(), 0);
	EXPECT_EQ(x, MAP_FAILED);
	EXPECT_EQ(errno, EPERM);
	EXPECT_EQ(mprotect(page.addr(), size, PROT_READ | PROT_EXEC), -1);
	EXPECT_EQ(errno, EACCES);
	for (int flags : {MAP_SHARED, MAP_PRIVATE}) {
		void *p = mmap(nullptr, size, PROT_READ, flags, d.fd(), 0);
		ASSERT_NE(p, MAP_FAILED) << flags;
		EXPECT_EQ(mprotect(p, size, PROT_READ | PROT_WRITE), -1) << flags;
		EXPECT_EQ(errno, EACCES) << flags;
		munmap(p, size);
	}
	int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	ASSERT_GE(mem, 0);
	uint32_t odd = 1;
	EXPECT_EQ(pwrite(mem, &odd, sizeof(odd), off_t(uintptr_t(page.addr()))), -1);
	close(mem);
	EXPECT_EQ(page.read().seq % 2, 0u);

	// Another offset, or more than the page: EINVAL.
	long pg = sysconf(_SC_PAGESIZE);
	EXPECT_EQ(mmap(nullptr, size, PROT_READ, MAP_SHARED, d.fd(), pg), MAP_FAILED);
	EXPECT_EQ(errno, EINVAL);
	EXPECT_EQ(mmap(nullptr, 2 * pg, PROT_READ, MAP_SHARED, d.fd(), 0), MAP_FAILED);
	EXPECT_EQ(errno, EINVAL);
}

// The holder's reports show in the page and its fdinfo; a file that holds
// nothing, or a grant not completed, gets EPERM; unknown flags EINVAL; a
// report that changes nothing is no update.
TEST_F(Work, TheHoldersReportsShowInThePage)
{
	Dev admin, a, b, other;
	Layout l;
	l.k = 2;
	l.priority[0] = 1;
	l.priority[1] = 0;
	ASSERT_EQ(admin.set_layout(l), 0);
	WorkPage page(other);
	ASSERT_EQ(page.err(), 0);

	EXPECT_EQ(set_work(other, GPUSLOT_WORK_PENDING), EPERM);
	ASSERT_EQ(a.acquire(0, 0, 0x1).err, 0);
	EXPECT_EQ(set_work(a, 2), EINVAL);
	EXPECT_EQ(set_work(a, GPUSLOT_WORK_PENDING | 0x80000000u), EINVAL);
	gpuslot_work_state s = page.read();
	EXPECT_EQ(s.k, 2u);
	EXPECT_EQ(s.held_mask, 1u);
	EXPECT_EQ(s.work_mask, 0u);
	EXPECT_EQ(s.priority[0], 1);
	EXPECT_EQ(a.fdinfo()["gpuslot-work"], "none");

	uint64_t updates = s.updates;
	ASSERT_EQ(set_work(a, GPUSLOT_WORK_PENDING), 0);
	s = page.read();
	EXPECT_EQ(s.work_mask, 1u);
	EXPECT_EQ(s.preempt_mask, 1u);
	EXPECT_EQ(s.preempt_level, 2u); // 1 + slot 0's priority
	EXPECT_EQ(s.updates, updates + 1);
	EXPECT_EQ(s.seq % 2, 0u);
	EXPECT_EQ(a.fdinfo()["gpuslot-work"], "pending");
	ASSERT_EQ(set_work(a, GPUSLOT_WORK_PENDING), 0);
	EXPECT_EQ(page.read().updates, updates + 1);

	// An asynchronous grant not completed holds the slot, but no thread
	// of it is known to run its job: EPERM until COMPLETE.
	ASSERT_EQ(b.acquire_async(0x2), 0);
	ASSERT_TRUE(b.readable(10000));
	EXPECT_EQ(set_work(b, GPUSLOT_WORK_PENDING), EPERM);
	ASSERT_EQ(b.complete().err, 0);
	ASSERT_EQ(set_work(b, GPUSLOT_WORK_PENDING), 0);
	s = page.read();
	EXPECT_EQ(s.held_mask, 3u);
	EXPECT_EQ(s.work_mask, 3u);
	EXPECT_EQ(s.preempt_level, 2u);

	ASSERT_EQ(set_work(a, 0), 0);
	s = page.read();
	EXPECT_EQ(s.work_mask, 2u);
	EXPECT_EQ(s.preempt_level, 1u);
	EXPECT_EQ(a.fdinfo()["gpuslot-work"], "none");
	ASSERT_EQ(set_work(a, GPUSLOT_WORK_PENDING), 0);

	// The end of a hold ends its work.
	EXPECT_EQ(a.release(), 0);
	s = page.read();
	EXPECT_EQ(s.held_mask, 2u);
	EXPECT_EQ(s.work_mask, 2u);
	EXPECT_EQ(set_work(a, GPUSLOT_WORK_PENDING), EPERM);
	EXPECT_EQ(b.release(), 0);
	s = page.read();
	EXPECT_EQ(s.held_mask, 0u);
	EXPECT_EQ(s.work_mask, 0u);
	EXPECT_EQ(s.preempt_level, 0u);
}

// A holder killed with its work pending: by the time its parent has reaped
// it the work is gone, and the next holder, granted the slot it held, finds
// none of it.
TEST_F(Work, AHoldersDeathEndsItsWorkBeforeTheNextHolder)
{
	Dev next;
	WorkPage page(next);
	ASSERT_EQ(page.err(), 0);
	Pipe ready;
	pid_t child = spawn([&ready] {
		Dev d;
		if (d.acquire().err || set_work(d, GPUSLOT_WORK_PENDING))
			return 1;
		ready.put(1);
		for (;;)
			pause();
	});
	ASSERT_EQ(ready.get(), 1);
	gpuslot_work_state s = page.read();
	EXPECT_EQ(s.held_mask, 1u);
	EXPECT_EQ(s.work_mask, 1u);
	EXPECT_EQ(s.preempt_mask, 1u);

	ASSERT_EQ(next.acquire_async(), 0);
	ASSERT_TRUE(wait_waiters(1));
	ASSERT_EQ(kill(child, SIGKILL), 0);
	EXPECT_EQ(wait_child(child), 128 + SIGKILL);
	EXPECT_EQ(page.read().work_mask, 0u);
	ASSERT_TRUE(next.readable(10000));
	s = page.read();
	EXPECT_EQ(s.held_mask, 1u); // the next holder's, pending
	EXPECT_EQ(s.work_mask, 0u);
	EXPECT_EQ(s.preempt_mask, 0u);
	EXPECT_EQ(s.preempt_level, 0u);
	ASSERT_EQ(next.complete().err, 0);
	EXPECT_EQ(page.read().work_mask, 0u);
	EXPECT_EQ(next.release(), 0);
}

// A k that shrinks retires the slots past it: their work goes at once,
// though their holders hold on, and a report for such a slot shows
// nothing. Priorities come from the layout, and a new layout's apply to
// the work already pending.
TEST_F(Work, KAndPrioritiesComeFromTheLayout)
{
	Dev admin, a, b;
	WorkPage page(admin);
	ASSERT_EQ(page.err(), 0);
	Layout l;
	l.k = 2;
	l.priority[0] = 3;
	l.priority[1] = 7;
	ASSERT_EQ(admin.set_layout(l), 0);
	ASSERT_EQ(a.acquire(0, 0, 0x1).err, 0);
	ASSERT_EQ(b.acquire(0, 0, 0x2).err, 0);
	ASSERT_EQ(set_work(a, GPUSLOT_WORK_PENDING), 0);
	ASSERT_EQ(set_work(b, GPUSLOT_WORK_PENDING), 0);
	gpuslot_work_state s = page.read();
	EXPECT_EQ(s.priority[0], 3);
	EXPECT_EQ(s.priority[1], 7);
	EXPECT_EQ(s.preempt_level, 8u);
	EXPECT_EQ(s.generation, l.generation);

	// Same k, priorities swapped: the work stays, the level follows.
	l.priority[0] = 9;
	l.priority[1] = 2;
	ASSERT_EQ(admin.set_layout(l), 0);
	s = page.read();
	EXPECT_EQ(s.generation, l.generation);
	EXPECT_EQ(s.work_mask, 3u);
	EXPECT_EQ(s.priority[0], 9);
	EXPECT_EQ(s.preempt_level, 10u);

	uint64_t gen = 0;
	ASSERT_EQ(admin.set_k(1, &gen), 0);
	s = page.read();
	EXPECT_EQ(s.k, 1u);
	EXPECT_EQ(s.generation, gen);
	EXPECT_EQ(s.held_mask, 3u); // slot 1's holder holds on ...
	EXPECT_EQ(s.work_mask, 1u); // ... without its work
	EXPECT_EQ(s.priority[0], 0); // SET_K makes every slot whole, priority 0
	EXPECT_EQ(s.priority[1], 0);
	EXPECT_EQ(s.preempt_level, 1u);
	EXPECT_EQ(set_work(b, GPUSLOT_WORK_PENDING), 0);
	EXPECT_EQ(page.read().work_mask, 1u);
	EXPECT_EQ(b.release(), 0);
	EXPECT_EQ(page.read().held_mask, 1u);
	EXPECT_EQ(a.release(), 0);
	EXPECT_EQ(page.read().work_mask, 0u);
}

// Wait up to 10 s for the page's preempt_mask to be @mask: its time, or 0.
uint64_t wait_preempt_mask(const WorkPage &page, uint64_t mask)
{
	const uint64_t end = now_ns() + 10000000000ull;
	for (uint64_t t = now_ns(); t < end; t = now_ns()) {
		if (page.read().preempt_mask == mask)
			return t;
		usleep(100);
	}
	return 0;
}

// share 10 % of a 100 ms window: a bucket of 10 ms, refilled at 10 % while
// it drains, so it runs out 10 / 0.9 = 11.1 ms after the report; the slot
// keeps its work but no longer preempts, a second report does not restart
// it, and after it drained and its bucket refilled it preempts again.
TEST_F(Work, ThePreemptionBudgetRunsOutAndRefills)
{
	ASSERT_EQ(write_attr(0, "preempt_share", "10"), 0);
	ASSERT_EQ(write_attr(0, "preempt_window_ms", "100"), 0);
	Dev h;
	WorkPage page(h);
	ASSERT_EQ(page.err(), 0);
	ASSERT_EQ(h.acquire().err, 0);

	for (int round = 0; round < 2; round++) {
		const uint64_t expiries = stat_of("preempt_expiries");
		const uint64_t t0 = now_ns();
		ASSERT_EQ(set_work(h, GPUSLOT_WORK_PENDING), 0);
		// Preempting now, unless this process stalled for 11 ms
		// since, in which case the expiry proves it preempted.
		if (page.read().preempt_mask != 1u) {
			EXPECT_EQ(stat_of("preempt_expiries"), expiries + 1) << round;
		}
		const uint64_t t1 = wait_preempt_mask(page, 0);
		ASSERT_NE(t1, 0u) << "still preempting 10 s on, round " << round;
		EXPECT_GE(t1 - t0, 10000000u) << "ran out early, round " << round;
		gpuslot_work_state s = page.read();
		EXPECT_EQ(s.work_mask, 1u);
		EXPECT_EQ(s.preempt_level, 0u);
		EXPECT_EQ(stat_of("preempt_expiries"), expiries + 1);
		EXPECT_EQ(h.fdinfo()["gpuslot-work"], "pending");

		// Work still pending: another report changes nothing.
		ASSERT_EQ(set_work(h, GPUSLOT_WORK_PENDING), 0);
		EXPECT_EQ(page.read().preempt_mask, 0u);
		usleep(50000);
		EXPECT_EQ(page.read().preempt_mask, 0u);

		// Drained; 150 ms refill the 10 ms bucket (10 % of 100 ms).
		ASSERT_EQ(set_work(h, 0), 0);
		EXPECT_EQ(page.read().work_mask, 0u);
		usleep(150000);
	}
	EXPECT_EQ(h.release(), 0);
}

// The budget's knobs: 1..100 % and 1..60000 ms; anything else EINVAL,
// changing nothing; only an admin sets them (uid 0 without CAP_SYS_ADMIN
// gets EPERM); share 100 is no bound.
TEST_F(Work, TheBudgetKnobsTakeOnlyTheirRange)
{
	EXPECT_EQ(read_attr(0, "preempt_share"), std::to_string(kDefaultPreemptShare) + "\n");
	EXPECT_EQ(read_attr(0, "preempt_window_ms"), std::to_string(kDefaultPreemptWindowMs) + "\n");
	ASSERT_EQ(write_attr(0, "preempt_share", "40"), 0);
	ASSERT_EQ(write_attr(0, "preempt_window_ms", "250"), 0);
	for (const char *bad : {"0", "101", "-1", "abc", "4294967296"})
		EXPECT_EQ(write_attr(0, "preempt_share", bad), EINVAL) << bad;
	for (const char *bad : {"0", "60001", "-5", "1.5", "4294967296"})
		EXPECT_EQ(write_attr(0, "preempt_window_ms", bad), EINVAL) << bad;
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(drop_cap_sys_admin() == 0);
		CHILD_REQUIRE(write_attr(0, "preempt_share", "50") == EPERM);
		CHILD_REQUIRE(write_attr(0, "preempt_window_ms", "500") == EPERM);
		return 0;
	}));
	EXPECT_EQ(read_attr(0, "preempt_share"), "40\n");
	EXPECT_EQ(read_attr(0, "preempt_window_ms"), "250\n");
	ASSERT_EQ(write_attr(0, "preempt_share", "1"), 0);
	ASSERT_EQ(write_attr(0, "preempt_window_ms", std::to_string(kMaxPreemptWindowMs)), 0);
	EXPECT_EQ(read_attr(0, "preempt_window_ms"), std::to_string(kMaxPreemptWindowMs) + "\n");

	// share 100: a slot with work preempts for as long as it has it.
	ASSERT_EQ(write_attr(0, "preempt_share", "100"), 0);
	ASSERT_EQ(write_attr(0, "preempt_window_ms", "1"), 0);
	Dev h;
	WorkPage page(h);
	ASSERT_EQ(h.acquire().err, 0);
	ASSERT_EQ(set_work(h, GPUSLOT_WORK_PENDING), 0);
	usleep(100000);
	EXPECT_EQ(page.read().preempt_mask, 1u);
	EXPECT_EQ(h.release(), 0);
}

} // namespace
