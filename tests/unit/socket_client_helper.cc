// SPDX-License-Identifier: GPL-2.0
// A client of the socket transport in a process of its own, for the unit
// tests to spawn where their own process runs threads and must not fork
// (socket_transport_test.cc: fork_one_thread()).
//
//   socket_client_helper try-acquire SOCKET_DIR DOMAIN
//	a TRY on a new connection; exits with its errno (0: granted), or
//	100 if it could not connect.
//   socket_client_helper acquire-passed FD UID [keep-cap-sys-nice]
//	becomes UID (all its uids and gids; with keep-cap-sys-nice keeping
//	CAP_SYS_NICE alone), then takes a slot on connection FD, which it
//	was passed (inherited) open, and keeps it (the connection outlives
//	it in its passer). Exits 0 if granted and not SCHED_FIFO while it
//	holds, 1 if granted and SCHED_FIFO, 100 + n on failure n.
//   socket_client_helper connections-served SOCKET_DIR DOMAIN N [drop-cap-sys-admin]
//	opens N connections to DOMAIN (kept open) and asks each for the
//	VERSION; with drop-cap-sys-admin first drops CAP_SYS_ADMIN from its
//	effective and permitted sets, as a rootful container's uid 0 lacks
//	it. Exits with how many were answered (at most 99).
//   socket_client_helper hold-with-work SOCKET_DIR DOMAIN SLOT
//	takes slot SLOT on a new connection, reports work pending on it
//	(SET_WORK), writes "held\n" to its standard output and waits to be
//	killed. Exits 100 + n on failure n.
//   socket_client_helper write-attr SOCKET_DIR DOMAIN UID NAME VALUE
//	becomes UID (all its uids and gids), then writes attribute NAME.
//	Exits with the write's errno (0: written), 100 + n on failure n.
#include <linux/capability.h>
#include <linux/gpuslot.h>
#include <gpuslot_wire.h>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lock_file.hpp"

