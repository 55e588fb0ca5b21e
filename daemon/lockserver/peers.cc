// SPDX-License-Identifier: GPL-2.0
// The lock server's peers and what it trusts of them (peers.hpp).
#include "peers.hpp"
#include "server_state.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

namespace gpuslot {

namespace {

// Whether @uid is the real, effective or saved uid of process @pid now.
bool uid_of(pid_t pid, uid_t uid)
{
	std::ifstream in("/proc/" + std::to_string(pid) + "/status");
	unsigned long r, e, s;
	for (std::string line; std::getline(in, line);)
		if (std::sscanf(line.c_str(), "Uid: %lu %lu %lu", &r, &e, &s) == 3)
			return r == uid || e == uid || s == uid;
	return false;
}

// The user namespace of process @pid (device and inode of
// /proc/<pid>/ns/user), or {0, 0} if it cannot be read (gpuslotd without
// ptrace access to it: no admin).
std::pair<dev_t, ino_t> user_ns_of(const std::string &pid)
{
	struct stat st;
	if (stat(("/proc/" + pid + "/ns/user").c_str(), &st))
		return {0, 0};
	return {st.st_dev, st.st_ino};
}

} // namespace

Creds creds_of(const std::string &pid)
{
	std::ifstream in("/proc/" + pid + "/status");
	Creds c;
	unsigned long real, effective;
	for (std::string line; std::getline(in, line);) {
		if (line.rfind("CapEff:", 0) == 0)
			c.caps = std::stoull(line.substr(7), nullptr, 16);
		else if (std::sscanf(line.c_str(), "Uid: %lu %lu", &real, &effective) == 2)
			c.euid = uid_t(effective);
	}
	return c;
}

// The start time of process @pid (clock ticks after boot, /proc/<pid>/stat
// field 22): with the pid, who a process is across pid reuse. 0 if gone.
uint64_t proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	std::snprintf(path, sizeof(path), "/proc/%d/stat", int(pid));
	int f = ::open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return 0;
	const ssize_t n = ::read(f, buf, sizeof(buf) - 1);
	::close(f);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *p = std::strrchr(buf, ')'); // the name may hold anything
	if (!p)
		return 0;
	// Field 3 (state) follows ") "; the start time is field 22.
	unsigned long long start = 0;
	int field = 2;
	for (const char *q = p + 1; *q && field < 22; q++)
		if (*q == ' ' && ++field == 22)
			start = std::strtoull(q + 1, nullptr, 10);
	return start;
}

// A pidfd for the process the kernel named @pid with uid @uid (from
// SO_PEERCRED or SCM_CREDENTIALS), taken at once, while the kernel still
// vouches for it: then checked, so that a pid reused in between by another
// user's process is refused (the pidfd pins what /proc is read of, and the
// process must still live after the reads). -1 if it cannot be had.
int checked_pidfd(pid_t pid, uid_t uid, uint64_t *start)
{
	int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
	if (pidfd < 0)
		return -1;
	*start = proc_start_time(pid);
	if (!*start || !uid_of(pid, uid) || !pidfd_alive(pidfd)) {
		::close(pidfd);
		return -1;
	}
	return pidfd;
}

bool pidfd_alive(int pidfd)
{
	return pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) == 0;
}

bool thread_in_group(pid_t pid, pid_t tid)
{
	return syscall(SYS_tgkill, pid, tid, 0) == 0 || errno == EPERM;
}

bool peer_is_admin(pid_t pid, uid_t uid, int pidfd)
{
	if (pid <= 0 || pidfd < 0 || uid == uid_t(-1))
		return false;
	const Creds self = creds_of("self");
	const bool root = uid == 0;
	// A gpuslotd that a user started without root is that user's own: it
	// holds nothing that user's processes do not (checked below).
	const bool own_user = self.euid != 0 && self.euid != uid_t(-1) && uid == self.euid;
	if (!root && !own_user)
		return false;
	const std::string p = std::to_string(pid);
	const Creds peer = creds_of(p);
	const auto ns = user_ns_of(p), our_ns = user_ns_of("self");
	// The reads were of the process the pidfd pins only if it still
	// lives now (its pid not reused in between).
	if (!pidfd_alive(pidfd) || ns.second == 0 || ns != our_ns)
		return false;
	if (root)
		return peer.euid == 0 && (peer.caps >> kCapSysAdmin & 1);
	return peer.euid == self.euid && (peer.caps & self.caps) == self.caps;
}

