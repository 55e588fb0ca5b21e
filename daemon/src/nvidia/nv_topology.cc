// SPDX-License-Identifier: GPL-2.0
#include "nvidia/nv_topology.hpp"

#include <dlfcn.h>

#include <cctype>
#include <vector>

#ifdef GPUSLOT_HAVE_CUDA
#include <cuda.h>
#endif

namespace gpuslot {

#ifndef GPUSLOT_HAVE_CUDA
NvTopologyResult read_nv_topology()
{
	return {{}, "this build has no CUDA headers: NVIDIA GPUs cannot be read"};
}
#else
namespace {

// The sizes of the groups the driver makes for minCount @g, default flags;
// empty where it fails.
std::vector<unsigned int> group_sizes(decltype(&cuDevSmResourceSplitByCount) split,
				      const CUdevResource &all, unsigned int g)
{
	unsigned int n = 0;
	if (split(nullptr, &n, &all, nullptr, 0, g) || !n)
		return {};
	std::vector<CUdevResource> groups(n, CUdevResource{});
	if (split(groups.data(), &n, &all, nullptr, 0, g) || !n)
		return {};
	std::vector<unsigned int> sizes;
	for (unsigned int j = 0; j < n; j++)
		sizes.push_back(groups[j].sm.smCount);
	return sizes;
}

} // namespace

NvTopologyResult read_nv_topology()
{
	NvTopologyResult r;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		r.error = std::string("no NVIDIA driver: ") + dlerror();
		return r;
	}
	using GetProc = CUresult (*)(const char *, void **, int, cuuint64_t,
				     CUdriverProcAddressQueryResult *);
	auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
	decltype(&cuInit) init = nullptr;
	decltype(&cuDeviceGetCount) count = nullptr;
	decltype(&cuDeviceGet) device = nullptr;
	decltype(&cuDeviceGetName) name = nullptr;
	decltype(&cuDeviceGetDevResource) resource = nullptr;
	decltype(&cuDeviceGetPCIBusId) bus_id = nullptr;
	decltype(&cuDevSmResourceSplitByCount) split = nullptr;
	decltype(&cuDeviceGetAttribute) attribute = nullptr;
	auto sym = [&](const char *n, auto *fn) {
		void *p = nullptr;
		CUdriverProcAddressQueryResult st;
		if (get && !get(n, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st))
			*fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
	};
	sym("cuInit", &init);
	sym("cuDeviceGetCount", &count);
	sym("cuDeviceGet", &device);
	sym("cuDeviceGetName", &name);
	sym("cuDeviceGetDevResource", &resource);
	sym("cuDeviceGetPCIBusId", &bus_id);
	sym("cuDevSmResourceSplitByCount", &split);
	sym("cuDeviceGetAttribute", &attribute);
	if (!init || !count || !device || !name || !resource || !split) {
		r.error = "the NVIDIA driver lacks green-context resources (CUDA 12.4 or later)";
		return r;
	}
	int n = 0;
	if (CUresult e = init(0); e || (e = count(&n))) {
		r.error = "cuInit/cuDeviceGetCount failed with CUresult " + std::to_string(e);
		return r;
	}
	for (int i = 0; i < n; i++) {
		CUdevice d;
		// Zeroed: a driver of CUDA 12.4 to 12.6 writes smCount only
		// (nv_sm_granularity).
		CUdevResource sm{};
		char buf[256] = "";
		if (CUresult e = device(&d, i); e || (e = name(buf, sizeof(buf), d)) ||
						(e = resource(d, &sm, CU_DEV_RESOURCE_TYPE_SM))) {
			r.error = "CUDA device " + std::to_string(i) + ": CUresult " + std::to_string(e);
			return r;
		}
		// The driver writes DDDD:BB:DD.F in upper case; the module's
		// pci_bus_id reads back in lower case.
		char pci[32] = "";
		if (bus_id && bus_id(pci, sizeof(pci), d) == CUDA_SUCCESS)
			for (char *c = pci; *c; c++)
				*c = char(tolower(*c));
		else
			pci[0] = '\0';
		NvGpu gpu{i, buf, sm.sm.smCount, 0, 0, pci, {}};
		int major = 0, minor = 0;
		if (attribute &&
		    !attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) &&
		    !attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d)) {
			gpu.cc_major = unsigned(major);
			gpu.cc_minor = unsigned(minor);
		}
		const NvGranularity g = nv_sm_granularity(sm.sm.minSmPartitionSize,
							  sm.sm.smCoscheduledAlignment,
							  gpu.cc_major, gpu.cc_minor);
		gpu.min_partition_sms = g.min_sms;
		gpu.coscheduled_alignment = g.alignment;
		gpu.granularity_documented = g.documented;
		gpu.splits = nv_exact_splits(gpu.sm_count, g, [&](unsigned int size) {
			return group_sizes(split, sm, size);
		});
		r.gpus.push_back(gpu);
	}
	if (r.gpus.empty())
		r.error = "the NVIDIA driver sees no GPU";
	return r;
}
#endif

} // namespace gpuslot