namespace {

// The effective and permitted capability sets set to @keep (bits of the
// first 32, CAP_SYS_NICE and CAP_SYS_ADMIN among them), or those less
// @drop: 0 or -1.
int set_caps(uint32_t keep, uint32_t drop, bool use_keep)
{
	__user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
	__user_cap_data_struct d[2]{};
	if (syscall(SYS_capget, &h, d))
		return -1;
	if (use_keep) {
		d[0].effective = d[0].permitted = keep;
		d[1].effective = d[1].permitted = 0;
	} else {
		d[0].effective &= ~drop;
		d[0].permitted &= ~drop;
	}
	d[0].inheritable = d[1].inheritable = 0;
	return int(syscall(SYS_capset, &h, d));
}

int acquire_passed(int fd, uid_t uid, bool keep_nice)
{
	if (keep_nice && prctl(PR_SET_KEEPCAPS, 1))
		return 101;
	if (setgroups(0, nullptr) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		return 102;
	if (keep_nice && set_caps(1u << CAP_SYS_NICE, 0, true))
		return 103;
	struct {
		gpuslot_wire h;
		gpuslot_acquire a;
	} m{};
	m.h.magic = GPUSLOT_WIRE_MAGIC;
	m.h.cmd = _IOC_NR(GPUSLOT_IOC_ACQUIRE);
	m.h.size = sizeof(m.a);
	m.h.tid = int32_t(syscall(SYS_gettid));
	m.h.seq = 0x7e57;
	m.a.size = sizeof(m.a);
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != ssize_t(sizeof(m)))
		return 104;
	for (;;) {
		char buf[512];
		const ssize_t n = recv(fd, buf, sizeof(buf), 0);
		gpuslot_wire r;
		if (n < ssize_t(sizeof(r)))
			return 105;
		std::memcpy(&r, buf, sizeof(r));
		if (r.seq != m.h.seq)
			continue; // an announcement
		if (r.error)
			return 106;
		break;
	}
	return (sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) == SCHED_FIFO ? 1 : 0;
}

int connections_served(const char *dir, unsigned int domain, int n, bool drop_admin)
{
	if (drop_admin && set_caps(0, 1u << CAP_SYS_ADMIN, false))
		return 100;
	std::vector<std::unique_ptr<gpuslot::LockFile>> files;
	int served = 0;
	for (int i = 0; i < n; i++) {
		std::unique_ptr<gpuslot::LockFile> f;
		std::string error;
		if (gpuslot::open_lock_file(gpuslot::Transport::socket, dir, domain, &f, &error))
			continue;
		gpuslot_version v{};
		v.size = sizeof(v);
		if (f->call(GPUSLOT_IOC_VERSION, &v) == 0)
			served++;
		files.push_back(std::move(f)); // kept open
	}
	return std::min(served, 99);
}

std::unique_ptr<gpuslot::LockFile> connect_to(const char *dir, const char *domain)
{
	std::unique_ptr<gpuslot::LockFile> f;
	std::string error;
	if (gpuslot::open_lock_file(gpuslot::Transport::socket, dir, unsigned(std::atoi(domain)), &f,
				    &error))
		std::fprintf(stderr, "%s\n", error.c_str());
	return f;
}

int hold_with_work(const char *dir, const char *domain, unsigned int slot)
{
	auto f = connect_to(dir, domain);
	if (!f)
		return 100;
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.allowed_mask = 1ULL << slot;
	if (f->call(GPUSLOT_IOC_ACQUIRE, &a))
		return 101;
	struct gpuslot_set_work w{};
	w.size = sizeof(w);
	w.flags = GPUSLOT_WORK_PENDING;
	if (f->call(GPUSLOT_IOC_SET_WORK, &w))
		return 102;
	if (write(1, "held\n", 5) != 5)
		return 103;
	for (;;)
		pause();
}

int write_attr(const char *dir, const char *domain, uid_t uid, const char *name, const char *value)
{
	if (setgroups(0, nullptr) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
		return 100;
	auto f = connect_to(dir, domain);
	if (!f)
		return 101;
	return f->write_attr(name, value);
}

} // namespace

int main(int argc, char **argv)
{
	const std::string cmd = argc > 1 ? argv[1] : "";
	if (cmd == "hold-with-work" && argc == 5)
		return hold_with_work(argv[2], argv[3], unsigned(std::atoi(argv[4])));
	if (cmd == "write-attr" && argc == 7)
		return write_attr(argv[2], argv[3], uid_t(std::atol(argv[4])), argv[5], argv[6]);
	if (cmd == "acquire-passed" && (argc == 4 || argc == 5))
		return acquire_passed(std::atoi(argv[2]), uid_t(std::atol(argv[3])),
				      argc == 5 && !std::strcmp(argv[4], "keep-cap-sys-nice"));
	if (cmd == "connections-served" && (argc == 5 || argc == 6))
		return connections_served(argv[2], unsigned(std::atoi(argv[3])), std::atoi(argv[4]),
					  argc == 6 && !std::strcmp(argv[5], "drop-cap-sys-admin"));
	if (cmd != "try-acquire" || argc != 4) {
		std::fprintf(stderr,
			     "usage: %s try-acquire SOCKET_DIR DOMAIN\n"
			     "       %s acquire-passed FD UID [keep-cap-sys-nice]\n"
			     "       %s connections-served SOCKET_DIR DOMAIN N [drop-cap-sys-admin]\n",
			     argv[0], argv[0], argv[0]);
		return 2;
	}
	std::unique_ptr<gpuslot::LockFile> f;
	std::string error;
	if (gpuslot::open_lock_file(gpuslot::Transport::socket, argv[2],
				    unsigned(std::atoi(argv[3])), &f, &error)) {
		std::fprintf(stderr, "%s\n", error.c_str());
		return 100;
	}
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.flags = GPUSLOT_ACQUIRE_TRY;
	return f->call(GPUSLOT_IOC_ACQUIRE, &a);
}
