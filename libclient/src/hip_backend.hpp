// SPDX-License-Identifier: LGPL-2.1-or-later
// The "hip" backend: one hipExtStreamCreateWithCUMask stream per slot (a
// plain stream for a slot on the whole GPU, at its priority if it has one).
//
// HIP is loaded at run time (hip_load.cc), so libgpuslot works on hosts
// without ROCm. The backend calls HIP only through HipApi, the few entry
// points it needs; tests hand it a test double of them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend.hpp"
#include "hip_queues.hpp"

namespace gpuslot {

// HIP entry points, as plain function pointers. int stands for hipError_t
// (0 = hipSuccess) and void * for hipStream_t.
struct HipApi {
	int (*get_device)(int *device);
	int (*set_device)(int device);
	int (*device_count)(int *count);
	int (*device_by_pci_bus_id)(int *device, const char *pci_bus_id);
	int (*stream_create)(void **stream);
	int (*stream_create_with_cu_mask)(void **stream, uint32_t words,
					  const uint32_t *mask);
	// hipStreamCreateWithPriority (flags hipStreamDefault),
	// hipDeviceGetStreamPriorityRange and hipStreamGetPriority: a slot
	// on the whole GPU (no CU mask) at a priority (issue 32).
	int (*stream_create_with_priority)(void **stream, int priority);
	int (*priority_range)(int *least, int *greatest);
	int (*stream_priority)(void *stream, int *priority);
	int (*stream_synchronize)(void *stream);
	int (*stream_destroy)(void *stream);
	const char *(*error_string)(int error);
	// Launch markers for gpuslot_launch_begin(): events without timing
	// (hipEventDisableTiming); empty where HIP lacks one of them.
	EventOps events;
};

// What the dynamic loader does, for hip_load.cc and its test double.
struct Loader {
	void *(*open)(const char *name, int flags);
	void *(*sym)(void *handle, const char *name);
	const char *(*error)();
};

// The HIP runtime a process uses: the one it already loaded if any (a
// second runtime beside PyTorch-ROCm's would be a second HIP), else the
// newest that loads.
struct HipRuntime {
	HipApi api{};
	std::string soname;
	bool preloaded = false; // loaded before gpuslot_open: env set too late
	unsigned int pool_queues = 1; // HIP's default-queue pool
};
constexpr const char *kHipSonames[] = {"libamdhip64.so.7", "libamdhip64.so.6",
				       "libamdhip64.so.5"};
// The loader's view: which soname, loaded already or now; false with
// *error when none loads. *handle is the library to resolve symbols in.
bool find_hip(const Loader &loader, HipRuntime *rt, void **handle, std::string *error);
// Loads HIP with the process's dynamic loader; false with *error.
bool load_hip(HipRuntime *rt, std::string *error);

// A backend on @rt for @device. Whole-GPU slots get a plain stream from
// HIP's pool; partitioned slots a masked stream (a queue) each.
std::unique_ptr<Backend> make_hip_backend(const HipRuntime &rt, const DeviceChoice &device);

} // namespace gpuslot
