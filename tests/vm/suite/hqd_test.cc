// SPDX-License-Identifier: GPL-2.0
// Hardware-queue admission on a real kernel: the 24-of-32 HQD budget.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "device.h"
#include "gpuslot.h"

namespace gpuslot::test {
namespace {

std::string domain_file(const char *attr)
{
	return read_attr(0, attr);
}

unsigned int hqd_used()
{
	return std::stoul(domain_file("hqd_used"));
}

// pid -> queues, from sysfs "queues" (one line per reserving file).
std::map<int, unsigned int> queues_by_pid()
{
	std::map<int, unsigned int> out;
	for (auto &line : split_lines(domain_file("debug/queues"))) {
		auto w = split_words(line);
		if (w.size() == 3)
			out[std::stoi(w[0])] += std::stoul(w[2]);
	}
	return out;
}

bool wait_queue_waiters(unsigned int n)
{
	return wait_until([n] {
		return std::stoul(domain_file("hqd_waiters")) == n;
	});
}

class Hqd : public testing::Test {
protected:
	void SetUp() override
	{
		reset_domain(0);
		*child_failed_line() = 0;
	}

	void TearDown() override
	{
		EXPECT_TRUE(wait_until([] { return hqd_used() == 0; }))
			<< domain_file("debug/queues");
		EXPECT_EQ(domain_file("debug/queues"), "");
		reset_domain(0);
	}

