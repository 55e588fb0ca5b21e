// SPDX-License-Identifier: GPL-2.0
// The module's threat model (docs/device.md, "Threat model"): what a member
// of group gpuslot can make the kernel hold, and that root of a user
// namespace is no admin.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "device.h"

namespace gpuslot::test {
namespace {

// Waiters a domain queues, of each kind, and of them one user's
// (docs/device.md, "Bounds").
constexpr unsigned int kMaxWaiters = 1024;
constexpr unsigned int kMaxWaitersPerUser = 256;
constexpr unsigned int kUsersToFill = kMaxWaiters / kMaxWaitersPerUser;
// The unprivileged member the tests become, as the other suites do.
constexpr uid_t kMember = 65534;

int become_member()
{
	if (setresgid(kMember, kMember, kMember) || setresuid(kMember, kMember, kMember))
		return errno;
	return 0;
}

// Become the @i-th member, uid kMember - i (the waiter bound counts the
// real uid). Each member is a process of its own: setresuid() in a process
// whose threads wait would interrupt their waits (glibc signals every
// thread to change its credentials) and restart them at the back.
int become_nth_member(unsigned int i)
{
	const uid_t uid = kMember - i;
	if (setresgid(kMember, kMember, kMember) || setresuid(uid, uid, uid))
		return errno;
	return 0;
}

// The exit status of child @pid, or -1 if it ran @ms longer (then killed:
// a request past the bound would sleep).
int wait_child_for(int ms, pid_t pid)
{
	int status = 0;
	if (wait_until([&] { return waitpid(pid, &status, WNOHANG) == pid; }, ms))
		return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

int raise_nofile(rlim_t n)
{
	rlimit r{n, n};
	return setrlimit(RLIMIT_NOFILE, &r) ? errno : 0;
}

// Whether the kernel log has a line that contains @text.
bool kernel_log_has(const std::string &text)
{
	int len = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0);
	std::string buf(len > 0 ? len : 1 << 20, '\0');
	len = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf.data(), buf.size());
	buf.resize(len > 0 ? len : 0);
	return buf.find(text) != std::string::npos;
}

class Bounds : public DomainTest {};

// Members fill a domain's lock queue with sleeping and asynchronous
// waiters, each its own share: the next waiter, anyone's, is refused with
// ENOSPC at once (TRY still says EAGAIN: it never queues), the refused
// file stays idle, a waiter that leaves makes room, and closing the files
// leaves nothing.
TEST_F(Bounds, LockWaitersOfADomainAreBounded)
{
	SKIP_ON_SOCKET("the module's per-domain bound; gpuslotd bounds connections per member");
	Dev holder, root_file;
	ASSERT_EQ(holder.acquire().err, 0);

	Pipe full, go, fillers_queued, fillers_go;
	pid_t member = spawn([&] {
		CHILD_REQUIRE(raise_nofile(kMaxWaitersPerUser + 256) == 0);
		std::vector<std::unique_ptr<Dev>> files;
		for (unsigned int i = 0; i <= kMaxWaitersPerUser; i++)
			files.push_back(std::make_unique<Dev>());
		CHILD_REQUIRE(become_nth_member(0) == 0);
		// One thread sleeps in ACQUIRE, the rest of the queue is async.
		auto *slept = new std::atomic<int>(-1);
		std::thread([slept, &files] { *slept = files[0]->acquire().err; }).detach();
		CHILD_REQUIRE(wait_waiters(1));
		for (unsigned int i = 1; i < kMaxWaitersPerUser; i++)
			CHILD_REQUIRE(files[i]->acquire_async() == 0);
		full.put(0);
		// The other members fill the rest.
		CHILD_REQUIRE(go.get(60000) == 0);
		CHILD_REQUIRE(holder.info().nr_waiters == kMaxWaiters);

		Dev &extra = *files[kMaxWaitersPerUser];
		CHILD_REQUIRE(extra.acquire_async() == ENOSPC);
		CHILD_REQUIRE(extra.acquire().err == ENOSPC);
		CHILD_REQUIRE(extra.acquire(GPUSLOT_ACQUIRE_DEADLINE, 1000000000).err == ENOSPC);
		CHILD_REQUIRE(extra.try_acquire().err == EAGAIN);
		// Refused, not queued: nothing to cancel or complete.
		CHILD_REQUIRE(extra.cancel() == EPERM);
		CHILD_REQUIRE(extra.complete().err == EPERM);
		CHILD_REQUIRE(holder.info().nr_waiters == kMaxWaiters);
		full.put(1);
		CHILD_REQUIRE(go.get() == 1);

		// One leaves, one more fits.
		CHILD_REQUIRE(files[1]->cancel() == 0);
		CHILD_REQUIRE(extra.acquire_async() == 0);
		CHILD_REQUIRE(extra.acquire_async() == EBUSY);
		full.put(2);
		CHILD_REQUIRE(go.get() == 2);
		// The holder released: the sleeper, first in the queue, has it.
		CHILD_REQUIRE(wait_until([slept] { return *slept != -1; }));
		CHILD_REQUIRE(*slept == 0);
		CHILD_REQUIRE(files[0]->release() == 0);
		return 0; // closing every file leaves the queue
	});
	std::vector<pid_t> fillers;
	auto stop = [&](const std::string &why) {
		kill(member, SIGKILL);
		for (pid_t f : fillers)
			kill(f, SIGKILL);
		const int status = wait_child(member);
		for (pid_t f : fillers)
			wait_child(f);
		return why + ": child status " + std::to_string(status) + ", failed check at line " +
		       std::to_string(*child_failed_line());
	};
	if (full.get(30000) != 0)
		FAIL() << stop("the first member could not queue its share");
	for (unsigned int u = 1; u < kUsersToFill; u++) {
		fillers.push_back(spawn([&, u] {
			CHILD_REQUIRE(raise_nofile(kMaxWaitersPerUser + 256) == 0);
			std::vector<std::unique_ptr<Dev>> files;
			for (unsigned int i = 0; i < kMaxWaitersPerUser; i++)
				files.push_back(std::make_unique<Dev>());
			CHILD_REQUIRE(become_nth_member(u) == 0);
			for (auto &f : files)
				CHILD_REQUIRE(f->acquire_async() == 0);
			fillers_queued.put(int(u));
			CHILD_REQUIRE(fillers_go.get(120000) == 1);
			return 0;
		}));
		if (fillers_queued.get(30000) != int(u))
			FAIL() << stop("member " + std::to_string(u) + " could not queue its share");
	}
	go.put(0);
	if (full.get(30000) != 1)
		FAIL() << stop("the members could not fill the queue and see ENOSPC");
	// The bound is the domain's: root's waiter is refused too.
	EXPECT_EQ(root_file.acquire_async(), ENOSPC);
	EXPECT_EQ(root_file.acquire(GPUSLOT_ACQUIRE_DEADLINE, 1000000).err, ENOSPC);
	// The log says why, and whose call it was.
	EXPECT_TRUE(kernel_log_has("gpuslot: gpu0: 1024 waiters queued, the most a domain takes: "
				   "ENOSPC for pid " + std::to_string(member) + "\n"));
	// The table is whole, however long: no page cut, no "... N more".
	auto waiters = split_lines(read_attr(0, "debug/waiters"));
	EXPECT_EQ(waiters.size(), size_t(kMaxWaiters));
	go.put(1);
	ASSERT_EQ(full.get(), 2);
	EXPECT_EQ(holder.info().nr_waiters, kMaxWaiters);
	EXPECT_EQ(holder.release(), 0);
	go.put(2);
	expect_child_ok(member);
	for (pid_t f : fillers) {
		fillers_go.put(1);
		(void)f;
	}
	for (pid_t f : fillers)
		expect_child_ok(f);

	// Nothing left behind: an empty queue, a free slot at once.
	EXPECT_TRUE(wait_until([&] { return holder.info().nr_waiters == 0; }));
	EXPECT_EQ(read_attr(0, "debug/waiters"), "");
	EXPECT_EQ(read_attr(0, "debug/holders"), "");
	auto again = root_file.try_acquire();
	EXPECT_EQ(again.err, 0);
	EXPECT_EQ(again.slot, 0u);
	EXPECT_EQ(root_file.release(), 0);
}

// Issue 38: one user queues at most kMaxWaitersPerUser waiters in a
// domain's lock queue. A member's flood is refused there, and leaves room
// for everyone else's waiters: another member's, and root's.
TEST_F(Bounds, OneUsersFloodOfWaitersLeavesRoomForOthers)
{
	SKIP_ON_SOCKET("the module's per-user bound; gpuslotd bounds connections per member");
	Dev holder, root_file;
	ASSERT_EQ(holder.acquire().err, 0);

	Pipe full, go;
	pid_t member = spawn([&] {
		CHILD_REQUIRE(raise_nofile(kMaxWaitersPerUser + 256) == 0);
		std::vector<std::unique_ptr<Dev>> files;
		for (unsigned int i = 0; i <= kMaxWaitersPerUser; i++)
			files.push_back(std::make_unique<Dev>());
		CHILD_REQUIRE(become_member() == 0);
		unsigned int queued = 0;
		while (queued <= kMaxWaitersPerUser && files[queued]->acquire_async() == 0)
			queued++;
		CHILD_REQUIRE(queued == kMaxWaitersPerUser);
		Dev &extra = *files[kMaxWaitersPerUser];
		CHILD_REQUIRE(extra.acquire().err == ENOSPC);
		CHILD_REQUIRE(extra.acquire(GPUSLOT_ACQUIRE_DEADLINE, 1000000000).err == ENOSPC);
		CHILD_REQUIRE(holder.info().nr_waiters == kMaxWaitersPerUser);
		full.put(1);
		CHILD_REQUIRE(go.get() == 1);
		return 0;
	});
	if (full.get(30000) != 1) {
		kill(member, SIGKILL);
		const int status = wait_child(member);
		FAIL() << "the member's flood was not cut at its share: child status " << status
		       << ", failed check at line " << *child_failed_line();
	}
	EXPECT_TRUE(kernel_log_has("gpuslot: gpu0: uid 65534 has 256 waiters queued, the most a "
				   "user takes: ENOSPC for pid " + std::to_string(member) + "\n"));
	// Another member queues, sleeping and asynchronously.
	expect_child_ok(spawn([] {
		Dev d;
		CHILD_REQUIRE(become_nth_member(1) == 0);
		CHILD_REQUIRE(d.acquire(GPUSLOT_ACQUIRE_DEADLINE, 50000000).err == ETIMEDOUT);
		CHILD_REQUIRE(d.acquire_async() == 0);
		CHILD_REQUIRE(d.cancel() == 0);
		return 0;
	}));
	EXPECT_EQ(root_file.acquire_async(), 0);
	EXPECT_EQ(root_file.cancel(), 0);
	go.put(1);
	expect_child_ok(member);
	EXPECT_TRUE(wait_until([&] { return holder.info().nr_waiters == 0; }));
	EXPECT_EQ(holder.release(), 0);
}

struct ReserveThread {
	const Dev *dev;
	std::atomic<int> *started;
};

void *reserve_and_wait(void *arg)
{
	auto *t = static_cast<ReserveThread *>(arg);
	t->started->fetch_add(1);
	t->dev->reserve(1, GPUSLOT_RESERVE_WAIT);
	return nullptr;
}

// The same for RESERVE_QUEUES: any number of threads of one file may wait
// for queues; the domain queues kMaxWaiters of them (kMaxWaitersPerUser
// of one user's), and refuses the next waiting request with ENOSPC.
// Killing the members empties the queue.
TEST_F(Bounds, QueueWaitersOfADomainAreBounded)
{
	SKIP_ON_SOCKET("the module's per-domain bound; gpuslotd bounds connections per member");
	Dev budget, root_file;
	ASSERT_EQ(budget.reserve(kDefaultHqdLimit).err, 0);
	auto waiting = [] { return read_attr(0, "hqd_waiters"); };

	// Each member's kMaxWaitersPerUser threads wait; the first member's
	// next request is refused, its share being full.
	Pipe queued;
	std::vector<pid_t> members;
	for (unsigned int u = 0; u < kUsersToFill; u++) {
		members.push_back(spawn([&, u] {
			Dev d;
			CHILD_REQUIRE(become_nth_member(u) == 0);
			std::atomic<int> started{0};
			std::vector<ReserveThread> args(kMaxWaitersPerUser, ReserveThread{&d, &started});
			pthread_attr_t attr;
			pthread_attr_init(&attr);
			pthread_attr_setstacksize(&attr, 64 * 1024);
			for (auto &arg : args) {
				pthread_t t;
				CHILD_REQUIRE(pthread_create(&t, &attr, reserve_and_wait, &arg) == 0);
			}
			const std::string want = std::to_string((u + 1) * kMaxWaitersPerUser) + "\n";
			CHILD_REQUIRE(wait_until([&] { return waiting() == want; }, 60000));
			if (u == 0)
				CHILD_REQUIRE(d.reserve(1, GPUSLOT_RESERVE_DEADLINE, 1000000000).err == ENOSPC);
			queued.put(int(u));
			pause();
			return 0;
		}));
		if (queued.get(60000) != int(u))
			break;
	}
	// The next waiting request, anyone's, is refused: a user with none.
	const int refused_status = members.size() == kUsersToFill && waiting() == std::to_string(kMaxWaiters) + "\n" ?
		wait_child_for(10000, spawn([&] {
			Dev d;
			CHILD_REQUIRE(become_nth_member(kUsersToFill) == 0);
			CHILD_REQUIRE(d.reserve(1, GPUSLOT_RESERVE_WAIT).err == ENOSPC);
			CHILD_REQUIRE(d.reserve(1, GPUSLOT_RESERVE_DEADLINE, 1000000000).err == ENOSPC);
			CHILD_REQUIRE(d.reserve(1).err == ENOSPC);
			CHILD_REQUIRE(waiting() == std::to_string(kMaxWaiters) + "\n");
			return 0;
		})) : -1;
	const int failed_line = *child_failed_line();
	if (refused_status == 0) {
		EXPECT_TRUE(kernel_log_has("gpuslot: gpu0: uid 65534 has 256 queue reservations waiting, "
					   "the most a user takes: ENOSPC for pid " +
					   std::to_string(members[0]) + "\n"));
		EXPECT_TRUE(kernel_log_has("gpuslot: gpu0: 1024 queue reservations waiting, the most a "
					   "domain takes: ENOSPC for pid "));
		EXPECT_EQ(root_file.reserve(1, GPUSLOT_RESERVE_DEADLINE, 1000000).err, ENOSPC);
		EXPECT_EQ(waiting(), std::to_string(kMaxWaiters) + "\n");
	}
	for (pid_t m : members)
		kill(m, SIGKILL);
	for (pid_t m : members)
		EXPECT_EQ(wait_child(m), 128 + SIGKILL) << "line " << failed_line;
	ASSERT_EQ(members.size(), kUsersToFill) << "a member's threads did not all wait; line " << failed_line;
	ASSERT_EQ(refused_status, 0) << "the waiter past the bound was not refused at once; line " << failed_line;
	EXPECT_EQ(waiting(), "0\n");
	EXPECT_EQ(budget.unreserve(kDefaultHqdLimit), 0);
	EXPECT_EQ(read_attr(0, "hqd_used"), "0\n");
	EXPECT_EQ(read_attr(0, "debug/queues"), "");
	EXPECT_EQ(root_file.reserve(1, GPUSLOT_RESERVE_WAIT).err, 0);
	EXPECT_EQ(root_file.unreserve(1), 0);
}

// Write @text to @path: 0 or errno.
int write_proc(const char *path, const std::string &text)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	int err = write(fd, text.data(), text.size()) == ssize_t(text.size()) ? 0 : errno;
	close(fd);
	return err;
}

