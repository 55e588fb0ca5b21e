// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA driver API behind CudaApi, loaded from libcuda.so.1 at run time
// and resolved with cuGetProcAddress, so each entry point is the version
// the CUDA 13 headers declare. Built only with those headers.
//
// What a process keeps per device (the primary context, the last split)
// is shared by every client and thread: one mutex guards it. No step makes
// a context current for good: the one step that needs the primary context
// current (cuStreamCreate) pushes it and pops it again.
#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_backend.hpp"

#ifdef GPUSLOT_HAVE_CUDA
#include "cuda_driver.hpp"
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

// Replaced only by cuda_api_over(); read by every step.
std::atomic<const CudaDriver *> driver_table;

const CudaDriver *driver() { return driver_table.load(std::memory_order_acquire); }

struct Device {
	CUdevice dev = 0;
	CUcontext primary = nullptr;
	std::vector<CUdevResource> groups;
	CUdevResource rest{};
};

std::mutex devices_lock;
std::map<int, Device> devices; // under devices_lock
bool initialised;	       // under devices_lock

int device_count(int *count)
{
	std::lock_guard<std::mutex> hold(devices_lock);
	if (!initialised) {
		if (CUresult r = driver()->init(0))
			return r;
		initialised = true;
	}
	return driver()->device_count(count);
}

int device_by_pci_bus_id(int *ordinal, const char *id)
{
	CUdevice dev;
	if (CUresult r = driver()->device_by_pci_bus_id(&dev, id))
		return r;
	*ordinal = int(dev);
	return 0;
}

int open_device(int ordinal)
{
	std::lock_guard<std::mutex> hold(devices_lock);
	if (devices.count(ordinal))
		return 0;
	Device d;
	if (CUresult r = driver()->device_get(&d.dev, ordinal))
		return r;
	if (CUresult r = driver()->primary_retain(&d.primary, d.dev))
		return r;
	devices[ordinal] = d;
	return 0;
}

// Default flags: every group is co-scheduled SMs, so thread-block
// clusters run on any partition (IGNORE_SM_COSCHEDULING would give 2-SM
// granularity and partitions on which cuDNN and cuBLAS kernels fail).
int split(int ordinal, unsigned int group_sms, CudaSplit *out)
{
	std::lock_guard<std::mutex> hold(devices_lock);
	Device &d = devices.at(ordinal);
	// Zeroed: a driver of CUDA 12.4 to 12.6 (JetPack 6) writes smCount
	// only, so its co-scheduled alignment reads 0 (none reported).
	CUdevResource all{};
	if (CUresult r = driver()->device_resource(d.dev, &all, CU_DEV_RESOURCE_TYPE_SM))
		return r;
	unsigned int n = 0;
	if (CUresult r = driver()->split(nullptr, &n, &all, nullptr, 0, group_sms))
		return r;
	d.groups.assign(n, CUdevResource{});
	if (CUresult r = driver()->split(d.groups.data(), &n, &all, &d.rest, 0, group_sms))
		return r;
	d.groups.resize(n);
	*out = CudaSplit{n, n ? d.groups[0].sm.smCount : 0, all.sm.smCoscheduledAlignment};
	for (const CUdevResource &g : d.groups)
		if (g.sm.smCount != out->group_sms)
			out->group_sms = 0;
	return 0;
}

int green_stream(int ordinal, const unsigned int *idx, unsigned int n, int priority,
		 void **stream, void **green_ctx, unsigned int *sms, unsigned int *coscheduled)
{
	std::vector<CUdevResource> mine;
	CUdevice dev;
	{
		std::lock_guard<std::mutex> hold(devices_lock);
		const Device &d = devices.at(ordinal);
		for (unsigned int i = 0; i < n; i++) {
			if (idx[i] >= d.groups.size())
				return CUDA_ERROR_INVALID_VALUE;
			mine.push_back(d.groups[idx[i]]);
		}
		dev = d.dev;
	}
	CUdevResourceDesc desc;
	if (CUresult r = driver()->generate_desc(&desc, mine.data(), n))
		return r;
	CUgreenCtx g;
	if (CUresult r = driver()->green_create(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM))
		return r;
	CUstream s;
	if (CUresult r = driver()->green_stream(&s, g, CU_STREAM_NON_BLOCKING, priority)) {
		driver()->green_destroy(g);
		return r;
	}
	// Never trust the request: read back what the context has.
	CUdevResource got{};
	if (CUresult r = driver()->green_resource(g, &got, CU_DEV_RESOURCE_TYPE_SM)) {
		driver()->stream_destroy(s);
		driver()->green_destroy(g);
		return r;
	}
	*stream = s;
	*green_ctx = g;
	*sms = got.sm.smCount;
	*coscheduled = got.sm.smCoscheduledAlignment;
	return 0;
}

