// SPDX-License-Identifier: GPL-2.0
// A CUDA driver double for gpuslot-run's tests: libcuda.so.1 with the entry
// points the interposer stands in for (legacy and per-thread forms), both
// exported cuGetProcAddress forms, and a clock instead of a GPU: a kernel
// keeps its stream busy for FAKE_CUDA_KERNEL_US microseconds, cuStreamQuery
// says whether it has finished, synchronizations sleep until it has.
//
// Events are recorded at their stream's end of work (cuEventQuery says
// whether it has passed); cuStreamWaitEvent is a command.
//
// One device (FAKE_CUDA_PCI, default 0000:19:00.0) of 132 SMs in pairs,
// its primary context the only context, and green contexts as the driver
// makes them (CUDA 12.5+): a split into groups of consecutive SMs, a
// descriptor, a green context of those SMs, NON_BLOCKING streams on it
// only. A command's line says which SMs its stream may run on: sms=all or
// sms=<first>-<last>[,...].
//
// Every call appends a line to FAKE_CUDA_LOG (one write(2) with O_APPEND,
// so processes sharing the file do not interleave lines):
//   <pid> <CLOCK_MONOTONIC ns> <entry point> [key=value ...]
// With FAKE_CUDA_LOCK_DIR set, commands also record lock=busy|free: a TRY
// of domain 0 on gpuslotd's socket there, what the lock itself says
// (for tests where the domain has k = 1).
#include <cuda.h>
#undef cuGetProcAddress
#include <fcntl.h>
#include <strings.h>
#include <linux/gpuslot.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fake_driver_log.hpp"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// cuCtxGetStreamPriorityRange of an H100: 0 (least) .. -5 (greatest).
constexpr int kLeast = 0, kGreatest = -5;


// A green context: the SMs its groups give it, [first, first + count).
struct Green {
	std::vector<std::pair<unsigned int, unsigned int>> sms;
	bool dead = false;
	unsigned int count() const
	{
		unsigned int n = 0;
		for (auto &r : sms)
			n += r.second;
		return n;
	}
	// Adjacent groups read as one range: "0-31".
	std::string text() const
	{
		std::string t;
		for (size_t i = 0; i < sms.size();) {
			size_t j = i;
			while (j + 1 < sms.size() &&
			       sms[j + 1].first == sms[j].first + sms[j].second)
				j++;
			t += (t.empty() ? "" : ",") + std::to_string(sms[i].first) + "-" +
			     std::to_string(sms[j].first + sms[j].second - 1);
			i = j + 1;
		}
		return t;
	}
};

struct Stream {
	int priority;
	uint64_t busy_until = 0;
	const Green *green = nullptr;
};

std::mutex mutex;
// Stream 0 and the special handles share one clock: the device's.
Stream default_stream{kLeast};
std::vector<std::unique_ptr<Stream>> streams;

Stream *stream_of(CUstream s)
{
	for (auto &p : streams)
		if (reinterpret_cast<CUstream>(p.get()) == s)
			return p.get();
	return &default_stream;
}

using fake_driver::kernel_ns;
using fake_driver::lock_state;
using fake_driver::now_ns;
using fake_driver::sleep_until;

void log(const std::string &line)
{
	fake_driver::log("fake libcuda: log", line);
}

CUresult launch(const char *name, CUstream s)
{
	const std::string held = lock_state();
	std::lock_guard guard(mutex);
	Stream *st = stream_of(s);
	if (st->green && st->green->dead) {
		log(std::string(name) + " error=context-destroyed");
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	}
	st->busy_until = std::max(st->busy_until, now_ns()) + kernel_ns();
	char h[32];
	std::snprintf(h, sizeof(h), "%p", static_cast<void *>(s));
	log(std::string(name) + " stream=" + h + " end=" + std::to_string(st->busy_until) + held +
	    " sms=" + (st->green ? st->green->text() : "all"));
	return CUDA_SUCCESS;
}

CUresult sync_stream(const char *name, CUstream s)
{
	uint64_t until;
	{
		std::lock_guard guard(mutex);
		until = stream_of(s)->busy_until;
	}
	sleep_until(until);
	log(name);
	return CUDA_SUCCESS;
}

