// SPDX-License-Identifier: LGPL-2.1-or-later
// The HIP entry points libgpuslot-run-hip.so stands in for (HIP 5.2's
// hip_runtime_api.h), on an AMD domain (docs/run.md). A HIP program links
// libamdhip64.so directly (hipcc does; <<<>>> and hipLaunchKernelGGL reach
// hipLaunchKernel), so LD_PRELOAD alone puts these ahead of HIP's own: there
// is no cuGetProcAddress to answer and no dlsym hook. Each wrapper calls the
// next definition of its name (dlsym(RTLD_NEXT): libamdhip64's), looked up
// once.
#include <hip/hip_runtime_api.h>

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "interposer.hpp"

#define GPUSLOT_RUN_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpuslot::run {
namespace {

// The next definition of @name (libamdhip64's), of type @Fn, looked up on
// the first call that finds it and kept: thread-safe, and a lookup made
// before HIP is loaded is tried again.
template <class Fn>
class Real {
public:
	explicit constexpr Real(const char *name) : name_(name) {}
	Fn get()
	{
		void *p = fn_.load(std::memory_order_acquire);
		if (!p) {
			p = dlsym(RTLD_NEXT, name_);
			if (p)
				fn_.store(p, std::memory_order_release);
		}
		return reinterpret_cast<Fn>(p);
	}

private:
	const char *const name_;
	std::atomic<void *> fn_{nullptr};
};

#define GPUSLOT_RUN_REAL(name) Real<decltype(&::name)> real_##name(#name)

GPUSLOT_RUN_REAL(hipLaunchKernel);
GPUSLOT_RUN_REAL(hipModuleLaunchKernel);
// Overloaded in C++ (a template of the kernel's type): the C entry point.
Real<hipError_t (*)(const void *, dim3, dim3, void **, unsigned int, hipStream_t)>
	real_hipLaunchCooperativeKernel("hipLaunchCooperativeKernel");
GPUSLOT_RUN_REAL(hipGraphLaunch);
GPUSLOT_RUN_REAL(hipMemcpyAsync);
GPUSLOT_RUN_REAL(hipMemcpyHtoDAsync);
GPUSLOT_RUN_REAL(hipMemcpyDtoHAsync);
GPUSLOT_RUN_REAL(hipMemcpyDtoDAsync);
GPUSLOT_RUN_REAL(hipMemsetAsync);
GPUSLOT_RUN_REAL(hipMemsetD32Async);
GPUSLOT_RUN_REAL(hipStreamWaitEvent);
GPUSLOT_RUN_REAL(hipStreamSynchronize);
GPUSLOT_RUN_REAL(hipDeviceSynchronize);
GPUSLOT_RUN_REAL(hipEventSynchronize);
GPUSLOT_RUN_REAL(hipMemcpy);
GPUSLOT_RUN_REAL(hipMemcpyHtoD);
GPUSLOT_RUN_REAL(hipMemcpyDtoH);
GPUSLOT_RUN_REAL(hipStreamCreateWithPriority);
GPUSLOT_RUN_REAL(hipStreamCreate);
GPUSLOT_RUN_REAL(hipStreamCreateWithFlags);
GPUSLOT_RUN_REAL(hipStreamDestroy);
GPUSLOT_RUN_REAL(hipStreamQuery);
GPUSLOT_RUN_REAL(hipDeviceGetStreamPriorityRange);
GPUSLOT_RUN_REAL(hipGetDevice);
GPUSLOT_RUN_REAL(hipEventCreateWithFlags);
GPUSLOT_RUN_REAL(hipEventRecord);
GPUSLOT_RUN_REAL(hipEventQuery);
GPUSLOT_RUN_REAL(hipEventDestroy);
GPUSLOT_RUN_REAL(hipStreamIsCapturing);
GPUSLOT_RUN_REAL(hipThreadExchangeStreamCaptureMode);
#undef GPUSLOT_RUN_REAL

// What a command the slot could not be taken for returns (not run).
constexpr hipError_t kRefused = hipErrorNotSupported;

pid_t this_thread()
{
	static thread_local pid_t tid = pid_t(syscall(SYS_gettid));
	return tid;
}

// How the queue keys @s: hipStreamPerThread is a different stream in each
// thread, so it carries the thread; the null stream is one per process, as
// the CUDA side keys its legacy default stream.
StreamKey key(hipStream_t s)
{
	return {static_cast<void *>(s), s == hipStreamPerThread ? this_thread() : 0};
}

// A command: sent when the queue admits it.
template <class Fn, class... A>
hipError_t gated(Real<Fn> &real, hipStream_t s, A... a)
{
	Fn fn = real.get();
	if (!fn)
		return hipErrorSharedObjectSymbolNotFound;
	LaunchQueue *q = launch_queue();
	if (!q)
		return fn(a...);
	return q->submit(key(s), [&] { return fn(a...); }, kRefused);
}

// A synchronization: the queue hears of its return.
template <class Fn, class... A>
hipError_t synchronizing(Real<Fn> &real, SyncKind kind, A... a)
{
	Fn fn = real.get();
	if (!fn)
		return hipErrorSharedObjectSymbolNotFound;
	const hipError_t r = fn(a...);
	if (LaunchQueue *q = launch_queue())
		q->synchronized(kind);
	return r;
}

// A blocking copy: a command on the null stream, and a synchronization
// when it returns.
template <class Fn, class... A>
hipError_t blocking_copy(Real<Fn> &real, A... a)
{
	const hipError_t r = gated(real, nullptr, a...);
	if (LaunchQueue *q = launch_queue())
		q->synchronized(SyncKind::stream);
	return r;
}

// HIP's default stream priority, hipStreamCreate's (ROCclr's Normal). Unlike
// CUDA's it is not the least: hipDeviceGetStreamPriorityRange gives Low (1)
// .. High (-1), so counting the slot's levels from the least would put a
// slot of priority 0 below every plain stream of the program and one of
// priority 1 at the default. Counted from here, as libgpuslot's hip backend
// counts them.
constexpr int kHipDefaultPriority = 0;

// The HIP priority for the program's new streams: the slot's, @levels above
// the default, clamped into hipDeviceGetStreamPriorityRange (lower is more
// urgent, as in CUDA). False: leave it.
bool slot_hip_priority(int *priority)
{
	unsigned int levels;
	if (!stream_priority_levels(&levels))
		return false;
	auto range = real_hipDeviceGetStreamPriorityRange.get();
	int least = 0, greatest = 0;
	if (!range || range(&least, &greatest) != hipSuccess)
		return false;
	*priority = priority_in_range(levels, std::min(kHipDefaultPriority, least), greatest);
	return true;
}

// Streams made with the slot's priority: where the launcher set
// HSA_CU_MASK (a partitioned slot) ROCr confines their queues to the
// slot's CUs, else they run on the whole GPU.
std::atomic<unsigned long> streams_confined, streams_whole;

hipError_t create_stream(hipStream_t *stream, unsigned int flags, int asked, bool asked_priority)
{
	int priority = asked;
	const bool slot = slot_hip_priority(&priority);
	if (slot) {
		static const bool masked = std::getenv("HSA_CU_MASK") != nullptr;
		(masked ? streams_confined : streams_whole).fetch_add(1, std::memory_order_relaxed);
	}
	if (slot || asked_priority) {
		auto fn = real_hipStreamCreateWithPriority.get();
		return fn ? fn(stream, flags, priority) : hipErrorSharedObjectSymbolNotFound;
	}
	if (flags) {
		auto fn = real_hipStreamCreateWithFlags.get();
		return fn ? fn(stream, flags) : hipErrorSharedObjectSymbolNotFound;
	}
	auto fn = real_hipStreamCreate.get();
	return fn ? fn(stream) : hipErrorSharedObjectSymbolNotFound;
}

// The calling thread's stream-capture mode set to relaxed for the life of
// this object, then put back: the interposer's own event and stream
// queries must not invalidate a graph another thread captures in global
// mode.
class RelaxedCapture {
public:
	RelaxedCapture()
	{
		exchange_ = real_hipThreadExchangeStreamCaptureMode.get();
		if (exchange_ && exchange_(&mode_) != hipSuccess)
			exchange_ = nullptr;
	}
	~RelaxedCapture()
	{
		if (exchange_)
			(void)exchange_(&mode_);
	}
	RelaxedCapture(const RelaxedCapture &) = delete;
	RelaxedCapture &operator=(const RelaxedCapture &) = delete;

private:
	hipError_t (*exchange_)(hipStreamCaptureMode *) = nullptr;
	hipStreamCaptureMode mode_ = hipStreamCaptureModeRelaxed;
};

// The throttle's markers: a HIP event without timing (hipEventDisableTiming,
// the cheapest to record and query) recorded after a command on its
// stream. An event belongs to the device current when it was made: the
// pool keeps each with its device and gives it only to a record made with
// that device current. Called with the queue's mutex held.
class HipMarkers final : public Markers {
public:
	bool capturing(void *stream) override
	{
		auto is_capturing = real_hipStreamIsCapturing.get();
		hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
		const RelaxedCapture relaxed;
		return is_capturing &&
		       is_capturing(static_cast<hipStream_t>(stream), &status) == hipSuccess &&
		       status != hipStreamCaptureStatusNone;
	}
	void *record(void *stream) override
	{
		auto get_device = real_hipGetDevice.get();
		auto create = real_hipEventCreateWithFlags.get();
		auto record = real_hipEventRecord.get();
		int device = 0;
		if (!get_device || !create || !record || get_device(&device) != hipSuccess)
			return nullptr;
		Event *e = nullptr;
		for (size_t i = 0; i < free_.size(); i++)
			if (free_[i]->device == device) {
				e = free_[i];
				free_.erase(free_.begin() + long(i));
				break;
			}
		if (!e) {
			hipEvent_t event = nullptr;
			if (create(&event, hipEventDisableTiming) != hipSuccess)
				return nullptr;
			e = new Event{device, event};
		}
		const RelaxedCapture relaxed;
		if (record(e->event, static_cast<hipStream_t>(stream)) != hipSuccess) {
			// A stream of another device, or one gone: not counted,
			// and the event not pooled again.
			if (auto destroy = real_hipEventDestroy.get())
				(void)destroy(e->event);
			delete e;
			return nullptr;
		}
		return e;
	}
	bool reached(void *marker) override
	{
		auto query = real_hipEventQuery.get();
		const RelaxedCapture relaxed;
		// Only hipErrorNotReady means work still runs there.
		return !query || query(static_cast<Event *>(marker)->event) != hipErrorNotReady;
	}
	void recycle(void *marker) override { free_.push_back(static_cast<Event *>(marker)); }

private:
	struct Event {
		int device;
		hipEvent_t event;
	};
	std::vector<Event *> free_;
};

} // namespace

