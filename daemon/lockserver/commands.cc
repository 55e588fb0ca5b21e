// SPDX-License-Identifier: GPL-2.0
// The socket transport's commands, as the module's ioctls: ACQUIRE and its
// asynchronous form, RELEASE, CANCEL, the queue budget's RESERVE and
// UNRESERVE, and an admin's k and layouts (with their generations).
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

namespace gpuslot {

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
	const bool reclaim_only = a.flags & GPUSLOT_ACQUIRE_RECLAIM;
	if (a.__reserved ||
	    (a.flags & ~(GPUSLOT_ACQUIRE_TRY | GPUSLOT_ACQUIRE_DEADLINE | GPUSLOT_ACQUIRE_RECLAIM)) ||
	    ((a.flags & GPUSLOT_ACQUIRE_TRY) && timed) || (!timed && a.deadline_ns) ||
	    (reclaim_only && !(a.flags & GPUSLOT_ACQUIRE_TRY)))
		return EINVAL;
	if (int err = may_acquire(d, c, allowed))
		return err;
	c.start_ns = now_ns();
	c.acquire_pid = c.request_pid;
	c.acquire_tid = c.request_tid;
	c.acquire_may_boost = c.request_may_boost;
	take_acquire_pidfd(c);
	int slot = reclaim(d, c, allowed);
	// RECLAIM: the kept hold or nothing, so that a client taking its hold
	// back learns when it was lost (a free slot is no hold kept).
	if (slot < 0 && !reclaim_only)
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
	c.acquire_may_boost = false; // the COMPLETE's caller is the holder
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
	c.holder_may_boost = c.request_may_boost;
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
	work_layout_changed(d);
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
	work_layout_changed(d);
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

} // namespace gpuslot
