// SPDX-License-Identifier: GPL-2.0
// Which SMs a plain CUDA program's kernels run on (built with nvcc alone,
// cudart static, linked with nothing of gpuslot): for gpuslot-run's
// confinement on the GPU host (run_confine.sh). A stream of its own,
// made NON_BLOCKING (as PyTorch's are) or blocking (cudaStreamCreate),
// ROUNDS kernels of 8 blocks per SM of the whole GPU, each block spinning
// 20 us and writing its %smid; then each block's value checked.
//
//   smid_probe nonblocking|blocking [ROUNDS]
// prints "mode M priority P sms N of TOTAL list A,B,..." (the distinct
// SM ids in ascending order) and "result exact" or "result WRONG".
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cuda_check.cuh"

namespace {

__global__ void where(unsigned long long cycles, unsigned int *smid, unsigned int *value,
		      unsigned int round)
{
	unsigned int id;
	asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
	const unsigned long long start = clock64();
	while (clock64() - start < cycles)
		;
	if (threadIdx.x == 0) {
		smid[blockIdx.x] = id;
		value[blockIdx.x] = blockIdx.x * 7u + round;
	}
}

} // namespace

int main(int argc, char **argv)
{
	const std::string mode = argc > 1 ? argv[1] : "";
	const int rounds = argc > 2 ? std::atoi(argv[2]) : 20;
	if ((mode != "nonblocking" && mode != "blocking") || rounds < 1) {
		std::fprintf(stderr, "usage: smid_probe nonblocking|blocking [ROUNDS]\n");
		return 2;
	}
	cudaDeviceProp prop;
	check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
	cudaStream_t s;
	if (mode == "nonblocking")
		check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
	else
		check(cudaStreamCreate(&s), "cudaStreamCreate");
	int priority = 0;
	check(cudaStreamGetPriority(s, &priority), "cudaStreamGetPriority");
	const int blocks = prop.multiProcessorCount * 8;
	unsigned int *smid, *value;
	check(cudaMalloc(&smid, blocks * sizeof(unsigned int)), "cudaMalloc");
	check(cudaMalloc(&value, blocks * sizeof(unsigned int)), "cudaMalloc");
	int khz = 0; // CUDA 13 dropped cudaDeviceProp::clockRate
	check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "cudaDevAttrClockRate");
	const unsigned long long cycles = (unsigned long long)khz * 20 / 1000; // 20 us
	std::set<unsigned int> used;
	bool exact = true;
	std::vector<unsigned int> got(blocks), vals(blocks);
	for (int r = 0; r < rounds; r++) {
		where<<<blocks, 64, 0, s>>>(cycles, smid, value, unsigned(r));
		check(cudaGetLastError(), "launch");
		check(cudaMemcpyAsync(got.data(), smid, blocks * sizeof(unsigned int),
				      cudaMemcpyDeviceToHost, s), "copy");
		check(cudaMemcpyAsync(vals.data(), value, blocks * sizeof(unsigned int),
				      cudaMemcpyDeviceToHost, s), "copy");
		check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
		for (int b = 0; b < blocks; b++) {
			used.insert(got[b]);
			exact &= vals[b] == unsigned(b) * 7u + unsigned(r);
		}
	}
	std::string list;
	for (unsigned int id : used)
		list += (list.empty() ? "" : ",") + std::to_string(id);
	std::printf("mode %s priority %d sms %zu of %d list %s\n", mode.c_str(), priority,
		    used.size(), prop.multiProcessorCount, list.c_str());
	std::printf("result %s\n", exact ? "exact" : "WRONG");
	return exact ? 0 : 1;
}
