// SPDX-License-Identifier: GPL-2.0
#include "lock_server.hpp"
#include "server_state.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>

#include <sys/syscall.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 // Linux 6.5
#endif

// The ledger's idea of a thread (kmod/lockcore/boost.h): here, a thread of a peer
// process, verified against the peer's pidfd before every change.
struct task_struct {
	pid_t pid = 0;
	pid_t tid = 0;
	uid_t uid = 0; // the uid of the connection it was boosted through
	int pidfd = -1; // its own, pinning the process
	unsigned int records = 0; // boost records that point here
	// Who the thread was when its boost record was made: its credentials
	// and its program (see owner_of()); empty if they could not be read.
	std::string owner;
	// The kernel refused to make it RT (sched_setattr() said EPERM: an RT
	// cgroup without runtime, an LSM's setsched); LockServer::boost() says so.
	bool rt_refused = false;

	~task_struct()
	{
		if (pidfd >= 0)
			close(pidfd);
	}
};

namespace gpuslot {

static_assert(kDefaultHqdLimit == GPUSLOT_DEFAULT_HQD_LIMIT);

namespace {

// What the ioctl dispatcher checks of a struct's size (main.c).
int take_struct(const char *data, uint32_t usize, void *out, size_t known, size_t ver0)
{
	if (usize < ver0)
		return EINVAL;
	if (usize > GPUSLOT_MAX_STRUCT_SIZE)
		return E2BIG;
	std::memset(out, 0, known);
	std::memcpy(out, data, std::min<size_t>(usize, known));
	for (size_t i = known; i < usize; i++)
		if (data[i])
			return E2BIG;
	return 0;
}

constexpr unsigned int kRootReserve = 16; // connections only root may take

// Replies up to this fit any socket's default send buffer.
constexpr size_t kSmallReply = 65536;

// One ledger for the server, as the module has one: every call runs on the
// server's thread.
std::map<pid_t, std::unique_ptr<task_struct>> tasks;
gpuslot_boost_ledger ledger;

// sched_setattr(2)'s struct, which glibc does not declare (and whose uapi
// header clashes with glibc's <sched.h>).
struct SchedAttr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
};
constexpr uint64_t kResetOnFork = 0x01; // SCHED_FLAG_RESET_ON_FORK

// @tid is a thread of the process @pidfd stands for, now: the pidfd says
// the process is the one that connected (its pid not reused), and
// thread_in_group() that @tid is one of its threads. Two syscalls, no walk
// of /proc: this runs at every boost and restore, on the handoff's path.
bool thread_of(const task_struct *p)
{
	return pidfd_alive(p->pidfd) && thread_in_group(p->pid, p->tid);
}

// The scheduling attributes of thread @tid, or false.
bool sched_attr_of(pid_t tid, SchedAttr *attr)
{
	*attr = {};
	return syscall(SYS_sched_getattr, tid, attr, sizeof(*attr), 0) == 0;
}

std::string owner_of(const task_struct *p);

} // namespace