// The effective capabilities of the calling thread, in its own namespace.
uint64_t effective_caps()
{
	__user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
	__user_cap_data_struct data[2]{};
	if (syscall(SYS_capget, &hdr, data))
		return 0;
	return data[0].effective | uint64_t(data[1].effective) << 32;
}

// An admin is CAP_SYS_ADMIN in the initial user namespace. A member that
// makes itself root of a user namespace of its own (every capability
// there) changes nothing: SET_K and SET_LAYOUT say EPERM, the sysfs files
// do not open for writing (EACCES: the VFS checks their 0644 root mode
// against the member's real uid), and a sysfs file that root opened for
// writing before handing it over is refused at the write (EPERM).
TEST_F(Bounds, RootOfAUserNamespaceIsNoAdmin)
{
	SKIP_ON_SOCKET("the module's check; the socket's admin check is gpuslotd's");
	constexpr int kNoUserns = 77;
	pid_t member = spawn([&] {
		Dev d;
		int k_fd = open(sysfs_path(0, "k").c_str(), O_WRONLY);
		CHILD_REQUIRE(k_fd >= 0);
		CHILD_REQUIRE(become_member() == 0);
		// Dropping root made the process undumpable, its /proc files
		// root's: a member's own process is dumpable.
		CHILD_REQUIRE(prctl(PR_SET_DUMPABLE, 1) == 0);
		if (unshare(CLONE_NEWUSER))
			return kNoUserns;
		CHILD_REQUIRE(write_proc("/proc/self/setgroups", "deny") == 0);
		CHILD_REQUIRE(write_proc("/proc/self/uid_map", "0 65534 1") == 0);
		CHILD_REQUIRE(write_proc("/proc/self/gid_map", "0 65534 1") == 0);
		CHILD_REQUIRE(getuid() == 0);
		CHILD_REQUIRE(effective_caps() & (1ULL << CAP_SYS_ADMIN));

		CHILD_REQUIRE(d.set_k(2) == EPERM);
		Layout l;
		l.k = 2;
		CHILD_REQUIRE(d.set_layout(l) == EPERM);
		for (const char *attr : {"k", "boost_priority", "max_hold_ms", "max_boost_share",
					 "hqd_limit", "pci_bus_id", "slot0/units", "slot0/priority",
					 "commit"})
			CHILD_REQUIRE(write_attr(0, attr, "2") == EACCES);
		CHILD_REQUIRE(write(k_fd, "2", 1) < 0 && errno == EPERM);
		// What any member may do still works.
		CHILD_REQUIRE(d.acquire().err == 0);
		CHILD_REQUIRE(d.release() == 0);
		return 0;
	});
	int status = wait_child(member);
	if (status == kNoUserns)
		GTEST_SKIP() << "this kernel allows no unprivileged user namespace";
	EXPECT_EQ(status, 0) << "child failed its check at line " << *child_failed_line();
	EXPECT_EQ(read_attr(0, "k"), "1\n");
	EXPECT_EQ(read_attr(0, "boost_priority"),
		  std::to_string(default_boost_priority()) + "\n");
}

