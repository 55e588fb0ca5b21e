// SPDX-License-Identifier: GPL-2.0
// The lock without the module: gpuslotd serves each GPU domain on a Unix
// socket (SOCK_SEQPACKET), one connection standing for one open file of
// /dev/gpuslot, with the module's own lock code (kmod/lockcore/core.c, budget.c,
// partition.c, built for userspace) and the module's semantics: strict
// FIFO with direct handoff, allowed-slot masks, try / timeout / forever,
// the asynchronous acquire, k and layouts with generations, the HQD budget,
// statistics. The wire messages are the uapi structs (see "The socket
// transport" in <linux/gpuslot.h>), so the two transports cannot drift.
//
// Death is release: a connection that closes (exit, crash, SIGKILL) frees
// its slot and its queues. Admin commands (SET_K, SET_LAYOUT, attribute
// writes, the debug/ tables) need the message's sender to be uid 0 as the
// kernel stamped the message when it was sent (SCM_CREDENTIALS), with
// CAP_SYS_ADMIN in the initial user namespace as its pidfd vouches for at
// the request (peers.hpp); or, for a gpuslotd that a user started without
// root, that user holding every capability gpuslotd holds.
//
// What one member can cost the server is bounded (docs/transports.md, "The
// threat model"): connections per uid and in all, requests per uid (a
// token bucket: a uid over its rate is not read until it has tokens again),
// thread names cached. gpuslotd's own death is survived: the holds and
// boosts are recorded in a state file (an mmap'd table in the socket
// directory, flock'd by the one server that serves it), so that the next
// server gives back the boosts a dead one left and keeps the slots of
// holders that still live for a grace period in which they reclaim them
// (the same process and client token). A state file gpuslotd cannot trust
// or read is logged and moved aside, never used (state_file.cc).
//
// One thread runs everything (epoll); timeouts are one timerfd per domain
// over an ordered set of deadlines, so a queue of thousands costs
// O(log n) per operation, and no thread waits per waiter.
//
// The boost: with CAP_SYS_NICE, the holding thread runs SCHED_FIFO at the
// domain's boost priority under the module's own ledger (kmod/lockcore/boost.c: one
// record per thread, nesting, the restore rules). The thread id a client
// names in its request must be a thread of the peer process, checked
// through a pidfd of the peer taken at connect; and it must be of the
// connector's effective uid, or hold CAP_SYS_NICE (the module's rule for a
// passed file: a connection passed to another user's process gives it the
// slots, not the boost; peers.hpp, may_be_boosted()). Without CAP_SYS_NICE the
// boost is off and DOMAIN_INFO says boost_priority 0. max_hold_ms ends a
// boost as in the module, read when the slot is granted; the server's
// thread runs SCHED_FIFO one above the highest boost_priority of its
// domains (at most GPUSLOT_MAX_BOOST_PRIORITY, 98), so that a holder
// spinning at its boost on the server's CPU cannot keep the server from
// ending that boost. A thread that exec'd or changed credentials while
// boosted gets back no real-time policy and no negative nice (kmod/lockcore/boost.h).
// Not yet: a client in another PID namespace (its thread ids do not match
// ours: no boost).
//
// The files' counterpart: GPUSLOT_WIRE_ATTR_READ/WRITE read and write the
// attributes of /sys/class/gpuslot/gpu<N>/, debugfs's tables (debug/<name>,
// admins only) and the connection's fdinfo with the module's text
// (attributes.cc), so gpuslotctl and the tests read one format from both.
// A gsl1 peer (API 1) is answered in its own header and closed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <linux/gpuslot.h>
#include <gpuslot_wire.h>

struct list_head; // kmod's lists, of the lock core
struct ucred; // <sys/socket.h>

