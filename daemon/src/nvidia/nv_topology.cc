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

// Ask the driver, with the default flags, for groups of every multiple of
// the co-scheduled alignment; keep the splits that make groups of exactly
// that many SMs (it rounds some requests up: 66 SMs gives one group of 72
// on an H100, which the library could not ask for again).
std::vector<NvSplit> co_scheduled_splits(decltype(&cuDevSmResourceSplitByCount) split,
					 CUdevResource all)
{
	std::vector<NvSplit> out;
	const unsigned int unit = all.sm.smCoscheduledAlignment;
	for (unsigned int g = unit; unit && g <= all.sm.smCount; g += unit) {
		unsigned int n = 0;
		if (split(nullptr, &n, &all, nullptr, 0, g) || !n)
			continue;
		std::vector<CUdevResource> groups(n);
		if (split(groups.data(), &n, &all, nullptr, 0, g) || !n)
			continue;
		bool exact = true;
		for (unsigned int j = 0; j < n; j++)
			exact &= groups[j].sm.smCount == g;
		if (exact)
			out.push_back({g, n});
	}
	return out;
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
		CUdevResource sm;
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
		NvGpu gpu{i, buf, sm.sm.smCount, sm.sm.minSmPartitionSize,
			  sm.sm.smCoscheduledAlignment, pci, {}};
		gpu.splits = co_scheduled_splits(split, sm);
		int major = 0, minor = 0;
		if (attribute &&
		    !attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) &&
		    !attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d)) {
			gpu.cc_major = unsigned(major);
			gpu.cc_minor = unsigned(minor);
		}
		r.gpus.push_back(gpu);
	}
	if (r.gpus.empty())
		r.error = "the NVIDIA driver sees no GPU";
	return r;
}
#endif

} // namespace gpuslot
