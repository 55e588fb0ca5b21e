// SPDX-License-Identifier: GPL-2.0
// The boost on the socket transport: the module's ledger (kmod/lockcore/boost.c)
// over threads of peer processes, each checked against a pidfd before every
// change; boosting a holder and ending it (max_hold_ms, the member's budget);
// priority inheritance from waiters; the server's own priority above every
// boost; and what a dead server's boosts get back (give_back_boost()).
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
#include <fstream>
#include <map>
#include <memory>

#include <pthread.h>
#include <sys/stat.h>


namespace gpuslot {

namespace {

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

// One ledger, on gpuslotd's one thread: @l is it.
gpuslot_boost_thread *task_new_thread(gpuslot_boost_ledger *, task_struct *p)
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
uint32_t task_member_id(gpuslot_boost_ledger *, task_struct *p)
{
	return p->uid;
}

gpuslot_boost_member *task_new_member(gpuslot_boost_ledger *)
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

} // namespace

// CAP_SYS_NICE in our effective set: without it there is no boost.
bool can_boost()
{
	return creds_of("self").caps >> kCapSysNice & 1;
}

void boost_ledger_init()
{
	gpuslot_boost_ledger_init(&ledger, &task_ops);
}

void boost_finish_any(gpuslot_boost_hold *hold)
{
	gpuslot_boost_finish(&ledger, hold, UINT64_MAX);
	prune_tasks();
}

void boost_drain_all()
{
	gpuslot_boost_drain(&ledger);
	prune_tasks();
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

void LockServer::boost(Domain &d, Conn &c, pid_t pid, pid_t tid)
{
	if (!d.boost_priority || c.pidfd < 0 || tid <= 0 || c.hold_boost == Conn::overrun)
		return;
	// The slot travels with the connection, the boost does not: a thread
	// of another user than the connector's, without CAP_SYS_NICE, holds
	// unboosted (decided as its request came: may_be_boosted(), and
	// again where a boost begins later: recheck_may_boost()).
	if (!c.holder_may_boost) {
		if (c.state == Conn::holding)
			boost_refused(d, c, tid, refused_other_user);
		return;
	}
	// A hold past its max_hold_ms is boosted no more, whatever its waiters
	// lend it: an unboosted hold has no clock, so reaching the bound left
	// no mark (the module's rule, docs/device.md).
	if (c.state == Conn::holding && c.hold_boost == Conn::unboosted && c.hold_max_ns &&
	    now_ns() - c.hold_start_ns >= c.hold_max_ns)
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
		boost_refused(d, c, tid, refused_by_kernel);
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
		if (h->state == Conn::holding) {
			recheck_may_boost(d, *h, h->holder_pid, h->holder_tid);
			boost(d, *h, h->holder_pid, h->holder_tid);
		}
	}
}

// Whether @c's holder may still be boosted, asked again where a boost
// begins later than the request that decided it (a grant after a wait, a
// waiter's lending to an unboosted hold): the thread may have exec'd
// another user's program meanwhile, as the module asks at each boost. Not
// on the request's own message, which has just asked (the uncontended
// acquire's path reads /proc once).
void LockServer::recheck_may_boost(Domain &d, Conn &c, pid_t pid, pid_t tid)
{
	if (d.boost_priority && c.holder_may_boost && !c.boost.thread &&
	    !may_be_boosted(pid, tid, pidfd_for(c, pid), c.uid))
		c.holder_may_boost = false;
}

// The holder of @c gets no boost, for @why: the kernel refused it RT, as
// it would refuse the thread itself (docs/device.md, the boost's policy
// checks), or it is another user's thread on a passed connection. The hold
// goes on unboosted; counted, named in the connection's fdinfo, and logged
// at most once a second.
void LockServer::boost_refused(Domain &d, Conn &c, pid_t tid, BoostRefusal why)
{
	// Once per hold: inheritance boosts a hold again as lending changes.
	if (c.boost_refused_seq == c.hold_seq)
		return;
	d.boosts_refused++;
	c.boost_refused_seq = c.hold_seq;
	c.boost_refusal = why;
	const uint64_t now = now_ns();
	if (now - last_refusal_log_ns_ < 1000000000 && last_refusal_log_ns_)
		return;
	last_refusal_log_ns_ = now;
	if (why == refused_other_user)
		std::fprintf(stderr, "gpuslotd: gpu%u: no boost for thread %d, holder of slot %u: not of "
			     "uid %u, which opened the connection, and without CAP_SYS_NICE\n",
			     d.id, int(tid), c.slot, unsigned(c.uid));
	else
		std::fprintf(stderr, "gpuslotd: gpu%u: no boost for thread %d, holder of slot %u: the "
			     "kernel refused it SCHED_FIFO (EPERM: an RT cgroup without runtime, or "
			     "an LSM)\n",
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

} // namespace gpuslot