Markers *api_markers()
{
	static HipMarkers *markers = new HipMarkers;
	return markers;
}

void stream_counts(unsigned long *confined, unsigned long *whole)
{
	*confined = streams_confined.load(std::memory_order_relaxed);
	*whole = streams_whole.load(std::memory_order_relaxed);
}

bool stream_finished(void *stream)
{
	auto query = real_hipStreamQuery.get();
	const RelaxedCapture relaxed;
	// An error (a stream of a device reset) leaves nothing running.
	return !query || query(static_cast<hipStream_t>(stream)) != hipErrorNotReady;
}

} // namespace gpuslot::run

using namespace gpuslot::run;

// Stream creation: the slot's priority.
GPUSLOT_RUN_EXPORT hipError_t hipStreamCreate(hipStream_t *stream)
{
	return create_stream(stream, hipStreamDefault, 0, false);
}
GPUSLOT_RUN_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags)
{
	return create_stream(stream, flags, 0, false);
}
GPUSLOT_RUN_EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t *stream, unsigned int flags,
							  int priority)
{
	return create_stream(stream, flags, priority, true);
}
GPUSLOT_RUN_EXPORT hipError_t hipStreamDestroy(hipStream_t stream)
{
	auto fn = real_hipStreamDestroy.get();
	if (!fn)
		return hipErrorSharedObjectSymbolNotFound;
	if (LaunchQueue *q = launch_queue())
		q->stream_destroyed(key(stream));
	return fn(stream);
}

