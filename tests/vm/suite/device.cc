// SPDX-License-Identifier: GPL-2.0
#include "device.h"

#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gpuslot::test {

namespace {

// struct sched_attr of sched_setattr(2); glibc 2.36 has no declaration and
// <linux/sched/types.h> clashes with glibc's struct sched_param.
struct SchedAttr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
};

} // namespace

namespace {
void on_test_signal(int)
{
}
} // namespace

int under_signals(int sa_flags, int every_ms, const std::function<int()> &call, int *sent)
{
	struct sigaction sa = {};
	sa.sa_handler = on_test_signal;
	sa.sa_flags = sa_flags;
	sigaction(SIGUSR1, &sa, nullptr);
	std::atomic<bool> done{false};
	std::atomic<int> count{0};
	const pthread_t target = pthread_self();
	std::thread signaller([&] {
		while (!done.load()) {
			usleep(every_ms * 1000);
			if (done.load())
				break;
			pthread_kill(target, SIGUSR1);
			count++;
		}
	});
	const int ret = call();
	done = true;
	signaller.join();
	if (sent)
		*sent = count.load();
	return ret;
}

int ioctl_errno(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? errno : 0;
}

bool on_socket()
{
	static const bool socket = [] {
		const char *t = getenv("GPUSLOT_TEST_TRANSPORT");
		return t && !strcmp(t, "socket");
	}();
	return socket;
}

namespace {

std::unique_ptr<LockFile> open_domain(unsigned int domain)
{
	std::unique_ptr<LockFile> file;
	std::string error;
	const char *dir = getenv("GPUSLOT_SOCKET_DIR");
	if (on_socket() ? open_lock_file(Transport::socket, dir ? dir : "/run/gpuslot",
					 domain, &file, &error)
			: open_lock_file(Transport::device, "/dev/gpuslot", domain, &file,
					 &error))
		throw std::runtime_error(error);
	return file;
}

} // namespace

Dev::Dev() : file_(open_domain(0)) {}

Dev::~Dev() = default;

int Dev::fd() const
{
	return file_ ? file_->fd() : -1;
}

void Dev::close()
{
	file_.reset();
}

int Dev::call(unsigned long cmd, void *arg) const
{
	return file_ ? file_->call(cmd, arg) : EBADF;
}

// The tests speak relative timeouts; the ioctls take absolute
// CLOCK_MONOTONIC deadlines (saturating: UINT64_MAX waits forever).
uint64_t deadline_after(uint64_t timeout_ns)
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	const uint64_t now = uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
	return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

Dev::Acquired Dev::acquire(uint32_t flags, uint64_t timeout_ns,
			   uint64_t mask) const
{
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.flags = flags;
	a.deadline_ns = flags & GPUSLOT_ACQUIRE_DEADLINE ? deadline_after(timeout_ns) : timeout_ns;
	a.allowed_mask = mask;
	int err = call(GPUSLOT_IOC_ACQUIRE, &a);
	return {err, a.slot, a.generation};
}

int Dev::release(unsigned int *slot) const
{
	gpuslot_release r{};
	r.size = sizeof(r);
	int err = call(GPUSLOT_IOC_RELEASE, &r);
	if (slot)
		*slot = r.slot;
	return err;
}

int Dev::acquire_async(uint64_t mask) const
{
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.allowed_mask = mask;
	return call(GPUSLOT_IOC_ACQUIRE_ASYNC, &a);
}

Dev::Acquired Dev::complete() const
{
	gpuslot_acquire a{};
	a.size = sizeof(a);
	int err = call(GPUSLOT_IOC_ACQUIRE_COMPLETE, &a);
	return {err, a.slot, a.generation};
}

int Dev::cancel(unsigned int *slot) const
{
	gpuslot_release r{};
	r.size = sizeof(r);
	int err = call(GPUSLOT_IOC_ACQUIRE_CANCEL, &r);
	if (slot)
		*slot = r.slot;
	return err;
}

