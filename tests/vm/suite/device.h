// SPDX-License-Identifier: GPL-2.0
// Helpers for the VM suite: /dev/gpuslot, sysfs, processes, kernel log.
#pragma once

#include <linux/gpuslot.h>
#include <gpuslot_wire.h>
#include <sys/types.h>

#include <gtest/gtest.h>

#include "lock_file.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <string>
#include <vector>

namespace gpuslot::test {

// A domain's layout as SET_LAYOUT takes it and GET_LAYOUT returns it.
struct Layout {
	uint32_t k = 1;
	uint32_t unit_kind = GPUSLOT_UNIT_NONE;
	uint32_t unit_size = 0;
	uint32_t nr_units = 0;
	uint32_t hqd_limit = 0;
	std::vector<gpuslot_partition> partitions;
	// Slot i's priority, 0 .. GPUSLOT_MAX_SLOT_PRIORITY (zero from k on).
	uint8_t priority[GPUSLOT_MAX_SLOTS] = {};
	uint64_t generation = 0; // out
};

// An AMD CU layout of @nr_units CUs; one partition per mask (0 = whole).
Layout cu_layout(uint32_t nr_units, const std::vector<uint64_t> &masks);
// A partition of units [first, first + count).
gpuslot_partition unit_range(unsigned int first, unsigned int count);

// The suite runs on either transport (GPUSLOT_TEST_TRANSPORT=device, the
// default, or socket): the same tests, the same expectations. On the socket
// main.cc starts gpuslotd's lock server first, in GPUSLOT_SOCKET_DIR.
bool on_socket();
// Skip a test (or the rest of one) that only one transport can run: the
// reason says why it does not apply.
#define SKIP_ON_SOCKET(why)						\
	do {								\
		if (gpuslot::test::on_socket())				\
			GTEST_SKIP() << "socket transport: " << why;	\
	} while (0)

// The hardware-queue budget a domain starts with (GPUSLOT_DEFAULT_HQD_LIMIT
// in kmod/lockcore/budget.h, kDefaultHqdLimit in the lock server): AMD's number,
// which left the uapi in API 2.
constexpr unsigned int kDefaultHqdLimit = 24;

// CLOCK_MONOTONIC now + @timeout_ns, saturating at UINT64_MAX (waits
// forever): the deadline the ioctls take for a test's relative timeout.
uint64_t deadline_after(uint64_t timeout_ns);

// One open file of /dev/gpuslot, or one connection to gpuslotd's socket;
// every call returns 0 or an errno.

class Dev {
public:
	Dev();
	Dev(const Dev &) = delete;
	Dev &operator=(const Dev &) = delete;
	~Dev();

	int fd() const;
	void close();
	// Any command, as ioctl(2) on the device takes it: 0 or errno.
	int call(unsigned long cmd, void *arg) const;
	LockFile &file() const { return *file_; }

	struct Acquired {
		int err;
		unsigned int slot;
		uint64_t generation;
	};
	Acquired acquire(uint32_t flags = 0, uint64_t timeout_ns = 0,
			 uint64_t mask = 0) const;
	Acquired try_acquire(uint64_t mask = 0) const
	{
		return acquire(GPUSLOT_ACQUIRE_TRY, 0, mask);
	}
	int release(unsigned int *slot = nullptr) const;
	// ACQUIRE_ASYNC, ACQUIRE_COMPLETE and ACQUIRE_CANCEL.
	int acquire_async(uint64_t mask = 0) const;
	Acquired complete() const;
	int cancel(unsigned int *slot = nullptr) const;
	// poll() for POLLIN for up to @timeout_ms: true if readable.
	bool readable(int timeout_ms = 0) const;