CUresult sync_all(const char *name)
{
	uint64_t until;
	{
		std::lock_guard guard(mutex);
		until = default_stream.busy_until;
		for (auto &p : streams)
			until = std::max(until, p->busy_until);
	}
	sleep_until(until);
	log(name);
	return CUDA_SUCCESS;
}

CUresult create(CUstream *out, int priority)
{
	std::lock_guard guard(mutex);
	priority = std::clamp(priority, kGreatest, kLeast);
	streams.push_back(std::make_unique<Stream>(Stream{priority}));
	*out = reinterpret_cast<CUstream>(streams.back().get());
	log("cuStreamCreate priority=" + std::to_string(priority));
	return CUDA_SUCCESS;
}

} // namespace

FAKE_EXPORT CUresult cuInit(unsigned int)
{
	log("cuInit");
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDriverGetVersion(int *v)
{
	*v = CUDA_VERSION;
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
	*least = kLeast;
	*greatest = kGreatest;
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int)
{
	return create(s, kLeast);
}
FAKE_EXPORT CUresult cuStreamCreateWithPriority(CUstream *s, unsigned int, int priority)
{
	return create(s, priority);
}
FAKE_EXPORT CUresult cuStreamGetPriority(CUstream s, int *priority)
{
	std::lock_guard guard(mutex);
	*priority = stream_of(s)->priority;
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamGetPriority_ptsz(CUstream s, int *priority)
{
	return cuStreamGetPriority(s, priority);
}
FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
	std::lock_guard guard(mutex);
	std::erase_if(streams, [s](auto &p) { return reinterpret_cast<CUstream>(p.get()) == s; });
	log("cuStreamDestroy_v2");
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamQuery(CUstream s)
{
	std::lock_guard guard(mutex);
	return now_ns() < stream_of(s)->busy_until ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamQuery_ptsz(CUstream s)
{
	return cuStreamQuery(s);
}
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	return sync_stream("cuStreamSynchronize", s);
}
FAKE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
	return sync_stream("cuStreamSynchronize_ptsz", s);
}
FAKE_EXPORT CUresult cuCtxSynchronize(void)
{
	return sync_all("cuCtxSynchronize");
}
FAKE_EXPORT CUresult cuEventSynchronize(CUevent)
{
	return sync_all("cuEventSynchronize");
}
FAKE_EXPORT CUresult cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int,
				    unsigned int, unsigned int, unsigned int, unsigned int,
				    CUstream s, void **, void **)
{
	return launch("cuLaunchKernel", s);
}
FAKE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction, unsigned int, unsigned int, unsigned int,
					 unsigned int, unsigned int, unsigned int, unsigned int,
					 CUstream s, void **, void **)
{
	return launch("cuLaunchKernel_ptsz", s);
}
FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction, void **, void **)
{
	return launch("cuLaunchKernelEx", c->hStream);
}
FAKE_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction, void **, void **)
{
	return launch("cuLaunchKernelEx_ptsz", c->hStream);
}
FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec, CUstream s)
{
	return launch("cuGraphLaunch", s);
}
FAKE_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream s)
{
	return launch("cuGraphLaunch_ptsz", s);
}
FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream s)
{
	return launch("cuMemcpyHtoDAsync_v2", s);
}
FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr, const void *, size_t, CUstream s)
{
	return launch("cuMemcpyHtoDAsync_v2_ptsz", s);
}
FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t)
{
	launch("cuMemcpyDtoH_v2", nullptr);
	return sync_all("cuMemcpyDtoH_v2:done");
}
FAKE_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *, CUdeviceptr, size_t)
{
	launch("cuMemcpyDtoH_v2_ptds", nullptr);
	return sync_all("cuMemcpyDtoH_v2_ptds:done");
}

FAKE_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent, unsigned int)
{
	return launch("cuStreamWaitEvent", s);
}
FAKE_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent, unsigned int)
{
	return launch("cuStreamWaitEvent_ptsz", s);
}
FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus *status)
{
	*status = CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}
