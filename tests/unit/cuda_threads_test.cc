// SPDX-License-Identifier: GPL-2.0
// The CUDA layer of libgpuslot (cuda_load.cc) over a test double of the
// CUDA driver, from many threads at once, under ThreadSanitizer: the
// per-process device state is shared safely, and no call leaves a context
// current on the calling thread.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda_driver.hpp"

namespace {

// The test double of the driver: two GPUs of 132 SMs; a per-thread stack
// of current contexts, as the driver keeps one.
thread_local std::vector<CUcontext> current;
std::atomic<uintptr_t> next_handle{0x1000};
std::atomic<int> live_streams{0}, live_greens{0};

template <class T> T handle()
{
	return reinterpret_cast<T>(next_handle.fetch_add(1));
}

CUresult init(unsigned int) { return CUDA_SUCCESS; }
CUresult device_count(int *n)
{
	*n = 2;
	return CUDA_SUCCESS;
}
// cuDeviceGet takes any of 16 devices; the count says 2 (the PCI lookup
// finds those); the rest let threads open devices of their own at once.
CUresult device_get(CUdevice *d, int ordinal)
{
	*d = ordinal;
	return ordinal < 16 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
CUresult by_bus_id(CUdevice *d, const char *id)
{
	if (!strcasecmp(id, "0000:19:00.0"))
		*d = 0;
	else if (!strcasecmp(id, "0000:3b:00.0"))
		*d = 1;
	else
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}
CUresult retain(CUcontext *c, CUdevice d)
{
	*c = reinterpret_cast<CUcontext>(uintptr_t(0x100 + d));
	return CUDA_SUCCESS;
}
CUresult push(CUcontext c)
{
	current.push_back(c);
	return CUDA_SUCCESS;
}
CUresult pop(CUcontext *c)
{
	if (current.empty())
		return CUDA_ERROR_INVALID_CONTEXT;
	*c = current.back();
	current.pop_back();
	return CUDA_SUCCESS;
}
CUresult device_resource(CUdevice, CUdevResource *r, CUdevResourceType type)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	r->sm.smCount = 132;
	r->sm.smCoscheduledAlignment = 8;
	return CUDA_SUCCESS;
}
// As the driver: the groups report no co-scheduled alignment of their own.
CUresult split(CUdevResource *result, unsigned int *groups, const CUdevResource *input,
	       CUdevResource *, unsigned int, unsigned int min_count)
{
	const unsigned int n = input->sm.smCount / min_count;
	if (result)
		for (unsigned int i = 0; i < n && i < *groups; i++) {
			memset(&result[i], 0, sizeof(result[i]));
			result[i].type = CU_DEV_RESOURCE_TYPE_SM;
			result[i].sm.smCount = min_count;
		}
	*groups = n;
	return CUDA_SUCCESS;
}
CUresult generate_desc(CUdevResourceDesc *desc, CUdevResource *r, unsigned int n)
{
	unsigned int sms = 0;
	for (unsigned int i = 0; i < n; i++)
		sms += r[i].sm.smCount;
	*desc = reinterpret_cast<CUdevResourceDesc>(uintptr_t(sms));
	return CUDA_SUCCESS;
}
CUresult green_create(CUgreenCtx *g, CUdevResourceDesc desc, CUdevice, unsigned int)
{
	// The handle carries the SM count, for green_resource.
	*g = reinterpret_cast<CUgreenCtx>(reinterpret_cast<uintptr_t>(desc) << 32 |
					  (next_handle.fetch_add(1) & 0xffffffff));
	live_greens++;
	return CUDA_SUCCESS;
}
CUresult green_stream(CUstream *s, CUgreenCtx, unsigned int, int)
{
	*s = handle<CUstream>();
	live_streams++;
	return CUDA_SUCCESS;
}
CUresult green_resource(CUgreenCtx g, CUdevResource *r, CUdevResourceType type)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	r->sm.smCount = unsigned(reinterpret_cast<uintptr_t>(g) >> 32);
	r->sm.smCoscheduledAlignment = 8;
	return CUDA_SUCCESS;
}
CUresult green_destroy(CUgreenCtx)
{
	live_greens--;
	return CUDA_SUCCESS;
}
CUresult stream_create(CUstream *s, unsigned int)
{
	// A plain stream needs a current context, as the driver's does.
	if (current.empty())
		return CUDA_ERROR_INVALID_CONTEXT;
	*s = handle<CUstream>();
	live_streams++;
	return CUDA_SUCCESS;
}
CUresult stream_create_priority(CUstream *s, unsigned int flags, int)
{
	return stream_create(s, flags);
}
CUresult stream_get_priority(CUstream, int *priority)
{
	*priority = 0;
	return CUDA_SUCCESS;
}
CUresult priority_range(int *least, int *greatest)
{
	// The range is a context's, as the driver's is.
	if (current.empty())
		return CUDA_ERROR_INVALID_CONTEXT;
	*least = 0;
	*greatest = -5;
	return CUDA_SUCCESS;
}
CUresult stream_sync(CUstream) { return CUDA_SUCCESS; }
CUresult stream_destroy(CUstream)
{
	live_streams--;
	return CUDA_SUCCESS;
}
CUresult error_string(CUresult, const char **s)
{
	*s = "test double error";
	return CUDA_SUCCESS;
}

