// SPDX-License-Identifier: LGPL-2.1-or-later
// The "hip" backend: one hipExtStreamCreateWithCUMask stream per slot.
//
// HIP is loaded at run time (libamdhip64.so.5), so libgpuslot works on
// hosts without ROCm. The backend calls HIP only through HipApi, the few
// entry points it needs; tests hand it a test double of them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend.hpp"

namespace gpuslot {

// HIP entry points, as plain function pointers. int stands for hipError_t
// (0 = hipSuccess) and void * for hipStream_t.
struct HipApi {
	int (*set_device)(int device);
	int (*stream_create)(void **stream);
	int (*stream_create_with_cu_mask)(void **stream, uint32_t words,
					  const uint32_t *mask);
	int (*stream_synchronize)(void *stream);
	int (*stream_destroy)(void *stream);
	const char *(*error_string)(int error);
};

// Loads libamdhip64.so.5; false with *error saying why.
bool load_hip(HipApi *api, std::string *error);

// Queues beside the masked streams: HIP's default pool (GPU_MAX_HW_QUEUES,
// which the backend sets to 1) and ROCr's blit and utility queues.
constexpr unsigned int kHipDefaultPool = 1;
constexpr unsigned int kHipRuntimeQueues = 2;

// A backend on @api for HIP device @device. Whole-GPU slots get a plain
// stream from HIP's pool; partitioned slots a masked stream each.
std::unique_ptr<Backend> make_hip_backend(const HipApi &api, int device);

} // namespace gpuslot