// A fingerprint of owner_of()'s text, for the state file (FNV-1a, 64
// bits); 0 for "" (unknown), never 0 otherwise.
uint64_t owner_fingerprint(const std::string &owner)
{
	if (owner.empty())
		return 0;
	uint64_t h = 0xcbf29ce484222325ULL;
	for (unsigned char ch : owner) {
		h ^= ch;
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

// A boost a dead server left on @h's holder thread, given back if the
// holder (pid and start time) still lives and the thread still runs at
// the boost (a thread that changed its policy since keeps its own). The
// hold stays recorded, unboosted. Whether the holder lives.
bool give_back_boost(StateHold &h, unsigned int domain, unsigned int slot,
		     std::vector<std::string> *notes, int *pidfd_out)
{
	const std::string who = "gpu" + std::to_string(domain) + " slot " + std::to_string(slot) +
				": holder " + std::to_string(h.pid) + "/" + std::to_string(h.tid);
	int pidfd = int(syscall(SYS_pidfd_open, h.pid, 0));
	if (pidfd < 0 || proc_start_time(h.pid) != h.start_time || !pidfd_alive(pidfd)) {
		if (pidfd >= 0)
			::close(pidfd);
		notes->push_back(who + " is gone");
		h.state = StateHold::free;
		return false;
	}
	if (h.state == StateHold::boosted) {
		SchedAttr now;
		const bool ours = thread_in_group(h.pid, h.tid) && sched_attr_of(h.tid, &now) &&
				  now.sched_policy == SCHED_FIFO && now.sched_priority == h.prio;
		if (ours) {
			// As the normal restore (task_same_owner()): a thread that
			// exec'd or changed credentials since its boost, or one we
			// cannot tell of, gets back nothing privileged.
			task_struct now_owner;
			now_owner.pid = h.pid;
			now_owner.tid = h.tid;
			now_owner.pidfd = pidfd;
			const uint64_t owner = owner_fingerprint(owner_of(&now_owner));
			now_owner.pidfd = -1; // not its to close
			gpuslot_sched_attr saved{h.policy, h.rt_priority, h.nice, h.reset_on_fork != 0};
			const bool same = h.owner && owner == h.owner;
			if (!same) {
				gpuslot_sched_attr safe;
				gpuslot_boost_unprivileged(&saved, &safe);
				saved = safe;
			}
			SchedAttr back{};
			back.size = sizeof(back);
			back.sched_policy = saved.policy;
			back.sched_flags = saved.reset_on_fork ? kResetOnFork : 0;
			back.sched_nice = saved.nice;
			back.sched_priority = saved.rt_priority;
			// The pidfd still names the holder: the tid is its thread.
			if (pidfd_alive(pidfd) && !syscall(SYS_sched_setattr, h.tid, &back, 0))
				notes->push_back(who + ": SCHED_FIFO " + std::to_string(h.prio) +
						 " given back (policy " + std::to_string(saved.policy) +
						 ", priority " + std::to_string(saved.rt_priority) +
						 ", nice " + std::to_string(saved.nice) +
						 (same ? ")"
						       : "; no privilege back: its credentials or "
							 "program changed, or are unknown)"));
			else
				notes->push_back(who + ": cannot give its boost back: " +
						 strerror(errno));
		} else {
			notes->push_back(who + ": no longer runs at the boost; left as it is");
		}
		h.state = StateHold::held;
	}
	if (pidfd_out)
		*pidfd_out = pidfd;
	else
		::close(pidfd);
	return true;
}

namespace {

void task_get_attr(task_struct *p, gpuslot_sched_attr *a)
{
	SchedAttr attr{};
	*a = {};
	if (syscall(SYS_sched_getattr, p->tid, &attr, sizeof(attr), 0))
		return;
	a->policy = attr.sched_policy;
	a->rt_priority = attr.sched_priority;
	a->nice = attr.sched_nice;
	a->reset_on_fork = attr.sched_flags & kResetOnFork;
}

int task_set_attr(task_struct *p, const gpuslot_sched_attr *a)
{
	if (!thread_of(p))
		return -ESRCH;
	SchedAttr attr{};
	attr.size = sizeof(attr);
	attr.sched_policy = a->policy;
	attr.sched_flags = a->reset_on_fork ? kResetOnFork : 0;
	attr.sched_nice = a->nice;
	attr.sched_priority = a->rt_priority;
	if (syscall(SYS_sched_setattr, p->tid, &attr, 0)) {
		const int err = errno;
		if (err == EPERM && (a->policy == SCHED_FIFO || a->policy == SCHED_RR))
			p->rt_refused = true;
		return -err;
	}
	return 0;
}

// Who thread @p is, as far as the server can tell through /proc: its
// uids, gids and capabilities, and the program it runs (device and inode
// of /proc/<pid>/exe: an exec changes it). Checked against the pidfd after
// reading, so that a reused pid is not taken for the thread; "" if any of
// it cannot be read.
std::string owner_of(const task_struct *p)
{
	const std::string proc = "/proc/" + std::to_string(p->pid);
	std::ifstream in(proc + "/task/" + std::to_string(p->tid) + "/status");
	std::string who;
	for (std::string line; std::getline(in, line);)
		if (line.rfind("Uid:", 0) == 0 || line.rfind("Gid:", 0) == 0 ||
		    line.rfind("Groups:", 0) == 0 || line.rfind("CapEff:", 0) == 0 ||
		    line.rfind("CapPrm:", 0) == 0)
			who += line + "\n";
	struct stat exe;
	if (who.empty() || stat((proc + "/exe").c_str(), &exe))
		return "";
	who += std::to_string(exe.st_dev) + ":" + std::to_string(exe.st_ino);
	if (syscall(SYS_pidfd_send_signal, p->pidfd, 0, nullptr, 0))
		return "";
	return who;
}

// The thread exec'd or changed credentials since it was boosted (or we
// cannot tell): it gets back only what needs no privilege (kmod/lockcore/boost.c).
bool task_same_owner(gpuslot_boost_thread *t)
{
	return !t->task->owner.empty() && owner_of(t->task) == t->task->owner;
}

// Cheap: the process lives. set_attr() checks the thread itself.
bool task_exiting(task_struct *p)
{
	return syscall(SYS_pidfd_send_signal, p->pidfd, 0, nullptr, 0) != 0;
}

gpuslot_boost_thread *task_new_thread(task_struct *p)
{
	if (!p->records)
		p->owner = owner_of(p);
	p->records++;
	return new gpuslot_boost_thread{};
}

// The task itself goes in prune_tasks(), once the ledger call is over.
void task_free_thread(gpuslot_boost_thread *t)
{
	if (t->task)
		t->task->records--;
	delete t;
}

void prune_tasks()
{
	std::erase_if(tasks, [](const auto &t) { return !t.second->records; });
}

uint64_t task_now()
{
	return now_ns();
}

// The CPU time thread @p has used, in ns: the first field of its schedstat
// (a thread of another process has no CPU clock we may read). 0 if it
// cannot be read (gone): nothing more is charged.
uint64_t task_cputime(task_struct *p)
{
	char path[64], buf[96];
	std::snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", int(p->pid), int(p->tid));
	const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
	::close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return std::strtoull(buf, nullptr, 10);
}

// The member a thread's boost is charged to: the uid of the connection it
// was boosted through, as the kernel named it (SO_PEERCRED, or the
// message's credentials).
uint32_t task_member_id(task_struct *p)
{
	return p->uid;
}

gpuslot_boost_member *task_new_member()
{
	return new gpuslot_boost_member{};
}

void task_free_member(gpuslot_boost_member *m)
{
	delete m;
}

// No rearm(): after a boost begins, LockServer::boost() moves the clocks of
// the holds whose budget end the ledger brought forward.
const gpuslot_boost_ops task_ops = {
	.get_attr = task_get_attr,
	.set_attr = task_set_attr,
	.exiting = task_exiting,
	.new_thread = task_new_thread,
	.free_thread = task_free_thread,
	.same_owner = task_same_owner,
	.now = task_now,
	.cputime = task_cputime,
	.member_id = task_member_id,
	.new_member = task_new_member,
	.free_member = task_free_member,
	.rearm = nullptr,
	.nr_cpus = nullptr, // waiters are boosted at their grant here, not asleep
};

// CAP_SYS_NICE in our effective set: without it there is no boost.
bool can_boost()
{
	return creds_of("self").caps >> kCapSysNice & 1;
}

} // namespace

std::filesystem::path domain_socket(const std::filesystem::path &dir, unsigned int domain)
{
	return dir / ("gpu" + std::to_string(domain) + ".sock");
}

LockServer::LockServer(const LockServerOptions &options) : options_(options) {}

LockServer::~LockServer()
{
	for (auto &[fd, c] : conns_) {
		// A stopping gpuslotd leaves no thread boosted. The hold stays
		// recorded: its holder may still be at work on the slot, and the
		// next server keeps it for the grace period.
		gpuslot_boost_finish(&ledger, &c->boost, UINT64_MAX);
		prune_tasks();
		if (c->state == Conn::holding || c->state == Conn::granted)
			record_hold(*c->domain, c->slot);
		for (int pidfd : {c->pidfd, c->request_pidfd, c->acquire_pidfd})
			if (pidfd >= 0)
				::close(pidfd);
		::close(fd);
	}
	// Threads kept for their budget only.
	gpuslot_boost_drain(&ledger);
	prune_tasks();
	for (auto &o : orphans_)
		if (o->pidfd >= 0)
			::close(o->pidfd);
	if (housekeeping_fd_ >= 0)
		::close(housekeeping_fd_);
	if (state_)
		munmap(state_, state_size_);
	if (state_fd_ >= 0)
		close_state_file(state_fd_); // the lock goes with it
	for (auto &d : domains_) {
		if (d->listen_fd >= 0) {
			::close(d->listen_fd);
			std::error_code ec;
			std::filesystem::remove(domain_socket(options_.socket_dir, d->id), ec);
		}
		if (d->timer_fd >= 0)
			::close(d->timer_fd);
	}
	if (stop_fd_ >= 0)
		::close(stop_fd_);
	if (epoll_fd_ >= 0)
		::close(epoll_fd_);
}

int LockServer::start(std::string *error)
{
	gpuslot_boost_ledger_init(&ledger, &task_ops);
	boost_ = can_boost();
	auto fail = [&](const std::string &what) {
		int err = errno;
		*error = what + ": " + strerror(err);
		return -err;
	};
	epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
	stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	housekeeping_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (epoll_fd_ < 0 || stop_fd_ < 0 || housekeeping_fd_ < 0)
		return fail("epoll/eventfd/timerfd");
	sources_.push_back(std::make_unique<Source>(Source{Source::stopper}));
	epoll_event e{};
	e.events = EPOLLIN;
	e.data.ptr = sources_.back().get();
	if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &e))
		return fail("epoll_ctl");
	sources_.push_back(std::make_unique<Source>(Source{Source::housekeeping}));
	e.data.ptr = sources_.back().get();
	if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, housekeeping_fd_, &e))
		return fail("epoll_ctl");
	// Each connection costs up to five fds: the socket, the peer's pidfd,
	// a forked child's request and queued-acquire pidfds, and the pidfd
	// its holder's thread record dups. A fifth of the limit, less a
	// reserve for ours (epoll, timers, the state file) and root's.
	rlimit nofile{};
	getrlimit(RLIMIT_NOFILE, &nofile);
	constexpr unsigned int kFdsPerConn = 5, kOwnFds = 64;
	max_conns_ = options_.max_conns
			     ? options_.max_conns
			     : unsigned(std::max<rlim_t>(nofile.rlim_cur / kFdsPerConn,
							 kOwnFds + kRootReserve + 16) -
					kOwnFds - kRootReserve);
	std::error_code ec;
	std::filesystem::create_directories(options_.socket_dir, ec);
	// One server per socket directory, and what the last one left.
	if (int err = open_state(error))
		return err;
	for (unsigned int i = 0; i < options_.nr_domains; i++) {
		auto d = std::make_unique<Domain>();
		d->id = i;
		gpuslot_core_init(&d->core, 1);
		// Generations keep growing across restarts of gpuslotd, so that a
		// client that reconnects never takes a new layout for the one its
		// streams were built for: past the last one the state file
		// recorded, and past CLOCK_BOOTTIME in microseconds (which the
		// wall clock's steps do not move, and a daemon makes far fewer
		// than one change per microsecond of its life) where the file is
		// new. Clients do not outlive a boot.
		timespec boot;
		clock_gettime(CLOCK_BOOTTIME, &boot);
		const uint64_t recorded = state_domain(state_, i)->generation;
		d->core.generation = std::max(recorded + 1, uint64_t(boot.tv_sec) * 1000000 +
								    uint64_t(boot.tv_nsec) / 1000);
		state_domain(state_, i)->generation = d->core.generation;
		gpuslot_budget_init(&d->budget, GPUSLOT_DEFAULT_HQD_LIMIT);
		d->listen_source.domain = d.get();
		if (!boost_)
			d->boost_priority = 0;
		d->timer_source.domain = d.get();
		const auto path = domain_socket(options_.socket_dir, i);
		sockaddr_un addr{};
		addr.sun_family = AF_UNIX;
		if (path.string().size() >= sizeof(addr.sun_path)) {
			*error = path.string() + ": too long for a Unix socket";
			return -ENAMETOOLONG;
		}
		strcpy(addr.sun_path, path.c_str());
		std::filesystem::remove(path, ec);
		d->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (d->listen_fd < 0)
			return fail("socket");
		// Every message carries its sender's credentials from the first.
		const int on = 1;
		setsockopt(d->listen_fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
		if (bind(d->listen_fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)))
			return fail(path.string());
		if (chmod(path.c_str(), options_.mode) ||
		    (options_.group != gid_t(-1) && chown(path.c_str(), uid_t(-1), options_.group)))
			return fail(path.string());
		if (listen(d->listen_fd, 128))
			return fail("listen");
		d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (d->timer_fd < 0)
			return fail("timerfd_create");
		e.data.ptr = &d->listen_source;
		if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, d->listen_fd, &e))
			return fail("epoll_ctl");
		e.data.ptr = &d->timer_source;
		if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, d->timer_fd, &e))
			return fail("epoll_ctl");
		domains_.push_back(std::move(d));
	}
	return 0;
}

void LockServer::record_hold(const Domain &d, unsigned int slot)
{
	if (!state_)
		return;
	StateHold &r = state_domain(state_, d.id)->slot[slot];
	const Conn *c = d.holder[slot];
	if (!c) {
		r = {};
		return;
	}
	StateHold h{};
	h.state = StateHold::held;
	h.pid = c->holder_pid;
	h.tid = c->holder_tid;
	h.start_time = c->holder_pid == c->pid		? c->start_time
		       : c->holder_pid == c->acquire_pid ? c->acquire_start
							 : c->request_start;
	h.client_token = c->client_token;
	if (const gpuslot_boost_thread *t = c->boost.thread) {
		h.state = StateHold::boosted;
		h.prio = t->applied;
		h.policy = t->saved.policy;
		h.rt_priority = t->saved.rt_priority;
		h.nice = t->saved.nice;
		h.reset_on_fork = t->saved.reset_on_fork;
		if (t->task) {
			h.tid = t->task->tid;
			h.owner = owner_fingerprint(t->task->owner);
		}
	}
	r = h;
}

void LockServer::every(uint64_t interval_ns, std::function<void()> f)
{
	every_.emplace_back(interval_ns, std::move(f));
}

void LockServer::at(uint64_t when, std::function<void()> f)
{
	later_.emplace(when, std::move(f));
	arm_housekeeping();
}

