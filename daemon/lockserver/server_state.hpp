// SPDX-License-Identifier: GPL-2.0
// The lock server's state: a domain (the module's struct gpuslot_domain:
// the lock core, the queue budget, the partitions, the holders) and a
// connection (the module's struct gpuslot_file: what one open file holds,
// waits for and has reserved). Shared by the server's commands
// (lock_server.cc, commands.cc, dispatch.cc, admission.cc, boost_ops.cc) and its
// attributes (attributes.cc).
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lock_server.hpp"
#include "peers.hpp"

extern "C" {
#include "boost.h"
#include "budget.h"
#include "core.h"
#include "partition.h"
#include "preempt.h"
}

namespace gpuslot {

// CLOCK_MONOTONIC in ns: the clock of waits, holds and deadlines.
inline uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct LockServer::Source {
	enum Kind { listener, connection, timer, stopper, housekeeping, orphan_exit } kind;
	Domain *domain = nullptr;
	Conn *conn = nullptr;
	Orphan *orphan = nullptr;
};

// Connections only an admin may take, beyond max_conns.
constexpr unsigned int kRootReserve = 16;

// One uid's connections and request budget; or the admins' (not limited,
// LockServer::member_for()).
struct LockServer::Member {
	uid_t uid = 0;
	bool limited = true;
	unsigned int conns = 0;
	int64_t tokens = 0;
	uint64_t refilled_ns = 0;
	bool paused = false;
	// Its refusals' log lines: those written in the window that began at
	// @log_window_ns, and those left out since the last line said so (as
	// the kernel's pr_*_ratelimited()).
	uint64_t log_window_ns = 0;
	unsigned int logged = 0;
	uint64_t suppressed = 0;
};

// A hold that a dead gpuslotd left, its holder still living: the slot is
// held for it until it reclaims it, exits, or the grace period ends.
struct LockServer::Orphan {
	unsigned int domain = 0, slot = 0;
	pid_t pid = 0, tid = 0;
	uint64_t start_time = 0;
	uint64_t client_token = 0; // the holding connection's, 0: none
	int pidfd = -1; // readable when the holder exits
	Source source{Source::orphan_exit};
};

// The state file (gpuslotd.state in the socket directory): a header and,
// per domain, the generation and a record per slot. Written in place
// through a shared mapping, so what a SIGKILLed server wrote is there for
// the next one; flock()ed by the server that serves the directory.
struct StateHold {
	enum : uint32_t { free = 0, held = 1, boosted = 2 };
	uint32_t state;
	int32_t pid, tid;
	uint32_t prio; // the boost applied
	uint64_t start_time; // the holder process's, clock ticks after boot
	// What the holder thread ran at before the boost.
	uint32_t policy, rt_priority;
	int32_t nice;
	uint32_t reset_on_fork;
	// Who the thread was when boosted: a hash of what owner_of() read
	// (uids, gids, groups, CapEff/CapPrm, the program's device and inode);
	// 0: unknown. A restore after a change gives back nothing privileged.
	uint64_t owner;
	// The holding connection's client token (GPUSLOT_WIRE_CLIENT_TOKEN),
	// 0: none. After a restart only a connection of the holder's process
	// with the same token reclaims the hold.
	uint64_t client_token;
};

// The record of a state file of version 2 (gpuslotd before client
// tokens): read, as if the holds had been taken without a token.
struct StateHoldV2 {
	uint32_t state;
	int32_t pid, tid;
	uint32_t prio;
	uint64_t start_time;
	uint32_t policy, rt_priority;
	int32_t nice;
	uint32_t reset_on_fork;
	uint64_t owner;
};

// The record of a state file of version 1 (gpuslotd before the owner was
// recorded): read, as if the owner were unknown.
struct StateHoldV1 {
	uint32_t state;
	int32_t pid, tid;
	uint32_t prio;
	uint64_t start_time;
	uint32_t policy, rt_priority;
	int32_t nice;
	uint32_t reset_on_fork;
};

struct StateDomain {
	uint64_t generation;
	StateHold slot[GPUSLOT_MAX_SLOTS];
};

struct StateHeader {
	uint64_t magic; // kStateMagic
	uint32_t nr_domains;
	uint32_t size; // sizeof(StateHold), a check of the layout
};

constexpr uint64_t kStateMagic = 0x33657461736c7367ULL; // "gslstat3"
constexpr uint64_t kStateMagicV2 = 0x32657461736c7367ULL; // "gslstat2"
constexpr uint64_t kStateMagicV1 = 0x31657461736c7367ULL; // "gslstat1"

inline StateDomain *state_domain(void *state, unsigned int i)
{
	return reinterpret_cast<StateDomain *>(static_cast<char *>(state) + sizeof(StateHeader)) +
	       i;
}

// A boost a dead server left on @h's holder thread, given back if the
// holder (pid and start time) still lives and the thread still runs at
// the boost; the hold stays recorded, unboosted. Whether the holder lives;
// its pidfd in *@pidfd_out if wanted. Lines for the log in *@notes.
// (boost_ops.cc, beside the boost ledger it mirrors.)
bool give_back_boost(StateHold &h, unsigned int domain, unsigned int slot,
		     std::vector<std::string> *notes, int *pidfd_out);
// A fingerprint of a thread's owner (owner_of()'s text), for the state
// file: 0 for "" (unknown).
uint64_t owner_fingerprint(const std::string &owner);
// Close a server's state file fd (its lock goes with it).
void close_state_file(int fd);

struct LockServer::Conn {
	int fd = -1;
	Domain *domain = nullptr;
	pid_t pid = 0;
	uid_t uid = 0;
	uint64_t start_time = 0; // the connector's, clock ticks after boot
	// The client's token (GPUSLOT_WIRE_CLIENT_TOKEN), 0: none set. Who
	// may reclaim this connection's hold after a restart of gpuslotd.
	uint64_t client_token = 0;
	Member *member = nullptr;
	// Root (or gpuslotd's user) connected: as on a sysfs file that root
	// opened, attribute writes then fail EPERM, not EACCES, once the
	// caller is no admin.
	bool admin_at_connect = false;
	Source source{Source::connection};
	bool paused = false; // its uid's request budget is spent
	// The work state's memfd went out on it (once a connection: a member
	// that never reads its socket holds at most one in flight each).
	bool work_state_sent = false;
	enum State { idle, acquiring, holding, queued, granted } state = idle;
	struct Waiter {
		gpuslot_core_waiter core;
		Conn *conn;
	} waiter{};
	uint32_t acquire_size = 0; // the pending ACQUIRE's struct size
	unsigned int slot = 0;
	uint64_t generation = 0;
	uint64_t start_ns = 0;
	bool timed = false;
	std::multimap<uint64_t, Conn *>::iterator deadline;
	int async_error = 0;
	// The boost: the peer pinned by a pidfd, the thread of the last
	// request, and the ledger's record of this connection's hold.
	int pidfd = -1;
	pid_t request_pid = 0, request_tid = 0; // the current message's caller
	// The sender's uid as the kernel stamped the message (SCM_CREDENTIALS),
	// in our (the initial) user namespace; -1 without credentials.
	uid_t request_uid = uid_t(-1);
	// A sender other than the connector (a forked child): its pidfd,
	// taken as its message came, and a queued ACQUIRE's caller's.
	int request_pidfd = -1, acquire_pidfd = -1;
	pid_t request_pidfd_pid = 0;
	uint64_t request_start = 0, acquire_start = 0; // their start times
	// Requests are answered under their sequence number: the current
	// one's, and those of a queued ACQUIRE and a waiting RESERVE_QUEUES.
	uint32_t request_seq = 0, acquire_seq = 0, reserve_seq = 0;
	pid_t acquire_pid = 0, acquire_tid = 0; // the caller of a queued ACQUIRE
	// Priority inheritance (LockServer::inherit()): the real-time
	// priority a queued ACQUIRE's caller lends the holders of the slots it
	// accepts, and the highest lent to this connection's hold.
	unsigned int lend_prio = 0, inherit_prio = 0;
	uint64_t hold_seq = 0;
	gpuslot_boost_hold boost{};
	// The current hold, as the holders table shows it: the thread that
	// asked for it, since when, and its boost; max_hold_ms's clock.
	pid_t holder_pid = 0, holder_tid = 0;
	uint64_t hold_start_ns = 0;
	uint64_t hold_max_ns = 0; // the domain's max_hold_ms at the grant; 0: none
	enum HoldBoost { unboosted, boosted, overrun } hold_boost = unboosted;
	uint64_t boost_refused_seq = 0; // the hold whose boost was refused
	BoostRefusal boost_refusal = refused_by_kernel; // why

