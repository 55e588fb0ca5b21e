// SPDX-License-Identifier: GPL-2.0
// The lock server's life and loop (lock_server.hpp): start (sockets,
// timers, the state file), the event loop, the timers of waits and holds,
// grants, releases and the end of a connection. Its other rooms: the
// boost (boost_ops.cc), admission of connections and the rate limits
// (admission.cc), messages and replies (dispatch.cc), the commands
// (commands.cc), peers and trust (peers.cc), the state file
// (state_file.cc), the attributes (attributes.cc).
#include "boost_ops.hpp"
#include "lock_server.hpp"
#include "server_state.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>

namespace gpuslot {

static_assert(kDefaultHqdLimit == GPUSLOT_DEFAULT_HQD_LIMIT);

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
		boost_finish_any(&c->boost);
		if (c->state == Conn::holding || c->state == Conn::granted)
			record_hold(*c->domain, c->slot);
		for (int pidfd : {c->pidfd, c->request_pidfd, c->acquire_pidfd})
			if (pidfd >= 0)
				::close(pidfd);
		::close(fd);
	}
	// Threads kept for their budget only.
	boost_drain_all();
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
		close_work_state(*d);
	}
	if (stop_fd_ >= 0)
		::close(stop_fd_);
	if (epoll_fd_ >= 0)
		::close(epoll_fd_);
}

int LockServer::start(std::string *error)
{
	boost_ledger_init();
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
		if (int err = open_work_state(*d, error))
			return err;
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

void LockServer::arm_timer(Domain &d)
{
	uint64_t next = 0;
	if (!d.deadlines.empty())
		next = d.deadlines.begin()->first;
	for (const auto *m : {&d.hqd_deadlines, &d.hold_deadlines})
		if (!m->empty() && (!next || m->begin()->first < next))
			next = m->begin()->first;
	if (d.preempt_expiry && (!next || d.preempt_expiry < next))
		next = d.preempt_expiry;
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
	c.holder_may_boost = c.acquire_may_boost;
	c.hold_boost = Conn::unboosted;
	c.inherit_prio = 0;
	d.holder[slot] = &c;
	d.stats.acquisitions++;
	d.stats.total_wait_ns += wait;
	d.stats.max_wait_ns = std::max<uint64_t>(d.stats.max_wait_ns, wait);
	d.stats.wait_hist[std::min(wait ? 63 - std::countl_zero(wait) : 0,
				   GPUSLOT_HIST_BUCKETS - 1)]++;
	record_hold(d, slot);
	publish_work(d); // the held mask, before the grant is answered
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
			if (!async) {
				recheck_may_boost(d, c, c.acquire_pid, c.acquire_tid);
				boost(d, c, c.acquire_pid, c.acquire_tid);
			}
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
	// The holders and the queue changed: what each holder inherits too,
	// and the published held mask.
	inherit(d);
	publish_work(d);
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
	// Its work ends with the hold, published before the next grant.
	work_hold_ends(d, c.slot);
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
	work_timer(d, now);
	arm_timer(d);
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

} // namespace gpuslot
