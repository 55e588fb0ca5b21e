// SPDX-License-Identifier: GPL-2.0
// Preemptive slots on the socket transport (issue 40): which slots of a
// domain have GPU work pending, and which of them preempt within their
// budget (kmod/lockcore/preempt.c, the module's own logic), published in a
// sealed memfd that every member may map and none may write.
//
// The memfd is one page. The server maps it shared and writable once,
// then seals it: F_SEAL_SHRINK and F_SEAL_GROW (its size stays a page),
// F_SEAL_FUTURE_WRITE (no write(), no new writable shared mapping, no
// mprotect() of a read-only one to writable; the server's own mapping,
// made before, still writes) and F_SEAL_SEAL (no seal changes, none
// removed). Members get it over SCM_RIGHTS (GPUSLOT_WIRE_WORK_STATE),
// reopened read-only as well: a reopen through /proc/self/fd is the seals'
// to refuse.
//
// What a member can make the server do: a SET_WORK per hold edge, which
// only the holder of a slot may send (EPERM for others), costing a request
// of its uid's budget like any other (a flood is throttled there); one
// that changes nothing publishes nothing. The budget's expiry is the
// domain's own timer (arm_timer()), as max_hold_ms is.
#include "lock_server.hpp"
#include "server_state.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuslot {

static_assert(sizeof(gpuslot_work_state) <= GPUSLOT_WORK_STATE_SIZE);

int LockServer::open_work_state(Domain &d, std::string *error)
{
	const std::string name = "gpuslot-work-gpu" + std::to_string(d.id);
	const int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		*error = std::string("memfd_create: ") + strerror(errno);
		return -errno;
	}
	auto fail = [&](const char *what) {
		const int err = errno;
		*error = std::string(what) + ": " + strerror(err);
		::close(fd);
		return -err;
	};
	if (ftruncate(fd, GPUSLOT_WORK_STATE_SIZE))
		return fail("ftruncate (the work state's memfd)");
	void *page = mmap(nullptr, GPUSLOT_WORK_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED)
		return fail("mmap (the work state's memfd)");
	d.work = static_cast<gpuslot_work_state *>(page);
	if (fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL))
		return fail("F_ADD_SEALS (the work state's memfd)");
	// What members get: the same memfd, through a read-only file.
	const std::string self = "/proc/self/fd/" + std::to_string(fd);
	d.work_fd = ::open(self.c_str(), O_RDONLY | O_CLOEXEC);
	::close(fd);
	if (d.work_fd < 0) {
		*error = self + ": " + strerror(errno);
		return -errno;
	}
	gpuslot_preempt_init(&d.preempt, GPUSLOT_DEFAULT_PREEMPT_SHARE,
			     GPUSLOT_DEFAULT_PREEMPT_WINDOW_MS, now_ns());
	gpuslot_preempt_set_layout(&d.preempt, d.core.k, d.parts.priority, now_ns());
	gpuslot_preempt_publish(&d.preempt, d.work, d.core.generation, d.core.held);
	return 0;
}

void LockServer::close_work_state(Domain &d)
{
	if (d.work) {
		// A server that stops publishes that nothing has work, so that
		// no reader holds back for it before it sees the connection
		// gone (a killed one cannot: the library reads its page as
		// empty once the connection is gone).
		const uint64_t now = now_ns();
		for (unsigned int s = 0; s < GPUSLOT_MAX_SLOTS; s++)
			gpuslot_preempt_hold_ended(&d.preempt, s, now);
		gpuslot_preempt_publish(&d.preempt, d.work, d.core.generation, 0);
		munmap(d.work, GPUSLOT_WORK_STATE_SIZE);
		d.work = nullptr;
	}
	if (d.work_fd >= 0)
		::close(d.work_fd);
	d.work_fd = -1;
}

