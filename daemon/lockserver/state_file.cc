// SPDX-License-Identifier: GPL-2.0
// The lock server's state file (gpuslotd.state in the socket directory,
// laid out in server_state.hpp): opened only if gpuslotd can trust it,
// read, moved aside when it cannot be used, and the holds a dead server
// left kept for their holders to reclaim.
#include "boost_ops.hpp"
#include "lock_server.hpp"
#include "server_state.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

namespace gpuslot {

namespace {

const char kStateName[] = "gpuslotd.state";

// The state files' fds of the servers of this process: a forked child
// closes its copies, so that the lock stays the server's alone (flock()
// belongs to the open file, which fork() shares).
std::mutex state_fds_lock;
std::set<int> state_fds;

void forget_state_fds_in_child()
{
	for (int fd : state_fds)
		::close(fd);
	state_fds.clear();
}

// Why gpuslotd cannot trust the file @st describes, or "": it must be a
// regular file (not a link to one elsewhere, a FIFO or a device), gpuslotd's
// own, and writable by no one else. A file that a member could write or
// plant would give it whatever the restore gives back (SCHED_FIFO at the
// priority the file names) and the slots the file says are held.
std::string untrusted(const struct stat &st)
{
	if (S_ISLNK(st.st_mode))
		return "a symbolic link";
	if (!S_ISREG(st.st_mode))
		return "not a regular file";
	if (st.st_uid != geteuid())
		return "owned by uid " + std::to_string(st.st_uid) + ", not gpuslotd's (" +
		       std::to_string(geteuid()) + ")";
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		char mode[8];
		std::snprintf(mode, sizeof(mode), "%04o", unsigned(st.st_mode & 07777));
		return std::string("writable by its group or others (mode ") + mode + ")";
	}
	return "";
}

// @path renamed to @path.bad.<n>, the first such name that is free (never
// over another file, never deleted: an admin may want to see it), with a
// line in *@notes saying why (@why) and where it went. False (and the
// line says so) if it cannot be moved.
bool move_aside(const std::filesystem::path &path, const std::string &why,
		std::vector<std::string> *notes)
{
	for (unsigned int n = 1; n <= 1000; n++) {
		std::filesystem::path to = path;
		to += ".bad." + std::to_string(n);
		if (!renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE)) {
			notes->push_back(path.string() + ": " + why + ": not used; moved aside to " +
					 to.string());
			return true;
		}
		if (errno != EEXIST)
			break;
	}
	notes->push_back(path.string() + ": " + why + ": not used, and cannot be moved aside: " +
			 strerror(errno));
	return false;
}

// Open and lock @path, a state file gpuslotd can trust (untrusted()): the
// fd, or -errno (EBUSY: a server holds it). One it cannot trust is never
// read: it is named in *@notes and moved aside, and with @create a new one
// takes its place; without, -EPERM. The checks are of the file opened
// (fstat), with O_NOFOLLOW; lstat() first keeps a FIFO or a device from
// being opened at all.
int lock_state_file(const std::filesystem::path &path, bool create,
		    std::vector<std::string> *notes, std::string *error)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		struct stat st;
		std::string why;
		int fd = -1;
		if (lstat(path.c_str(), &st) == 0)
			why = untrusted(st);
		if (why.empty()) {
			fd = ::open(path.c_str(),
				    O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
					    (create ? O_CREAT : 0),
				    0600);
			if (fd < 0 && errno == ELOOP)
				why = "a symbolic link";
			else if (fd < 0) {
				const int err = errno;
				*error = path.string() + ": " + strerror(err);
				return -err;
			} else if (fstat(fd, &st) || !(why = untrusted(st)).empty()) {
				if (why.empty())
					why = std::string("fstat: ") + strerror(errno);
				::close(fd);
				fd = -1;
			}
		}
		if (!why.empty()) {
			if (!move_aside(path, why, notes)) {
				*error = notes->back();
				return -EPERM;
			}
			if (!create) {
				*error = path.string() + ": not trusted: nothing restored";
				return -EPERM;
			}
			continue;
		}
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			int err = errno == EWOULDBLOCK ? EBUSY : errno;
			::close(fd);
			*error = path.string() + (err == EBUSY ? ": another gpuslotd serves this socket "
								 "directory (it holds this file)"
							       : std::string(": ") + strerror(err));
			return -err;
		}
		return fd;
	}
	*error = path.string() + ": replaced again and again while gpuslotd opened it";
	return -EAGAIN;
}