// The launch markers' entry points. A stream's context is the stream's
// handle + 1 (for a green context's stream the primary context, as
// cuStreamGetCtx_v2 gives beside the green context, the handle + 2); an
// event remembers the context current where it was made. Each call
// checks that it runs in relaxed capture mode, the mode the thread had back
// after it (cuThreadExchangeStreamCaptureMode).
thread_local CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
std::atomic<int> not_relaxed{0}, wrong_context{0}, timed_events{0}, live_events{0};
void check_relaxed()
{
	if (capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED)
		not_relaxed++;
}
CUresult exchange_mode(CUstreamCaptureMode *mode)
{
	std::swap(*mode, capture_mode);
	return CUDA_SUCCESS;
}
CUresult stream_get_ctx(CUstream s, CUcontext *ctx, CUgreenCtx *green)
{
	*ctx = reinterpret_cast<CUcontext>(reinterpret_cast<uintptr_t>(s) + 1);
	*green = reinterpret_cast<CUgreenCtx>(reinterpret_cast<uintptr_t>(s) + 2);
	return CUDA_SUCCESS;
}
CUresult event_create(CUevent *e, unsigned int flags)
{
	check_relaxed();
	if (flags != CU_EVENT_DISABLE_TIMING)
		timed_events++;
	if (current.empty())
		return CUDA_ERROR_INVALID_CONTEXT;
	*e = reinterpret_cast<CUevent>(new CUcontext(current.back()));
	live_events++;
	return CUDA_SUCCESS;
}
CUresult event_record(CUevent e, CUstream s)
{
	check_relaxed();
	CUcontext ctx;
	CUgreenCtx green;
	stream_get_ctx(s, &ctx, &green);
	if (*reinterpret_cast<CUcontext *>(e) != ctx)
		wrong_context++;
	return CUDA_SUCCESS;
}
CUresult event_query(CUevent)
{
	check_relaxed();
	return CUDA_ERROR_NOT_READY;
}
CUresult event_destroy(CUevent e)
{
	delete reinterpret_cast<CUcontext *>(e);
	live_events--;
	return CUDA_SUCCESS;
}
CUresult is_capturing(CUstream, CUstreamCaptureStatus *status)
{
	check_relaxed();
	*status = CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

const gpuslot::CudaDriver driver = {
	init,	       device_count,  device_get,    by_bus_id,	   retain,
	push,	       pop,	      device_resource, split,	   generate_desc,
	green_create, green_stream, green_resource, green_destroy, stream_create,
	stream_sync,  stream_destroy, error_string, stream_create_priority, stream_get_priority,
	priority_range, stream_get_ctx, event_create, event_record, event_query, event_destroy,
	is_capturing, exchange_mode,
};

TEST(CudaThreads, ManyThreadsOpenSplitAndBuildAtOnce)
{
	const gpuslot::CudaApi api = gpuslot::cuda_api_over(driver);
	constexpr int kThreads = 8, kRounds = 200;
	std::atomic<int> failures{0}, left_current{0};
	std::atomic<bool> go{false};
	std::vector<std::thread> threads;
	for (int t = 0; t < kThreads; t++)
		threads.emplace_back([&, t] {
			const int ordinal = t % 2;
			while (!go.load())
				;
			// Every thread adds devices to the shared table at once.
			gpuslot::CudaSplit halves;
			if (api.open_device(2 + t) || api.open_device(2 + (t + 1) % kThreads) ||
			    api.split(2 + t, 66, &halves) || halves.groups != 2 ||
			    halves.group_sms != 66)
				failures++;
			for (int i = 0; i < kRounds; i++) {
				int n = 0, found = -1;
				gpuslot::CudaSplit groups;
				unsigned int sms = 0, coscheduled = 0;
				int least = 1, greatest = 1;
				const unsigned int idx[] = {0, 1};
				void *s = nullptr, *g = nullptr, *plain = nullptr;
				if (api.device_count(&n) || n != 2 ||
				    api.device_by_pci_bus_id(&found, ordinal ? "0000:3B:00.0"
									     : "0000:19:00.0") ||
				    found != ordinal || api.open_device(ordinal) ||
				    api.split(ordinal, 32, &groups) || groups.groups != 4 ||
				    groups.group_sms != 32 || groups.device_coscheduled != 8 ||
				    api.green_stream(ordinal, idx, 2, 0, &s, &g, &sms, &coscheduled) ||
				    sms != 64 || coscheduled != 8 ||
				    api.plain_stream(ordinal, -1, &plain) ||
				    api.priority_range(ordinal, &least, &greatest) || least != 0 ||
				    greatest != -5 ||
				    api.stream_synchronize(s)) {
					failures++;
					continue;
				}
				left_current += int(current.size());
				api.destroy(s, g);
				api.destroy(plain, nullptr);
			}
		});
	go = true;
	for (auto &t : threads)
		t.join();
	EXPECT_EQ(failures.load(), 0);
	EXPECT_EQ(left_current.load(), 0) << "a call left a context current";
	EXPECT_EQ(live_streams.load(), 0);
	EXPECT_EQ(live_greens.load(), 0);
	EXPECT_STREQ(api.error_string(1), "test double error");
}

// The launch markers of gpuslot_launch_begin() (EventMarkers over
// cuda_load.cc's events), from many threads, each with markers of its own
// stream: an event is made in its stream's context (not the caller's, not a
// green context), without timing, and every call runs in relaxed capture
// mode and gives the thread its own mode back, with no context left current.
TEST(CudaThreads, LaunchMarkersAreUntimedEventsOfTheStreamsContext)
{
	const gpuslot::CudaApi api = gpuslot::cuda_api_over(driver);
	constexpr int kThreads = 8, kRounds = 200;
	std::atomic<int> failures{0}, left_current{0}, mode_changed{0};
	std::vector<std::thread> threads;
	for (int t = 0; t < kThreads; t++)
		threads.emplace_back([&, t] {
			void *stream = reinterpret_cast<void *>(uintptr_t(0x10000 + 0x10 * t));
			std::unique_ptr<gpuslot::Markers> m =
				gpuslot::make_event_markers(api.events, stream);
			if (!m) {
				failures++;
				return;
			}
			// The caller's own context stays where it is.
			push(reinterpret_cast<CUcontext>(uintptr_t(0x777)));
			for (int i = 0; i < kRounds; i++) {
				void *e = m->record(stream);
				if (!e || m->reached(e) || m->capturing(stream))
					failures++;
				if (e)
					m->recycle(e);
			}
			CUcontext mine = nullptr;
			pop(&mine);
			if (mine != reinterpret_cast<CUcontext>(uintptr_t(0x777)))
				failures++;
			left_current += int(current.size());
			if (capture_mode != CU_STREAM_CAPTURE_MODE_GLOBAL)
				mode_changed++;
		});
	for (auto &t : threads)
		t.join();
	EXPECT_EQ(failures.load(), 0);
	EXPECT_EQ(wrong_context.load(), 0) << "an event of another context was recorded";
	EXPECT_EQ(timed_events.load(), 0);
	EXPECT_EQ(not_relaxed.load(), 0) << "a marker call ran in the thread's global mode";
	EXPECT_EQ(mode_changed.load(), 0) << "a thread's capture mode was not given back";
	EXPECT_EQ(left_current.load(), 0) << "a call left a context current";
	EXPECT_EQ(live_events.load(), 0) << "the markers' events were not destroyed";
}

} // namespace
