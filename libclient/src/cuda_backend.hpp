// SPDX-License-Identifier: LGPL-2.1-or-later
// The "cuda" backend: one CUDA green context with one stream per slot.
//
// A slot's partition is a set of SM groups of one deterministic split
// (GPUSLOT_UNIT_NV_SM_GROUP, unit_size SMs each; daemon/src/nv_plan.hpp):
// the backend repeats the split, combines the slot's groups into one green
// context (allowed because they come from one split) and creates one
// non-blocking stream on it. The CUstream is usable as a cudaStream_t.
// The driver API is loaded at run time (libcuda.so.1); the backend calls it
// only through CudaApi, which tests replace with a test double.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"

namespace gpuslot {

// The driver-API steps the backend needs; int stands for CUresult (0 =
// CUDA_SUCCESS) and void * for CUstream and CUgreenCtx.
struct CudaApi {
	// cuInit, cuDeviceGet and the device's primary context, made current.
	int (*open_device)(int ordinal);
	// Split the device's SMs with CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_
	// COSCHEDULING into groups of @group_sms; *groups gets their number.
	int (*split)(int ordinal, unsigned int group_sms, unsigned int *groups);
	// A green context of groups @idx[0 .. n) of that split and a stream on
	// it; *sms gets the SMs cuGreenCtxGetDevResource reports.
	int (*green_stream)(int ordinal, const unsigned int *idx, unsigned int n,
			    void **stream, void **green_ctx, unsigned int *sms);
	// A stream of the primary context: the whole GPU.
	int (*plain_stream)(int ordinal, void **stream);
	int (*stream_synchronize)(void *stream);
	// Destroy @stream, then @green_ctx (NULL for a plain stream).
	int (*destroy)(void *stream, void *green_ctx);
	const char *(*error_string)(int error);
	// An MPS control daemon is running for this user.
	bool (*mps_running)();
};

// Loads libcuda.so.1; false with *error saying why.
bool load_cuda(CudaApi *api, std::string *error);

class CudaBackend : public Backend {
public:
	CudaBackend(const CudaApi &api, int ordinal) : api_(api), ordinal_(ordinal) {}

	const char *name() const override { return "cuda"; }
	unsigned int reserved() const override { return 0; }
	const char *notice() const override { return notice_.c_str(); }
	int build(const SlotLayout &layout, QueueBudget &budget, std::vector<void *> *streams,
		  std::string *error) override;
	void destroy(std::vector<void *> *streams) override;

	// The SMs each slot's stream really has (read back, not requested).
	const std::vector<unsigned int> &slot_sms() const { return sms_; }

private:
	CudaApi api_;
	int ordinal_;
	std::vector<void *> green_;
	std::vector<unsigned int> sms_;
	std::string notice_;
};

} // namespace gpuslot
