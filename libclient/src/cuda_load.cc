// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA driver API behind CudaApi, loaded from libcuda.so.1 at run time
// and resolved with cuGetProcAddress, so each entry point is the version
// the CUDA 13.0 headers declare. Built only with those headers.
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cuda_backend.hpp"

#ifdef GPUSLOT_HAVE_CUDA
#include <cuda.h>
#endif

namespace gpuslot {

#ifndef GPUSLOT_HAVE_CUDA
bool load_cuda(CudaApi *, std::string *error)
{
	*error = "this libgpuslot was built without the CUDA headers";
	return false;
}
#else
namespace {

struct Driver {
	decltype(&cuInit) init;
	decltype(&cuDeviceGet) device_get;
	decltype(&cuDevicePrimaryCtxRetain) primary_retain;
	decltype(&cuCtxSetCurrent) set_current;
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
};

Driver drv;

// What a process keeps per device: the primary context (green contexts
// retain it; keeping it avoids re-initialising) and the last split.
struct Device {
	CUdevice dev = 0;
	CUcontext primary = nullptr;
	std::vector<CUdevResource> groups;
	CUdevResource rest{};
};
std::map<int, Device> devices;

int open_device(int ordinal)
{
	if (devices.count(ordinal))
		return drv.set_current(devices[ordinal].primary);
	Device d;
	if (CUresult r = drv.init(0))
		return r;
	if (CUresult r = drv.device_get(&d.dev, ordinal))
		return r;
	if (CUresult r = drv.primary_retain(&d.primary, d.dev))
		return r;
	devices[ordinal] = d;
	return drv.set_current(d.primary);
}

int split(int ordinal, unsigned int group_sms, unsigned int *groups)
{
	Device &d = devices.at(ordinal);
	CUdevResource all;
	if (CUresult r = drv.device_resource(d.dev, &all, CU_DEV_RESOURCE_TYPE_SM))
		return r;
	unsigned int n = 0;
	const unsigned int flags = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING;
	if (CUresult r = drv.split(nullptr, &n, &all, nullptr, flags, group_sms))
		return r;
	d.groups.assign(n, CUdevResource{});
	if (CUresult r = drv.split(d.groups.data(), &n, &all, &d.rest, flags, group_sms))
		return r;
	d.groups.resize(n);
	*groups = n;
	return 0;
}

int green_stream(int ordinal, const unsigned int *idx, unsigned int n, void **stream,
		 void **green_ctx, unsigned int *sms)
{
	Device &d = devices.at(ordinal);
	std::vector<CUdevResource> mine;
	for (unsigned int i = 0; i < n; i++) {
		if (idx[i] >= d.groups.size())
			return CUDA_ERROR_INVALID_VALUE;
		mine.push_back(d.groups[idx[i]]);
	}
	CUdevResourceDesc desc;
	if (CUresult r = drv.generate_desc(&desc, mine.data(), n))
		return r;
	CUgreenCtx g;
	if (CUresult r = drv.green_create(&g, desc, d.dev, CU_GREEN_CTX_DEFAULT_STREAM))
		return r;
	CUstream s;
	if (CUresult r = drv.green_stream(&s, g, CU_STREAM_NON_BLOCKING, 0)) {
		drv.green_destroy(g);
		return r;
	}
	// Never trust the request: read back what the context has.
	CUdevResource got;
	if (CUresult r = drv.green_resource(g, &got, CU_DEV_RESOURCE_TYPE_SM)) {
		drv.stream_destroy(s);
		drv.green_destroy(g);
		return r;
	}
	*stream = s;
	*green_ctx = g;
	*sms = got.sm.smCount;
	return 0;
}

int plain_stream(int ordinal, void **stream)
{
	if (CUresult r = drv.set_current(devices.at(ordinal).primary))
		return r;
	CUstream s;
	CUresult r = drv.stream_create(&s, CU_STREAM_NON_BLOCKING);
	*stream = s;
	return r;
}

int stream_synchronize(void *stream)
{
	return drv.stream_sync(static_cast<CUstream>(stream));
}

int destroy(void *stream, void *green_ctx)
{
	// A green context does not destroy its streams: streams first.
	CUresult r = drv.stream_destroy(static_cast<CUstream>(stream));
	if (green_ctx)
		drv.green_destroy(static_cast<CUgreenCtx>(green_ctx));
	return r;
}

const char *error_string(int error)
{
	const char *s = nullptr;
	drv.error_string(static_cast<CUresult>(error), &s);
	return s ? s : "unknown CUDA error";
}

// The control daemon listens in CUDA_MPS_PIPE_DIRECTORY (/tmp/nvidia-mps
// by default) on "control", a named pipe or a socket by version.
bool mps_running()
{
	const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
	std::string control = std::string(dir ? dir : "/tmp/nvidia-mps") + "/control";
	struct stat st;
	return stat(control.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

} // namespace

bool load_cuda(CudaApi *api, std::string *error)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		*error = std::string("cannot load the CUDA driver: ") + dlerror();
		return false;
	}
	using GetProc = CUresult (*)(const char *, void **, int, cuuint64_t,
				     CUdriverProcAddressQueryResult *);
	auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
	if (!get) {
		*error = "libcuda.so.1 has no cuGetProcAddress_v2: a driver for CUDA 12 or "
			 "later is needed";
		return false;
	}
	bool ok = true;
	auto sym = [&](const char *name, auto *fn) {
		void *p = nullptr;
		CUdriverProcAddressQueryResult st;
		if (get(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st) || !p) {
			if (ok)
				*error = std::string("the CUDA driver has no ") + name +
					 " (green contexts need CUDA 12.5 or later)";
			ok = false;
		}
		*fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
	};
	sym("cuInit", &drv.init);
	sym("cuDeviceGet", &drv.device_get);
	sym("cuDevicePrimaryCtxRetain", &drv.primary_retain);
	sym("cuCtxSetCurrent", &drv.set_current);
	sym("cuDeviceGetDevResource", &drv.device_resource);
	sym("cuDevSmResourceSplitByCount", &drv.split);
	sym("cuDevResourceGenerateDesc", &drv.generate_desc);
	sym("cuGreenCtxCreate", &drv.green_create);
	sym("cuGreenCtxStreamCreate", &drv.green_stream);
	sym("cuGreenCtxGetDevResource", &drv.green_resource);
	sym("cuGreenCtxDestroy", &drv.green_destroy);
	sym("cuStreamCreate", &drv.stream_create);
	sym("cuStreamSynchronize", &drv.stream_sync);
	sym("cuStreamDestroy", &drv.stream_destroy);
	sym("cuGetErrorString", &drv.error_string);
	if (!ok)
		return false;
	*api = {open_device, split, green_stream, plain_stream, stream_synchronize,
		destroy, error_string, mps_running};
	return true;
}
#endif

} // namespace gpuslot