const char kCgroupRoot[] = "/sys/fs/cgroup";

// The cgroup v2 hierarchy with the memory controller for children: "" or
// why there is none.
std::string memory_cgroups()
{
	if (access((std::string(kCgroupRoot) + "/cgroup.controllers").c_str(), F_OK) &&
	    mount("cgroup2", kCgroupRoot, "cgroup2", 0, nullptr))
		return std::string("cannot mount cgroup2: ") + strerror(errno);
	if (read_file(std::string(kCgroupRoot) + "/cgroup.controllers").find("memory") ==
	    std::string::npos)
		return "no memory controller";
	if (write_file(std::string(kCgroupRoot) + "/cgroup.subtree_control", "+memory"))
		return "cannot enable the memory controller";
	return "";
}

// What @files opens of @path cost a fresh memory cgroup, in bytes, or -1.
long long cost_of_opens(const char *path, int files)
{
	const std::string cg = std::string(kCgroupRoot) + "/gpuslot-bounds";
	auto *bytes = shared_new<long long>();
	*bytes = -1;
	if (mkdir(cg.c_str(), 0755))
		return -1;
	pid_t child = spawn([&] {
		// One CPU: only one CPU's charge cache (64 pages) blurs
		// memory.current.
		CHILD_REQUIRE(pin_to_cpu(0) == 0);
		CHILD_REQUIRE(raise_nofile(files + 256) == 0);
		CHILD_REQUIRE(write_file(cg + "/cgroup.procs", std::to_string(getpid())) == 0);
		// Grow the descriptor table and the vector first: the
		// measurement holds the opens alone.
		CHILD_REQUIRE(dup2(0, files + 64) == files + 64 && close(files + 64) == 0);
		std::vector<int> fds;
		fds.reserve(files);
		const std::string current = read_file(cg + "/memory.current");
		const long long before = std::stoll(current);
		for (int i = 0; i < files; i++) {
			fds.push_back(open(path, O_RDWR | O_CLOEXEC));
			CHILD_REQUIRE(fds.back() >= 0);
		}
		*bytes = std::stoll(read_file(cg + "/memory.current")) - before;
		return 0;
	});
	const int status = wait_child(child);
	// The exited child's charges go back as its files are freed.
	wait_until([&] { return rmdir(cg.c_str()) == 0; });
	return status == 0 ? *bytes : -1;
}

