// SPDX-License-Identifier: GPL-2.0
// A message of the socket transport: read with the kernel's credentials of
// its sender, charged to its uid's budget, checked as the ioctl dispatcher
// checks a struct (kmod/main.c), handed to its command, and answered under
// its sequence number; a gsl1 peer answered in its own header.
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
#include <sys/uio.h>

namespace gpuslot {

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

// Replies up to this fit any socket's default send buffer.
constexpr size_t kSmallReply = 65536;

} // namespace

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
	if (cmd == GPUSLOT_WIRE_WORK_STATE) {
		send_work_state(c, data, h.size);
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
		// Whether that thread may be boosted through this connection
		// (the module's rule for a passed file, may_be_boosted()):
		// decided now, from its credentials as its message came,
		// through the pidfd taken while the kernel vouched for its
		// process. ACQUIRE_ASYNC boosts nobody (its COMPLETE does).
		c.request_may_boost = false;
		if (boost_ && c.request_tid && cmd != _IOC_NR(GPUSLOT_IOC_ACQUIRE_ASYNC)) {
			const int pidfd = c.request_pid == c.pid ? c.pidfd
					  : c.request_pidfd_pid == c.request_pid ? c.request_pidfd
										 : -1;
			c.request_may_boost =
				may_be_boosted(c.request_pid, c.request_tid, pidfd, c.uid);
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
	gpuslot_set_work sw;
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
				     GPUSLOT_FEATURE_DEADLINE | GPUSLOT_FEATURE_SLOT_PRIORITY |
				     GPUSLOT_FEATURE_WORK;
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
	case _IOC_NR(GPUSLOT_IOC_SET_WORK):
		// Write-only, as the ioctl (_IOC_WRITE): nothing comes back.
		if ((err = take_struct(data, usize, &sw, sizeof(sw), GPUSLOT_SET_WORK_SIZE_VER0)))
			break;
		err = cmd_set_work(c, sw);
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