int plain_stream(int ordinal, int priority, void **stream)
{
	CUcontext primary;
	{
		std::lock_guard<std::mutex> hold(devices_lock);
		primary = devices.at(ordinal).primary;
	}
	// The caller's current context, if any, comes back on top.
	if (CUresult r = driver()->push_current(primary))
		return r;
	CUstream s;
	CUresult r = driver()->stream_create_priority(&s, CU_STREAM_NON_BLOCKING, priority);
	CUcontext popped;
	driver()->pop_current(&popped);
	*stream = r ? nullptr : s;
	return r;
}
int priority_range(int ordinal, int *least, int *greatest)
{
	CUcontext primary;
	{
		std::lock_guard<std::mutex> hold(devices_lock);
		primary = devices.at(ordinal).primary;
	}
	// The range is the context's: the primary context, pushed and popped.
	if (CUresult r = driver()->push_current(primary))
		return r;
	CUresult r = driver()->priority_range(least, greatest);
	CUcontext popped;
	driver()->pop_current(&popped);
	return r;
}
int stream_priority(void *stream, int *priority)
{
	return driver()->stream_get_priority(static_cast<CUstream>(stream), priority);
}

int stream_synchronize(void *stream)
{
	return driver()->stream_sync(static_cast<CUstream>(stream));
}

int destroy(void *stream, void *green_ctx)
{
	// A green context does not destroy its streams: streams first.
	CUresult r = driver()->stream_destroy(static_cast<CUstream>(stream));
	if (green_ctx)
		driver()->green_destroy(static_cast<CUgreenCtx>(green_ctx));
	return r;
}

// The calling thread in relaxed stream-capture mode while it lives: a
// marker's calls stay legal while another thread captures in global mode
// (cuEventQuery is an unsafe call there, and would invalidate the capture).
class RelaxedCapture {
public:
	RelaxedCapture()
	{
		if (driver()->exchange_capture_mode(&mode_) != CUDA_SUCCESS)
			exchanged_ = false;
	}
	~RelaxedCapture()
	{
		if (exchanged_)
			driver()->exchange_capture_mode(&mode_);
	}
	RelaxedCapture(const RelaxedCapture &) = delete;
	RelaxedCapture &operator=(const RelaxedCapture &) = delete;

private:
	CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
	bool exchanged_ = true;
};

// An event of @stream's context, pushed for cuEventCreate and popped: for a
// green context's stream the device's primary context, which
// cuStreamGetCtx_v2 names beside the green context (an event of the primary
// context records on a green context's stream: checked on an H200,
// docs/preemption.md). Not the green context itself: that may be current
// to one thread at a time only, perhaps a thread of the program's.
int event_create(void *stream, void **event)
{
	const RelaxedCapture relaxed;
	CUcontext ctx;
	CUgreenCtx green;
	if (CUresult r = driver()->stream_get_ctx(static_cast<CUstream>(stream), &ctx, &green))
		return r;
	if (CUresult r = driver()->push_current(ctx))
		return r;
	CUevent e;
	const CUresult r = driver()->event_create(&e, CU_EVENT_DISABLE_TIMING);
	CUcontext popped;
	driver()->pop_current(&popped);
	if (r == CUDA_SUCCESS)
		*event = e;
	return r;
}

int event_record(void *event, void *stream)
{
	const RelaxedCapture relaxed;
	return driver()->event_record(static_cast<CUevent>(event), static_cast<CUstream>(stream));
}

int event_query(void *event)
{
	const RelaxedCapture relaxed;
	return driver()->event_query(static_cast<CUevent>(event));
}

int event_destroy(void *event)
{
	return driver()->event_destroy(static_cast<CUevent>(event));
}

int stream_capturing(void *stream, bool *capturing)
{
	const RelaxedCapture relaxed;
	CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
	const CUresult r = driver()->stream_is_capturing(static_cast<CUstream>(stream), &status);
	*capturing = status != CU_STREAM_CAPTURE_STATUS_NONE;
	return r;
}