bool Dev::readable(int timeout_ms) const
{
	pollfd p = {fd(), POLLIN, 0};
	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

Dev::Reserved Dev::reserve(unsigned int count, uint32_t flags,
			   uint64_t timeout_ns) const
{
	gpuslot_reserve_queues r{};
	r.size = sizeof(r);
	r.flags = flags;
	r.deadline_ns = flags & GPUSLOT_RESERVE_DEADLINE ? deadline_after(timeout_ns) : timeout_ns;
	r.count = count;
	int err = call(GPUSLOT_IOC_RESERVE_QUEUES, &r);
	return {err, r.reserved, r.hqd_used, r.hqd_limit};
}

int Dev::unreserve(unsigned int count) const
{
	gpuslot_unreserve_queues u{};
	u.size = sizeof(u);
	u.count = count;
	return call(GPUSLOT_IOC_UNRESERVE_QUEUES, &u);
}

int Dev::attach(unsigned int domain) const
{
	gpuslot_attach a{};
	a.size = sizeof(a);
	a.domain = domain;
	return call(GPUSLOT_IOC_ATTACH, &a);
}

int Dev::set_k(unsigned int k, uint64_t *generation) const
{
	gpuslot_set_k s{};
	s.size = sizeof(s);
	s.k = k;
	int err = call(GPUSLOT_IOC_SET_K, &s);
	if (generation)
		*generation = s.generation;
	return err;
}

Layout cu_layout(uint32_t nr_units, const std::vector<uint64_t> &masks)
{
	Layout l;
	l.k = masks.size();
	l.unit_kind = GPUSLOT_UNIT_AMD_CU;
	l.unit_size = 1;
	l.nr_units = nr_units;
	for (uint64_t m : masks) {
		gpuslot_partition p{};
		p.units[0] = m;
		l.partitions.push_back(p);
	}
	return l;
}

gpuslot_partition unit_range(unsigned int first, unsigned int count)
{
	gpuslot_partition p{};
	for (unsigned int u = first; u < first + count; u++)
		p.units[u / 64] |= 1ULL << (u % 64);
	return p;
}

int Dev::set_layout(Layout &l) const
{
	gpuslot_layout a{};
	a.size = sizeof(a);
	a.k = l.k;
	a.unit_kind = l.unit_kind;
	a.unit_size = l.unit_size;
	a.nr_units = l.nr_units;
	a.hqd_limit = l.hqd_limit;
	a.nr_partitions = l.partitions.size();
	a.partitions = reinterpret_cast<uintptr_t>(l.partitions.data());
	memcpy(a.priority, l.priority, sizeof(a.priority));
	int err = call(GPUSLOT_IOC_SET_LAYOUT, &a);
	if (!err)
		l.generation = a.generation;
	return err;
}

int Dev::get_layout(Layout &l, unsigned int room) const
{
	std::vector<gpuslot_partition> parts(room);
	gpuslot_layout a{};
	a.size = sizeof(a);
	a.nr_partitions = room;
	a.partitions = reinterpret_cast<uintptr_t>(parts.data());
	int err = call(GPUSLOT_IOC_GET_LAYOUT, &a);
	if (err)
		return err;
	l.k = a.k;
	l.unit_kind = a.unit_kind;
	l.unit_size = a.unit_size;
	l.nr_units = a.nr_units;
	l.hqd_limit = a.hqd_limit;
	l.generation = a.generation;
	memcpy(l.priority, a.priority, sizeof(l.priority));
	parts.resize(std::min(room, a.k));
	l.partitions = parts;
	return 0;
}

gpuslot_domain_info Dev::info() const
{
	gpuslot_domain_info i{};
	i.size = sizeof(i);
	if (call(GPUSLOT_IOC_DOMAIN_INFO, &i))
		throw std::runtime_error("GPUSLOT_IOC_DOMAIN_INFO failed");
	return i;
}

gpuslot_stats Dev::stats() const
{
	gpuslot_stats s{};
	s.size = sizeof(s);
	if (call(GPUSLOT_IOC_GET_STATS, &s))
		throw std::runtime_error("GPUSLOT_IOC_GET_STATS failed");
	return s;
}

std::string sysfs_path(unsigned int domain, const std::string &attr)
{
	const std::string gpu = "gpu" + std::to_string(domain) + "/";
	if (attr.rfind("debug/", 0) == 0)
		return "/sys/kernel/debug/gpuslot/" + gpu + attr.substr(6);
	return "/sys/class/gpuslot/" + gpu + attr;
}

int read_attr_err(unsigned int domain, const std::string &attr, std::string *text)
{
	text->clear();
	if (on_socket()) {
		try {
			return open_domain(domain)->read_attr(attr, text);
		} catch (const std::exception &) {
			return ECONNREFUSED;
		}
	}
	int fd = open(sysfs_path(domain, attr).c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	char buf[4096];
	int err = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0)
			err = errno;
		if (n <= 0)
			break;
		text->append(buf, n);
	}
	::close(fd);
	if (err)
		text->clear();
	return err;
}