	static void expect_child_ok(pid_t pid)
	{
		EXPECT_EQ(wait_child(pid), 0)
			<< "child failed its check at line "
			<< *child_failed_line();
	}
};

// A child that reserves @count (however @flags says), reports the result,
// and keeps the queues until told to go on.
pid_t spawn_reserver(const Pipe &report, const Pipe &go, const char *name,
		     unsigned int count, uint32_t flags = 0,
		     uint64_t timeout_ns = 0)
{
	return spawn([&report, &go, name, count, flags, timeout_ns] {
		prctl(PR_SET_NAME, name);
		Dev d;
		auto r = d.reserve(count, flags, timeout_ns);
		report.put(r.err ? -r.err : int(r.reserved));
		if (r.err)
			return 0;
		CHILD_REQUIRE(go.get(60000) == 1);
		return 0;
	});
}

// 1. reservations add up; the 25th queue with limit 24 gets ENOSPC
TEST_F(Hqd, ReservationsAddUpAndTheTwentyFifthQueueIsRefused)
{
	EXPECT_EQ(domain_file("hqd_limit"), "24\n");
	Pipe report, go;
	std::vector<pid_t> kids;
	const char *names[] = {"ds_infer", "planner", "tracker"};
	for (int i = 0; i < 3; i++) {
		kids.push_back(spawn_reserver(report, go, names[i], 8));
		EXPECT_EQ(report.get(), 8);
	}
	EXPECT_EQ(hqd_used(), 24u);
	auto q = queues_by_pid();
	ASSERT_EQ(q.size(), 3u);
	for (pid_t pid : kids)
		EXPECT_EQ(q[pid], 8u);
	EXPECT_NE(domain_file("debug/queues").find("planner"), std::string::npos);

	Dev d;
	auto r = d.reserve(1); // the 25th queue
	EXPECT_EQ(r.err, ENOSPC);
	EXPECT_EQ(hqd_used(), 24u);
	r = d.reserve(5);
	EXPECT_EQ(r.err, ENOSPC);
	EXPECT_EQ(hqd_used(), 24u); // nothing changed

	// libgpuslot turns the ENOSPC into words a person can act on.
	char msg[512];
	int n = gpuslot_hqd_explain(0, 5, msg, sizeof(msg));
	ASSERT_GT(n, 0) << msg;
	std::string text(msg);
	EXPECT_NE(text.find("GPU 0: hardware queue budget exhausted: 24 of 24 "
			    "reserved (pid " + std::to_string(kids[0]) +
			    " ds_infer: 8, pid " + std::to_string(kids[1]) +
			    " planner: 8"), std::string::npos) << text;
	EXPECT_NE(text.find("this process needs 5."), std::string::npos) << text;
	EXPECT_EQ(queues_by_pid().size(), 3u);
	EXPECT_EQ(d.info().hqd_used, 24u);
	EXPECT_EQ(d.info().hqd_limit, 24u);

	// Within one file, reservations add up too.
	for (int i = 0; i < 3; i++)
		go.put(1);
	for (pid_t pid : kids)
		expect_child_ok(pid);
	EXPECT_EQ(d.reserve(10).reserved, 10u);
	r = d.reserve(14);
	EXPECT_EQ(r.err, 0);
	EXPECT_EQ(r.reserved, 24u);
	EXPECT_EQ(r.used, 24u);
	EXPECT_EQ(d.reserve(1).err, ENOSPC);
	EXPECT_EQ(d.unreserve(25), EINVAL);
	EXPECT_EQ(d.unreserve(0), EINVAL);
	EXPECT_EQ(d.unreserve(4), 0);
	EXPECT_EQ(hqd_used(), 20u);
	EXPECT_EQ(d.attach(0), EBUSY); // reservations belong to the domain
	EXPECT_EQ(d.unreserve(20), 0);
	EXPECT_EQ(domain_file("debug/queues"), "");
}

// 2. waiting mode: FIFO service and a clean timeout
TEST_F(Hqd, WaitingReservationsAreServedInFifoOrderAndTimeOut)
{
	Dev full;
	ASSERT_EQ(full.reserve(24).err, 0);
	Pipe report, go_a, go_b;
	pid_t a = spawn_reserver(report, go_a, "big", 6, GPUSLOT_RESERVE_WAIT);
	ASSERT_TRUE(wait_queue_waiters(1));
	pid_t b = spawn_reserver(report, go_b, "small", 2, GPUSLOT_RESERVE_WAIT);
	ASSERT_TRUE(wait_queue_waiters(2));

	// 2 free: "small" fits but must not overtake "big".
	ASSERT_EQ(full.unreserve(2), 0);
	EXPECT_EQ(report.get(200), -1);
	EXPECT_EQ(full.reserve(1).err, ENOSPC); // nor may a newcomer
	ASSERT_EQ(full.unreserve(4), 0);
	EXPECT_EQ(report.get(), 6); // "big" first ...
	EXPECT_EQ(report.get(200), -1);
	ASSERT_EQ(full.unreserve(2), 0);
	EXPECT_EQ(report.get(), 2); // ... then "small"
	EXPECT_EQ(hqd_used(), 24u);

	// A timed reservation times out and leaves no trace.
	Dev t;
	auto r = t.reserve(3, GPUSLOT_RESERVE_DEADLINE, 50'000'000);
	EXPECT_EQ(r.err, ETIMEDOUT);
	EXPECT_EQ(domain_file("hqd_waiters"), "0\n");
	EXPECT_EQ(hqd_used(), 24u);
	// And one served within its deadline succeeds.
	Pipe report_c, go_c;
	pid_t c = spawn_reserver(report_c, go_c, "timed", 3,
				 GPUSLOT_RESERVE_DEADLINE, 30'000'000'000ULL);
	ASSERT_TRUE(wait_queue_waiters(1));
	go_a.put(1);
	expect_child_ok(a);
	EXPECT_EQ(report_c.get(), 3);
	go_b.put(1);
	go_c.put(1);
	expect_child_ok(b);
	expect_child_ok(c);
	ASSERT_EQ(full.unreserve(16), 0);

	// Bad requests change nothing.
	EXPECT_EQ(t.reserve(0).err, EINVAL);
	EXPECT_EQ(t.reserve(GPUSLOT_MAX_HQD + 1).err, EINVAL);
	EXPECT_EQ(t.reserve(1, GPUSLOT_RESERVE_WAIT | GPUSLOT_RESERVE_DEADLINE).err,
		  EINVAL);
	EXPECT_EQ(t.reserve(1, 0, 5).err, EINVAL);
	EXPECT_EQ(t.reserve(1, 1u << 5).err, EINVAL);
	EXPECT_EQ(hqd_used(), 0u);
}

// A waiting reservation's deadline is absolute: SA_RESTART signals every
// 50 ms restart the wait (the module; on the socket they do not interrupt
// it) and it ends with ETIMEDOUT at the deadline; a deadline already past
// tries once; without SA_RESTART the first signal ends the wait with EINTR.
TEST_F(Hqd, AReservationDeadlineSurvivesSignalsAndAPastOneTriesOnce)
{
	Dev full;
	ASSERT_EQ(full.reserve(24).err, 0);
	auto reserve_under_signals = [](int sa_flags, uint64_t timeout_ns) {
		return spawn([sa_flags, timeout_ns] {
			Dev x;
			gpuslot_reserve_queues r{};
			r.size = sizeof(r);
			r.flags = GPUSLOT_RESERVE_DEADLINE;
			r.count = 2;
			r.deadline_ns = deadline_after(timeout_ns);
			int eintr = 0, sent = 0;
			int err = under_signals(sa_flags, 50, [&] {
				for (;;) {
					int e = x.call(GPUSLOT_IOC_RESERVE_QUEUES, &r);
					if (e != EINTR || !sa_flags)
						return e;
					eintr++;
				}
			}, &sent);
			const uint64_t end = deadline_after(0);
			if (!sa_flags) {
				CHILD_REQUIRE(err == EINTR);
				CHILD_REQUIRE(end < r.deadline_ns);
				return 0;
			}
			CHILD_REQUIRE(err == ETIMEDOUT);
			CHILD_REQUIRE(eintr == 0);
			CHILD_REQUIRE(sent >= 2);
			CHILD_REQUIRE(end >= r.deadline_ns);
			// Generous for a loaded TCG guest; a wait that started
			// over at each signal would not end while they go on.
			CHILD_REQUIRE(end < r.deadline_ns + 4'000'000'000ULL);
			return 0;
		});
	};
	expect_child_ok(reserve_under_signals(SA_RESTART, 400'000'000));
	EXPECT_EQ(domain_file("hqd_waiters"), "0\n");
	EXPECT_EQ(hqd_used(), 24u);

	Dev t;
	gpuslot_reserve_queues r{};
	r.size = sizeof(r);
	r.flags = GPUSLOT_RESERVE_DEADLINE;
	r.count = 2;
	r.deadline_ns = deadline_after(0) - 1;
	EXPECT_EQ(t.call(GPUSLOT_IOC_RESERVE_QUEUES, &r), ETIMEDOUT);
	EXPECT_EQ(domain_file("hqd_waiters"), "0\n");
	ASSERT_EQ(full.unreserve(22), 0);
	EXPECT_EQ(t.call(GPUSLOT_IOC_RESERVE_QUEUES, &r), 0);
	EXPECT_EQ(r.reserved, 2u);
	ASSERT_EQ(full.reserve(20).err, 0);

	SKIP_ON_SOCKET("a signal does not interrupt a waiting RESERVE_QUEUES on the socket "
		       "(libgpuslot cancels only ACQUIRE's wait)");
	expect_child_ok(reserve_under_signals(0, 30'000'000'000ULL));
	EXPECT_EQ(domain_file("hqd_waiters"), "0\n");
	EXPECT_EQ(hqd_used(), 24u);
}

// 3. kill -9 of a reserving process returns its queues
TEST_F(Hqd, KilledReserverReturnsItsQueues)
{
	Pipe report, go, never;
	pid_t victim = spawn_reserver(report, never, "victim", 20);
	EXPECT_EQ(report.get(), 20);
	pid_t w = spawn_reserver(report, go, "waiter", 10, GPUSLOT_RESERVE_WAIT);
	Dev probe;
	ASSERT_TRUE(wait_queue_waiters(1));
	kill(victim, SIGKILL);
	EXPECT_EQ(wait_child(victim), 128 + SIGKILL);
	EXPECT_EQ(report.get(), 10); // the waiter got in
	EXPECT_EQ(hqd_used(), 10u);
	auto q = queues_by_pid();
	EXPECT_EQ(q.size(), 1u);
	EXPECT_EQ(q[w], 10u);
	go.put(1);
	expect_child_ok(w);
}

struct ChurnShared {
	std::atomic<int> in_use;
	std::atomic<int> max_in_use;
};

#define CHURN_REQUIRE(cond)						\
	do {								\
		if (!(cond))						\
			return -__LINE__;				\
	} while (0)

// Random reserve/unreserve on one file; returns what it keeps at the end,
// or -line of a failed check.
int churn(const Dev &d, ChurnShared *sh, int seed, int ops)
{
	std::mt19937 rng(seed);
	unsigned int mine = 0;
	for (int i = 0; i < ops; i++) {
		if (mine && rng() % 2) {
			unsigned int n = 1 + rng() % mine;
			sh->in_use -= n;
			CHURN_REQUIRE(d.unreserve(n) == 0);
			mine -= n;
			continue;
		}
		unsigned int n = 1 + rng() % 6;
		uint32_t flags = rng() % 2 ? GPUSLOT_RESERVE_DEADLINE : 0;
		auto r = d.reserve(n, flags, flags ? 2'000'000 : 0);
		if (r.err) {
			CHURN_REQUIRE(r.err == ENOSPC || r.err == ETIMEDOUT);
			continue;
		}
		mine += n;
		CHURN_REQUIRE(r.reserved == mine);
		CHURN_REQUIRE(r.used <= r.limit);
		int now = sh->in_use += n;
		int m = sh->max_in_use.load();
		while (now > m && !sh->max_in_use.compare_exchange_weak(m, now))
			;
	}
	return int(mine);
}

// 4. concurrent reserve/unreserve from 16 processes
TEST_F(Hqd, ConcurrentReservationsNeverExceedTheLimit)
{
	constexpr int kProcs = 16, kOps = 300;
	auto *sh = shared_new<ChurnShared>();
	Pipe done, go;
	std::vector<pid_t> kids;
	for (int p = 0; p < kProcs; p++)
		kids.push_back(spawn([sh, p, &done, &go] {
			// Report what is kept, or the failed line as -line.
			Dev d;
			int rc = churn(d, sh, p, kOps);
			done.put(rc);
			CHILD_REQUIRE(rc >= 0 && go.get(60000) == 1);
			return 0;
		}));
	int total = 0;
	for (int p = 0; p < kProcs; p++) {
		int mine = done.get(100000);
		ASSERT_GE(mine, 0) << "a child failed its check at line " << -mine;
		total += mine;
	}
	EXPECT_LE(sh->max_in_use.load(), 24);
	EXPECT_EQ(hqd_used(), unsigned(total));
	unsigned int sum = 0;
	for (auto &[pid, n] : queues_by_pid())
		sum += n;
	EXPECT_EQ(sum, hqd_used()); // hqd_used equals the sum of "queues"
	for (int p = 0; p < kProcs; p++)
		go.put(1);
	for (pid_t pid : kids)
		expect_child_ok(pid);
	EXPECT_EQ(hqd_used(), 0u);
}

// 5. lowering and raising hqd_limit under load; bad values
TEST_F(Hqd, LimitCanBeLoweredAndRaisedUnderLoad)
{
	Dev a, b;
	ASSERT_EQ(a.reserve(20).err, 0);
	ASSERT_EQ(write_attr(0, "hqd_limit", "10"), 0);
	EXPECT_EQ(domain_file("hqd_limit"), "10\n");
	EXPECT_EQ(hqd_used(), 20u); // nothing is revoked
	EXPECT_EQ(b.reserve(1).err, ENOSPC);

	Pipe report, go;
	pid_t w = spawn_reserver(report, go, "waiter", 2, GPUSLOT_RESERVE_WAIT);
	ASSERT_TRUE(wait_queue_waiters(1));
	ASSERT_EQ(a.unreserve(11), 0); // 9 used: 1 free, the waiter needs 2
	EXPECT_EQ(report.get(200), -1);
	ASSERT_EQ(write_attr(0, "hqd_limit", "11"), 0);
	EXPECT_EQ(report.get(), 2);
	EXPECT_EQ(hqd_used(), 11u);

	for (const char *bad : {"0", "1025", "abc", "-3", "\n", "24 "})
		EXPECT_EQ(write_attr(0, "hqd_limit", bad), EINVAL)
			<< bad;
	EXPECT_EQ(domain_file("hqd_limit"), "11\n");
	expect_child_ok(spawn([] {
		CHILD_REQUIRE(setresuid(65534, 65534, 65534) == 0);
		CHILD_REQUIRE(write_attr(0, "hqd_limit", "30") ==
			      EACCES);
		return 0;
	}));
	ASSERT_EQ(write_attr(0, "hqd_limit", "1024"), 0);
	EXPECT_EQ(b.reserve(1000).err, 0);
	go.put(1);
	expect_child_ok(w);
	EXPECT_EQ(a.unreserve(9), 0);
	EXPECT_EQ(b.unreserve(1000), 0);
	EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
}

// Defect 5: a request for more than the limit could never be served and
// would block every request behind it: refused at once; and a waiting
// request that a lowered limit makes impossible fails.
TEST_F(Hqd, RequestsOverTheLimitNeverBlockTheQueue)
{
	Dev a;
	for (uint32_t flags : {0u, unsigned(GPUSLOT_RESERVE_WAIT)}) {
		EXPECT_EQ(a.reserve(25, flags).err, EINVAL);
		EXPECT_EQ(a.reserve(GPUSLOT_MAX_HQD, flags).err, EINVAL);
	}
	EXPECT_EQ(a.reserve(25, GPUSLOT_RESERVE_DEADLINE, 200'000'000).err, EINVAL);
	EXPECT_EQ(hqd_used(), 0u);
	EXPECT_EQ(domain_file("hqd_waiters"), "0\n");

	// Two waiters behind a holder of 20: one for 10, one for 4.
	ASSERT_EQ(a.reserve(20).err, 0);
	Pipe r10, r4, go;
	pid_t w10 = spawn_reserver(r10, go, "big", 10, GPUSLOT_RESERVE_DEADLINE,
				   20'000'000'000ULL);
	ASSERT_TRUE(wait_queue_waiters(1));
	pid_t w4 = spawn_reserver(r4, go, "small", 4, GPUSLOT_RESERVE_DEADLINE,
				  20'000'000'000ULL);
	ASSERT_TRUE(wait_queue_waiters(2));
	// Limit 8: the request for 10 can never fit and fails now; the one
	// for 4 still waits for the holder.
	ASSERT_EQ(write_attr(0, "hqd_limit", "8"), 0);
	EXPECT_EQ(r10.get(2000), -ENOSPC);
	EXPECT_EQ(r4.get(200), -1);
	EXPECT_EQ(domain_file("hqd_waiters"), "1\n");
	ASSERT_EQ(a.unreserve(20), 0);
	EXPECT_EQ(r4.get(), 4);
	go.put(1);
	go.put(1);
	expect_child_ok(w10);
	expect_child_ok(w4);
	EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
}

} // namespace
} // namespace gpuslot::test
