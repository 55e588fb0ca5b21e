// SPDX-License-Identifier: GPL-2.0
// The GPU host's small CUDA programs (run_plain.cu, launch_rate.cu,
// smid_probe.cu): a failed runtime call ends the program, saying which.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

inline void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
		std::exit(1);
	}
}