std::string read_attr(unsigned int domain, const std::string &attr)
{
	std::string text;
	read_attr_err(domain, attr, &text);
	return text;
}

int write_attr(unsigned int domain, const std::string &attr, const std::string &text)
{
	if (!on_socket())
		return write_file(sysfs_path(domain, attr), text);
	try {
		return open_domain(domain)->write_attr(attr, text);
	} catch (const std::exception &) {
		return ECONNREFUSED;
	}
}

std::string bitmap_text(const std::vector<uint64_t> &words, unsigned int nr_bits)
{
	std::string out;
	unsigned int chunk_bits = nr_bits % 32 ? nr_bits % 32 : 32;
	for (int i = int((nr_bits + 31) / 32) - 1; i >= 0; i--) {
		uint64_t w = size_t(i / 2) < words.size() ? words[i / 2] : 0;
		uint32_t v = uint32_t(i % 2 ? w >> 32 : w);
		char buf[16];
		snprintf(buf, sizeof(buf), "%0*x", int((chunk_bits + 3) / 4), v);
		if (!out.empty())
			out += ",";
		out += buf;
		chunk_bits = 32;
	}
	return out;
}

std::string bitmap_hex(const std::string &pb)
{
	std::string t = pb;
	while (!t.empty() && t.back() == '\n')
		t.pop_back();
	if (t == "all")
		return t;
	std::string hex;
	for (char c : t)
		if (c != ',')
			hex += char(tolower(c));
	size_t first = hex.find_first_not_of('0');
	return "0x" + (first == std::string::npos ? "0" : hex.substr(first));
}

std::string partitions_text(unsigned int domain)
{
	const std::string k = read_attr(domain, "k");
	if (k.empty())
		return "";
	std::string out;
	for (unsigned int i = 0; i < std::stoul(k); i++)
		out += std::to_string(i) + " " +
		       bitmap_hex(read_attr(domain, "slot" + std::to_string(i) + "/units")) +
		       "\n";
	return out;
}

std::string units_text(unsigned int domain)
{
	auto value = [&](const char *name) {
		std::string t = read_attr(domain, name);
		if (!t.empty() && t.back() == '\n')
			t.pop_back();
		return t;
	};
	return value("unit_kind") + " " + value("nr_units") + " " + value("unit_size") + "\n";
}

