// SPDX-License-Identifier: GPL-2.0
// A HIP double for gpuslot-run's tests: libamdhip64.so.5 with exactly the
// entry points libgpuslot-run-hip.so stands in for, and those it calls
// itself (events, the stream query and capture state, the priority range,
// the current device), with a clock instead of a GPU: a command keeps its
// stream busy for FAKE_CUDA_KERNEL_US microseconds (default 1000) after
// the stream's previous one, hipStreamQuery says whether it has finished,
// synchronizations sleep until it has. An event is recorded at its
// stream's end of work; hipStreamWaitEvent is a command.
//
// It logs as the CUDA double does (fake_libcuda.cc), to the same variable,
// so that fake_work_state.cc's lines join it: every call appends a line to
// FAKE_CUDA_LOG (one write(2) with O_APPEND):
//   <pid> <CLOCK_MONOTONIC ns> <entry point> [key=value ...]
// a command's line with stream= and end= (when its work ends on the
// simulated GPU), event records and queries with mode= (the calling
// thread's capture mode: relaxed|other). With FAKE_CUDA_LOCK_DIR set,
// commands also record lock=busy|free, as the CUDA double's do.
//
// Stream priorities as HIP (ROCm 5.2 to 7) has them, hip::Stream::Priority:
// hipDeviceGetStreamPriorityRange gives 1 (least: Low) .. -1 (greatest:
// High); hipStreamCreate and hipStreamCreateWithFlags make streams at 0
// (Normal), between the two; a stream keeps the priority it was made with,
// clamped into the range, and hipStreamGetPriority reads it back.
#include <hip/hip_runtime_api.h>

#include <fcntl.h>
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

constexpr int kLeast = 1, kNormal = 0, kGreatest = -1;

struct Stream {
	int priority;
	uint64_t busy_until = 0;
};

std::mutex mutex;
// The null stream and hipStreamPerThread share one clock: the device's.
Stream default_stream{kNormal};
std::vector<std::unique_ptr<Stream>> streams;

Stream *stream_of(hipStream_t s)
{
	for (auto &p : streams)
		if (reinterpret_cast<hipStream_t>(p.get()) == s)
			return p.get();
	return &default_stream;
}

using fake_driver::kernel_ns;
using fake_driver::lock_state;
using fake_driver::now_ns;
using fake_driver::sleep_until;

void log(const std::string &line)
{
	fake_driver::log("fake libamdhip64: log", line);
}

hipError_t command(const char *name, hipStream_t s)
{
	const std::string held = lock_state();
	std::lock_guard guard(mutex);
	Stream *st = stream_of(s);
	st->busy_until = std::max(st->busy_until, now_ns()) + kernel_ns();
	char h[32];
	std::snprintf(h, sizeof(h), "%p", static_cast<void *>(s));
	log(std::string(name) + " stream=" + h + " end=" + std::to_string(st->busy_until) + held);
	return hipSuccess;
}

hipError_t sync_until(const char *name, uint64_t until)
{
	sleep_until(until);
	log(name);
	return hipSuccess;
}

uint64_t all_done()
{
	std::lock_guard guard(mutex);
	uint64_t until = default_stream.busy_until;
	for (auto &p : streams)
		until = std::max(until, p->busy_until);
	return until;
}

hipError_t create(hipStream_t *out, int priority)
{
	std::lock_guard guard(mutex);
	priority = std::clamp(priority, kGreatest, kLeast);
	streams.push_back(std::make_unique<Stream>(Stream{priority}));
	*out = reinterpret_cast<hipStream_t>(streams.back().get());
	log("hipStreamCreate priority=" + std::to_string(priority));
	return hipSuccess;
}

// The calling thread's capture mode (hipThreadExchangeStreamCaptureMode).
thread_local hipStreamCaptureMode capture_mode = hipStreamCaptureModeGlobal;
const char *mode_name()
{
	return capture_mode == hipStreamCaptureModeRelaxed ? "relaxed" : "other";
}

} // namespace

// Streams.
FAKE_EXPORT hipError_t hipDeviceGetStreamPriorityRange(int *least, int *greatest)
{
	*least = kLeast;
	*greatest = kGreatest;
	return hipSuccess;
}
FAKE_EXPORT hipError_t hipStreamCreate(hipStream_t *s)
{
	return create(s, kNormal);
}
FAKE_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t *s, unsigned int)
{
	return create(s, kNormal);
}
FAKE_EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t *s, unsigned int, int priority)
{
	return create(s, priority);
}
FAKE_EXPORT hipError_t hipStreamGetPriority(hipStream_t s, int *priority)
{
	std::lock_guard guard(mutex);
	*priority = stream_of(s)->priority;
	return hipSuccess;
}
FAKE_EXPORT hipError_t hipStreamDestroy(hipStream_t s)
{
	std::lock_guard guard(mutex);
	std::erase_if(streams, [s](auto &p) { return reinterpret_cast<hipStream_t>(p.get()) == s; });
	log("hipStreamDestroy");
	return hipSuccess;
}
FAKE_EXPORT hipError_t hipStreamQuery(hipStream_t s)
{
	std::lock_guard guard(mutex);
	return now_ns() < stream_of(s)->busy_until ? hipErrorNotReady : hipSuccess;
}
FAKE_EXPORT hipError_t hipStreamIsCapturing(hipStream_t, hipStreamCaptureStatus *status)
{
	*status = hipStreamCaptureStatusNone;
	return hipSuccess;
}
FAKE_EXPORT hipError_t hipThreadExchangeStreamCaptureMode(hipStreamCaptureMode *mode)
{
	std::swap(*mode, capture_mode);
	return hipSuccess;
}
FAKE_EXPORT hipError_t hipGetDevice(int *device)
{
	*device = 0;
	return hipSuccess;
}