	struct Reserved {
		int err;
		unsigned int reserved; // this file's total
		unsigned int used;     // the domain's total
		unsigned int limit;
	};
	Reserved reserve(unsigned int count, uint32_t flags = 0,
			 uint64_t timeout_ns = 0) const;
	int unreserve(unsigned int count) const;
	int attach(unsigned int domain) const;
	int set_k(unsigned int k, uint64_t *generation = nullptr) const;
	// SET_LAYOUT with nr_partitions = l.partitions.size(); sets l.generation.
	int set_layout(Layout &l) const;
	// GET_LAYOUT with room for @room partitions.
	int get_layout(Layout &l, unsigned int room = GPUSLOT_MAX_SLOTS) const;
	gpuslot_domain_info info() const;
	gpuslot_stats stats() const;
	// This file's fdinfo (/proc/self/fdinfo/<fd>, or the socket's
	// "fdinfo" of this connection): its gpuslot-* keys.
	std::map<std::string, std::string> fdinfo() const;

private:
	std::unique_ptr<LockFile> file_;
};

// In a forked child: run @call on this thread while another thread sends
// it SIGUSR1 every @every_ms, caught by a handler installed with @sa_flags
// (SA_RESTART or 0; it stays installed). Returns what @call returns; sets
// *@sent to the signals sent meanwhile.
int under_signals(int sa_flags, int every_ms, const std::function<int()> &call,
		  int *sent = nullptr);

// Raw ioctl on @fd: 0 or errno.
int ioctl_errno(int fd, unsigned long cmd, void *arg);

// The module's file of a domain attribute: /sys/class/gpuslot/gpu<domain>/<attr>
// ("k", "stats/contended", "slot3/units", ...), or for "debug/<table>"
// /sys/kernel/debug/gpuslot/gpu<domain>/<table>. The socket serves the same
// names (GPUSLOT_WIRE_ATTR_READ/WRITE), so tests name attributes only so.
std::string sysfs_path(unsigned int domain, const std::string &attr);
// A domain attribute's text (sysfs, debugfs, or the socket's
// GPUSLOT_WIRE_ATTR_READ); "" if it cannot be read.
std::string read_attr(unsigned int domain, const std::string &attr);
// The same with the read's errno: 0 or the errno of the open or read.
int read_attr_err(unsigned int domain, const std::string &attr, std::string *text);
// Write it: 0 or the errno sysfs (or the socket) gives.
int write_attr(unsigned int domain, const std::string &attr, const std::string &text);

// A bitmap of @nr_bits bits (@words, least significant first) as the
// kernel's "%*pb" prints it: comma-separated 32-bit groups of hex, the
// first as wide as its bits need.
std::string bitmap_text(const std::vector<uint64_t> &words, unsigned int nr_bits);
// A "%*pb" text as "0x" and hex digits without leading zeros ("0x0" for
// none); "all" stays "all".
std::string bitmap_hex(const std::string &pb);
// The slots' partitions below k, one line "<slot> <all|0xhex>" each, read
// from slot<i>/units.
std::string partitions_text(unsigned int domain = 0);
// "<unit_kind> <nr_units> <unit_size>\n" from the three files.
std::string units_text(unsigned int domain = 0);
// Stage "<slot> <all|0xhex>" lines into slot<i>/units and commit them with
// the generation read before: 0 or the first errno (a write's or commit's).
int stage_partitions(unsigned int domain, const std::string &lines);
// The "gpuslot-*" lines of an open file's fdinfo, key -> value.
std::map<std::string, std::string> parse_fdinfo(const std::string &text);
std::string read_file(const std::string &path);
// 0 or the errno of the open() or write().
int write_file(const std::string &path, const std::string &text);
std::vector<std::string> split_lines(const std::string &text);
std::vector<std::string> split_words(const std::string &line);

// Poll @pred every millisecond for up to @timeout_ms.
bool wait_until(const std::function<bool()> &pred, int timeout_ms = 10000);
bool wait_waiters(unsigned int n, unsigned int domain = 0);

// fork(), from a process of one thread only: a child forked beside
// another thread inherits the locks that thread held at that instant with
// nobody to release them (issue 38: a unit test's child deadlocked so).
// Throws, naming the count, where the process has other threads.
pid_t fork_one_thread();
// fork_one_thread() and run @fn in the child, which exits with its return
// value.
pid_t spawn(const std::function<int()> &fn);
// The child's exit status, or 128 + the signal that killed it.
int wait_child(pid_t pid);
// Send @sig to child @pid every 20 ms until it has exited (left to be
// reaped), for up to @timeout_ms: false if it did not. On the socket a wait
// is the caller's recv(), and gpuslotd counts the waiter once its message
// is in, so one signal may come before the caller is in recv() and
// interrupt nothing.
bool signal_until_exited(pid_t pid, int sig, int timeout_ms = 20000);

// A pipe for small integers between processes; reads time out.
class Pipe {
public:
	Pipe();
	~Pipe();
	void put(int value) const;
	// The next value, or -1 after @timeout_ms.
	int get(int timeout_ms = 10000) const;

private:
	int fd_[2];
};

// Memory shared with forked children.
void *shared_alloc(size_t size);
template <class T> T *shared_new()
{
	return new (shared_alloc(sizeof(T))) T();
}

// Lines of the kernel log that name a bug: BUG:, WARNING:, Oops, Call Trace.
std::vector<std::string> kernel_log_problems();

struct Sched {
	uint32_t policy;
	uint32_t priority;
	int32_t nice;
	uint64_t flags;
};
Sched get_sched(pid_t tid = 0);
// @flags: SCHED_FLAG_RESET_ON_FORK or 0.
int set_sched(uint32_t policy, uint32_t priority, int32_t nice, uint64_t flags = 0);

// A forked child reports the source line of its first failed check here.
int *child_failed_line();
#define CHILD_REQUIRE(cond)						\
	do {								\
		if (!(cond)) {						\
			*gpuslot::test::child_failed_line() = __LINE__;	\
			return 1;					\
		}							\
	} while (0)

// Holders run SCHED_FIFO: always on the module; on the socket only where
// gpuslotd has CAP_SYS_NICE.
bool boost_available();
// The highest boost_priority the module accepts on this kernel
// (/sys/class/misc/gpuslot/boost_priority_limit): GPUSLOT_MAX_BOOST_PRIORITY,
// or 1 where the kernel does not export sched_setattr_nocheck() (5.10,
// kmod/compat.h: the boost is SCHED_FIFO 1, for threads with CAP_SYS_NICE
// whose own policy is SCHED_NORMAL). gpuslotd's socket transport has no
// such limit.
unsigned int boost_priority_limit();
// Whether this is such a kernel, and the boost_priority a domain starts at.
bool boost_limited();
unsigned int default_boost_priority();
// A test of what such a kernel does not have (boost priorities but 1, a
// boost that keeps reset-on-fork) is skipped there, saying why.
#define SKIP_WHERE_BOOST_LIMITED(why)					\
	do {								\
		if (gpuslot::test::boost_limited())			\
			GTEST_SKIP() << "this kernel boosts at SCHED_FIFO 1 only: " << why; \
	} while (0)
// The boost budget is the member's (issue 38): root's for every test the
// suite runs as root. One boosted hold at max_boost_share 100 (no budget)
// settles root's account to full, so that what an earlier test spent does
// not leave a test that expects a boost unboosted; the default share is
// put back.
void refill_root_boost_budget();

// Reset domain @domain to k = 1, the default boost priority, max_hold_ms
// and hqd_limit.
void reset_domain(unsigned int domain = 0);

// A test of domain 0: it starts reset; it ends with no holder and no
// waiter left, the domain reset, and no bug in the kernel log.
class DomainTest : public testing::Test {
protected:
	void SetUp() override;
	void TearDown() override;
	// A forked child's exit status 0, or the line of its failed check.
	static void expect_child_ok(pid_t pid);
};

// insmod gpuslot.ko (GPUSLOT_KO) with @params, and rmmod: 0 or errno.
int load_module(const std::string &params);
int unload_module();

// Run on CPU @cpu only: 0 or errno.
int pin_to_cpu(int cpu);

// A SCHED_FIFO thread that keeps CPU @cpu busy until @stop is set or
// @max_ms pass; RT throttling is off while any runs, so that nothing but a
// higher RT priority gets that CPU.
class CpuHog {
public:
	CpuHog(int cpu, unsigned int prio, const std::atomic<bool> &stop,
	       int max_ms);
	~CpuHog();
	// Wait for the hog to stop; true if @stop ended it, not the clock.
	bool join();

private:
	std::thread thread_;
	std::atomic<bool> started_{false}, stopped_by_flag_{false};
	std::string saved_runtime_;
};

} // namespace gpuslot::test