int stage_partitions(unsigned int domain, const std::string &lines)
{
	const std::string generation = read_attr(domain, "generation");
	std::string nr = read_attr(domain, "nr_units");
	const unsigned int nr_units = nr.empty() ? 0 : std::stoul(nr);
	for (const auto &line : split_lines(lines)) {
		auto w = split_words(line);
		if (w.size() != 2)
			return EINVAL;
		std::string units = w[1];
		if (units != "all") {
			// 0x<hex> -> the %*pb form, 32 bits a group.
			std::vector<uint64_t> words;
			std::string hex = units.substr(units.rfind('x') + 1);
			for (size_t end = hex.size(); end > 0; end -= std::min<size_t>(end, 16)) {
				size_t begin = end > 16 ? end - 16 : 0;
				words.push_back(std::stoull(hex.substr(begin, end - begin), nullptr, 16));
			}
			units = bitmap_text(words, std::max(nr_units, 1u));
		}
		int err = write_attr(domain, "slot" + w[0] + "/units", units);
		if (err)
			return err;
	}
	return write_attr(domain, "commit", generation);
}

std::map<std::string, std::string> parse_fdinfo(const std::string &text)
{
	std::map<std::string, std::string> out;
	for (const auto &line : split_lines(text)) {
		if (line.rfind("gpuslot-", 0) != 0)
			continue;
		size_t colon = line.find(':');
		if (colon == std::string::npos)
			continue;
		size_t v = line.find_first_not_of(" \t", colon + 1);
		out[line.substr(0, colon)] = v == std::string::npos ? "" : line.substr(v);
	}
	return out;
}

std::map<std::string, std::string> Dev::fdinfo() const
{
	std::string text;
	if (on_socket()) {
		if (file_->read_attr("fdinfo", &text))
			text.clear();
	} else {
		text = read_file("/proc/self/fdinfo/" + std::to_string(fd()));
	}
	return parse_fdinfo(text);
}