void LockServer::publish_work(Domain &d)
{
	if (!d.work)
		return;
	const gpuslot_work_state &w = *d.work; // ours alone to write
	const bool changed = w.generation != d.core.generation || w.k != d.core.k ||
			     w.held_mask != d.core.held ||
			     w.work_mask != gpuslot_preempt_work_mask(&d.preempt) ||
			     w.preempt_mask != gpuslot_preempt_preempt_mask(&d.preempt) ||
			     w.preempt_level != gpuslot_preempt_level(&d.preempt) ||
			     std::memcmp(w.priority, d.preempt.priority, sizeof(w.priority)) != 0;
	if (changed)
		gpuslot_preempt_publish(&d.preempt, d.work, d.core.generation, d.core.held);
	// When the next preempting slot's budget runs out: the domain's timer.
	const uint64_t expiry = gpuslot_preempt_next_expiry(&d.preempt);
	const uint64_t at = expiry == UINT64_MAX ? 0 : expiry ? expiry : 1;
	if (at != d.preempt_expiry) {
		d.preempt_expiry = at;
		arm_timer(d);
	}
}

void LockServer::work_layout_changed(Domain &d)
{
	gpuslot_preempt_set_layout(&d.preempt, d.core.k, d.parts.priority, now_ns());
	publish_work(d);
}

void LockServer::work_hold_ends(Domain &d, unsigned int slot)
{
	// Published before the slot goes to its next holder.
	gpuslot_preempt_hold_ended(&d.preempt, slot, now_ns());
	publish_work(d);
}

void LockServer::work_timer(Domain &d, uint64_t now)
{
	if (!d.preempt_expiry || d.preempt_expiry > now)
		return;
	d.preempt_expiry = 0;
	gpuslot_preempt_tick(&d.preempt, now);
	publish_work(d);
}

int LockServer::cmd_set_work(Conn &c, struct gpuslot_set_work &w)
{
	if (w.flags & ~GPUSLOT_WORK_PENDING)
		return EINVAL;
	// Only a completed hold's owner speaks for its slot.
	if (c.state != Conn::holding)
		return EPERM;
	Domain &d = *c.domain;
	gpuslot_preempt_set_work(&d.preempt, c.slot, w.flags & GPUSLOT_WORK_PENDING, now_ns());
	publish_work(d);
	return 0;
}

int LockServer::store_preempt_attr(Domain &d, const std::string &name, unsigned int v)
{
	const unsigned int share = name == "preempt_share" ? v : d.preempt.share;
	const unsigned int window_ms =
		name == "preempt_window_ms" ? v : unsigned(d.preempt.window_ns / 1000000);
	if (gpuslot_preempt_set_budget(&d.preempt, share, window_ms, now_ns()))
		return EINVAL; // nothing changed
	publish_work(d);
	return 0;
}

void LockServer::send_work_state(Conn &c, const char *data, size_t size)
{
	uint32_t flags = 0;
	int err = size == sizeof(flags) ? 0 : EINVAL;
	if (!err)
		std::memcpy(&flags, data, sizeof(flags));
	if (!err && flags)
		err = EINVAL;
	if (!err && c.work_state_sent)
		err = EBUSY;
	gpuslot_wire h{};
	h.magic = GPUSLOT_WIRE_MAGIC;
	h.cmd = GPUSLOT_WIRE_WORK_STATE;
	h.error = err ? err : c.domain->work_fd < 0 ? ENODEV : 0;
	h.seq = c.request_seq;
	iovec iov{&h, sizeof(h)};
	msghdr m{};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
	if (!h.error) {
		m.msg_control = control;
		m.msg_controllen = sizeof(control);
		cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(cm), &c.domain->work_fd, sizeof(int));
	}
	if (sendmsg(c.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) {
		c.work_state_sent = !h.error;
	} else if (c.state == Conn::idle) {
		// Lost (a full buffer, too many descriptors in flight): a
		// connection that holds nothing ends, so that its peer learns
		// it and asks again; one that holds or waits keeps going, as
		// for any reply it cannot take.
		close_conn(c);
		return;
	}
	if (c.state == Conn::granted)
		reply(c, 0, GPUSLOT_WIRE_GRANTED, 0, nullptr, 0);
}

} // namespace gpuslot