// Commands.
GPUSLOT_RUN_EXPORT hipError_t hipLaunchKernel(const void *f, dim3 grid, dim3 block, void **args,
					      size_t shared, hipStream_t s)
{
	return gated(real_hipLaunchKernel, s, f, grid, block, args, shared, s);
}
GPUSLOT_RUN_EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gx,
						    unsigned int gy, unsigned int gz,
						    unsigned int bx, unsigned int by,
						    unsigned int bz, unsigned int shared,
						    hipStream_t s, void **params, void **extra)
{
	return gated(real_hipModuleLaunchKernel, s, f, gx, gy, gz, bx, by, bz, shared, s, params,
		     extra);
}
GPUSLOT_RUN_EXPORT hipError_t hipLaunchCooperativeKernel(const void *f, dim3 grid, dim3 block,
							 void **params, unsigned int shared,
							 hipStream_t s)
{
	return gated(real_hipLaunchCooperativeKernel, s, f, grid, block, params, shared, s);
}
GPUSLOT_RUN_EXPORT hipError_t hipGraphLaunch(hipGraphExec_t g, hipStream_t s)
{
	return gated(real_hipGraphLaunch, s, g, s);
}
GPUSLOT_RUN_EXPORT hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n,
					     hipMemcpyKind kind, hipStream_t s)
{
	return gated(real_hipMemcpyAsync, s, dst, src, n, kind, s);
}
GPUSLOT_RUN_EXPORT hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void *src, size_t n,
						 hipStream_t s)
{
	return gated(real_hipMemcpyHtoDAsync, s, dst, src, n, s);
}
GPUSLOT_RUN_EXPORT hipError_t hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t n,
						 hipStream_t s)
{
	return gated(real_hipMemcpyDtoHAsync, s, dst, src, n, s);
}
GPUSLOT_RUN_EXPORT hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n,
						 hipStream_t s)
{
	return gated(real_hipMemcpyDtoDAsync, s, dst, src, n, s);
}
GPUSLOT_RUN_EXPORT hipError_t hipMemsetAsync(void *dst, int value, size_t n, hipStream_t s)
{
	return gated(real_hipMemsetAsync, s, dst, value, n, s);
}
GPUSLOT_RUN_EXPORT hipError_t hipMemsetD32Async(hipDeviceptr_t dst, int value, size_t count,
						hipStream_t s)
{
	return gated(real_hipMemsetD32Async, s, dst, value, count, s);
}
// An event wait holds its stream back on the GPU: a command too.
GPUSLOT_RUN_EXPORT hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned int flags)
{
	return gated(real_hipStreamWaitEvent, s, s, e, flags);
}

// Synchronizations.
GPUSLOT_RUN_EXPORT hipError_t hipStreamSynchronize(hipStream_t s)
{
	return synchronizing(real_hipStreamSynchronize, SyncKind::stream, s);
}
GPUSLOT_RUN_EXPORT hipError_t hipDeviceSynchronize(void)
{
	return synchronizing(real_hipDeviceSynchronize, SyncKind::context);
}
GPUSLOT_RUN_EXPORT hipError_t hipEventSynchronize(hipEvent_t e)
{
	return synchronizing(real_hipEventSynchronize, SyncKind::stream, e);
}

// Blocking copies.
GPUSLOT_RUN_EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t n, hipMemcpyKind kind)
{
	return blocking_copy(real_hipMemcpy, dst, src, n, kind);
}
GPUSLOT_RUN_EXPORT hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void *src, size_t n)
{
	return blocking_copy(real_hipMemcpyHtoD, dst, src, n);
}
GPUSLOT_RUN_EXPORT hipError_t hipMemcpyDtoH(void *dst, hipDeviceptr_t src, size_t n)
{
	return blocking_copy(real_hipMemcpyDtoH, dst, src, n);
}
