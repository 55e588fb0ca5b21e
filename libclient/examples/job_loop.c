// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The per-job loop of a gpuslot client, in C: acquire a slot (waiting at
 * most one frame period), run the job on the slot's stream, release.
 *
 * usage: gpuslot_example_c [JOBS] [BACKEND: auto|none|hip]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gpuslot.h>

/* Stands in for launching kernels on @stream and waiting for them. */
static void run_job(void *stream, unsigned int slot)
{
	struct timespec job = { 0, 2 * 1000 * 1000 };

	(void)stream;
	(void)slot;
	nanosleep(&job, NULL);
}

int main(int argc, char **argv)
{
	struct gpuslot_options o = { .size = sizeof(o) };
	long jobs = argc > 1 ? strtol(argv[1], NULL, 10) : 10;
	const char *backend = argc > 2 ? argv[2] : "auto";
	struct gpuslot_client *c;
	struct gpuslot_slot s = { .size = sizeof(s) };
	long done = 0, skipped = 0;

	o.backend = !strcmp(backend, "none") ? GPUSLOT_BACKEND_NONE :
		    !strcmp(backend, "hip")  ? GPUSLOT_BACKEND_HIP :
					       GPUSLOT_BACKEND_AUTO;
	if (gpuslot_open(&o, &c) < 0) {
		fprintf(stderr, "%s\n", gpuslot_last_error());
		return 1;
	}
	for (long i = 0; i < jobs; i++) {
		/* A frame that waited 33 ms for the GPU is stale: skip it. */
		int err = gpuslot_acquire_slot(c, 33 * 1000 * 1000, 0, &s);

		if (err == -ETIMEDOUT) {
			skipped++;
			continue;
		}
		if (err < 0) {
			fprintf(stderr, "%s\n", gpuslot_last_error());
			break;
		}
		run_job(s.stream, s.index);
		/* Waits for the job's work on s.stream, then hands over. */
		gpuslot_release_slot(c, &s, 0);
		done++;
	}
	printf("%ld jobs done, %ld skipped\n", done, skipped);
	gpuslot_close(c);
	return done + skipped == jobs ? 0 : 1;
}