// The primary context, and with FAKE_CUDA_OWN_CTX=1 a context of the
// program's own current instead (cuCtxCreate's, as the double has it).
CUcontext primary_context()
{
	return reinterpret_cast<CUcontext>(&default_stream);
}
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	static int own;
	*ctx = std::getenv("FAKE_CUDA_OWN_CTX") ? reinterpret_cast<CUcontext>(&own)
						 : primary_context();
	return CUDA_SUCCESS;
}
// An event: the time its stream's work recorded before it ends.
FAKE_EXPORT CUresult cuEventCreate(CUevent *e, unsigned int)
{
	*e = reinterpret_cast<CUevent>(new uint64_t(0));
	log("cuEventCreate");
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
	delete reinterpret_cast<uint64_t *>(e);
	return CUDA_SUCCESS;
}
// The calling thread's stream-capture mode (cuThreadExchangeStreamCaptureMode).
static thread_local CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
FAKE_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	std::swap(*mode, capture_mode);
	return CUDA_SUCCESS;
}
static const char *mode_name()
{
	return capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED ? "relaxed" : "other";
}
FAKE_EXPORT CUresult cuCtxGetId(CUcontext, unsigned long long *id)
{
	*id = 1;
	return CUDA_SUCCESS;
}
// Event records and queries say the thread's capture mode.
FAKE_EXPORT CUresult cuEventRecord(CUevent e, CUstream s)
{
	{
		std::lock_guard guard(mutex);
		*reinterpret_cast<uint64_t *>(e) = stream_of(s)->busy_until;
	}
	log(std::string("cuEventRecord mode=") + mode_name());
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventQuery(CUevent e)
{
	log(std::string("cuEventQuery mode=") + mode_name());
	return now_ns() < *reinterpret_cast<uint64_t *>(e) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

// The device, its primary context (the only context) and green contexts.
constexpr unsigned int kDeviceSms = 132, kCoscheduled = 2;

FAKE_EXPORT CUresult cuDeviceGetCount(int *n)
{
	*n = 1;
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice *d, const char *id)
{
	const char *mine = std::getenv("FAKE_CUDA_PCI");
	if (!id || strcasecmp(id, mine ? mine : "0000:19:00.0"))
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice)
{
	*ctx = primary_context();
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice, unsigned int *flags, int *active)
{
	*flags = 0;
	*active = 1;
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice)
{
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
	*d = 0;
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext)
{
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
	return cuCtxGetCurrent(ctx);
}
// A resource's first SM rides in the driver's padding.
unsigned int &first_sm(CUdevResource &r)
{
	return *reinterpret_cast<unsigned int *>(r._internal_padding);
}
CUdevResource sm_resource(unsigned int first, unsigned int count)
{
	CUdevResource r{};
	r.type = CU_DEV_RESOURCE_TYPE_SM;
	first_sm(r) = first;
	r.sm.smCount = count;
	r.sm.minSmPartitionSize = kCoscheduled;
	r.sm.smCoscheduledAlignment = kCoscheduled;
	return r;
}
FAKE_EXPORT CUresult cuDeviceGetDevResource(CUdevice, CUdevResource *r, CUdevResourceType type)
{
	if (type != CU_DEV_RESOURCE_TYPE_SM)
		return CUDA_ERROR_INVALID_VALUE;
	*r = sm_resource(0, kDeviceSms);
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *groups,
						 const CUdevResource *input,
						 CUdevResource *remaining, unsigned int,
						 unsigned int min_count)
{
	if (!groups || !input || !min_count || min_count % kCoscheduled)
		return CUDA_ERROR_INVALID_VALUE;
	const unsigned int n = input->sm.smCount / min_count;
	const unsigned int first = *reinterpret_cast<const unsigned int *>(input->_internal_padding);
	if (result) {
		const unsigned int made = std::min(*groups, n);
		for (unsigned int i = 0; i < made; i++)
			result[i] = sm_resource(first + i * min_count, min_count);
		*groups = made;
		if (remaining)
			*remaining = sm_resource(first + made * min_count,
						 input->sm.smCount - made * min_count);
	} else {
		*groups = n;
	}
	return CUDA_SUCCESS;
}
struct Desc {
	std::vector<CUdevResource> parts;
};
FAKE_EXPORT CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *r,
					       unsigned int n)
{
	// The driver has no call to free one: kept for the process.
	static std::vector<std::unique_ptr<Desc>> descs;
	std::lock_guard guard(mutex);
	descs.push_back(std::make_unique<Desc>());
	descs.back()->parts.assign(r, r + n);
	*desc = reinterpret_cast<CUdevResourceDesc>(descs.back().get());
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *g, CUdevResourceDesc desc, CUdevice,
				      unsigned int)
{
	auto *green = new Green;
	for (CUdevResource &r : reinterpret_cast<Desc *>(desc)->parts)
		green->sms.push_back({first_sm(r), r.sm.smCount});
	*g = reinterpret_cast<CUgreenCtx>(green);
	log("cuGreenCtxCreate sms=" + green->text());
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGreenCtxGetDevResource(CUgreenCtx g, CUdevResource *r, CUdevResourceType)
{
	const Green *green = reinterpret_cast<Green *>(g);
	*r = sm_resource(green->sms.empty() ? 0 : green->sms[0].first, green->count());
	return CUDA_SUCCESS;
}
// Kept, marked dead: a command on a stream of a destroyed green context
// fails, as on the driver.
FAKE_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx g)
{
	std::lock_guard guard(mutex);
	reinterpret_cast<Green *>(g)->dead = true;
	log("cuGreenCtxDestroy");
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGreenCtxStreamCreate(CUstream *out, CUgreenCtx g, unsigned int flags,
					    int priority)
{
	// As the driver documents: NON_BLOCKING must be given.
	if (!(flags & CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	std::lock_guard guard(mutex);
	priority = std::clamp(priority, kGreatest, kLeast);
	streams.push_back(std::make_unique<Stream>(Stream{priority}));
	streams.back()->green = reinterpret_cast<Green *>(g);
	*out = reinterpret_cast<CUstream>(streams.back().get());
	log("cuGreenCtxStreamCreate priority=" + std::to_string(priority) +
	    " sms=" + streams.back()->green->text());
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamGetGreenCtx(CUstream s, CUgreenCtx *g)
{
	std::lock_guard guard(mutex);
	*g = reinterpret_cast<CUgreenCtx>(const_cast<Green *>(stream_of(s)->green));
	return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGetErrorString(CUresult, const char **s)
{
	*s = "fake CUDA error";
	return CUDA_SUCCESS;
}

// For the probe program: what the lock says now (" lock=busy" ...).
FAKE_EXPORT const char *fake_cuda_lock_state()
{
	static thread_local std::string s;
	s = lock_state();
	return s.c_str();
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
					 CUdriverProcAddressQueryResult *);
FAKE_EXPORT CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);

namespace {

struct Proc {
	const char *base;
	int since;    // the version this ABI dates from
	void *legacy; // the driver's function
	void *ptsz;   // its per-thread form (nullptr: the same)
};
#define FN(f) reinterpret_cast<void *>(&f)
const Proc procs[] = {
	{"cuInit", 2000, FN(cuInit), nullptr},
	{"cuDriverGetVersion", 2020, FN(cuDriverGetVersion), nullptr},
	{"cuCtxGetStreamPriorityRange", 5050, FN(cuCtxGetStreamPriorityRange), nullptr},
	{"cuStreamCreate", 2000, FN(cuStreamCreate), nullptr},
	{"cuStreamCreateWithPriority", 5050, FN(cuStreamCreateWithPriority), nullptr},
	{"cuStreamGetPriority", 5050, FN(cuStreamGetPriority), FN(cuStreamGetPriority_ptsz)},
	{"cuStreamDestroy", 4000, FN(cuStreamDestroy_v2), nullptr},
	{"cuStreamQuery", 2000, FN(cuStreamQuery), FN(cuStreamQuery_ptsz)},
	{"cuStreamSynchronize", 2000, FN(cuStreamSynchronize), FN(cuStreamSynchronize_ptsz)},
	{"cuCtxSynchronize", 2000, FN(cuCtxSynchronize), nullptr},
	{"cuEventSynchronize", 2000, FN(cuEventSynchronize), nullptr},
	{"cuLaunchKernel", 4000, FN(cuLaunchKernel), FN(cuLaunchKernel_ptsz)},
	{"cuLaunchKernelEx", 11060, FN(cuLaunchKernelEx), FN(cuLaunchKernelEx_ptsz)},
	{"cuGraphLaunch", 10000, FN(cuGraphLaunch), FN(cuGraphLaunch_ptsz)},
	{"cuStreamWaitEvent", 3020, FN(cuStreamWaitEvent), FN(cuStreamWaitEvent_ptsz)},
	{"cuEventRecord", 2000, FN(cuEventRecord), nullptr},
	{"cuDeviceGetCount", 2000, FN(cuDeviceGetCount), nullptr},
	{"cuDeviceGet", 2000, FN(cuDeviceGet), nullptr},
	{"cuDeviceGetByPCIBusId", 4010, FN(cuDeviceGetByPCIBusId), nullptr},
	{"cuDevicePrimaryCtxRetain", 7000, FN(cuDevicePrimaryCtxRetain), nullptr},
	{"cuDevicePrimaryCtxRelease", 11000, FN(cuDevicePrimaryCtxRelease_v2), nullptr},
	{"cuDevicePrimaryCtxGetState", 7000, FN(cuDevicePrimaryCtxGetState), nullptr},
	{"cuCtxGetCurrent", 4000, FN(cuCtxGetCurrent), nullptr},
	{"cuCtxGetDevice", 2000, FN(cuCtxGetDevice), nullptr},
	{"cuCtxPushCurrent", 4000, FN(cuCtxPushCurrent_v2), nullptr},
	{"cuCtxPopCurrent", 4000, FN(cuCtxPopCurrent_v2), nullptr},
	{"cuDeviceGetDevResource", 12040, FN(cuDeviceGetDevResource), nullptr},
	{"cuDevSmResourceSplitByCount", 12040, FN(cuDevSmResourceSplitByCount), nullptr},
	{"cuDevResourceGenerateDesc", 12040, FN(cuDevResourceGenerateDesc), nullptr},
	{"cuGreenCtxCreate", 12040, FN(cuGreenCtxCreate), nullptr},
	{"cuGreenCtxGetDevResource", 12040, FN(cuGreenCtxGetDevResource), nullptr},
	{"cuGreenCtxDestroy", 12040, FN(cuGreenCtxDestroy), nullptr},
	{"cuGreenCtxStreamCreate", 12050, FN(cuGreenCtxStreamCreate), nullptr},
	{"cuStreamGetGreenCtx", 12040, FN(cuStreamGetGreenCtx), nullptr},
	{"cuGetErrorString", 6000, FN(cuGetErrorString), nullptr},
	{"cuEventQuery", 2000, FN(cuEventQuery), nullptr},
	{"cuThreadExchangeStreamCaptureMode", 10010, FN(cuThreadExchangeStreamCaptureMode), nullptr},
	{"cuCtxGetId", 12000, FN(cuCtxGetId), nullptr},
	{"cuMemcpyHtoDAsync", 3020, FN(cuMemcpyHtoDAsync_v2), FN(cuMemcpyHtoDAsync_v2_ptsz)},
	{"cuMemcpyDtoH", 3020, FN(cuMemcpyDtoH_v2), FN(cuMemcpyDtoH_v2_ptds)},
};
#undef FN

// As the driver answers: the newest form of @symbol at @version, the
// per-thread one with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
		  CUdriverProcAddressQueryResult *status, const char *form)
{
	log(std::string(form) + " symbol=" + symbol + " version=" + std::to_string(version) +
	    " flags=" + std::to_string(flags));
	*pfn = nullptr;
	bool known = false;
	for (const Proc &p : procs) {
		if (std::strcmp(p.base, symbol))
			continue;
		known = true;
		if (version < p.since)
			continue;
		const bool ptds = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
		*pfn = ptds && p.ptsz ? p.ptsz : p.legacy;
		break;
	}
	// cuGetProcAddress itself: the 4-argument form before CUDA 12.
	if (!std::strcmp(symbol, "cuGetProcAddress") && version >= 11030) {
		known = true;
		*pfn = version >= 12000 ? reinterpret_cast<void *>(&cuGetProcAddress_v2)
					: reinterpret_cast<void *>(&cuGetProcAddress);
	}
	if (status)
		*status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS
			       : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
				       : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

} // namespace

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
					 cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	return get_proc(symbol, pfn, version, flags, status, "cuGetProcAddress_v2");
}
FAKE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
				      cuuint64_t flags)
{
	return get_proc(symbol, pfn, version, flags, nullptr, "cuGetProcAddress");
}
