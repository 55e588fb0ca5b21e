// SPDX-License-Identifier: GPL-2.0
// The lock server's one boost ledger (kmod/lockcore/boost.c, built for
// userspace) and what the rest of the server needs of it: boost_ops.cc
// keeps the ledger's threads and their operations (sched_setattr() through
// a pidfd-checked thread id), the rest of the server reaches them here.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <string>

extern "C" {
#include "boost.h"
}

// The ledger's idea of a thread (kmod/lockcore/boost.h): here, a thread of a peer
// process, verified against the peer's pidfd before every change.
struct task_struct {
	pid_t pid = 0;
	pid_t tid = 0;
	uid_t uid = 0; // the uid of the connection it was boosted through
	int pidfd = -1; // its own, pinning the process
	unsigned int records = 0; // boost records that point here
	// Who the thread was when its boost record was made: its credentials
	// and its program (see owner_of()); empty if they could not be read.
	std::string owner;
	// The kernel refused to make it RT (sched_setattr() said EPERM: an RT
	// cgroup without runtime, an LSM's setsched); LockServer::boost() says so.
	bool rt_refused = false;

	~task_struct()
	{
		if (pidfd >= 0)
			close(pidfd);
	}
};

namespace gpuslot {

// The ledger with the socket transport's task operations, at start().
void boost_ledger_init();
// End the boost of @hold, whatever hold it was of (a stopping server
// leaves no thread boosted), and free the records nobody points at.
void boost_finish_any(gpuslot_boost_hold *hold);
// Free the threads kept for their budget only (a stopping server).
void boost_drain_all();
// CAP_SYS_NICE in our effective set: without it there is no boost.
bool can_boost();

} // namespace gpuslot
