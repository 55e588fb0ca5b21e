// SPDX-License-Identifier: LGPL-2.1-or-later
// dlopen() of libamdhip64.so.5 into a HipApi. Built only with HIP headers
// (Debian's libamdhip64-dev), so the types below are checked against them.
#include <dlfcn.h>

#include <cstdlib>

#include "hip_backend.hpp"

#ifdef GPUSLOT_HAVE_HIP
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#endif

namespace gpuslot {

bool load_hip(HipApi *api, std::string *error)
{
#ifndef GPUSLOT_HAVE_HIP
	(void)api;
	*error = "this libgpuslot was built without HIP headers";
	return false;
#else
	// Fewer pooled queues leave HQDs for the masked streams. Only read
	// when HIP initialises: a program that already used HIP keeps its own.
	setenv("GPU_MAX_HW_QUEUES", "1", 0);
	void *lib = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		*error = std::string("cannot load HIP: ") + dlerror() +
			 " (install ROCm's libamdhip64-5)";
		return false;
	}
	bool ok = true;
	auto sym = [&](const char *name) {
		void *p = dlsym(lib, name);
		if (!p && ok) {
			*error = std::string("libamdhip64.so.5 has no ") + name;
			ok = false;
		}
		return p;
	};
	// The casts pin each pointer to the declaration in the HIP headers.
	using SetDevice = decltype(&hipSetDevice);
	using Create = decltype(&hipStreamCreate);
	using CreateMasked = decltype(&hipExtStreamCreateWithCUMask);
	using Sync = decltype(&hipStreamSynchronize);
	using Destroy = decltype(&hipStreamDestroy);
	using ErrorString = decltype(&hipGetErrorString);
	static SetDevice set_device;
	static Create create;
	static CreateMasked create_masked;
	static Sync sync;
	static Destroy destroy;
	static ErrorString error_string;
	set_device = reinterpret_cast<SetDevice>(sym("hipSetDevice"));
	create = reinterpret_cast<Create>(sym("hipStreamCreate"));
	create_masked = reinterpret_cast<CreateMasked>(sym("hipExtStreamCreateWithCUMask"));
	sync = reinterpret_cast<Sync>(sym("hipStreamSynchronize"));
	destroy = reinterpret_cast<Destroy>(sym("hipStreamDestroy"));
	error_string = reinterpret_cast<ErrorString>(sym("hipGetErrorString"));
	if (!ok) {
		dlclose(lib);
		return false;
	}
	// The library stays loaded for the life of the process, as HIP must.
	api->set_device = [](int d) { return int(set_device(d)); };
	api->stream_create = [](void **s) {
		return int(create(reinterpret_cast<hipStream_t *>(s)));
	};
	api->stream_create_with_cu_mask = [](void **s, uint32_t n, const uint32_t *m) {
		return int(create_masked(reinterpret_cast<hipStream_t *>(s), n, m));
	};
	api->stream_synchronize = [](void *s) {
		return int(sync(static_cast<hipStream_t>(s)));
	};
	api->stream_destroy = [](void *s) {
		return int(destroy(static_cast<hipStream_t>(s)));
	};
	api->error_string = [](int e) {
		return error_string(static_cast<hipError_t>(e));
	};
	return true;
#endif
}

} // namespace gpuslot
