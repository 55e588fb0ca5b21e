// SPDX-License-Identifier: GPL-2.0
/*
 * The system test's holder: acquire a slot through libgpuslot (as installed
 * by libgpuslot-dev), say so, and keep it until killed.
 */
#include <stdio.h>
#include <unistd.h>

#include <gpuslot.h>

int main(void)
{
	struct gpuslot_options o = { .size = sizeof(o), .backend = GPUSLOT_BACKEND_NONE };
	struct gpuslot_client *c;
	struct gpuslot_slot s = { .size = sizeof(s) };

	if (gpuslot_open(&o, &c) < 0 || gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s) < 0) {
		fprintf(stderr, "%s\n", gpuslot_last_error());
		return 1;
	}
	printf("holding slot %u\n", s.index);
	fflush(stdout);
	pause();
	return 0;
}