namespace gpuslot {

// A domain's hardware-queue budget when no topology says otherwise: the
// module's default (GPUSLOT_DEFAULT_HQD_LIMIT, kmod/lockcore/budget.h; AMD's number,
// not kernel ABI, so not in the uapi).
inline constexpr unsigned int kDefaultHqdLimit = 24;

// What accepting a member's connection costs its uid's request budget
// (tokens, as one request costs one): the accept, the peer's credentials,
// a pidfd and two /proc reads, at real-time priority.
constexpr unsigned int kAcceptCost = 4;

struct LockServerOptions {
	std::filesystem::path socket_dir = "/run/gpuslot";
	unsigned int nr_domains = 1;
	// The sockets' group and mode: members of the group may connect.
	gid_t group = gid_t(-1);
	mode_t mode = 0660;
	// Connections: per uid (an admin's are not counted: uid 0 with
	// CAP_SYS_ADMIN, not uid 0 alone) and in all (0: a fifth
	// of RLIMIT_NOFILE, less a reserve: each costs up to five fds, its
	// socket and pidfds).
	unsigned int max_conns_per_uid = 256;
	unsigned int max_conns = 0;
	// Requests per second a uid may make (an admin's connections: any)
	// (a table read costs one more per line), and the burst it may save.
	unsigned int member_rate = 20000;
	unsigned int member_burst = 20000;
	// How long the holds a dead gpuslotd left stay reserved for their
	// holders to reclaim (their process still living), at most.
	unsigned int grace_ms = 10000;
	// Log lines of refusals (a gsl1 peer) per uid: at most @refusal_log_burst
	// in @refusal_log_interval_ms, then one line saying how many were left
	// out (the kernel's ratelimit defaults: 10 in 5 s).
	unsigned int refusal_log_interval_ms = 5000;
	unsigned int refusal_log_burst = 10;
	// Take the connector's pidfd with SO_PEERPIDFD where the kernel has it
	// (6.5); off, or on older kernels: pidfd_open() at once, checked.
	bool peer_pidfd = true;
};

// What a dead gpuslotd left in @state (its state file): boosts given back
// now (SCHED_FIFO threads of holders that still live, by pid and start
// time), as ExecStopPost and the next start do. Lines for the log in
// *@notes. Fails (-errno, *@notes says why) if a server holds the file,
// and gives nothing back from one it cannot trust (another owner, group- or
// other-writable, not a regular file: -EPERM) or read (-EINVAL): that file
// is moved aside.
int restore_boosts(const std::filesystem::path &state, std::vector<std::string> *notes);

// gpu<domain>.sock in @dir.
std::filesystem::path domain_socket(const std::filesystem::path &dir, unsigned int domain);

class LockServer {
public:
	explicit LockServer(const LockServerOptions &options);
	LockServer(const LockServer &) = delete;
	LockServer &operator=(const LockServer &) = delete;
	~LockServer();

	// Create the sockets and the event loop: 0 or -errno with *error.
	int start(std::string *error);
	// Serve until stop(); 0, or -errno with *error. May be called again
	// after it returned, on another thread too, and serves on.
	int run(std::string *error);
	// Make run() return; safe from any thread and from signal handlers.
	void stop();
	// Holders are boosted (gpuslotd has CAP_SYS_NICE); valid after start().
	bool boosting() const { return boost_; }
	// What start() found of a previous gpuslotd: boosts given back, holds
	// kept for reclaim (lines for the log).
	const std::vector<std::string> &recovered() const { return recovered_; }
	// Call @f every @interval_ns on the server's thread while run() runs
	// (gpuslotd's sd_notify WATCHDOG=1: sent only by a loop that turns).
	// Before run().
	void every(uint64_t interval_ns, std::function<void()> f);

	// SET_LAYOUT as an admin would (@l->partitions ignored: @parts has
	// @l->nr_partitions entries). Before run(), or on its thread. 0 or a
	// positive errno, as the ioctl.
	int set_layout(unsigned int domain, gpuslot_layout *l, const gpuslot_partition *parts);
	int get_layout(unsigned int domain, gpuslot_layout *l,
		       std::vector<gpuslot_partition> *parts) const;
	// What an admin changed: k (which resets every partition to the whole
	// GPU), or the partitions themselves (SET_LAYOUT, the partitions
	// attribute), which say what the admin wants, whole GPU included.
	enum class AdminChange { k, partitions };
	// Called on the server's thread after a client (an admin) changed a
	// domain's k or partitions, as gpuslotd watches sysfs on the device:
	// it may re-plan with set_layout().
	void on_admin_change(std::function<void(unsigned int domain, AdminChange what)> f)
	{
		admin_change_ = std::move(f);
	}
	// Write attribute @name of @domain as an admin would (pci_bus_id,
	// k, ...; see attributes.cc). Before run(), or on its thread. 0 or a
	// positive errno.
	int set_attr(unsigned int domain, const std::string &name, const std::string &text);

