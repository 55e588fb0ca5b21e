// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA driver entry points behind CudaApi (cuda_load.cc), typed by the
// CUDA 13 headers. Only built with them. cuda_api_over() makes a CudaApi
// over any such table: libcuda.so.1's, or a test double's.
#pragma once

#include <cuda.h>

#include "cuda_backend.hpp"

namespace gpuslot {

struct CudaDriver {
	decltype(&cuInit) init;
	decltype(&cuDeviceGetCount) device_count;
	decltype(&cuDeviceGet) device_get;
	decltype(&cuDeviceGetByPCIBusId) device_by_pci_bus_id;
	decltype(&cuDevicePrimaryCtxRetain) primary_retain;
	decltype(&cuCtxPushCurrent) push_current;
	decltype(&cuCtxPopCurrent) pop_current;
	decltype(&cuDeviceGetDevResource) device_resource;
	decltype(&cuDevSmResourceSplitByCount) split;
	decltype(&cuDevResourceGenerateDesc) generate_desc;
	decltype(&cuGreenCtxCreate) green_create;
	decltype(&cuGreenCtxStreamCreate) green_stream;
	decltype(&cuGreenCtxGetDevResource) green_resource;
	decltype(&cuGreenCtxDestroy) green_destroy;
	decltype(&cuStreamCreate) stream_create;
	decltype(&cuStreamSynchronize) stream_sync;
	decltype(&cuStreamDestroy) stream_destroy;
	decltype(&cuGetErrorString) error_string;
	// Slot priorities (since libgpuslot 1.3).
	decltype(&cuStreamCreateWithPriority) stream_create_priority;
	decltype(&cuStreamGetPriority) stream_get_priority;
	decltype(&cuCtxGetStreamPriorityRange) priority_range;
	// Launch markers (since libgpuslot 1.7); optional: without them
	// CudaApi::events_ready() says no and gpuslot_launch_begin() is
	// refused. libcuda.so.1's are looked up at their first use.
	decltype(&cuStreamGetCtx_v2) stream_get_ctx;
	decltype(&cuEventCreate) event_create;
	decltype(&cuEventRecord) event_record;
	decltype(&cuEventQuery) event_query;
	decltype(&cuEventDestroy) event_destroy;
	decltype(&cuStreamIsCapturing) stream_is_capturing;
	decltype(&cuThreadExchangeStreamCaptureMode) exchange_capture_mode;
};

// A CudaApi over @driver, which must outlive every use of it. The process
// has one: a later call replaces the table for every CudaApi.
CudaApi cuda_api_over(const CudaDriver &driver);

} // namespace gpuslot
