// SPDX-License-Identifier: GPL-2.0
// gpuslotd's lock server alone, on the socket transport, with k whole-GPU
// slots at one priority, or at one each: the lock for run_gpuslot_run.sh
// and run_launch_cost.sh where no release build of gpuslotd is at hand
// (built from the unit tests' objects).
//
//   run_lock_server SOCKET_DIR K PRIORITY[,PRIORITY...]   (serves until killed)
// (a list gives slot i the i-th priority; the last repeats)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lock_server.hpp"

int main(int argc, char **argv)
{
	if (argc != 4) {
		std::fprintf(stderr, "usage: run_lock_server SOCKET_DIR K PRIORITY[,PRIORITY...]\n");
		return 2;
	}
	gpuslot::LockServerOptions o;
	o.socket_dir = argv[1];
	o.nr_domains = 1;
	gpuslot::LockServer server(o);
	std::string error;
	if (server.start(&error)) {
		std::fprintf(stderr, "run_lock_server: %s\n", error.c_str());
		return 1;
	}
	gpuslot_layout l{};
	l.size = sizeof(l);
	l.k = unsigned(std::atoi(argv[2]));
	const char *p = argv[3];
	for (unsigned int s = 0; s < l.k; s++) {
		l.priority[s] = unsigned(std::atoi(p));
		if (const char *comma = std::strchr(p, ','))
			p = comma + 1;
	}
	if (int err = server.set_layout(0, &l, nullptr)) {
		std::fprintf(stderr, "run_lock_server: layout: error %d\n", err);
		return 1;
	}
	std::printf("serving %s: k %u, priority %s\n", argv[1], l.k, argv[3]);
	std::fflush(stdout);
	return server.run(&error) ? 1 : 0;
}