	struct Domain;
	struct Conn;
	// Why a hold went unboosted (the connection's fdinfo says): the
	// kernel refused its thread RT, or the thread is another user's than
	// the connector's, without CAP_SYS_NICE (a passed connection).
	enum BoostRefusal { refused_by_kernel, refused_other_user };
	struct Member;
	struct Orphan;

private:
	struct Source;
	void accept_on(Domain &d);
	// The connector's pidfd, and the member its connection counts as.
	int peer_pidfd(int fd, const ::ucred &cred, uint64_t *start) const;
	Member &member_for(uid_t uid, bool admin);
	// Listeners off while accept fails for want of fds, back on when one
	// frees or at a retry.
	void pause_listeners(uint64_t now);
	void resume_listeners();
	// A uid's request budget: false (and its connections paused until it
	// refills) once it is spent.
	bool charge(Conn &c, uint64_t cost);
	// The tokens @m has earned since its last refill, added.
	void refill(Member &m, uint64_t now);
	void set_member_paused(Member &m, bool paused);
	// Work at a time (the watchdog, retries, refills, grace): the
	// housekeeping timer.
	void at(uint64_t when, std::function<void()> f);
	void arm_housekeeping();
	void on_housekeeping();
	// The state file: open, lock, and read what a previous server left.
	int open_state(std::string *error);
	void record_hold(const Domain &d, unsigned int slot);
	void adopt_orphans();
	void end_orphan(Domain &d, unsigned int slot);
	// A holder of a dead gpuslotd's slot asks again: its slot, or -1.
	int reclaim(Domain &d, Conn &c, uint64_t allowed);
	// The pidfd that stands for @pid in @c's requests, or -1.
	int pidfd_for(const Conn &c, pid_t pid) const;
	void take_acquire_pidfd(Conn &c);
	void record_generation(const Domain &d);
	void on_message(Conn &c);
	void on_timer(Domain &d);
	void on_hold_deadline(Domain &d, Conn &c, uint64_t now);
	void close_conn(Conn &c);
	// Answer request @seq of @c (0: an announcement, GPUSLOT_WIRE_GRANTED).
	void reply(Conn &c, uint32_t seq, uint32_t cmd, int error, const void *data, size_t size,
		   const void *tail = nullptr, size_t tail_size = 0);
	void arm_timer(Domain &d);
	// A message of gsl1 (libgpuslot 1.x): refused in words both sides read.
	void refuse_old_peer(Conn &c, const gpuslot_wire &request);
	// Whether a refusal of @m's may be logged now (peers.cc); a line
	// saying how many were left out before it goes to the log first.
	bool may_log_refusal(Member &m);
	// Complete what the lock core finished: grants and failures.
	void finish(Domain &d, ::list_head *done);
	void finish_budget(Domain &d, ::list_head *done);
	void grant(Domain &d, Conn &c, unsigned int slot);
	// SCHED_FIFO for thread @tid of process @pid for @c's current hold (the
	// module's boost ledger, kmod/lockcore/boost.c), and the end of it.
	// Also sets the hold's priority when what its waiters lend it
	// changed (inherit()).
	void boost(Domain &d, Conn &c, pid_t pid, pid_t tid);
	void recheck_may_boost(Domain &d, Conn &c, pid_t pid, pid_t tid);
	void boost_refused(Domain &d, Conn &c, pid_t tid, BoostRefusal why);
	void unboost(Conn &c);
	// Priority inheritance, as in the module (kmod/lock.c): each holder
	// runs at least at the highest priority of the queued waiters that
	// accept its slot, within the boost. After every change of the queue
	// or of the holders.
	void inherit(Domain &d);
	// The real-time priority the caller of @c's queued ACQUIRE lends.
	unsigned int lend_prio(const Conn &c) const;
	void arm_hold(Domain &d, Conn &c, uint64_t budget_end);
	// SCHED_FIFO one above the highest boost_priority and every boost
	// still granted, on run()'s thread; boost_ended() after a boost ends.
	void run_above_boosts(unsigned int about_to_apply = 0);
	void boost_ended();
	void release_slot(Domain &d, Conn &c);

