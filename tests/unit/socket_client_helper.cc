// SPDX-License-Identifier: GPL-2.0
// A client of the socket transport in a process of its own, for the unit
// tests to spawn where their own process runs threads and must not fork
// (socket_transport_test.cc: fork_one_thread()).
//
//   socket_client_helper try-acquire SOCKET_DIR DOMAIN
//	a TRY on a new connection; exits with its errno (0: granted), or
//	100 if it could not connect.
#include <linux/gpuslot.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "lock_file.hpp"

int main(int argc, char **argv)
{
	if (argc != 4 || std::strcmp(argv[1], "try-acquire")) {
		std::fprintf(stderr, "usage: %s try-acquire SOCKET_DIR DOMAIN\n", argv[0]);
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