std::string read_file(const std::string &path)
{
	std::ifstream in(path);
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

int write_file(const std::string &path, const std::string &text)
{
	int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	ssize_t n = write(fd, text.data(), text.size());
	int err = n < 0 ? errno : 0;
	::close(fd);
	return err;
}

std::vector<std::string> split_lines(const std::string &text)
{
	std::vector<std::string> out;
	std::stringstream ss(text);
	for (std::string line; std::getline(ss, line);)
		if (!line.empty())
			out.push_back(line);
	return out;
}

std::vector<std::string> split_words(const std::string &line)
{
	std::vector<std::string> out;
	std::stringstream ss(line);
	for (std::string w; ss >> w;)
		out.push_back(w);
	return out;
}

bool wait_until(const std::function<bool()> &pred, int timeout_ms)
{
	for (int i = 0; i < timeout_ms; i++) {
		if (pred())
			return true;
		usleep(1000);
	}
	return pred();
}

bool wait_waiters(unsigned int n, unsigned int domain)
{
	return wait_until([&] {
		return read_attr(domain, "nr_waiters") == std::to_string(n) + "\n";
	});
}

namespace {
int thread_count()
{
	std::ifstream status("/proc/self/status");
	for (std::string line; std::getline(status, line);)
		if (line.rfind("Threads:", 0) == 0)
			return std::atoi(line.c_str() + 8);
	return -1;
}
} // namespace

pid_t fork_one_thread()
{
	// A thread just joined is counted until the kernel has finished its
	// exit (the join returns at its tid's clearing, before that): up to 2 s.
	int threads = thread_count();
	for (int i = 0; i < 2000 && threads != 1; i++) {
		usleep(1000);
		threads = thread_count();
	}
	if (threads != 1)
		throw std::runtime_error("fork() from a process of " + std::to_string(threads) +
					 " threads");
	return fork();
}

pid_t spawn(const std::function<int()> &fn)
{
	pid_t pid = fork_one_thread();
	if (pid < 0)
		throw std::runtime_error("fork failed");
	if (pid == 0) {
		int rc = 99;
		try {
			rc = fn();
		} catch (const std::exception &e) {
			fprintf(stderr, "child %d: %s\n", getpid(), e.what());
		} catch (...) {
		}
		_exit(rc);
	}
	return pid;
}

bool signal_until_exited(pid_t pid, int sig, int timeout_ms)
{
	const auto end = std::chrono::steady_clock::now() +
			 std::chrono::milliseconds(timeout_ms);
	while (std::chrono::steady_clock::now() < end) {
		siginfo_t si{};
		if (waitid(P_PID, id_t(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == pid)
			return true;
		kill(pid, sig);
		usleep(20000);
	}
	return false;
}

int wait_child(pid_t pid)
{
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

Pipe::Pipe()
{
	if (pipe2(fd_, O_CLOEXEC))
		throw std::runtime_error("pipe failed");
}

Pipe::~Pipe()
{
	::close(fd_[0]);
	::close(fd_[1]);
}

void Pipe::put(int value) const
{
	if (write(fd_[1], &value, sizeof(value)) != sizeof(value))
		abort();
}

int Pipe::get(int timeout_ms) const
{
	pollfd p{fd_[0], POLLIN, 0};
	int value;
	if (poll(&p, 1, timeout_ms) != 1 ||
	    read(fd_[0], &value, sizeof(value)) != sizeof(value))
		return -1;
	return value;
}

void *shared_alloc(size_t size)
{
	void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		throw std::runtime_error("mmap failed");
	return p;
}

std::vector<std::string> kernel_log_problems()
{
	if (on_socket())
		return {}; // no kernel code of ours runs on the socket transport
	int len = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0);
	std::string buf(len > 0 ? len : 1 << 20, '\0');
	len = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf.data(), buf.size());
	buf.resize(len > 0 ? len : 0);
	std::vector<std::string> bad;
	for (auto &line : split_lines(buf))
		for (const char *word : {"BUG:", "WARNING:", "Oops", "Call Trace"})
			if (line.find(word) != std::string::npos)
				bad.push_back(line);
	return bad;
}

Sched get_sched(pid_t tid)
{
	SchedAttr a{};
	if (syscall(SYS_sched_getattr, tid, &a, sizeof(a), 0))
		throw std::runtime_error("sched_getattr of tid " + std::to_string(tid) +
					 " failed: " + strerror(errno));
	return {a.sched_policy, a.sched_priority, a.sched_nice, a.sched_flags};
}

int set_sched(uint32_t policy, uint32_t priority, int32_t nice, uint64_t flags)
{
	SchedAttr a{};
	a.size = sizeof(a);
	a.sched_flags = flags;
	a.sched_policy = policy;
	a.sched_priority = priority;
	a.sched_nice = nice;
	return syscall(SYS_sched_setattr, 0, &a, 0) ? errno : 0;
}

int *child_failed_line()
{
	static int *line = static_cast<int *>(shared_alloc(sizeof(int)));
	return line;
}

bool boost_available()
{
	// gpuslotd without CAP_SYS_NICE serves no boost (main.cc says).
	const char *boost = getenv("GPUSLOT_TEST_SOCKET_BOOST");
	return !on_socket() || (boost && !strcmp(boost, "1"));
}

unsigned int boost_priority_limit()
{
	if (on_socket())
		return GPUSLOT_MAX_BOOST_PRIORITY;
	// The kernel's: read once, while the module is loaded (a test may
	// unload it).
	static const unsigned int limit = [] {
		const std::string v = read_file("/sys/class/misc/gpuslot/boost_priority_limit");
		if (v.empty())
			throw std::runtime_error("no /sys/class/misc/gpuslot/boost_priority_limit");
		return unsigned(std::stoul(v));
	}();
	return limit;
}

bool boost_limited()
{
	return boost_priority_limit() < GPUSLOT_DEFAULT_BOOST_PRIORITY;
}

unsigned int default_boost_priority()
{
	return std::min(boost_priority_limit(), unsigned(GPUSLOT_DEFAULT_BOOST_PRIORITY));
}

void refill_root_boost_budget()
{
	ASSERT_EQ(write_attr(0, "max_boost_share", "100"), 0);
	{
		Dev d;
		ASSERT_EQ(d.acquire().err, 0);
		ASSERT_EQ(d.release(), 0);
	}
	ASSERT_EQ(write_attr(0, "max_boost_share",
			     std::to_string(GPUSLOT_DEFAULT_MAX_BOOST_SHARE)), 0);
}

void reset_domain(unsigned int domain)
{
	Dev d;
	Layout none;
	none.hqd_limit = kDefaultHqdLimit;
	// max_hold_ms may be missing: the suite also runs against older
	// modules, to show which of its tests they fail.
	const bool max_hold = on_socket() || access(sysfs_path(domain, "max_hold_ms").c_str(), F_OK) == 0;
	const bool budget = on_socket() ? !read_attr(domain, "max_boost_share").empty()
				      : access(sysfs_path(domain, "max_boost_share").c_str(), F_OK) == 0;
	if (d.attach(domain) || d.set_layout(none) ||
	    write_attr(domain, "boost_priority",
		       std::to_string(boost_available() ? default_boost_priority() : 0)) ||
	    (max_hold &&
	     write_attr(domain, "max_hold_ms", std::to_string(GPUSLOT_DEFAULT_MAX_HOLD_MS))) ||
	    (budget && write_attr(domain, "max_boost_share",
				  std::to_string(GPUSLOT_DEFAULT_MAX_BOOST_SHARE))))
		throw std::runtime_error("cannot reset the domain");
}

void DomainTest::SetUp()
{
	reset_domain(0);
	*child_failed_line() = 0;
}

void DomainTest::TearDown()
{
	auto idle = [] {
		return read_attr(0, "nr_holders") == "0\n" && read_attr(0, "nr_waiters") == "0\n";
	};
	EXPECT_TRUE(wait_until(idle)) << read_attr(0, "debug/holders") << read_attr(0, "debug/waiters");
	reset_domain(0);
	EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
}

void DomainTest::expect_child_ok(pid_t pid)
{
	EXPECT_EQ(wait_child(pid), 0) << "child failed its check at line " << *child_failed_line();
}

int load_module(const std::string &params)
{
	const char *ko = getenv("GPUSLOT_KO");
	int fd = open(ko ? ko : "/lib/modules/gpuslot.ko", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int err = syscall(SYS_finit_module, fd, params.c_str(), 0) ? errno : 0;
	::close(fd);
	return err;
}

int unload_module()
{
	return syscall(SYS_delete_module, "gpuslot", O_NONBLOCK) ? errno : 0;
}

int pin_to_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? errno : 0;
}

namespace {
const char kRtRuntime[] = "/proc/sys/kernel/sched_rt_runtime_us";
}

CpuHog::CpuHog(int cpu, unsigned int prio, const std::atomic<bool> &stop,
	       int max_ms)
{
	saved_runtime_ = read_file(kRtRuntime);
	if (write_file(kRtRuntime, "-1"))
		throw std::runtime_error("cannot turn RT throttling off");
	thread_ = std::thread([this, cpu, prio, &stop, max_ms] {
		sched_param p{};
		p.sched_priority = int(prio);
		if (pin_to_cpu(cpu) || sched_setscheduler(0, SCHED_FIFO, &p))
			return;
		started_ = true;
		auto end = std::chrono::steady_clock::now() +
			   std::chrono::milliseconds(max_ms);
		while (std::chrono::steady_clock::now() < end)
			if (stop.load()) {
				stopped_by_flag_ = true;
				return;
			}
	});
	if (!wait_until([this] { return started_.load(); }, 2000)) {
		thread_.join();
		write_file(kRtRuntime, saved_runtime_);
		throw std::runtime_error("the CPU hog did not start");
	}
	// Give the hog the CPU: anything below it there stops running now.
	usleep(20000);
}

bool CpuHog::join()
{
	if (thread_.joinable())
		thread_.join();
	return stopped_by_flag_;
}

CpuHog::~CpuHog()
{
	join();
	write_file(kRtRuntime, saved_runtime_);
}

} // namespace gpuslot::test