// Commands.
FAKE_EXPORT hipError_t hipLaunchKernel(const void *, dim3, dim3, void **, size_t, hipStream_t s)
{
	return command("hipLaunchKernel", s);
}
FAKE_EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t, unsigned int, unsigned int,
					     unsigned int, unsigned int, unsigned int, unsigned int,
					     unsigned int, hipStream_t s, void **, void **)
{
	return command("hipModuleLaunchKernel", s);
}
FAKE_EXPORT hipError_t hipLaunchCooperativeKernel(const void *, dim3, dim3, void **, unsigned int,
						  hipStream_t s)
{
	return command("hipLaunchCooperativeKernel", s);
}
FAKE_EXPORT hipError_t hipGraphLaunch(hipGraphExec_t, hipStream_t s)
{
	return command("hipGraphLaunch", s);
}
FAKE_EXPORT hipError_t hipMemcpyAsync(void *, const void *, size_t, hipMemcpyKind, hipStream_t s)
{
	return command("hipMemcpyAsync", s);
}
FAKE_EXPORT hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t, void *, size_t, hipStream_t s)
{
	return command("hipMemcpyHtoDAsync", s);
}
FAKE_EXPORT hipError_t hipMemcpyDtoHAsync(void *, hipDeviceptr_t, size_t, hipStream_t s)
{
	return command("hipMemcpyDtoHAsync", s);
}
FAKE_EXPORT hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t, hipDeviceptr_t, size_t, hipStream_t s)
{
	return command("hipMemcpyDtoDAsync", s);
}
FAKE_EXPORT hipError_t hipMemsetAsync(void *, int, size_t, hipStream_t s)
{
	return command("hipMemsetAsync", s);
}
FAKE_EXPORT hipError_t hipMemsetD32Async(hipDeviceptr_t, int, size_t, hipStream_t s)
{
	return command("hipMemsetD32Async", s);
}
FAKE_EXPORT hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t, unsigned int)
{
	return command("hipStreamWaitEvent", s);
}

// Synchronizations and blocking copies (on the null stream, then every
// stream: HIP's null stream synchronizes with the blocking streams).
FAKE_EXPORT hipError_t hipStreamSynchronize(hipStream_t s)
{
	uint64_t until;
	{
		std::lock_guard guard(mutex);
		until = stream_of(s)->busy_until;
	}
	return sync_until("hipStreamSynchronize", until);
}
FAKE_EXPORT hipError_t hipDeviceSynchronize(void)
{
	return sync_until("hipDeviceSynchronize", all_done());
}
FAKE_EXPORT hipError_t hipMemcpy(void *, const void *, size_t, hipMemcpyKind)
{
	(void)command("hipMemcpy", nullptr);
	return sync_until("hipMemcpy:done", all_done());
}
FAKE_EXPORT hipError_t hipMemcpyHtoD(hipDeviceptr_t, void *, size_t)
{
	(void)command("hipMemcpyHtoD", nullptr);
	return sync_until("hipMemcpyHtoD:done", all_done());
}
FAKE_EXPORT hipError_t hipMemcpyDtoH(void *, hipDeviceptr_t, size_t)
{
	(void)command("hipMemcpyDtoH", nullptr);
	return sync_until("hipMemcpyDtoH:done", all_done());
}

// Events: the time their stream's work recorded before them ends.
FAKE_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *e, unsigned flags)
{
	*e = reinterpret_cast<hipEvent_t>(new uint64_t(0));
	log("hipEventCreateWithFlags flags=" + std::to_string(flags));
	return hipSuccess;
}
FAKE_EXPORT hipError_t hipEventDestroy(hipEvent_t e)
{
	delete reinterpret_cast<uint64_t *>(e);
	return hipSuccess;
}
FAKE_EXPORT hipError_t hipEventRecord(hipEvent_t e, hipStream_t s)
{
	{
		std::lock_guard guard(mutex);
		*reinterpret_cast<uint64_t *>(e) = stream_of(s)->busy_until;
	}
	log(std::string("hipEventRecord mode=") + mode_name());
	return hipSuccess;
}
FAKE_EXPORT hipError_t hipEventQuery(hipEvent_t e)
{
	log(std::string("hipEventQuery mode=") + mode_name());
	return now_ns() < *reinterpret_cast<uint64_t *>(e) ? hipErrorNotReady : hipSuccess;
}
FAKE_EXPORT hipError_t hipEventSynchronize(hipEvent_t e)
{
	return sync_until("hipEventSynchronize", *reinterpret_cast<uint64_t *>(e));
}
