// SPDX-License-Identifier: LGPL-2.1-or-later
// Finding and loading the HIP runtime into a HipRuntime. The HipApi
// pointers are built only with HIP headers (Debian's libamdhip64-dev), so
// their types are checked against them; finding the runtime is plain
// loader logic, tested over a test double of the loader.
#include <dlfcn.h>

#include <cstdlib>

#include "hip_backend.hpp"

#ifdef GPUSLOT_HAVE_HIP
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#endif

namespace gpuslot {

bool find_hip(const Loader &loader, HipRuntime *rt, void **handle, std::string *error)
{
	// A runtime the process loaded already (RTLD_NOLOAD only finds it).
	for (const char *name : kHipSonames) {
		if (void *h = loader.open(name, RTLD_NOW | RTLD_NOLOAD)) {
			rt->soname = name;
			rt->preloaded = true;
			*handle = h;
			return true;
		}
	}
	std::string tried;
	for (const char *name : kHipSonames) {
		if (void *h = loader.open(name, RTLD_NOW | RTLD_LOCAL)) {
			rt->soname = name;
			rt->preloaded = false;
			*handle = h;
			return true;
		}
		const char *why = loader.error();
		tried += std::string(tried.empty() ? "" : "; ") + (why ? why : name);
	}
	*error = "cannot load HIP (ROCm 5, 6 or 7): " + tried;
	return false;
}

bool load_hip(HipRuntime *rt, std::string *error)
{
#ifndef GPUSLOT_HAVE_HIP
	(void)rt;
	*error = "this libgpuslot was built without HIP headers";
	return false;
#else
	static const Loader loader = {
		[](const char *name, int flags) { return dlopen(name, flags); },
		[](void *h, const char *name) { return dlsym(h, name); },
		[]() -> const char * { return dlerror(); },
	};
	void *lib = nullptr;
	// Fewer pooled queues leave HQDs for the masked streams; HIP reads
	// the variable when it initialises, so it only helps a HIP loaded
	// here. The setenv must come before the dlopen.
	const bool loaded = [] {
		for (const char *name : kHipSonames)
			if (dlopen(name, RTLD_NOW | RTLD_NOLOAD))
				return true;
		return false;
	}();
	if (!loaded)
		setenv("GPU_MAX_HW_QUEUES", "1", 0);
	if (!find_hip(loader, rt, &lib, error))
		return false;
	rt->pool_queues = hip_pool_queues(getenv("GPU_MAX_HW_QUEUES"));
	if (rt->pool_queues == kHipUnboundedPoolQueues) {
		*error = std::string("GPU_MAX_HW_QUEUES=\"") + getenv("GPU_MAX_HW_QUEUES") +
			 "\": HIP reads it (atoi) as a queue pool larger than any "
			 "hardware-queue budget holds (a negative number: no bound at all); "
			 "set it to a small number, such as 1";
		return false;
	}
	bool ok = true;
	auto sym = [&](const char *name) {
		void *p = dlsym(lib, name);
		if (!p && ok) {
			*error = rt->soname + " has no " + name;
			ok = false;
		}
		return p;
	};
	// The casts pin each pointer to the declaration in the HIP headers.
	using GetDevice = decltype(&hipGetDevice);
	using SetDevice = decltype(&hipSetDevice);
	using DeviceCount = decltype(&hipGetDeviceCount);
	using ByBusId = decltype(&hipDeviceGetByPCIBusId);
	using Create = decltype(&hipStreamCreate);
	using CreateMasked = decltype(&hipExtStreamCreateWithCUMask);
	using CreatePriority = decltype(&hipStreamCreateWithPriority);
	using PriorityRange = decltype(&hipDeviceGetStreamPriorityRange);
	using GetPriority = decltype(&hipStreamGetPriority);
	using Sync = decltype(&hipStreamSynchronize);
	using Destroy = decltype(&hipStreamDestroy);
	using ErrorString = decltype(&hipGetErrorString);
	static GetDevice get_device;
	static SetDevice set_device;
	static DeviceCount device_count;
	static ByBusId by_bus_id;
	static Create create;
	static CreateMasked create_masked;
	static CreatePriority create_priority;
	static PriorityRange priority_range;
	static GetPriority get_priority;
	static Sync sync;
	static Destroy destroy;
	static ErrorString error_string;
	get_device = reinterpret_cast<GetDevice>(sym("hipGetDevice"));
	set_device = reinterpret_cast<SetDevice>(sym("hipSetDevice"));
	device_count = reinterpret_cast<DeviceCount>(sym("hipGetDeviceCount"));
	by_bus_id = reinterpret_cast<ByBusId>(sym("hipDeviceGetByPCIBusId"));
	create = reinterpret_cast<Create>(sym("hipStreamCreate"));
	create_masked = reinterpret_cast<CreateMasked>(sym("hipExtStreamCreateWithCUMask"));
	create_priority = reinterpret_cast<CreatePriority>(sym("hipStreamCreateWithPriority"));
	priority_range = reinterpret_cast<PriorityRange>(sym("hipDeviceGetStreamPriorityRange"));
	get_priority = reinterpret_cast<GetPriority>(sym("hipStreamGetPriority"));
	sync = reinterpret_cast<Sync>(sym("hipStreamSynchronize"));
	destroy = reinterpret_cast<Destroy>(sym("hipStreamDestroy"));
	error_string = reinterpret_cast<ErrorString>(sym("hipGetErrorString"));
	if (!ok) {
		if (!rt->preloaded)
			dlclose(lib);
		return false;
	}
	// The library stays loaded for the life of the process, as HIP must.
	HipApi &api = rt->api;
	api.get_device = [](int *d) { return int(get_device(d)); };
	api.set_device = [](int d) { return int(set_device(d)); };
	api.device_count = [](int *n) { return int(device_count(n)); };
	api.device_by_pci_bus_id = [](int *d, const char *id) { return int(by_bus_id(d, id)); };
	api.stream_create = [](void **s) {
		return int(create(reinterpret_cast<hipStream_t *>(s)));
	};
	api.stream_create_with_cu_mask = [](void **s, uint32_t n, const uint32_t *m) {
		return int(create_masked(reinterpret_cast<hipStream_t *>(s), n, m));
	};
	api.stream_create_with_priority = [](void **s, int priority) {
		return int(create_priority(reinterpret_cast<hipStream_t *>(s), hipStreamDefault,
					   priority));
	};
	api.priority_range = [](int *least, int *greatest) {
		return int(priority_range(least, greatest));
	};
	api.stream_priority = [](void *s, int *priority) {
		return int(get_priority(static_cast<hipStream_t>(s), priority));
	};
	api.stream_synchronize = [](void *s) {
		return int(sync(static_cast<hipStream_t>(s)));
	};
	api.stream_destroy = [](void *s) {
		return int(destroy(static_cast<hipStream_t>(s)));
	};
	api.error_string = [](int e) {
		return error_string(static_cast<hipError_t>(e));
	};
	// The markers' entry points: without one, no launch gate.
	using EventCreate = decltype(&hipEventCreateWithFlags);
	using EventRecord = decltype(&hipEventRecord);
	using EventQuery = decltype(&hipEventQuery);
	using EventDestroy = decltype(&hipEventDestroy);
	using IsCapturing = decltype(&hipStreamIsCapturing);
	static EventCreate event_create;
	static EventRecord event_record;
	static EventQuery event_query;
	static EventDestroy event_destroy;
	static IsCapturing is_capturing;
	event_create = reinterpret_cast<EventCreate>(dlsym(lib, "hipEventCreateWithFlags"));
	event_record = reinterpret_cast<EventRecord>(dlsym(lib, "hipEventRecord"));
	event_query = reinterpret_cast<EventQuery>(dlsym(lib, "hipEventQuery"));
	event_destroy = reinterpret_cast<EventDestroy>(dlsym(lib, "hipEventDestroy"));
	is_capturing = reinterpret_cast<IsCapturing>(dlsym(lib, "hipStreamIsCapturing"));
	api.events = EventOps{};
	if (event_create && event_record && event_query && event_destroy && is_capturing) {
		api.events.create = [](void *, void **e) {
			return int(event_create(reinterpret_cast<hipEvent_t *>(e),
						hipEventDisableTiming));
		};
		api.events.record = [](void *e, void *s) {
			return int(event_record(static_cast<hipEvent_t>(e), static_cast<hipStream_t>(s)));
		};
		api.events.query = [](void *e) { return int(event_query(static_cast<hipEvent_t>(e))); };
		api.events.destroy = [](void *e) {
			return int(event_destroy(static_cast<hipEvent_t>(e)));
		};
		api.events.capturing = [](void *s, bool *capturing) {
			hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
			const int err = int(is_capturing(static_cast<hipStream_t>(s), &status));
			*capturing = status != hipStreamCaptureStatusNone;
			return err;
		};
		api.events.not_ready = int(hipErrorNotReady);
	}
	return true;
#endif
}

} // namespace gpuslot