bool may_be_boosted(pid_t pid, pid_t tid, int pidfd, uid_t opener_euid)
{
	if (pid <= 0 || tid <= 0 || pidfd < 0)
		return false;
	const std::string p = std::to_string(pid);
	std::ifstream in("/proc/" + p + "/task/" + std::to_string(tid) + "/status");
	bool have_uid = false, have_caps = false;
	unsigned long real, effective;
	uint64_t caps = 0;
	for (std::string line; std::getline(in, line);) {
		if (std::sscanf(line.c_str(), "Uid: %lu %lu", &real, &effective) == 2)
			have_uid = true;
		else if (line.rfind("CapEff:", 0) == 0) {
			caps = std::strtoull(line.c_str() + 7, nullptr, 16);
			have_caps = true;
		}
	}
	if (!have_uid || !have_caps)
		return false;
	const bool opener = uid_t(effective) == opener_euid;
	const bool nice_cap = (caps >> kCapSysNice & 1) && user_ns_of(p) == user_ns_of("self") &&
			      user_ns_of(p).second != 0;
	// The reads were of the process the pidfd pins only if it still
	// lives now (its pid not reused in between).
	return (opener || nice_cap) && pidfd_alive(pidfd);
}

// An admin now: the message's sender, as the kernel stamped it
// (SCM_CREDENTIALS: its uid mapped into our user namespace, and its pid),
// with the capability and user namespace its pidfd vouches for
// (peer_is_admin()). The connector's pidfd is the kernel's own
// (SO_PEERPIDFD) or one checked at accept; a forked child sharing the
// connection gets one now, checked against its message's uid. Decided at
// each admin request, never at connect: what a process could do when it
// connected says nothing of what it can do now.
bool LockServer::admin(const Conn &c) const
{
	if (c.request_uid == uid_t(-1))
		return false;
	if (c.request_pid == c.pid)
		return peer_is_admin(c.request_pid, c.request_uid, c.pidfd);
	uint64_t start = 0;
	const int pidfd = checked_pidfd(c.request_pid, c.request_uid, &start);
	const bool yes = peer_is_admin(c.request_pid, c.request_uid, pidfd);
	if (pidfd >= 0)
		::close(pidfd);
	return yes;
}

// A queued ACQUIRE's caller, when it is not the connector (a forked
// child): its pidfd, taken as its message came, kept for the grant.
void LockServer::take_acquire_pidfd(Conn &c)
{
	if (c.acquire_pidfd >= 0)
		::close(c.acquire_pidfd);
	c.acquire_pidfd = -1;
	c.acquire_start = c.start_time;
	if (c.request_pid != c.pid && c.request_pidfd >= 0 && c.request_pidfd_pid == c.request_pid) {
		c.acquire_pidfd = fcntl(c.request_pidfd, F_DUPFD_CLOEXEC, 0);
		c.acquire_start = c.request_start;
	}
}

int LockServer::pidfd_for(const Conn &c, pid_t pid) const
{
	if (pid == c.pid)
		return c.pidfd;
	if (pid == c.acquire_pid && c.acquire_pidfd >= 0)
		return c.acquire_pidfd;
	return pid == c.request_pidfd_pid ? c.request_pidfd : -1;
}

bool LockServer::may_log_refusal(Member &m)
{
	const uint64_t now = now_ns();
	const uint64_t interval = uint64_t(options_.refusal_log_interval_ms) * 1000000;
	if (!m.log_window_ns || now - m.log_window_ns >= interval) {
		if (m.suppressed)
			std::fprintf(stderr, "gpuslotd: uid %u: %llu refusal lines suppressed\n",
				     unsigned(m.uid), (unsigned long long)m.suppressed);
		m.log_window_ns = now;
		m.logged = 0;
		m.suppressed = 0;
	}
	if (m.logged < options_.refusal_log_burst) {
		m.logged++;
		return true;
	}
	m.suppressed++;
	return false;
}

} // namespace gpuslot