// The table of an older state file, whose records are @OldHold: read
// after its header, each record made a StateHold by @convert (what the old
// layout did not record is unknown); empty, and @cut_short told, if the
// file ends before its table does.
template <class OldHold, class CutShort, class Convert>
std::vector<StateDomain> read_old_state(int fd, uint32_t nr_domains, const CutShort &cut_short,
					const Convert &convert)
{
	struct OldDomain {
		uint64_t generation;
		OldHold slot[GPUSLOT_MAX_SLOTS];
	};
	std::vector<OldDomain> old(nr_domains);
	std::vector<StateDomain> out;
	const ssize_t want = ssize_t(old.size() * sizeof(OldDomain));
	if (pread(fd, old.data(), size_t(want), sizeof(StateHeader)) != want) {
		cut_short(size_t(want));
		return out;
	}
	out.resize(old.size());
	for (size_t i = 0; i < old.size(); i++) {
		out[i].generation = old[i].generation;
		for (unsigned int s = 0; s < GPUSLOT_MAX_SLOTS; s++)
			out[i].slot[s] = convert(old[i].slot[s]);
	}
	return out;
}

// The table a previous server left in @fd: its domains, or empty (a new
// file, or one of a layout we do not know: then *@problem says what is
// wrong with it). A version-1 file (an older gpuslotd's) is read as one
// whose holders' owners are unknown.
std::vector<StateDomain> read_state(int fd, std::string *problem)
{
	StateHeader h{};
	std::vector<StateDomain> out;
	struct stat st;
	const off_t size = fstat(fd, &st) ? 0 : st.st_size;
	if (size == 0)
		return out; // a new file
	const auto cut_short = [&](size_t want) {
		*problem = "its table is cut short (" + std::to_string(h.nr_domains) +
			   " domains need " + std::to_string(sizeof(h) + want) + " bytes, it has " +
			   std::to_string(size) + ")";
	};
	if (pread(fd, &h, sizeof(h), 0) != ssize_t(sizeof(h))) {
		*problem = "shorter than its header (" + std::to_string(size) + " bytes)";
		return out;
	}
	if (h.nr_domains > 4096) {
		*problem = "it claims " + std::to_string(h.nr_domains) + " domains (at most 4096)";
		return out;
	}
	if (h.magic == kStateMagic && h.size == sizeof(StateHold)) {
		out.resize(h.nr_domains);
		const ssize_t want = ssize_t(out.size() * sizeof(StateDomain));
		if (pread(fd, out.data(), size_t(want), sizeof(h)) != want) {
			out.clear();
			cut_short(size_t(want));
		}
		return out;
	}
	if (h.magic == kStateMagicV2 && h.size == sizeof(StateHoldV2))
		return read_old_state<StateHoldV2>(fd, h.nr_domains, cut_short,
						   [](const StateHoldV2 &o) {
							   return StateHold{o.state, o.pid, o.tid, o.prio,
									    o.start_time, o.policy,
									    o.rt_priority, o.nice,
									    o.reset_on_fork, o.owner, 0};
						   });
	if (h.magic == kStateMagicV1 && h.size == sizeof(StateHoldV1))
		return read_old_state<StateHoldV1>(fd, h.nr_domains, cut_short,
						   [](const StateHoldV1 &o) {
							   return StateHold{o.state, o.pid, o.tid, o.prio,
									    o.start_time, o.policy,
									    o.rt_priority, o.nice,
									    o.reset_on_fork, 0, 0};
						   });
	char magic[24];
	std::snprintf(magic, sizeof(magic), "%#llx", (unsigned long long)h.magic);
	*problem = std::string("not a state file this gpuslotd knows (magic ") + magic +
		   ", record size " + std::to_string(h.size) + ")";
	return out;
}

} // namespace

void close_state_file(int fd)
{
	std::lock_guard<std::mutex> g(state_fds_lock);
	state_fds.erase(fd);
	::close(fd);
}

