// SPDX-License-Identifier: GPL-2.0
// Admission of connections and the rate limits of the socket transport:
// accept (the peer's credentials and pidfd), the bounds on connections per
// uid and in all, the listeners paused while fds run out, and each uid's
// request budget (a token bucket; a uid over it is not read until it has
// tokens again).
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

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 // Linux 6.5
#endif

namespace gpuslot {

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

// The connector's pidfd: the kernel's own where it has SO_PEERPIDFD (the
// process that connected, whatever became of its pid); else one taken now
// and checked (a pid reused since by another user's process is refused: no
// boost for it). -1 if none; its start time in *@start (0: unknown).
int LockServer::peer_pidfd(int fd, const ucred &cred, uint64_t *start) const
{
	*start = 0;
	if (options_.peer_pidfd) {
		int pidfd = -1;
		socklen_t plen = sizeof(pidfd);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &plen) == 0 && pidfd >= 0) {
			*start = proc_start_time(cred.pid);
			if (!pidfd_alive(pidfd))
				*start = 0;
			return pidfd;
		}
	}
	return checked_pidfd(cred.pid, cred.uid, start);
}

// The admins' connections count as one member, not limited (there is one
// kind of admin per gpuslotd: uid 0 for root's, its user for a user's);
// everyone else's as its uid's, limited.
LockServer::Member &LockServer::member_for(uid_t uid, bool admin)
{
	auto &mp = admin ? admins_ : members_[uid];
	if (!mp) {
		mp = std::make_unique<Member>();
		mp->uid = uid;
		mp->limited = !admin;
		mp->tokens = std::max(1u, options_.member_burst);
		mp->refilled_ns = now_ns();
	}
	return *mp;
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
		// Only an admin is exempt from the bounds (peer_is_admin(): uid
		// 0 with CAP_SYS_ADMIN in the initial user namespace, or the user
		// of an unprivileged gpuslotd holding all its capabilities), as
		// its pidfd vouches for at connect: uid 0 alone is not one (a
		// rootful container's root without the capability is a member
		// like any other, bounded as its uid). A uid that could be an
		// admin costs the pidfd and the /proc reads before its bounds are
		// known; any other uid's connection only once they are checked.
		int pidfd = -1;
		uint64_t start_time = 0;
		bool have_pidfd = false, admin = false;
		if (cred.uid == 0 || (geteuid() != 0 && cred.uid == geteuid())) {
			pidfd = peer_pidfd(fd, cred, &start_time);
			have_pidfd = true;
			admin = peer_is_admin(cred.pid, cred.uid, pidfd);
		}
		Member &m = member_for(cred.uid, admin);
		// Over its uid's share, or over all but the admins' reserve:
		// closed at once (the client's first call fails ECONNRESET).
		if ((m.limited && m.conns >= options_.max_conns_per_uid) ||
		    conns_.size() >= max_conns_ + (m.limited ? 0 : kRootReserve)) {
			if (pidfd >= 0)
				::close(pidfd);
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
				if (pidfd >= 0)
					::close(pidfd);
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
		c->pidfd = have_pidfd ? pidfd : peer_pidfd(fd, cred, &start_time);
		c->start_time = start_time;
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

} // namespace gpuslot
