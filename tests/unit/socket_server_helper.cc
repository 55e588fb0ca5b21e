// SPDX-License-Identifier: GPL-2.0
// gpuslotd's lock server in a process of its own, for the unit tests to
// spawn (and SIGKILL, as gpuslotd can be killed) where their own process
// runs threads and must not fork.
//
//   socket_server_helper SOCKET_DIR PRIORITY...
//	serves one domain on SOCKET_DIR with k = the number of priorities
//	given and those slot priorities (no unit kind), until killed. Exits
//	1 if it could not start.
#include <linux/gpuslot.h>
#include <signal.h>
#include <sys/prctl.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "lock_server.hpp"

int main(int argc, char **argv)
{
	if (argc < 3 || argc - 2 > GPUSLOT_MAX_SLOTS) {
		std::fprintf(stderr, "usage: %s SOCKET_DIR PRIORITY...\n", argv[0]);
		return 2;
	}
	// A test that fails leaves no server behind.
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	gpuslot::LockServerOptions o;
	o.socket_dir = argv[1];
	o.nr_domains = 1;
	gpuslot::LockServer server(o);
	std::string error;
	if (server.start(&error)) {
		std::fprintf(stderr, "%s\n", error.c_str());
		return 1;
	}
	gpuslot_layout l{};
	l.size = sizeof(l);
	l.k = unsigned(argc - 2);
	l.unit_kind = GPUSLOT_UNIT_NONE;
	for (int i = 2; i < argc; i++)
		l.priority[i - 2] = uint8_t(std::atoi(argv[i]));
	if (server.set_layout(0, &l, nullptr))
		return 1;
	return server.run(&error) ? 1 : 0;
}