// What a member opens is charged to its memory cgroup: each open of
// /dev/gpuslot (its lock, async-waiter, boost and queue state) costs the
// opener's cgroup more than an open of /dev/null, which charges the struct
// file alone, by at least 256 bytes; with the allocation uncharged the two
// cost the same.
TEST_F(Bounds, OpenFilesAreChargedToTheOpenersMemoryCgroup)
{
	SKIP_ON_SOCKET("kernel memory accounting of the module");
	const std::string why = memory_cgroups();
	if (!why.empty())
		GTEST_SKIP() << why;
	constexpr int kFiles = 8192;
	const long long null_bytes = cost_of_opens("/dev/null", kFiles);
	const long long gpuslot_bytes = cost_of_opens("/dev/gpuslot", kFiles);
	ASSERT_GE(null_bytes, 0);
	ASSERT_GE(gpuslot_bytes, 0);
	printf("%d opens: /dev/null %lld bytes, /dev/gpuslot %lld bytes\n", kFiles,
	       null_bytes, gpuslot_bytes);
	EXPECT_GE(gpuslot_bytes - null_bytes, 256LL * kFiles)
		<< kFiles << " opens of /dev/null cost " << null_bytes
		<< " bytes, of /dev/gpuslot " << gpuslot_bytes;
}

} // namespace
} // namespace gpuslot::test