	// Whether @c may start an acquire of @allowed now: 0, or the errno
	// ACQUIRE and ACQUIRE_ASYNC give (EDEADLK, EBUSY, EINVAL).
	int may_acquire(const Domain &d, const Conn &c, uint64_t allowed) const;
	int cmd_acquire(Conn &c, gpuslot_acquire &a, uint32_t usize, bool *later);
	int cmd_release(Conn &c, gpuslot_release &r);
	int cmd_async(Conn &c, gpuslot_acquire &a);
	int cmd_complete(Conn &c, gpuslot_acquire &a);
	int cmd_cancel(Conn &c, gpuslot_release &r);
	int cmd_reserve(Conn &c, gpuslot_reserve_queues &r, uint32_t usize, bool *later);
	int cmd_unreserve(Conn &c, gpuslot_unreserve_queues &u);
	int cmd_set_k(Conn &c, gpuslot_set_k &s);
	int set_k(Domain &d, unsigned int k, __u64 *generation);
	int set_hqd_limit(Domain &d, unsigned int limit);
	// GPUSLOT_WIRE_ATTR_READ/WRITE (attributes.cc): 0 or a positive errno.
	int attr_read(const Conn &c, const std::string &name, std::string *text) const;
	int debug_table(const Domain &d, const std::string &table, std::string *text) const;
	std::string fdinfo(const Conn &c) const;
	// slot<i>/units and slot<i>/priority writes, staged; commit applies them.
	int stage_slot(Domain &d, unsigned int slot, const std::string &file,
		       const std::string &text);
	int commit_staged(Domain &d, const std::string &text);
	int attr_write(Conn &c, const std::string &name, const std::string &text);
	int store_attr(Domain &d, const std::string &name, const std::string &text);
	// The lines of a table it read (what the read cost).
	size_t on_attr(Conn &c, uint32_t cmd, const char *data, size_t size);
	bool admin(const Conn &c) const;
	std::string task_name(pid_t pid, pid_t tid) const;

	void admin_changed(const Domain &d, AdminChange what);

	// Preemptive slots (work_state.cc): the memfd, its publication after
	// every change, and the changes: a layout (k, priorities), a hold's
	// end (before the slot's next grant), the budget's expiry (from
	// on_timer()), a holder's SET_WORK, the admin's knobs.
	int open_work_state(Domain &d, std::string *error);
	void close_work_state(Domain &d);
	void publish_work(Domain &d);
	void work_layout_changed(Domain &d);
	void work_hold_ends(Domain &d, unsigned int slot);
	void work_timer(Domain &d, uint64_t now);
	int cmd_set_work(Conn &c, struct gpuslot_set_work &w);
	int store_preempt_attr(Domain &d, const std::string &name, unsigned int v);
	// GPUSLOT_WIRE_WORK_STATE: the memfd over SCM_RIGHTS.
	void send_work_state(Conn &c, const char *data, size_t size);

	LockServerOptions options_;
	std::function<void(unsigned int, AdminChange)> admin_change_;
	bool boost_ = false; // CAP_SYS_NICE: holders are boosted
	bool running_ = false; // run() has started: its thread's priority is ours to set
	unsigned int server_priority_ = 0; // SCHED_FIFO priority set last, 0: none
	// One above the highest boost_priority, what the server comes down to
	// once the boosts granted above it have ended.
	unsigned int configured_priority_ = 0;
	int epoll_fd_ = -1;
	int stop_fd_ = -1;
	std::vector<std::unique_ptr<Domain>> domains_;
	std::map<int, std::unique_ptr<Conn>> conns_;
	std::vector<std::unique_ptr<Source>> sources_;
	std::map<uid_t, std::unique_ptr<Member>> members_; // by uid, limited
	std::unique_ptr<Member> admins_; // admins' connections, not limited
	unsigned int max_conns_ = 0;
	bool listeners_paused_ = false;
	uint64_t accept_backoff_ns_ = 0;
	uint64_t last_refusal_log_ns_ = 0; // boost_refused()'s last log line
	int housekeeping_fd_ = -1;
	uint64_t housekeeping_armed_ = 0;
	std::multimap<uint64_t, std::function<void()>> later_;
	std::vector<std::pair<uint64_t, std::function<void()>>> every_;
	std::vector<std::shared_ptr<std::function<void()>>> ticks_;
	int state_fd_ = -1;
	void *state_ = nullptr;
	size_t state_size_ = 0;
	std::vector<std::unique_ptr<Orphan>> orphans_;
	std::vector<std::string> recovered_;
	// Thread names for the tables, read at most once a second each.
	struct Name {
		pid_t pid;
		std::string name;
		uint64_t read_ns;
	};
	mutable std::map<pid_t, Name> names_;
};

} // namespace gpuslot
