// SPDX-License-Identifier: GPL-2.0
// The per-launch cost of gpuslot-run's launch queue (issue 40): a plain
// CUDA program (nvcc alone, cudart static, nothing of gpuslot) that
// launches empty kernels back to back on a stream of its own and prints
// the host's launch rate. run_launch_cost.sh runs it without the
// interposer, under it with nothing preempting, and under it while a
// higher slot has work (throttled).
//
//   launch_rate LAUNCHES [BATCH]
// launches LAUNCHES empty kernels (after 1000 to warm up), a stream
// synchronization after every BATCH (default 256: the driver's queue stays
// short, the same in every case), and prints
//   launches L seconds S launches_per_s R us_per_launch U
#include <cuda_runtime.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "cuda_check.cuh"

namespace {

__global__ void empty() {}

double now_s()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return double(ts.tv_sec) + ts.tv_nsec / 1e9;
}

void run(cudaStream_t s, long launches, long batch)
{
	for (long i = 0; i < launches; i++) {
		empty<<<1, 32, 0, s>>>();
		if ((i + 1) % batch == 0 || i + 1 == launches)
			check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	}
	check(cudaGetLastError(), "launch");
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		std::fprintf(stderr, "usage: launch_rate LAUNCHES [BATCH]\n");
		return 2;
	}
	const long launches = std::atol(argv[1]);
	const long batch = argc == 3 ? std::atol(argv[2]) : 256;
	if (launches <= 0 || batch <= 0) {
		std::fprintf(stderr, "launch_rate: LAUNCHES and BATCH are positive numbers\n");
		return 2;
	}
	cudaStream_t s;
	check(cudaStreamCreate(&s), "cudaStreamCreate");
	run(s, 1000, batch);
	const double start = now_s();
	run(s, launches, batch);
	const double seconds = now_s() - start;
	std::printf("launches %ld seconds %.6f launches_per_s %.0f us_per_launch %.3f\n", launches,
		    seconds, launches / seconds, seconds * 1e6 / launches);
	return 0;
}
