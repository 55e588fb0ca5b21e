// SPDX-License-Identifier: GPL-2.0
// A program that links libgpuslot itself, for gpuslot-run's tests
// (gpuslot_run_test.cc): it opens a client of the cuda backend for slot 0
// (a whole-GPU slot in the test's layout, so libgpuslot makes a plain
// stream with cuStreamCreateWithPriority) against the driver double, and
// prints "client ok" and its stream's priority.
#include <cstdio>

#include "gpuslot.h"

int main()
{
	gpuslot_options o{};
	o.size = sizeof(o);
	o.backend = GPUSLOT_BACKEND_CUDA;
	o.slot_mask = 1;
	gpuslot_client *c = nullptr;
	if (gpuslot_open(&o, &c) < 0) {
		std::fprintf(stderr, "run_probe_client: %s\n", gpuslot_last_error());
		return 3;
	}
	std::printf("client ok priority %d\n", gpuslot_slot_priority(c, 0));
	gpuslot_close(c);
	return 0;
}