int restore_boosts(const std::filesystem::path &state, std::vector<std::string> *notes)
{
	std::string error, problem;
	int fd = lock_state_file(state, false, notes, &error);
	if (fd < 0) {
		if (fd != -EPERM) // an untrusted file is in the notes already
			notes->push_back(error);
		return fd;
	}
	// A file that cannot be read gives nothing back, and is set aside.
	std::vector<StateDomain> table = read_state(fd, &problem);
	if (!problem.empty()) {
		move_aside(state, problem, notes);
		::close(fd);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < table.size(); i++)
		for (unsigned int s = 0; s < GPUSLOT_MAX_SLOTS; s++)
			if (table[i].slot[s].state == StateHold::boosted)
				give_back_boost(table[i].slot[s], i, s, notes, nullptr);
	// The holds stay for the next server's grace period, unboosted now
	// (in this version's layout, whichever the file had).
	int err = 0;
	const ssize_t size = ssize_t(table.size() * sizeof(StateDomain));
	const StateHeader h{kStateMagic, uint32_t(table.size()), sizeof(StateHold)};
	if (!table.empty() &&
	    (ftruncate(fd, off_t(sizeof(h) + size_t(size))) ||
	     pwrite(fd, table.data(), size_t(size), sizeof(h)) != size ||
	     pwrite(fd, &h, sizeof(h), 0) != ssize_t(sizeof(h))))
		err = -errno;
	::close(fd);
	return err;
}

int LockServer::open_state(std::string *error)
{
	const auto path = options_.socket_dir / kStateName;
	state_fd_ = lock_state_file(path, true, &recovered_, error);
	if (state_fd_ < 0) {
		const int err = state_fd_;
		state_fd_ = -1;
		return err;
	}
	// A file that cannot be read is set aside (while we hold its lock:
	// no other server reads it meanwhile), and a new one made.
	std::string problem;
	std::vector<StateDomain> old = read_state(state_fd_, &problem);
	if (!problem.empty()) {
		move_aside(path, problem, &recovered_);
		::close(state_fd_);
		state_fd_ = lock_state_file(path, true, &recovered_, error);
		if (state_fd_ < 0) {
			const int err = state_fd_;
			state_fd_ = -1;
			return err;
		}
		old.clear();
	}
	{
		static std::once_flag atfork;
		std::call_once(atfork,
			       [] { pthread_atfork(nullptr, nullptr, forget_state_fds_in_child); });
		std::lock_guard<std::mutex> g(state_fds_lock);
		state_fds.insert(state_fd_);
	}
	state_size_ = sizeof(StateHeader) + options_.nr_domains * sizeof(StateDomain);
	if (ftruncate(state_fd_, off_t(state_size_))) {
		*error = path.string() + ": " + strerror(errno);
		return -errno;
	}
	// Mapped through a file of its own: a mapping holds its open file,
	// and the lock must go with our fd alone. Not inherited by a fork.
	// The same inode as the fd (not the path, which may have changed).
	const int map_fd =
		::open(("/proc/self/fd/" + std::to_string(state_fd_)).c_str(), O_RDWR | O_CLOEXEC);
	state_ = map_fd < 0 ? MAP_FAILED
			    : mmap(nullptr, state_size_, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
	const int map_err = errno;
	if (map_fd >= 0)
		::close(map_fd);
	if (state_ == MAP_FAILED) {
		state_ = nullptr;
		*error = path.string() + ": mmap: " + strerror(map_err);
		return -map_err;
	}
	madvise(state_, state_size_, MADV_DONTFORK);
	std::memset(state_, 0, state_size_);
	auto *h = static_cast<StateHeader *>(state_);
	h->magic = kStateMagic;
	h->nr_domains = options_.nr_domains;
	h->size = sizeof(StateHold);
	// What a dead (or stopped) server left: boosts given back now, holds
	// of holders that live kept for them until run() adopts them.
	for (unsigned int i = 0; i < old.size(); i++) {
		if (i < options_.nr_domains)
			state_domain(state_, i)->generation = old[i].generation;
		for (unsigned int s = 0; s < GPUSLOT_MAX_SLOTS; s++) {
			StateHold &r = old[i].slot[s];
			int pidfd = -1;
			if (r.state == StateHold::free ||
			    !give_back_boost(r, i, s, &recovered_, &pidfd))
				continue;
			if (i >= options_.nr_domains) {
				::close(pidfd);
				continue;
			}
			auto o = std::make_unique<Orphan>();
			o->domain = i;
			o->slot = s;
			o->pid = r.pid;
			o->tid = r.tid;
			o->start_time = r.start_time;
			o->client_token = r.client_token;
			o->pidfd = pidfd;
			o->source.orphan = o.get();
			orphans_.push_back(std::move(o));
			// Recorded again at once, unboosted: a server that dies
			// before run() adopts it leaves it to the next one.
			StateHold &kept = state_domain(state_, i)->slot[s];
			kept = {};
			kept.state = StateHold::held;
			kept.pid = r.pid;
			kept.tid = r.tid;
			kept.start_time = r.start_time;
			kept.client_token = r.client_token;
		}
	}
	return 0;
}

// The holds a dead server left become holds of the lock core, for their
// holders to reclaim within the grace period (NFS's lock reclaim): no new
// grant of their slots until then.
void LockServer::adopt_orphans()
{
	const uint64_t now = now_ns();
	for (auto it = orphans_.begin(); it != orphans_.end();) {
		Orphan &o = **it;
		Domain &d = *domains_[o.domain];
		const uint64_t bit = 1ULL << o.slot;
		epoll_event e{};
		e.events = EPOLLIN;
		e.data.ptr = &o.source;
		if (o.slot >= d.core.k || (d.core.held & bit) ||
		    gpuslot_core_try_acquire(&d.core, bit) != int(o.slot) ||
		    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, o.pidfd, &e)) {
			recovered_.push_back("gpu" + std::to_string(o.domain) + " slot " +
					     std::to_string(o.slot) + ": not kept (the layout changed)");
			if (!d.holder[o.slot])
				state_domain(state_, o.domain)->slot[o.slot] = {};
			::close(o.pidfd);
			it = orphans_.erase(it);
			continue;
		}
		d.orphan[o.slot] = &o;
		StateHold &r = state_domain(state_, o.domain)->slot[o.slot];
		r = {};
		r.state = StateHold::held;
		r.pid = o.pid;
		r.tid = o.tid;
		r.start_time = o.start_time;
		r.client_token = o.client_token;
		const unsigned int domain = o.domain, slot = o.slot;
		Orphan *self = &o;
		at(now + uint64_t(options_.grace_ms) * 1000000, [this, domain, slot, self] {
			if (domains_[domain]->orphan[slot] == self)
				end_orphan(*domains_[domain], slot);
		});
		++it;
	}
	// The kept holds are held: the work state says so from the start.
	for (auto &d : domains_)
		publish_work(*d);
}