	// Whether the thread of the current message, of a queued ACQUIRE and
	// of the hold may be boosted (may_be_boosted(), decided as each
	// ACQUIRE or ACQUIRE_COMPLETE came, from the thread's credentials).
	bool request_may_boost = false, acquire_may_boost = false, holder_may_boost = false;
	bool hold_timed = false;
	std::multimap<uint64_t, Conn *>::iterator hold_deadline;
	// Hardware queues.
	unsigned int hqd_reserved = 0;
	pid_t hqd_pid = 0; // who reserved first, for the queues table
	struct BudgetWaiter {
		gpuslot_budget_waiter b;
		Conn *conn;
	} hqd_waiter{};
	bool hqd_waiting = false;
	bool hqd_timed = false;
	uint32_t reserve_size = 0;
	gpuslot_reserve_queues reserve{};
	std::multimap<uint64_t, Conn *>::iterator hqd_deadline;
};

struct LockServer::Domain {
	unsigned int id = 0;
	int listen_fd = -1;
	int timer_fd = -1;
	Source listen_source{Source::listener};
	Source timer_source{Source::timer};
	gpuslot_core core{};
	gpuslot_budget budget{};
	gpuslot_partitions parts{};
	Conn *holder[GPUSLOT_MAX_SLOTS] = {};
	Orphan *orphan[GPUSLOT_MAX_SLOTS] = {}; // a dead gpuslotd's holds
	unsigned int max_hold_ms = GPUSLOT_DEFAULT_MAX_HOLD_MS;
	unsigned int boost_priority = GPUSLOT_DEFAULT_BOOST_PRIORITY;
	unsigned int max_boost_share = GPUSLOT_DEFAULT_MAX_BOOST_SHARE;
	gpuslot_stats stats{};
	uint64_t boosts_refused = 0; // sysfs stats/boosts_refused; not in GET_STATS
	// Timed waits, earliest first: slots and queue reservations.
	std::multimap<uint64_t, Conn *> deadlines;
	std::multimap<uint64_t, Conn *> hqd_deadlines;
	uint64_t armed_ns = 0; // the timerfd's expiry (0: disarmed)
	// Boosted holds, by when they reach max_hold_ms or their thread's
	// boost budget runs out.
	std::multimap<uint64_t, Conn *> hold_deadlines;
	std::string pci_bus_id; // DDDD:BB:DD.F, or empty while unknown
	// Writes to slot<i>/units and slot<i>/priority wait here for commit:
	// the live layout of generation @staged_from, as the writes changed
	// it (attributes.cc). Stale, and dropped, once the generation moved.
	bool staged = false;
	uint64_t staged_from = 0;
	gpuslot_partitions staged_parts{};
	// Preemptive slots (work_state.cc): the slots' work and preemption
	// budgets, the server's writable mapping of the sealed memfd that
	// publishes them, the read-only file members get, and when the next
	// budget runs out (0: none), for arm_timer().
	gpuslot_preempt preempt{};
	gpuslot_work_state *work = nullptr;
	int work_fd = -1;
	uint64_t preempt_expiry = 0;
};

// What the module would refuse in layout @p with @k slots, for a person
// (the priorities' range, kmod/lockcore/partition.c's rules), or "" if nothing.
std::string layout_problem(const gpuslot_partitions &p, unsigned int k);

// The connection whose lock-core waiter, or queue-budget waiter, @w is.
inline LockServer::Conn &waiting_conn(const gpuslot_core_waiter *w)
{
	return *reinterpret_cast<const LockServer::Conn::Waiter *>(
			reinterpret_cast<const char *>(w) - offsetof(LockServer::Conn::Waiter, core))
			->conn;
}

inline LockServer::Conn &waiting_conn(const gpuslot_budget_waiter *w)
{
	return *reinterpret_cast<const LockServer::Conn::BudgetWaiter *>(
			reinterpret_cast<const char *>(w) - offsetof(LockServer::Conn::BudgetWaiter, b))
			->conn;
}

} // namespace gpuslot
