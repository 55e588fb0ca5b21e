// SPDX-License-Identifier: GPL-2.0
// A double of a higher slot with work, for run_launch_cost.sh: holds a
// slot of domain 0 through libgpuslot (backend none: no GPU work of its
// own) and reports work pending (gpuslot_set_work), so that the lower
// slots' launch queues throttle, until its stdin closes.
//
//   work_holder SLOT        (GPUSLOT_TRANSPORT, GPUSLOT_SOCKET_DIR as usual)
// prints "working slot S priority P" once the work is reported.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpuslot.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: work_holder SLOT\n");
		return 2;
	}
	const unsigned int slot = unsigned(std::atoi(argv[1]));
	gpuslot_options o{};
	o.size = sizeof(o);
	o.domain = 0;
	o.backend = GPUSLOT_BACKEND_NONE;
	o.slot_mask = 1ULL << slot;
	gpuslot_client *c = nullptr;
	if (gpuslot_open(&o, &c) < 0) {
		std::fprintf(stderr, "work_holder: %s\n", gpuslot_last_error());
		return 1;
	}
	gpuslot_slot s{};
	s.size = sizeof(s);
	if (gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 1ULL << slot, &s) ||
	    gpuslot_set_work(c, &s, 1)) {
		std::fprintf(stderr, "work_holder: %s\n", gpuslot_last_error());
		return 1;
	}
	std::printf("working slot %u priority %u\n", s.index, s.priority);
	std::fflush(stdout);
	char buf[64];
	while (std::fread(buf, 1, sizeof(buf), stdin) > 0)
		;
	gpuslot_release_slot(c, &s, GPUSLOT_RELEASE_NO_SYNC);
	gpuslot_close(c);
	return 0;
}