void LockServer::end_orphan(Domain &d, unsigned int slot)
{
	Orphan *o = d.orphan[slot];
	d.orphan[slot] = nullptr;
	epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, o->pidfd, nullptr);
	::close(o->pidfd);
	o->pidfd = -1; // freed after this round of events
	state_domain(state_, d.id)->slot[slot] = {};
	LIST_HEAD(done);
	gpuslot_core_release(&d.core, slot, &done);
	finish(d, &done);
}

int LockServer::reclaim(Domain &d, Conn &c, uint64_t allowed)
{
	const uint64_t start = c.request_pid == c.pid ? c.start_time : c.request_start;
	for (unsigned int slot = 0; slot < GPUSLOT_MAX_SLOTS; slot++) {
		Orphan *o = d.orphan[slot];
		if (!o || !(allowed >> slot & 1) || o->pid != c.request_pid || o->start_time != start ||
		    !start || o->client_token != c.client_token)
			continue;
		// Its holder asks again, on a connection of the same client (its
		// token: another client of the same process may not take a hold
		// its holder still works under): the slot is its own, the core
		// keeps it held.
		d.orphan[slot] = nullptr;
		epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, o->pidfd, nullptr);
		::close(o->pidfd);
		o->pidfd = -1; // freed after this round of events
		return int(slot);
	}
	return -1;
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

void LockServer::record_generation(const Domain &d)
{
	if (state_)
		state_domain(state_, d.id)->generation = d.core.generation;
}

} // namespace gpuslot