void LockServer::arm_housekeeping()
{
	const uint64_t next = later_.empty() ? 0 : later_.begin()->first;
	if (next == housekeeping_armed_)
		return;
	housekeeping_armed_ = next;
	itimerspec t{};
	t.it_value.tv_sec = time_t(next / 1000000000);
	t.it_value.tv_nsec = long(next % 1000000000);
	timerfd_settime(housekeeping_fd_, TFD_TIMER_ABSTIME, &t, nullptr);
}

void LockServer::on_housekeeping()
{
	uint64_t ticks;
	(void)!read(housekeeping_fd_, &ticks, sizeof(ticks));
	housekeeping_armed_ = 0;
	const uint64_t now = now_ns();
	std::vector<std::function<void()>> due;
	while (!later_.empty() && later_.begin()->first <= now) {
		due.push_back(std::move(later_.begin()->second));
		later_.erase(later_.begin());
	}
	for (auto &f : due)
		f();
	arm_housekeeping();
}

void LockServer::pause_listeners(uint64_t now)
{
	if (listeners_paused_)
		return;
	listeners_paused_ = true;
	for (auto &d : domains_) {
		epoll_event e{};
		e.data.ptr = &d->listen_source;
		epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, d->listen_fd, &e);
	}
	// Back on when a connection closes, or after a while (the fds may
	// free elsewhere): 10 ms, doubling to 1 s while accept keeps failing.
	accept_backoff_ns_ = std::clamp<uint64_t>(accept_backoff_ns_ * 2, 10000000, 1000000000);
	at(now + accept_backoff_ns_, [this] { resume_listeners(); });
}

void LockServer::resume_listeners()
{
	if (!listeners_paused_)
		return;
	listeners_paused_ = false;
	for (auto &d : domains_) {
		epoll_event e{};
		e.events = EPOLLIN;
		e.data.ptr = &d->listen_source;
		epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, d->listen_fd, &e);
	}
}

void LockServer::set_member_paused(Member &m, bool paused)
{
	m.paused = paused;
	for (auto &[fd, c] : conns_) {
		if (c->member != &m || c->paused == paused)
			continue;
		c->paused = paused;
		epoll_event e{};
		e.events = paused ? 0u : uint32_t(EPOLLIN);
		e.data.ptr = &c->source;
		epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &e);
	}
}

void LockServer::refill(Member &m, uint64_t now)
{
	const int64_t rate = std::max(1u, options_.member_rate);
	const int64_t burst = std::max(1u, options_.member_burst);
	// Whole tokens earned since the last refill; the rest of the time
	// carries over.
	// (A full bucket's wait at most: no overflow after a long idle.)
	const uint64_t idle = std::min<uint64_t>(now - m.refilled_ns,
						 uint64_t(burst) * 1000000000 / uint64_t(rate) + 1);
	const int64_t earned = int64_t(idle * uint64_t(rate) / 1000000000);
	if (earned > 0) {
		m.refilled_ns += uint64_t(earned) * 1000000000 / uint64_t(rate);
		m.tokens = std::min(burst, m.tokens + earned);
		if (m.tokens == burst)
			m.refilled_ns = now;
	}
}

bool LockServer::charge(Conn &c, uint64_t cost)
{
	Member &m = *c.member;
	if (!m.limited)
		return true;
	const uint64_t now = now_ns();
	const int64_t rate = std::max(1u, options_.member_rate);
	const int64_t burst = std::max(1u, options_.member_burst);
	refill(m, now);
	m.tokens -= int64_t(std::min<uint64_t>(cost, uint64_t(burst)));
	if (m.tokens >= 0 || m.paused)
		return m.tokens >= 0;
	// Spent: that uid's connections are not read until it has earned a
	// fiftieth of a second's worth again (their messages wait in their
	// sockets; nobody else's do).
	set_member_paused(m, true);
	const int64_t want = std::min(burst, std::max<int64_t>(1, rate / 50)) - m.tokens;
	const uid_t uid = m.uid;
	at(now + uint64_t(want) * 1000000000 / uint64_t(rate) + 1, [this, uid] {
		auto it = members_.find(uid);
		if (it != members_.end() && it->second->paused)
			set_member_paused(*it->second, false);
	});
	return false;
}

void LockServer::stop()
{
	uint64_t one = 1;
	(void)!write(stop_fd_, &one, sizeof(one));
}

int LockServer::run(std::string *error)
{
	// run() again after stop() (the unit tests stop the server's thread
	// to fork as one thread) goes on where it stopped: the orphans are
	// adopted and the ticks scheduled once; the new thread is set to the
	// server's priority.
	const bool first = !running_;
	running_ = true;
	server_priority_ = 0;
	run_above_boosts();
	if (first)
		adopt_orphans();
	// The periodic calls (the watchdog) run from the loop, and so only
	// while it turns.
	for (auto &[interval, f] : every_) {
		if (!first)
			break;
		auto tick = std::make_shared<std::function<void()>>();
		*tick = [this, interval = interval, f = f, weak = std::weak_ptr(tick)] {
			f();
			if (auto again = weak.lock())
				at(now_ns() + interval, [again] { (*again)(); });
		};
		ticks_.push_back(tick);
		(*tick)();
	}
	epoll_event events[64];
	for (;;) {
		int n = epoll_wait(epoll_fd_, events, 64, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			*error = std::string("epoll_wait: ") + strerror(errno);
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			auto *s = static_cast<Source *>(events[i].data.ptr);
			switch (s->kind) {
			case Source::stopper: {
				uint64_t n;
				(void)!read(stop_fd_, &n, sizeof(n)); // a later run() serves
				return 0;
			}
			case Source::listener:
				accept_on(*s->domain);
				break;
			case Source::timer:
				on_timer(*s->domain);
				break;
			case Source::housekeeping:
				on_housekeeping();
				break;
			case Source::orphan_exit:
				// Its holder exited: the slot is free.
				if (s->orphan->pidfd >= 0)
					end_orphan(*domains_[s->orphan->domain], s->orphan->slot);
				break;
			case Source::connection:
				if (events[i].events & (EPOLLHUP | EPOLLERR))
					close_conn(*s->conn);
				else
					on_message(*s->conn);
				break;
			}
		}
		std::erase_if(orphans_, [](const auto &o) { return o->pidfd < 0; });
	}
}

void LockServer::accept_on(Domain &d)
{
	// A few at a time: the other sources have their turn in between.
	for (int i = 0; i < 16; i++) {
		int fd = accept4(d.listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == ECONNABORTED || errno == EINTR || errno == EPROTO)
				continue;
			// EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection stays
			// in the backlog, so the listener would be readable at
			// once again; stop listening until an fd frees.
			pause_listeners(now_ns());
			return;
		}
		accept_backoff_ns_ = 0;
		ucred cred{};
		socklen_t len = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
			::close(fd);
			continue;
		}
		auto &mp = members_[cred.uid];
		if (!mp) {
			mp = std::make_unique<Member>();
			mp->uid = cred.uid;
			mp->limited = cred.uid != 0 && cred.uid != geteuid();
			mp->tokens = std::max(1u, options_.member_burst);
			mp->refilled_ns = now_ns();
		}
		Member &m = *mp;
		// Over its uid's share, or over all but root's reserve: closed
		// at once (the client's first call fails ECONNRESET).
		if ((m.limited && m.conns >= options_.max_conns_per_uid) ||
		    conns_.size() >= max_conns_ + (m.limited ? 0 : kRootReserve)) {
			::close(fd);
			continue;
		}
		// What the rest of the accept costs (a pidfd, /proc reads) comes
		// out of the uid's request budget: a member without the tokens
		// is closed at once, and owes nothing for it (a connect loop
		// cannot push its bucket into debt).
		if (m.limited) {
			refill(m, now_ns());
			if (m.tokens < int64_t(std::min(kAcceptCost, std::max(1u, options_.member_burst)))) {
				::close(fd);
				continue;
			}
			m.tokens -= std::min(kAcceptCost, std::max(1u, options_.member_burst));
		}
		auto c = std::make_unique<Conn>();
		c->fd = fd;
		c->domain = &d;
		c->pid = cred.pid;
		c->uid = cred.uid;
		c->member = &m;
		c->source.conn = c.get();
		c->waiter.conn = c.get();
		// The connector's pidfd: the kernel's own where it has
		// SO_PEERPIDFD (the process that connected, whatever became of
		// its pid); else one taken now and checked (a pid reused since
		// by another user's process is refused: no boost for it).
		c->pidfd = -1;
		if (options_.peer_pidfd) {
			int pidfd = -1;
			socklen_t plen = sizeof(pidfd);
			if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &plen) == 0 && pidfd >= 0) {
				c->pidfd = pidfd;
				c->start_time = proc_start_time(cred.pid);
				if (!pidfd_alive(pidfd))
					c->start_time = 0;
			}
		}
		if (c->pidfd < 0)
			c->pidfd = checked_pidfd(cred.pid, cred.uid, &c->start_time);
		c->request_pid = cred.pid;
		// The "file mode" of the attributes: root's, or that of the user
		// an unprivileged gpuslotd runs as. From SO_PEERCRED, which holds
		// at connect; whether the writer is an admin is decided at each
		// write (admin()).
		c->admin_at_connect = cred.uid == 0 || (geteuid() != 0 && cred.uid == geteuid());
		const int on = 1;
		setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
		c->boost.node.next = c->boost.node.prev = &c->boost.node;
		c->hqd_waiter.conn = c.get();
		epoll_event e{};
		c->paused = m.paused;
		e.events = m.paused ? 0u : uint32_t(EPOLLIN);
		e.data.ptr = &c->source;
		if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e)) {
			if (c->pidfd >= 0)
				::close(c->pidfd);
			::close(fd);
			continue;
		}
		m.conns++;
		conns_[fd] = std::move(c);
	}
}

