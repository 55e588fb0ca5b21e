// SPDX-License-Identifier: LGPL-2.1-or-later
// The "cuda" backend: one CUDA green context with one stream per slot.
//
// A slot's partition is a set of SM groups of one deterministic split
// (GPUSLOT_UNIT_NV_SM_GROUP, unit_size SMs each; daemon/src/nvidia/nv_plan.hpp):
// the backend repeats the split (co-scheduled groups), checks that it makes
// the layout's groups, combines the slot's groups into one green context
// (allowed because they come from one split), checks the context's SMs and
// co-scheduling against the layout, and creates one non-blocking stream. The CUstream is usable as a cudaStream_t.
// Each stream is made at its slot's priority p (GPUSLOT_MAX_SLOT_PRIORITY
// levels above the default): CUDA priority least - p of the device's
// cuCtxGetStreamPriorityRange, a p beyond that range refused, and the
// stream's priority read back with cuStreamGetPriority.
// The driver API is loaded at run time (libcuda.so.1, cuda_load.cc); the
// backend calls it only through CudaApi, which tests replace with a test
// double.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"

namespace gpuslot {

// What one split made: @groups groups of @group_sms SMs each; and the
// device's co-scheduled alignment (the driver reports none for the groups
// themselves: a green context made of them reports its own).
struct CudaSplit {
	unsigned int groups = 0;
	unsigned int group_sms = 0; // 0: the groups differ in size
	unsigned int device_coscheduled = 0;
};

// The driver-API steps the backend needs; int stands for CUresult (0 =
// CUDA_SUCCESS) and void * for CUstream and CUgreenCtx. Every step is safe
// to call from any thread, and none leaves a context current on the
// calling thread.
struct CudaApi {
	int (*device_count)(int *count); // cuInit, cuDeviceGetCount
	int (*device_by_pci_bus_id)(int *ordinal, const char *pci_bus_id);
	// cuDeviceGet and the device's primary context, retained.
	int (*open_device)(int ordinal);
	// Split the device's SMs, default flags (co-scheduled groups), into
	// groups of @group_sms; *out says what the split made.
	int (*split)(int ordinal, unsigned int group_sms, CudaSplit *out);
	// A green context of groups @idx[0 .. n) of that split and a stream on
	// it at CUDA stream priority @priority; *sms and *coscheduled get what
	// cuGreenCtxGetDevResource reports.
	int (*green_stream)(int ordinal, const unsigned int *idx, unsigned int n,
			    int priority, void **stream, void **green_ctx, unsigned int *sms,
			    unsigned int *coscheduled);
	// A stream of the primary context at CUDA priority @priority: the
	// whole GPU.
	int (*plain_stream)(int ordinal, int priority, void **stream);
	// cuCtxGetStreamPriorityRange of the device's primary context: the
	// least (the default, e.g. 0) and greatest (most urgent, e.g. -5)
	// CUDA stream priority; lower numbers are more urgent.
	int (*priority_range)(int ordinal, int *least, int *greatest);
	// cuStreamGetPriority: the priority @stream really has.
	int (*stream_priority)(void *stream, int *priority);
	int (*stream_synchronize)(void *stream);
	// Destroy @stream, then @green_ctx (NULL for a plain stream).
	int (*destroy)(void *stream, void *green_ctx);
	const char *(*error_string)(int error);
	// An MPS control daemon is running for this user.
	bool (*mps_running)();
	// Launch markers for gpuslot_launch_begin(): events without timing
	// made in their stream's context (a green context's stream: the
	// primary context's); each call in
	// relaxed capture mode, so that another thread's global capture does
	// not make it illegal. Usable where @events_ready (null: always)
	// says the driver has every entry point they need.
	EventOps events;
	bool (*events_ready)() = nullptr;
};

// Loads libcuda.so.1; false with *error saying why.
bool load_cuda(CudaApi *api, std::string *error);

class CudaBackend : public Backend {
public:
	CudaBackend(const CudaApi &api, const DeviceChoice &device) : api_(api), choice_(device) {}

	const char *name() const override { return "cuda"; }
	// Green contexts are not HQDs of an AMD GPU: nothing to reserve.
	unsigned int set_queues(const SlotLayout &, uint64_t) const override { return 0; }
	std::string notice() const override { return notice_; }
	int build(const SlotLayout &layout, uint64_t slots, StreamSet *set,
		  std::string *error) override;
	int synchronize(void *stream, std::string *error) override;
	void destroy_slot(StreamSet *set, unsigned int slot) override;
	int build_union(const SlotLayout &layout, uint64_t slots, StreamSet::Union *out,
			std::string *error) override;
	void destroy_union(const StreamSet::Union &u) override;

	// The device the backend resolved, -1 before the first build.
	int device_ordinal() const override { return ordinal_; }
	int make_markers(void *stream, std::unique_ptr<Markers> *markers,
			 std::string *error) override;

private:
	int resolve(std::string *error);
	int check_split(const SlotLayout &layout, const CudaSplit &split,
			std::string *error) const;

	// The split's co-scheduled alignment, which every context keeps.
	unsigned int coscheduled_ = 0;
	CudaApi api_;
	DeviceChoice choice_;
	int ordinal_ = -1;
	std::string notice_;
};

} // namespace gpuslot
