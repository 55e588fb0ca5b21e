// SPDX-License-Identifier: GPL-2.0
// NVIDIA GPUs as the CUDA driver describes them, through libcuda.so.1
// loaded at run time: gpuslot needs no CUDA at build or install time.
#pragma once

#include <string>
#include <vector>

#include "nvidia/nv_plan.hpp"

namespace gpuslot {

struct NvTopologyResult {
	std::vector<NvGpu> gpus;
	std::string error; // empty on success; no driver is an error
};

// Every CUDA device: name, SM count, the SM resource's partition
// granularity (cuDeviceGetDevResource, CU_DEV_RESOURCE_TYPE_SM) and the
// co-scheduled splits the driver makes of it (NvGpu::splits).
NvTopologyResult read_nv_topology();

} // namespace gpuslot