void LockServer::reply(Conn &c, uint32_t seq, uint32_t cmd, int error, const void *data,
		       size_t size, const void *tail, size_t tail_size)
{
	gpuslot_wire h{};
	h.magic = GPUSLOT_WIRE_MAGIC;
	h.cmd = cmd;
	h.error = error;
	h.size = uint32_t(size + tail_size);
	h.seq = seq;
	// One message from its three parts, as they are.
	iovec parts[] = {{&h, sizeof(h)},
			 {const_cast<void *>(data), size},
			 {const_cast<void *>(tail), tail_size}};
	msghdr m{};
	m.msg_iov = parts;
	m.msg_iovlen = 3;
	// A debug/ table may be longer than the socket's default send
	// buffer holds in one message: room for it (above wmem_max as root).
	const size_t total = sizeof(h) + size + tail_size;
	if (total > kSmallReply) {
		const int room = int(2 * total + 4096);
		if (setsockopt(c.fd, SOL_SOCKET, SO_SNDBUFFORCE, &room, sizeof(room)))
			setsockopt(c.fd, SOL_SOCKET, SO_SNDBUF, &room, sizeof(room));
	}
	// A peer that cannot take a reply is gone or broken: it closes.
	if (sendmsg(c.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EMSGSIZE) {
		// Too long for the socket after all: say so instead.
		h.error = EFBIG;
		h.size = 0;
		(void)!send(c.fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	// A grant not yet completed keeps the connection readable, as it
	// keeps the device's file readable: a thread's call may have read the
	// announcement while waiting for its answer, so it comes again.
	if (seq && c.state == Conn::granted)
		reply(c, 0, GPUSLOT_WIRE_GRANTED, 0, nullptr, 0);
}

void LockServer::refuse_old_peer(Conn &c, const gpuslot_wire &request)
{
	if (may_log_refusal(*c.member))
		std::fprintf(stderr,
			     "gpuslotd: gpu%u: pid %d speaks the socket protocol gsl1 (API 1); "
			     "this gpuslotd speaks gsl2 (API 2): upgrade libgpuslot in that "
			     "program to 2.x\n",
			     c.domain->id, int(c.request_pid));
	// The reply in gsl1's header (the same struct): its error is what
	// the old library returns, EPROTONOSUPPORT.
	gpuslot_wire h{};
	h.magic = GPUSLOT_WIRE_MAGIC_V1;
	h.cmd = request.cmd;
	h.error = EPROTONOSUPPORT;
	h.seq = request.seq;
	(void)!send(c.fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
	close_conn(c);
}

void LockServer::arm_timer(Domain &d)
{
	uint64_t next = 0;
	if (!d.deadlines.empty())
		next = d.deadlines.begin()->first;
	for (const auto *m : {&d.hqd_deadlines, &d.hold_deadlines})
		if (!m->empty() && (!next || m->begin()->first < next))
			next = m->begin()->first;
	// Most calls (every handoff) find nothing to change: no system call.
	if (next == d.armed_ns)
		return;
	d.armed_ns = next;
	itimerspec t{};
	if (next) {
		t.it_value.tv_sec = time_t(next / 1000000000);
		t.it_value.tv_nsec = long(next % 1000000000);
	}
	timerfd_settime(d.timer_fd, TFD_TIMER_ABSTIME, &t, nullptr);
}

// The server hands slots to SCHED_FIFO holders and ends their boosts at
// max_hold_ms: it must not wait behind them, or behind the real-time work
// of the host, to do so. One above the highest boost priority, as an
// interrupt thread runs above the tasks it wakes: a holder spinning at its
// boost on the server's CPU (RT throttling off) is then preempted when its
// time is up. boost_priority is at most GPUSLOT_MAX_BOOST_PRIORITY, so
// there is always a priority above it. Above the boosts already granted
// too: a hold keeps the priority it was boosted at when an admin lowers
// boost_priority, so the server comes down only as those boosts end
// (boost_ended()).
void LockServer::run_above_boosts(unsigned int about_to_apply)
{
	if (!boost_ || !running_)
		return;
	unsigned int top = about_to_apply;
	for (const auto &d : domains_)
		top = std::max(top, d->boost_priority);
	top = std::max(top, unsigned(GPUSLOT_DEFAULT_BOOST_PRIORITY));
	configured_priority_ = top + 1;
	for (const auto &[fd, c] : conns_)
		if (const gpuslot_boost_thread *t = c->boost.thread)
			top = std::max(top, t->applied);
	const unsigned int prio = top + 1;
	if (prio == server_priority_)
		return;
	sched_param p{};
	p.sched_priority = int(prio);
	if (int err = pthread_setschedparam(pthread_self(), SCHED_FIFO | SCHED_RESET_ON_FORK, &p))
		std::fprintf(stderr, "gpuslotd: cannot run at SCHED_FIFO %u: %s\n", prio,
			     strerror(err));
	else
		server_priority_ = prio;
}

// A boost ended: if the server runs above boost_priority for boosts
// granted before it was lowered, it may come down (a compare, no system
// call, in the common case).
void LockServer::boost_ended()
{
	if (server_priority_ > configured_priority_)
		run_above_boosts();
}

void LockServer::grant(Domain &d, Conn &c, unsigned int slot)
{
	const uint64_t now = now_ns();
	const uint64_t wait = now > c.start_ns ? now - c.start_ns : 0;
	c.slot = slot;
	c.generation = d.core.generation;
	c.hold_seq++;
	c.hold_start_ns = now;
	// max_hold_ms is read when the slot is granted, as in the module.
	c.hold_max_ns = uint64_t(d.max_hold_ms) * 1000000;
	c.holder_pid = c.acquire_pid;
	c.holder_tid = c.acquire_tid;
	c.hold_boost = Conn::unboosted;
	c.inherit_prio = 0;
	d.holder[slot] = &c;
	d.stats.acquisitions++;
	d.stats.total_wait_ns += wait;
	d.stats.max_wait_ns = std::max<uint64_t>(d.stats.max_wait_ns, wait);
	d.stats.wait_hist[std::min(wait ? 63 - std::countl_zero(wait) : 0,
				   GPUSLOT_HIST_BUCKETS - 1)]++;
	record_hold(d, slot);
}

void LockServer::boost(Domain &d, Conn &c, pid_t pid, pid_t tid)
{
	if (!d.boost_priority || c.pidfd < 0 || tid <= 0 || c.hold_boost == Conn::overrun)
		return;
	auto it = tasks.find(tid);
	if (it != tasks.end() && it->second->pid != pid) {
		// A thread id the caller does not own: no boost while the
		// record of the thread that had it (gone, its id reused) has
		// holds. (The budget is the member's, not the record's.)
		task_struct *old = it->second.get();
		const bool gone = task_exiting(old) ||
				  (syscall(SYS_tgkill, old->pid, tid, 0) && errno == ESRCH);
		if (!gone || !gpuslot_boost_forget(&ledger, old))
			return;
		prune_tasks();
		it = tasks.find(tid);
		if (it != tasks.end())
			return;
	}
	if (it == tasks.end()) {
		auto t = std::make_unique<task_struct>();
		t->pid = pid;
		t->tid = tid;
		t->uid = c.uid;
		// The connecting process, pinned at connect; another process
		// sharing the connection (a forked child) as the kernel named it
		// in the message's credentials.
		// Either pidfd was taken when the kernel vouched for its process
		// (at connect, or as the child's message came), never now.
		const int pidfd = pidfd_for(c, pid);
		t->pidfd = pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 0) : -1;
		if (t->pidfd < 0)
			return;
		it = tasks.emplace(tid, std::move(t)).first;
	}
	task_struct *p = it->second.get();
	// The thread named must be the peer's: task_set_attr() checks it
	// against the pidfd before it changes anything (a failed first boost
	// leaves no record).
	// The hold's boost, or what its waiters lend it if that is higher:
	// a hold not begun yet begins (gpuslot_boost_begin()), a boosted one
	// changes priority.
	uint64_t budget_end = UINT64_MAX;
	p->rt_refused = false;
	// The server goes above an inherited priority before it is applied:
	// a holder above it on its CPU would keep it from ever ending that
	// boost (the module raises its expiry thread first, too).
	const unsigned int prio = std::max(d.boost_priority, c.inherit_prio);
	if (prio >= server_priority_)
		run_above_boosts(prio);
	const bool boosted = gpuslot_boost_set_prio(&ledger, &c.boost, c.hold_seq, p, prio,
						    d.max_boost_share, &budget_end);
	if (!boosted && p->rt_refused && c.state == Conn::holding)
		boost_refused(d, c, tid);
	prune_tasks();
	if (c.state == Conn::holding)
		record_hold(d, c.slot);
	boost_ended(); // a boost of an older hold of @c's may have ended
	// An inherited priority may be above the server's: it must stay above
	// every boost it has to end.
	if (c.boost.thread && c.boost.thread->applied >= server_priority_)
		run_above_boosts();
	// Another thread of the member boosted now drains its budget too:
	// the clocks of its boosted holds come forward, this one's too (its
	// thread may run at our boost again after it had moved above it).
	if (boosted)
		for (auto &od : domains_)
			for (Conn *h : od->holder)
				if (h && h->hold_boost == Conn::boosted && h->boost.thread &&
				    h->boost.budget_end_ns != UINT64_MAX &&
				    (!h->hold_timed || h->hold_deadline->first > h->boost.budget_end_ns)) {
					if (h->hold_timed)
						od->hold_deadlines.erase(h->hold_deadline);
					h->hold_timed = false;
					arm_hold(*od, *h, h->boost.budget_end_ns);
				}
	if (boosted && c.hold_boost == Conn::unboosted) {
		c.hold_boost = Conn::boosted;
		arm_hold(d, c, budget_end);
	} else if (!boosted && c.hold_boost == Conn::boosted) {
		// Lent nothing above the thread's own any more.
		c.hold_boost = Conn::unboosted;
		if (c.hold_timed) {
			d.hold_deadlines.erase(c.hold_deadline);
			c.hold_timed = false;
		}
	}
}

// The caller of a queued ACQUIRE, as the kernel named it (its process by
// SCM_CREDENTIALS and a pidfd taken then, the thread checked to be one of
// that process's now): its SCHED_FIFO or SCHED_RR priority, at most
// GPUSLOT_MAX_BOOST_PRIORITY; SCHED_DEADLINE lends that ceiling. A thread
// id that is not the caller's own lends nothing: a member cannot lend
// itself another process's priority.
unsigned int LockServer::lend_prio(const Conn &c) const
{
	if (!boost_ || c.acquire_tid <= 0)
		return 0;
	const int pidfd = pidfd_for(c, c.acquire_pid);
	if (!pidfd_alive(pidfd) || !thread_in_group(c.acquire_pid, c.acquire_tid))
		return 0;
	SchedAttr attr{};
	if (!sched_attr_of(c.acquire_tid, &attr))
		return 0;
	if (attr.sched_policy == SCHED_DEADLINE)
		return GPUSLOT_MAX_BOOST_PRIORITY;
	if (attr.sched_policy != SCHED_FIFO && attr.sched_policy != SCHED_RR)
		return 0;
	return std::min<unsigned int>(attr.sched_priority, GPUSLOT_MAX_BOOST_PRIORITY);
}

// The module's rule and its reasons are in kmod/lock.c: a waiter lends to
// the holder of every slot it accepts, as any of them releasing moves it
// forward. The server does it at once, in its own thread, which runs
// above every boost: no window in which a holder waits for it.
void LockServer::inherit(Domain &d)
{
	unsigned int want[GPUSLOT_MAX_SLOTS] = {};
	::list_head *head = &d.core.waiters;
	for (::list_head *n = head->next; n != head; n = n->next) {
		const Conn &w = waiting_conn(list_entry(n, gpuslot_core_waiter, node));
		if (w.state != Conn::acquiring || !w.lend_prio)
			continue;
		const uint64_t m = w.waiter.core.allowed & d.core.held;
		for (unsigned int s = 0; s < GPUSLOT_MAX_SLOTS; s++)
			if (m >> s & 1)
				want[s] = std::max(want[s], w.lend_prio);
	}
	for (unsigned int s = 0; s < GPUSLOT_MAX_SLOTS; s++) {
		Conn *h = d.holder[s];
		if (!h || h->inherit_prio == want[s])
			continue;
		h->inherit_prio = want[s];
		if (h->state == Conn::holding)
			boost(d, *h, h->holder_pid, h->holder_tid);
	}
}

// The kernel refused the holder of @c RT, as it would refuse the thread
// itself (docs/device.md, the boost's policy checks): the hold goes on
// unboosted; counted, named in the connection's fdinfo, and logged at most
// once a second.
void LockServer::boost_refused(Domain &d, Conn &c, pid_t tid)
{
	// Once per hold: inheritance boosts a hold again as lending changes.
	if (c.boost_refused_seq == c.hold_seq)
		return;
	d.boosts_refused++;
	c.boost_refused_seq = c.hold_seq;
	const uint64_t now = now_ns();
	if (now - last_refusal_log_ns_ < 1000000000 && last_refusal_log_ns_)
		return;
	last_refusal_log_ns_ = now;
	std::fprintf(stderr, "gpuslotd: gpu%u: no boost for thread %d, holder of slot %u: the kernel "
		     "refused it SCHED_FIFO (EPERM: an RT cgroup without runtime, or an LSM)\n",
		     d.id, int(tid), c.slot);
}

// The boost of @c's hold ends at the max_hold_ms read at the grant
// (counted from the grant, as in the module) or at @budget_end, when its
// thread's boost budget runs out, whichever comes first.
void LockServer::arm_hold(Domain &d, Conn &c, uint64_t budget_end)
{
	uint64_t end = budget_end;
	if (c.hold_max_ns)
		end = std::min(end, c.hold_start_ns + c.hold_max_ns);
	if (end == UINT64_MAX)
		return;
	c.hold_timed = true;
	c.hold_deadline = d.hold_deadlines.emplace(end, &c);
	arm_timer(d);
}

void LockServer::unboost(Conn &c)
{
	gpuslot_boost_finish(&ledger, &c.boost, c.hold_seq);
	prune_tasks();
	if (c.state == Conn::holding && c.domain->holder[c.slot] == &c)
		record_hold(*c.domain, c.slot);
	boost_ended();
}

void LockServer::finish(Domain &d, ::list_head *done)
{
	for (::list_head *n = done->next; n != done;) {
		::list_head *next = n->next;
		auto *cw = list_entry(n, gpuslot_core_waiter, node);
		Conn &c = waiting_conn(cw);
		list_del_init(n);
		if (c.timed) {
			d.deadlines.erase(c.deadline);
			c.timed = false;
		}
		const bool async = c.state == Conn::queued;
		if (cw->granted) {
			grant(d, c, unsigned(cw->slot));
			c.state = async ? Conn::granted : Conn::holding;
			// The new holder is SCHED_FIFO before it wakes.
			if (!async)
				boost(d, c, c.acquire_pid, c.acquire_tid);
			if (async) {
				reply(c, 0, GPUSLOT_WIRE_GRANTED, 0, nullptr, 0);
			} else {
				gpuslot_acquire a{};
				a.size = sizeof(a);
				a.slot = c.slot;
				a.generation = c.generation;
				reply(c, c.acquire_seq, _IOC_NR(GPUSLOT_IOC_ACQUIRE), 0, &a,
				      std::min<size_t>(c.acquire_size, sizeof(a)));
			}
		} else {
			c.state = Conn::idle;
			if (async) {
				c.async_error = -cw->error;
				reply(c, 0, GPUSLOT_WIRE_GRANTED, 0, nullptr, 0);
			} else {
				reply(c, c.acquire_seq, _IOC_NR(GPUSLOT_IOC_ACQUIRE), -cw->error, nullptr, 0);
			}
		}
		n = next;
	}
	// The holders and the queue changed: what each holder inherits too.
	inherit(d);
	arm_timer(d);
}

void LockServer::release_slot(Domain &d, Conn &c)
{
	const uint64_t now = now_ns();
	d.stats.max_hold_ns = std::max<uint64_t>(d.stats.max_hold_ns,
				       now > c.hold_start_ns ? now - c.hold_start_ns : 0);
	if (c.hold_timed) {
		d.hold_deadlines.erase(c.hold_deadline);
		c.hold_timed = false;
	}
	d.holder[c.slot] = nullptr;
	record_hold(d, c.slot);
	c.state = Conn::idle;
	LIST_HEAD(done);
	gpuslot_core_release(&d.core, c.slot, &done);
	finish(d, &done);
}

void LockServer::finish_budget(Domain &d, ::list_head *done)
{
	for (::list_head *n = done->next; n != done;) {
		::list_head *next = n->next;
		auto *bw = list_entry(n, gpuslot_budget_waiter, node);
		Conn &c = waiting_conn(bw);
		list_del_init(n);
		if (c.hqd_timed) {
			d.hqd_deadlines.erase(c.hqd_deadline);
			c.hqd_timed = false;
		}
		c.hqd_waiting = false;
		int err = 0;
		if (bw->granted)
			c.hqd_reserved += bw->count;
		else
			err = -bw->error;
		c.reserve.reserved = c.hqd_reserved;
		c.reserve.hqd_used = d.budget.used;
		c.reserve.hqd_limit = d.budget.limit;
		reply(c, c.reserve_seq, _IOC_NR(GPUSLOT_IOC_RESERVE_QUEUES), err, &c.reserve,
		      err ? 0 : std::min<size_t>(c.reserve_size, sizeof(c.reserve)));
		n = next;
	}
	arm_timer(d);
}

void LockServer::on_timer(Domain &d)
{
	uint64_t ticks;
	(void)!read(d.timer_fd, &ticks, sizeof(ticks));
	d.armed_ns = 0; // it fired: one-shot, so disarmed
	const uint64_t now = now_ns();
	while (!d.deadlines.empty() && d.deadlines.begin()->first <= now) {
		Conn &c = *d.deadlines.begin()->second;
		d.deadlines.erase(d.deadlines.begin());
		c.timed = false;
		gpuslot_core_cancel(&d.core, &c.waiter.core);
		c.state = Conn::idle;
		d.stats.timeouts++;
		reply(c, c.acquire_seq, _IOC_NR(GPUSLOT_IOC_ACQUIRE), ETIMEDOUT, nullptr, 0);
		if (c.lend_prio)
			inherit(d); // what it lent ends
	}
	while (!d.hqd_deadlines.empty() && d.hqd_deadlines.begin()->first <= now) {
		Conn &c = *d.hqd_deadlines.begin()->second;
		d.hqd_deadlines.erase(d.hqd_deadlines.begin());
		c.hqd_timed = false;
		c.hqd_waiting = false;
		LIST_HEAD(done);
		gpuslot_budget_cancel(&d.budget, &c.hqd_waiter.b, &done);
		reply(c, c.reserve_seq, _IOC_NR(GPUSLOT_IOC_RESERVE_QUEUES), ETIMEDOUT, nullptr, 0);
		finish_budget(d, &done);
	}
	while (!d.hold_deadlines.empty() && d.hold_deadlines.begin()->first <= now)
		on_hold_deadline(d, *d.hold_deadlines.begin()->second, now);
	arm_timer(d);
}

// A boosted hold reached the max_hold_ms it was granted under, or its
// thread's boost budget may be spent: its boost ends, the slot stays held
// (the module's overrun).
void LockServer::on_hold_deadline(Domain &d, Conn &c, uint64_t now)
{
	d.hold_deadlines.erase(c.hold_deadline);
	c.hold_timed = false;
	if (c.state != Conn::holding || c.hold_boost != Conn::boosted)
		return;
	if (!c.hold_max_ns || now - c.hold_start_ns < c.hold_max_ns) {
		uint64_t budget_end;
		const bool spent = gpuslot_boost_expire(&ledger, &c.boost, c.hold_seq, &budget_end);
		prune_tasks();
		if (!spent) {
			arm_hold(d, c, budget_end);
			return;
		}
		c.hold_boost = Conn::overrun;
		d.stats.overruns++;
		// The thread has its attributes back: the state file must not
		// tell a next server to give them back again.
		record_hold(d, c.slot);
		boost_ended();
		return;
	}
	c.hold_boost = Conn::overrun;
	d.stats.overruns++;
	unboost(c);
}

void LockServer::close_conn(Conn &c)
{
	Domain &d = *c.domain;
	// As the module's release of the file: holds, waits and queues end.
	unboost(c);
	for (int pidfd : {c.pidfd, c.request_pidfd, c.acquire_pidfd})
		if (pidfd >= 0)
			::close(pidfd);
	if (c.state == Conn::holding || c.state == Conn::granted) {
		release_slot(d, c);
	} else if (c.state == Conn::acquiring || c.state == Conn::queued) {
		if (c.timed)
			d.deadlines.erase(c.deadline);
		gpuslot_core_cancel(&d.core, &c.waiter.core);
		if (c.lend_prio)
			inherit(d);
	}
	LIST_HEAD(done);
	if (c.hqd_waiting) {
		if (c.hqd_timed)
			d.hqd_deadlines.erase(c.hqd_deadline);
		gpuslot_budget_cancel(&d.budget, &c.hqd_waiter.b, &done);
	}
	if (c.hqd_reserved)
		gpuslot_budget_unreserve(&d.budget, c.hqd_reserved, &done);
	c.hqd_waiting = false;
	c.hqd_reserved = 0;
	epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
	::close(c.fd);
	c.member->conns--;
	const int fd = c.fd;
	finish_budget(d, &done);
	conns_.erase(fd);
	// An fd is free: accept again if it had run out.
	resume_listeners();
}

int LockServer::may_acquire(const Domain &d, const Conn &c, uint64_t allowed) const
{
	if (c.state != Conn::idle || c.async_error)
		return c.state == Conn::holding ? EDEADLK : EBUSY;
	return allowed & gpuslot_core_valid(&d.core) ? 0 : EINVAL;
}

int LockServer::cmd_acquire(Conn &c, gpuslot_acquire &a, uint32_t usize, bool *later)
{
	Domain &d = *c.domain;
	const bool timed = a.flags & GPUSLOT_ACQUIRE_DEADLINE;
	const uint64_t allowed = a.allowed_mask ? a.allowed_mask : ~0ULL;
	if (a.__reserved || (a.flags & ~(GPUSLOT_ACQUIRE_TRY | GPUSLOT_ACQUIRE_DEADLINE)) ||
	    ((a.flags & GPUSLOT_ACQUIRE_TRY) && timed) || (!timed && a.deadline_ns))
		return EINVAL;
	if (int err = may_acquire(d, c, allowed))
		return err;
	c.start_ns = now_ns();
	c.acquire_pid = c.request_pid;
	c.acquire_tid = c.request_tid;
	take_acquire_pidfd(c);
	int slot = reclaim(d, c, allowed);
	if (slot < 0)
		slot = gpuslot_core_try_acquire(&d.core, allowed);
	if (slot >= 0) {
		grant(d, c, unsigned(slot));
		c.state = Conn::holding;
		boost(d, c, c.request_pid, c.request_tid);
		a.slot = c.slot;
		a.generation = c.generation;
		return 0;
	}
	if (a.flags & GPUSLOT_ACQUIRE_TRY)
		return EAGAIN;
	gpuslot_core_enqueue(&d.core, &c.waiter.core, allowed);
	c.state = Conn::acquiring;
	c.acquire_size = usize;
	c.acquire_seq = c.request_seq;
	d.stats.contended++;
	c.lend_prio = lend_prio(c);
	if (c.lend_prio)
		inherit(d);
	if (timed) {
		c.timed = true;
		// An absolute CLOCK_MONOTONIC deadline, the clock of now_ns().
		c.deadline = d.deadlines.emplace(a.deadline_ns, &c);
		arm_timer(d);
	}
	*later = true;
	return 0;
}

int LockServer::cmd_release(Conn &c, gpuslot_release &r)
{
	if (r.flags || r.__reserved)
		return EINVAL;
	if (c.state != Conn::holding)
		return EPERM;
	r.slot = c.slot;
	// The releaser has its own attributes back before the next holder runs.
	unboost(c);
	release_slot(*c.domain, c);
	return 0;
}

int LockServer::cmd_async(Conn &c, gpuslot_acquire &a)
{
	Domain &d = *c.domain;
	const uint64_t allowed = a.allowed_mask ? a.allowed_mask : ~0ULL;
	if (a.flags || a.deadline_ns || a.__reserved)
		return EINVAL;
	if (int err = may_acquire(d, c, allowed))
		return err;
	c.start_ns = now_ns();
	c.acquire_pid = c.request_pid;
	c.acquire_tid = c.request_tid;
	take_acquire_pidfd(c);
	int slot = reclaim(d, c, allowed);
	if (slot < 0)
		slot = gpuslot_core_try_acquire(&d.core, allowed);
	if (slot >= 0) {
		grant(d, c, unsigned(slot));
		c.state = Conn::granted;
		// The reply goes first, then the grant's announcement.
		return -1;
	}
	gpuslot_core_enqueue(&d.core, &c.waiter.core, allowed);
	c.state = Conn::queued;
	d.stats.contended++;
	return 0;
}

int LockServer::cmd_complete(Conn &c, gpuslot_acquire &a)
{
	if (a.flags || a.deadline_ns || a.allowed_mask || a.__reserved)
		return EINVAL;
	if (c.state == Conn::queued)
		return EAGAIN;
	if (c.state != Conn::granted) {
		int err = c.async_error ? c.async_error : EPERM;
		c.async_error = 0;
		return err;
	}
	c.state = Conn::holding;
	// The completing thread is the holder now, as in the module.
	c.holder_pid = c.request_pid;
	c.holder_tid = c.request_tid;
	take_acquire_pidfd(c);
	c.acquire_pid = c.request_pid;
	record_hold(*c.domain, c.slot);
	boost(*c.domain, c, c.request_pid, c.request_tid);
	a.slot = c.slot;
	a.generation = c.generation;
	return 0;
}

int LockServer::cmd_cancel(Conn &c, gpuslot_release &r)
{
	Domain &d = *c.domain;
	if (r.flags || r.__reserved)
		return EINVAL;
	r.slot = GPUSLOT_NO_SLOT;
	switch (c.state) {
	case Conn::queued:
		gpuslot_core_cancel(&d.core, &c.waiter.core);
		c.state = Conn::idle;
		return 0;
	case Conn::acquiring:
		// A sleeping ACQUIRE whose caller was interrupted: EINTR.
		if (c.timed) {
			d.deadlines.erase(c.deadline);
			c.timed = false;
		}
		gpuslot_core_cancel(&d.core, &c.waiter.core);
		c.state = Conn::idle;
		d.stats.interrupted++;
		// Its lent priority leaves the holders with it.
		if (c.lend_prio)
			inherit(d);
		reply(c, c.acquire_seq, _IOC_NR(GPUSLOT_IOC_ACQUIRE), EINTR, nullptr, 0);
		arm_timer(d);
		return 0;
	case Conn::granted:
		r.slot = c.slot;
		release_slot(d, c);
		return 0;
	default:
		if (c.async_error) {
			c.async_error = 0;
			return 0;
		}
		return EPERM;
	}
}

int LockServer::cmd_reserve(Conn &c, gpuslot_reserve_queues &r, uint32_t usize, bool *later)
{
	Domain &d = *c.domain;
	const bool timed = r.flags & GPUSLOT_RESERVE_DEADLINE;
	if ((r.flags & ~(GPUSLOT_RESERVE_WAIT | GPUSLOT_RESERVE_DEADLINE)) ||
	    ((r.flags & GPUSLOT_RESERVE_WAIT) && timed) || (!timed && r.deadline_ns) || !r.count ||
	    r.count > d.budget.limit)
		return EINVAL;
	if (c.hqd_waiting)
		return EBUSY;
	if (!c.hqd_reserved)
		c.hqd_pid = c.request_pid;
	if (gpuslot_budget_try_reserve(&d.budget, r.count)) {
		c.hqd_reserved += r.count;
		r.reserved = c.hqd_reserved;
		r.hqd_used = d.budget.used;
		r.hqd_limit = d.budget.limit;
		return 0;
	}
	if (!r.flags)
		return ENOSPC;
	gpuslot_budget_enqueue(&d.budget, &c.hqd_waiter.b, r.count);
	c.hqd_waiting = true;
	c.reserve_seq = c.request_seq;
	c.reserve = r;
	c.reserve_size = usize;
	if (timed) {
		c.hqd_timed = true;
		// An absolute CLOCK_MONOTONIC deadline, as ACQUIRE's.
		c.hqd_deadline = d.hqd_deadlines.emplace(r.deadline_ns, &c);
		arm_timer(d);
	}
	*later = true;
	return 0;
}

int LockServer::cmd_unreserve(Conn &c, gpuslot_unreserve_queues &u)
{
	Domain &d = *c.domain;
	if (u.__reserved || !u.count || u.count > c.hqd_reserved)
		return EINVAL;
	c.hqd_reserved -= u.count;
	u.reserved = c.hqd_reserved;
	LIST_HEAD(done);
	gpuslot_budget_unreserve(&d.budget, u.count, &done);
	finish_budget(d, &done);
	return 0;
}

int LockServer::cmd_set_k(Conn &c, gpuslot_set_k &s)
{
	if (!admin(c))
		return EPERM;
	if (int err = set_k(*c.domain, s.k, &s.generation))
		return err;
	admin_changed(*c.domain, AdminChange::k);
	return 0;
}

void LockServer::admin_changed(const Domain &d, AdminChange what)
{
	if (admin_change_)
		admin_change_(d.id, what);
}

int LockServer::set_k(Domain &d, unsigned int k, __u64 *generation)
{
	if (k < 1 || k > GPUSLOT_MAX_SLOTS)
		return EINVAL;
	LIST_HEAD(done);
	bool changed = gpuslot_core_set_k(&d.core, k, &done);
	// Partitions and priorities planned for the old k are the daemon's
	// to redo.
	bool reset = gpuslot_partitions_reset(&d.parts);
	for (uint8_t &p : d.parts.priority) {
		reset |= p != 0;
		p = 0;
	}
	if (reset && !changed)
		gpuslot_core_new_generation(&d.core);
	if (generation)
		*generation = d.core.generation;
	record_generation(d);
	finish(d, &done);
	return 0;
}

int LockServer::set_hqd_limit(Domain &d, unsigned int limit)
{
	if (limit < 1 || limit > GPUSLOT_MAX_HQD)
		return EINVAL;
	LIST_HEAD(done);
	gpuslot_budget_set_limit(&d.budget, limit, &done);
	finish_budget(d, &done);
	return 0;
}

int LockServer::set_layout(unsigned int domain, gpuslot_layout *l, const gpuslot_partition *parts)
{
	if (domain >= domains_.size())
		return EINVAL;
	Domain &d = *domains_[domain];
	if ((l->flags & ~(GPUSLOT_LAYOUT_MAX_HOLD | GPUSLOT_LAYOUT_EXPECT_GENERATION)) ||
	    l->__reserved || l->k < 1 || l->k > GPUSLOT_MAX_SLOTS ||
	    l->hqd_limit > GPUSLOT_MAX_HQD ||
	    ((l->flags & GPUSLOT_LAYOUT_MAX_HOLD) ? l->max_hold_ms > GPUSLOT_MAX_MAX_HOLD_MS
						  : l->max_hold_ms != 0) ||
	    (!(l->flags & GPUSLOT_LAYOUT_EXPECT_GENERATION) && l->expected_generation))
		return EINVAL;
	if (gpuslot_partitions_check_kind(l->unit_kind, l->unit_size, l->nr_units))
		return EINVAL;
	const unsigned int want = l->unit_kind == GPUSLOT_UNIT_NONE ? 0 : l->k;
	if (l->nr_partitions != want && !(l->unit_kind == GPUSLOT_UNIT_NONE && l->nr_partitions == 0))
		return EINVAL;
	gpuslot_partitions p{};
	p.unit_kind = l->unit_kind;
	p.unit_size = l->unit_size;
	p.nr_units = l->nr_units;
	for (unsigned int s = 0; s < l->nr_partitions; s++)
		std::memcpy(p.units[s], parts[s].units, sizeof(p.units[s]));
	// Priorities: 0 .. GPUSLOT_MAX_SLOT_PRIORITY below k, 0 from k on.
	for (unsigned int s = 0; s < GPUSLOT_MAX_SLOTS; s++) {
		if (l->priority[s] > GPUSLOT_MAX_SLOT_PRIORITY || (s >= l->k && l->priority[s]))
			return EINVAL;
		p.priority[s] = l->priority[s];
	}
	if (gpuslot_partitions_check(&p, l->k) || !layout_problem(p, l->k).empty())
		return EINVAL;
	if ((l->flags & GPUSLOT_LAYOUT_EXPECT_GENERATION) &&
	    l->expected_generation != d.core.generation) {
		l->generation = d.core.generation;
		return EAGAIN;
	}
	LIST_HEAD(done);
	// A change of priority alone is a change: clients remake their streams.
	bool changed = std::memcmp(&d.parts, &p, sizeof(p)) != 0;
	if (changed)
		d.parts = p;
	if (gpuslot_core_set_k(&d.core, l->k, &done))
		changed = true;
	else if (changed)
		gpuslot_core_new_generation(&d.core);
	if (l->flags & GPUSLOT_LAYOUT_MAX_HOLD)
		d.max_hold_ms = l->max_hold_ms;
	LIST_HEAD(budget_done);
	if (l->hqd_limit)
		gpuslot_budget_set_limit(&d.budget, l->hqd_limit, &budget_done);
	l->generation = d.core.generation;
	record_generation(d);
	finish(d, &done);
	finish_budget(d, &budget_done);
	return 0;
}

int LockServer::get_layout(unsigned int domain, gpuslot_layout *l,
			   std::vector<gpuslot_partition> *parts) const
{
	if (domain >= domains_.size())
		return EINVAL;
	const Domain &d = *domains_[domain];
	l->k = d.core.k;
	l->unit_kind = d.parts.unit_kind;
	l->unit_size = d.parts.unit_size;
	l->nr_units = d.parts.nr_units;
	l->hqd_limit = d.budget.limit;
	l->generation = d.core.generation;
	l->max_hold_ms = d.max_hold_ms;
	std::memcpy(l->priority, d.parts.priority, sizeof(l->priority)); // 0 from k on
	const unsigned int n = std::min(l->nr_partitions, d.core.k);
	parts->assign(n, gpuslot_partition{});
	for (unsigned int s = 0; s < n; s++)
		std::memcpy((*parts)[s].units, d.parts.units[s], sizeof((*parts)[s].units));
	return 0;
}

void LockServer::on_message(Conn &c)
{
	static char buf[sizeof(gpuslot_wire) + sizeof(gpuslot_layout) +
			GPUSLOT_MAX_SLOTS * sizeof(gpuslot_partition) + GPUSLOT_MAX_STRUCT_SIZE];
	// Who sent it: the kernel's credentials of the sender (SO_PASSCRED),
	// which a process sharing the connection (a forked child) has its own
	// of; the connecting process's where a message carries none.
	alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
	iovec iov{buf, sizeof(buf)};
	msghdr mh{};
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = control;
	mh.msg_controllen = sizeof(control);
	ssize_t n = recvmsg(c.fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
	c.request_pid = c.pid;
	c.request_uid = uid_t(-1); // no credentials: no admin
	for (cmsghdr *cm = CMSG_FIRSTHDR(&mh); n > 0 && cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(ucred))) {
			ucred cred;
			std::memcpy(&cred, CMSG_DATA(cm), sizeof(cred));
			if (cred.pid > 0)
				c.request_pid = cred.pid;
			c.request_uid = cred.uid;
		}
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			close_conn(c);
		return;
	}
	gpuslot_wire h;
	if (size_t(n) < sizeof(h) || size_t(n) > sizeof(buf)) {
		// Not our protocol, or truncated: that peer is broken.
		close_conn(c);
		return;
	}
	std::memcpy(&h, buf, sizeof(h));
	const char *data = buf + sizeof(h);
	if (h.magic == GPUSLOT_WIRE_MAGIC_V1) {
		// An API 1 client (libgpuslot 1.x): an answer it can parse, a
		// line in the log naming both protocols, and the end.
		refuse_old_peer(c, h);
		return;
	}
	if (h.magic != GPUSLOT_WIRE_MAGIC || h.size != size_t(n) - sizeof(h)) {
		close_conn(c);
		return;
	}
	const uint32_t cmd = h.cmd;
	c.request_seq = h.seq;
	// Each request spends its uid's budget; a table read one more per
	// line (below).
	charge(c, 1);
	if (cmd == GPUSLOT_WIRE_ATTR_READ || cmd == GPUSLOT_WIRE_ATTR_WRITE) {
		const size_t lines = on_attr(c, cmd, data, h.size);
		if (lines > 1)
			charge(c, lines - 1);
		return;
	}
	if (cmd == GPUSLOT_WIRE_CLIENT_TOKEN) {
		uint64_t token = 0;
		int err = h.size == sizeof(token) ? 0 : EINVAL;
		if (!err)
			std::memcpy(&token, data, sizeof(token));
		if (!err && !token)
			err = EINVAL;
		else if (!err && c.client_token)
			err = EBUSY; // once: a hold's claim does not move
		if (!err)
			c.client_token = token;
		reply(c, c.request_seq, cmd, err, nullptr, 0);
		return;
	}
	// The thread the header names, for the boost and the tables, only if
	// it is a thread of the sender now; else none (0): no boost.
	c.request_tid = 0;
	if (cmd == _IOC_NR(GPUSLOT_IOC_ACQUIRE) || cmd == _IOC_NR(GPUSLOT_IOC_ACQUIRE_ASYNC) ||
	    cmd == _IOC_NR(GPUSLOT_IOC_ACQUIRE_COMPLETE)) {
		if (h.tid > 0 && thread_in_group(c.request_pid, h.tid))
			c.request_tid = h.tid;
		// A sender that is not the connector (a forked child): its
		// pidfd now, while its message's credentials vouch for it,
		// not at a grant that may come after its pid was reused.
		if (c.request_pid != c.pid &&
		    (c.request_pidfd_pid != c.request_pid || !pidfd_alive(c.request_pidfd))) {
			if (c.request_pidfd >= 0)
				::close(c.request_pidfd);
			c.request_pidfd_pid = c.request_pid;
			c.request_pidfd =
				checked_pidfd(c.request_pid, c.request_uid, &c.request_start);
		}
	}
	// The struct's own size field, as the ioctl reads it.
	uint32_t usize = 0;
	if (h.size < sizeof(uint32_t)) {
		reply(c, c.request_seq, cmd, EFAULT, nullptr, 0);
		return;
	}
	std::memcpy(&usize, data, sizeof(usize));
	if (usize > h.size && usize <= GPUSLOT_MAX_STRUCT_SIZE) {
		reply(c, c.request_seq, cmd, EFAULT, nullptr, 0);
		return;
	}
	Domain &d = *c.domain;
	bool later = false, replied = false;
	int err = 0;
	auto out = [&](auto &s) { return std::min<size_t>(usize, sizeof(s)); };
	// Most commands have one shape, the ioctl dispatcher's (kmod/main.c):
	// the struct taken as the ioctl takes it, @execute on it, and the
	// struct back, or the error, or (@later) the answer when it comes.
	auto run = [&](auto st, size_t ver0, auto execute) {
		if ((err = take_struct(data, usize, &st, sizeof(st), ver0)) || (err = execute(st)) ||
		    later)
			return;
		reply(c, c.request_seq, cmd, 0, &st, out(st));
		replied = true;
	};
	switch (cmd) {
	case _IOC_NR(GPUSLOT_IOC_VERSION):
		run(gpuslot_version{}, GPUSLOT_VERSION_SIZE_VER0, [&](gpuslot_version &v) {
			if (v.__reserved)
				return EINVAL;
			v.api_version = GPUSLOT_API_VERSION;
			v.nr_domains = unsigned(domains_.size());
			v.features = GPUSLOT_FEATURE_LOCK | GPUSLOT_FEATURE_HQD |
				     GPUSLOT_FEATURE_LAYOUT | GPUSLOT_FEATURE_ASYNC |
				     GPUSLOT_FEATURE_DEADLINE | GPUSLOT_FEATURE_SLOT_PRIORITY;
			return 0;
		});
		break;
	case _IOC_NR(GPUSLOT_IOC_ATTACH): {
		gpuslot_attach a;
		if ((err = take_struct(data, usize, &a, sizeof(a), GPUSLOT_ATTACH_SIZE_VER0)))
			break;
		// A socket is one domain's: attaching elsewhere means another
		// socket. Lock state and queue reservations pin the file.
		if (a.domain != d.id)
			err = EINVAL;
		else if (c.state != Conn::idle || c.async_error || c.hqd_reserved || c.hqd_waiting)
			err = EBUSY;
		break;
	}
	case _IOC_NR(GPUSLOT_IOC_ACQUIRE):
		run(gpuslot_acquire{}, GPUSLOT_ACQUIRE_SIZE_VER0,
		    [&](gpuslot_acquire &a) { return cmd_acquire(c, a, usize, &later); });
		break;
	case _IOC_NR(GPUSLOT_IOC_RELEASE):
		run(gpuslot_release{}, GPUSLOT_RELEASE_SIZE_VER0,
		    [&](gpuslot_release &r) { return cmd_release(c, r); });
		break;
	case _IOC_NR(GPUSLOT_IOC_ACQUIRE_ASYNC): {
		gpuslot_acquire a;
		if ((err = take_struct(data, usize, &a, sizeof(a), GPUSLOT_ACQUIRE_SIZE_VER0)))
			break;
		err = cmd_async(c, a);
		if (err == -1) {
			// Granted at once: the reply says so, and the
			// announcement follows it (reply() sends it).
			const uint32_t now = GPUSLOT_WIRE_GRANTED;
			reply(c, c.request_seq, cmd, 0, &now, sizeof(now));
			return;
		}
		break;
	}
	case _IOC_NR(GPUSLOT_IOC_ACQUIRE_COMPLETE):
		run(gpuslot_acquire{}, GPUSLOT_ACQUIRE_SIZE_VER0,
		    [&](gpuslot_acquire &a) { return cmd_complete(c, a); });
		break;
	case _IOC_NR(GPUSLOT_IOC_ACQUIRE_CANCEL):
		run(gpuslot_release{}, GPUSLOT_RELEASE_SIZE_VER0,
		    [&](gpuslot_release &r) { return cmd_cancel(c, r); });
		break;
	case _IOC_NR(GPUSLOT_IOC_SET_K):
		run(gpuslot_set_k{}, GPUSLOT_SET_K_SIZE_VER0,
		    [&](gpuslot_set_k &k) { return cmd_set_k(c, k); });
		break;
	case _IOC_NR(GPUSLOT_IOC_DOMAIN_INFO):
		run(gpuslot_domain_info{}, GPUSLOT_DOMAIN_INFO_SIZE_VER0, [&](gpuslot_domain_info &i) {
			i.domain = d.id;
			i.k = d.core.k;
			i.boost_priority = d.boost_priority; // 0 without CAP_SYS_NICE
			i.nr_holders = unsigned(std::popcount(d.core.held));
			i.nr_waiters = d.core.nr_waiters;
			i.held_mask = d.core.held;
			i.generation = d.core.generation;
			i.hqd_limit = d.budget.limit;
			i.hqd_used = d.budget.used;
			return 0;
		});
		break;
	case _IOC_NR(GPUSLOT_IOC_GET_STATS):
		run(gpuslot_stats{}, GPUSLOT_STATS_SIZE_VER0, [&](gpuslot_stats &st) {
			if (st.__reserved)
				return EINVAL;
			st = d.stats;
			st.size = usize;
			return 0;
		});
		break;
	case _IOC_NR(GPUSLOT_IOC_RESERVE_QUEUES):
		run(gpuslot_reserve_queues{}, GPUSLOT_RESERVE_QUEUES_SIZE_VER0,
		    [&](gpuslot_reserve_queues &r) { return cmd_reserve(c, r, usize, &later); });
		break;
	case _IOC_NR(GPUSLOT_IOC_UNRESERVE_QUEUES):
		run(gpuslot_unreserve_queues{}, GPUSLOT_UNRESERVE_QUEUES_SIZE_VER0,
		    [&](gpuslot_unreserve_queues &u) { return cmd_unreserve(c, u); });
		break;
	case _IOC_NR(GPUSLOT_IOC_SET_LAYOUT):
	case _IOC_NR(GPUSLOT_IOC_GET_LAYOUT): {
		gpuslot_layout l;
		if ((err = take_struct(data, std::min<uint32_t>(usize, h.size), &l, sizeof(l),
				       GPUSLOT_LAYOUT_SIZE_VER0)))
			break;
		const size_t tail = h.size - std::min<uint32_t>(usize, h.size);
		if (cmd == _IOC_NR(GPUSLOT_IOC_GET_LAYOUT)) {
			// GET ignores expected_generation, as the module does.
			if (l.flags || l.__reserved) {
				err = EINVAL;
				break;
			}
			std::vector<gpuslot_partition> parts;
			get_layout(d.id, &l, &parts);
			reply(c, c.request_seq, cmd, 0, &l, out(l), parts.data(),
			      parts.size() * sizeof(gpuslot_partition));
			return;
		}
		if (!admin(c)) {
			err = EPERM;
			break;
		}
		if (l.nr_partitions > GPUSLOT_MAX_SLOTS ||
		    tail != l.nr_partitions * sizeof(gpuslot_partition)) {
			err = EINVAL;
			break;
		}
		std::vector<gpuslot_partition> parts(l.nr_partitions);
		if (tail) // an empty vector's data() may be null
			std::memcpy(parts.data(), data + usize, tail);
		if ((err = set_layout(d.id, &l, parts.data())) && err != EAGAIN)
			break;
		if (!err)
			admin_changed(d, AdminChange::partitions);
		reply(c, c.request_seq, cmd, err, &l, out(l));
		return;
	}
	default:
		err = ENOTTY;
	}
	if (!later && !replied)
		reply(c, c.request_seq, cmd, err, nullptr, 0);
}

} // namespace gpuslot
