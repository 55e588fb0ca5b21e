// SPDX-License-Identifier: GPL-2.0
// A plain CUDA program that knows nothing of gpuslot (built with nvcc
// alone, cudart static), for gpuslot-run on the GPU host
// (run_gpuslot_run.sh): a stream of its own, JOBS jobs of 3 spinning
// kernels and a stream synchronize, then its result copied back.
//
//   run_plain JOBS SPIN_US
// prints "priority P range LEAST GREATEST", a line "job START_NS END_NS"
// per job (the GPU's %globaltimer: the first block's start of its first
// kernel to the last block's end of its last, comparable across processes),
// and "result exact" or "result WRONG".
#include <cuda_runtime.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.cuh"

namespace {

__device__ unsigned long long global_ns()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// @stamp: where this job's GPU start (kernel 0) or end (kernel 2) goes.
__global__ void spin_add(unsigned long long cycles, int *data, int n, unsigned long long *start_at,
			 unsigned long long *end_at)
{
	if (start_at && threadIdx.x == 0)
		atomicMin(start_at, global_ns());
	const unsigned long long start = clock64();
	while (clock64() - start < cycles)
		;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		data[i] += 1;
	__syncthreads();
	if (end_at && threadIdx.x == 0)
		atomicMax(end_at, global_ns());
}

unsigned long long now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 3) {
		std::fprintf(stderr, "usage: run_plain JOBS SPIN_US\n");
		return 2;
	}
	const int jobs = std::atoi(argv[1]);
	const unsigned long long spin_us = std::strtoull(argv[2], nullptr, 10);
	int clock_khz = 0;
	check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "clock rate");
	cudaStream_t s;
	check(cudaStreamCreate(&s), "cudaStreamCreate");
	int priority = 0, least = 0, greatest = 0;
	check(cudaStreamGetPriority(s, &priority), "cudaStreamGetPriority");
	check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "priority range");
	std::printf("priority %d range %d %d\n", priority, least, greatest);
	const int n = 1 << 16;
	int *data;
	check(cudaMalloc(&data, n * sizeof(int)), "cudaMalloc");
	check(cudaMemsetAsync(data, 0, n * sizeof(int), s), "cudaMemsetAsync");
	check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	unsigned long long *stamps;
	check(cudaMalloc(&stamps, 2 * jobs * sizeof(*stamps)), "cudaMalloc");
	std::vector<unsigned long long> init(2 * jobs);
	for (int j = 0; j < jobs; j++)
		init[2 * j] = ~0ull;
	check(cudaMemcpy(stamps, init.data(), init.size() * sizeof(*stamps), cudaMemcpyHostToDevice),
	      "cudaMemcpy");
	const unsigned long long wall = now_ns();
	for (int j = 0; j < jobs; j++) {
		for (int k = 0; k < 3; k++)
			spin_add<<<132, 128, 0, s>>>(spin_us * clock_khz / 1000, data, n,
						     k == 0 ? stamps + 2 * j : nullptr,
						     k == 2 ? stamps + 2 * j + 1 : nullptr);
		check(cudaGetLastError(), "launch");
		check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
	}
	std::printf("wall %.1f ms\n", (now_ns() - wall) / 1e6);
	check(cudaMemcpy(init.data(), stamps, init.size() * sizeof(*stamps), cudaMemcpyDeviceToHost),
	      "cudaMemcpy");
	for (int j = 0; j < jobs; j++)
		std::printf("job %llu %llu\n", init[2 * j], init[2 * j + 1]);
	std::vector<int> host(n);
	check(cudaMemcpy(host.data(), data, n * sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
	bool exact = true;
	for (int v : host)
		exact &= v == 3 * jobs;
	std::printf("result %s\n", exact ? "exact" : "WRONG");
	return exact ? 0 : 1;
}