const char *error_string(int error)
{
	const char *s = nullptr;
	driver()->error_string(static_cast<CUresult>(error), &s);
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

using GetProc = CUresult (*)(const char *, void **, int, cuuint64_t,
			     CUdriverProcAddressQueryResult *);
// libcuda.so.1's table (load_cuda()) and its cuGetProcAddress_v2.
CudaDriver loaded;
GetProc loaded_proc;
std::once_flag loaded_events;

// Whether the driver table has the launch markers' entry points: in
// libcuda.so.1's, looked up once, at the first call (a test's table comes
// with them or without).
bool events_ready()
{
	if (driver() == &loaded) {
		std::call_once(loaded_events, [] {
			auto optional = [](const char *name, auto *fn, int version) {
				void *p = nullptr;
				CUdriverProcAddressQueryResult st;
				if (loaded_proc(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &st))
					p = nullptr;
				*fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
			};
			// The 12.5 ABI (cuStreamGetCtx_v2: the context, the
			// green one).
			optional("cuStreamGetCtx", &loaded.stream_get_ctx, 12050);
			optional("cuEventCreate", &loaded.event_create, CUDA_VERSION);
			optional("cuEventRecord", &loaded.event_record, CUDA_VERSION);
			optional("cuEventQuery", &loaded.event_query, CUDA_VERSION);
			optional("cuEventDestroy", &loaded.event_destroy, CUDA_VERSION);
			optional("cuStreamIsCapturing", &loaded.stream_is_capturing, CUDA_VERSION);
			optional("cuThreadExchangeStreamCaptureMode", &loaded.exchange_capture_mode,
				 CUDA_VERSION);
		});
	}
	const CudaDriver *t = driver();
	return t->stream_get_ctx && t->event_create && t->event_record && t->event_query &&
	       t->event_destroy && t->stream_is_capturing && t->exchange_capture_mode;
}

} // namespace

CudaApi cuda_api_over(const CudaDriver &table)
{
	{
		std::lock_guard<std::mutex> hold(devices_lock);
		// A new table (a test's) starts afresh; the same one keeps
		// the devices every client shares.
		if (driver_table.load() != &table) {
			driver_table.store(&table, std::memory_order_release);
			devices.clear();
			initialised = false;
		}
	}
	CudaApi api{device_count,	   device_by_pci_bus_id, open_device,	    split,
		    green_stream,	   plain_stream,	 priority_range,    stream_priority,
		    stream_synchronize, destroy,		 error_string,	    mps_running,
		    EventOps{}};
	api.events_ready = events_ready;
	api.events.create = event_create;
	api.events.record = event_record;
	api.events.query = event_query;
	api.events.destroy = event_destroy;
	api.events.capturing = stream_capturing;
	api.events.not_ready = CUDA_ERROR_NOT_READY;
	return api;
}

bool load_cuda(CudaApi *api, std::string *error)
{
	static std::mutex load_lock;
	static bool ok;
	std::lock_guard<std::mutex> hold(load_lock);
	if (ok) {
		*api = cuda_api_over(loaded);
		return true;
	}
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		*error = std::string("cannot load the CUDA driver: ") + dlerror();
		return false;
	}
	auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
	if (!get) {
		*error = "libcuda.so.1 has no cuGetProcAddress_v2: a driver for CUDA 12 or "
			 "later is needed";
		return false;
	}
	bool all = true;
	auto sym = [&](const char *name, auto *fn) {
		void *p = nullptr;
		CUdriverProcAddressQueryResult st;
		if (get(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st) || !p) {
			if (all)
				*error = std::string("the CUDA driver has no ") + name +
					 " (green contexts need CUDA 12.5 or later)";
			all = false;
		}
		*fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
	};
	// The launch markers' entry points stay null here: looked up at
	// their first use (events_ready()), a process that never gates
	// resolves none.
	CudaDriver d{};
	sym("cuInit", &d.init);
	sym("cuDeviceGetCount", &d.device_count);
	sym("cuDeviceGet", &d.device_get);
	sym("cuDeviceGetByPCIBusId", &d.device_by_pci_bus_id);
	sym("cuDevicePrimaryCtxRetain", &d.primary_retain);
	sym("cuCtxPushCurrent", &d.push_current);
	sym("cuCtxPopCurrent", &d.pop_current);
	sym("cuDeviceGetDevResource", &d.device_resource);
	sym("cuDevSmResourceSplitByCount", &d.split);
	sym("cuDevResourceGenerateDesc", &d.generate_desc);
	sym("cuGreenCtxCreate", &d.green_create);
	sym("cuGreenCtxStreamCreate", &d.green_stream);
	sym("cuGreenCtxGetDevResource", &d.green_resource);
	sym("cuGreenCtxDestroy", &d.green_destroy);
	sym("cuStreamCreate", &d.stream_create);
	sym("cuStreamCreateWithPriority", &d.stream_create_priority);
	sym("cuStreamGetPriority", &d.stream_get_priority);
	sym("cuCtxGetStreamPriorityRange", &d.priority_range);
	sym("cuStreamSynchronize", &d.stream_sync);
	sym("cuStreamDestroy", &d.stream_destroy);
	sym("cuGetErrorString", &d.error_string);
	if (!all)
		return false;
	loaded_proc = get;
	loaded = d;
	ok = true;
	*api = cuda_api_over(loaded);
	return true;
}
#endif

} // namespace gpuslot
