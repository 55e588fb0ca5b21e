// SPDX-License-Identifier: GPL-2.0
// The lock server's peers and what it trusts of them: who a process is
// (pidfds, start times), whether a thread is one of it, and whether the
// sender of a message is an admin. Trust comes from what the kernel vouches
// for at the time (SO_PEERCRED, SCM_CREDENTIALS, pidfds); /proc is read only
// of a process pinned by a pidfd, and believed only if the pidfd still
// names a living process after the read (peers.cc).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace gpuslot {

constexpr unsigned int kCapSysAdmin = 21;
constexpr unsigned int kCapSysNice = 23;

// Our own effective uid and capabilities ("self"), from /proc; uid -1
// and no capabilities if they cannot be read.
struct Creds {
	uid_t euid = uid_t(-1);
	uint64_t caps = 0;
};
Creds creds_of(const std::string &pid);

// Whether the process @pidfd stands for still runs (false without one).
bool pidfd_alive(int pidfd);

// Whether @tid is a thread of process @pid now: tgkill(pid, tid, 0) finds
// @tid only in that thread group (EPERM: found, but not ours to signal).
// With pidfd_alive() on the process's pidfd (its pid not reused), a thread
// of the process that connected.
bool thread_in_group(pid_t pid, pid_t tid);

// The start time of process @pid (clock ticks after boot, /proc/<pid>/stat
// field 22): with the pid, who a process is across pid reuse. 0 if gone.
uint64_t proc_start_time(pid_t pid);

// A pidfd for the process the kernel named @pid with uid @uid (from
// SO_PEERCRED or SCM_CREDENTIALS), taken at once and checked; -1 if it
// cannot be had (peers.cc says how).
int checked_pidfd(pid_t pid, uid_t uid, uint64_t *start);

// Whether process @pid, pinned by @pidfd, whose message the kernel stamped
// with uid @uid, is an admin of this gpuslotd now: uid 0 with CAP_SYS_ADMIN
// in its effective set, in gpuslotd's own user namespace (the initial one
// for the system's gpuslotd); or, for a gpuslotd that runs as a user other
// than root, that user, in the same user namespace, holding every
// capability gpuslotd holds. Read from /proc/<pid>/status and
// /proc/<pid>/ns/user, and believed only if @pidfd still names a living
// process afterwards (so the reads were of that process). False if any of
// it cannot be read.
bool peer_is_admin(pid_t pid, uid_t uid, int pidfd);

// Whether thread @tid of process @pid, pinned by @pidfd, may be boosted
// for a hold of a connection whose connector had effective uid
// @opener_euid (SO_PEERCRED): the module's rule for a passed file. The
// slots travel with the connection (SCM_RIGHTS, fork), the boost does
// not: only a thread whose effective uid is the opener's, or that has
// CAP_SYS_NICE in gpuslotd's user namespace (the initial one for the
// system's gpuslotd: it could make itself RT anyway). Read from
// /proc/<pid>/task/<tid>/status (the thread's own credentials: a thread of
// @pid only, else there is no such file) and /proc/<pid>/ns/user, and
// believed only if @pidfd still names a living process afterwards. False
// if any of it cannot be read.
bool may_be_boosted(pid_t pid, pid_t tid, int pidfd, uid_t opener_euid);

} // namespace gpuslot
