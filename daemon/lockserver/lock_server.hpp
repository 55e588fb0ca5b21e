// SPDX-License-Identifier: GPL-2.0
// The lock without the module: gpuslotd serves each GPU domain on a Unix
// socket (SOCK_SEQPACKET), one connection standing for one open file of
// /dev/gpuslot, with the module's own lock code (kmod/core.c, budget.c,
// partition.c, built for userspace) and the module's semantics: strict
// FIFO with direct handoff, allowed-slot masks, try / timeout / forever,
// the asynchronous acquire, k and layouts with generations, the HQD budget,
// statistics. The wire messages are the uapi structs (see "The socket
// transport" in <linux/gpuslot.h>), so the two transports cannot drift.
//
// Death is release: a connection that closes (exit, crash, SIGKILL) frees
// its slot and its queues. Admin commands (SET_K, SET_LAYOUT, attribute
// writes) need the peer to have CAP_SYS_ADMIN at the call (SO_PEERCRED,
// /proc), or to run as the user gpuslotd runs as (a gpuslotd that a user
// started without root is that user's to administer).
//
// One thread runs everything (epoll); timeouts are one timerfd per domain
// over an ordered set of deadlines, so a queue of thousands costs
// O(log n) per operation, and no thread waits per waiter.
//
// The boost: with CAP_SYS_NICE, the holding thread runs SCHED_FIFO at the
// domain's boost priority under the module's own ledger (kmod/boost.c: one
// record per thread, nesting, the restore rules). The thread id a client
// names in its request must be a thread of the peer process, checked
// through a pidfd of the peer taken at connect. Without CAP_SYS_NICE the
// boost is off and DOMAIN_INFO says boost_priority 0. max_hold_ms ends a
// boost as in the module, read when the slot is granted; the server's
// thread runs SCHED_FIFO one above the highest boost_priority of its
// domains (at most GPUSLOT_MAX_BOOST_PRIORITY, 98), so that a holder
// spinning at its boost on the server's CPU cannot keep the server from
// ending that boost. A thread that exec'd or changed credentials while
// boosted gets back no real-time policy and no negative nice (kmod/boost.h).
// Not yet: a client in another PID namespace (its thread ids do not match
// ours: no boost).
//
// The sysfs tree's counterpart: GPUSLOT_WIRE_ATTR_READ/WRITE read and write
// the attributes of /sys/kernel/gpuslot/gpu<N>/ with their sysfs text
// (attributes.cc), so gpuslotctl and the tests read one format from both.
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

struct list_head; // kmod's lists, of the lock core

namespace gpuslot {

struct LockServerOptions {
	std::filesystem::path socket_dir = "/run/gpuslot";
	unsigned int nr_domains = 1;
	// The sockets' group and mode: members of the group may connect.
	gid_t group = gid_t(-1);
	mode_t mode = 0660;
};

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
	// Serve until stop(); 0, or -errno with *error.
	int run(std::string *error);
	// Make run() return; safe from any thread and from signal handlers.
	void stop();
	// Holders are boosted (gpuslotd has CAP_SYS_NICE); valid after start().
	bool boosting() const { return boost_; }

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

private:
	struct Source;
	void accept_on(Domain &d);
	void on_message(Conn &c);
	void on_timer(Domain &d);
	void on_hold_deadline(Domain &d, Conn &c, uint64_t now);
	void close_conn(Conn &c);
	// Answer request @seq of @c (0: an announcement, GPUSLOT_WIRE_GRANTED).
	void reply(Conn &c, uint32_t seq, uint32_t cmd, int error, const void *data, size_t size,
		   const void *tail = nullptr, size_t tail_size = 0);
	void arm_timer(Domain &d);
	// Complete what the lock core finished: grants and failures.
	void finish(Domain &d, ::list_head *done);
	void finish_budget(Domain &d, ::list_head *done);
	void grant(Domain &d, Conn &c, unsigned int slot);
	// SCHED_FIFO for thread @tid of process @pid for @c's current hold (the
	// module's boost ledger, kmod/boost.c), and the end of it.
	void boost(Domain &d, Conn &c, pid_t pid, pid_t tid);
	void unboost(Conn &c);
	void arm_hold(Domain &d, Conn &c, uint64_t budget_end);
	// SCHED_FIFO one above the highest boost_priority, on run()'s thread.
	void run_above_boosts();
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
	int attr_read(const Domain &d, const std::string &name, std::string *text) const;
	int attr_write(Conn &c, const std::string &name, const std::string &text);
	int store_attr(Domain &d, const std::string &name, const std::string &text);
	void on_attr(Conn &c, uint32_t cmd, const char *data, size_t size);
	bool admin(const Conn &c) const;

	void admin_changed(const Domain &d, AdminChange what);

	LockServerOptions options_;
	std::function<void(unsigned int, AdminChange)> admin_change_;
	bool boost_ = false; // CAP_SYS_NICE: holders are boosted
	bool running_ = false; // run() has started: its thread's priority is ours to set
	unsigned int server_priority_ = 0; // SCHED_FIFO priority set last, 0: none
	int epoll_fd_ = -1;
	int stop_fd_ = -1;
	std::vector<std::unique_ptr<Domain>> domains_;
	std::map<int, std::unique_ptr<Conn>> conns_;
	std::vector<std::unique_ptr<Source>> sources_;
};

} // namespace gpuslot
