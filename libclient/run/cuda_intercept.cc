// SPDX-License-Identifier: LGPL-2.1-or-later
// The CUDA driver entry points libgpuslot-run.so stands in for, and the
// three ways a program reaches them (docs/run.md): linked with
// -lcuda (LD_PRELOAD binds them here first), dlsym() on libcuda's handle
// (the dlsym hook below), and cuGetProcAddress, through which cudart, and
// so PyTorch, TensorRT, cuDNN and cuBLAS, take every driver entry point.
// Each wrapper calls exactly the driver function it stands for: the one
// cuGetProcAddress or dlsym answered, of the same ABI and default-stream
// semantics (legacy or per-thread).
#include <cuda.h>
#undef cuGetProcAddress // cuda.h maps the name to _v2; both are exported
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "gpuslot.h"
#include "interposer.hpp"

#define GPUSLOT_RUN_EXPORT extern "C" __attribute__((visibility("default")))

using DlsymFn = void *(*)(void *, const char *);
// glibc's dlsym, which the hook (dlsym_hook.cc) jumps to.
extern "C" __attribute__((visibility("hidden"))) DlsymFn gpuslot_run_real_dlsym;
DlsymFn gpuslot_run_real_dlsym;

// The 4-argument cuGetProcAddress of CUDA 11.3, which 12 and 13 export too.
using GetProcV1 = CUresult (*)(const char *, void **, int, cuuint64_t);
using GetProcV2 = CUresult (*)(const char *, void **, int, cuuint64_t,
			       CUdriverProcAddressQueryResult *);

namespace gpuslot::run {
namespace {

enum Variant { kLegacy = 0, kPerThread = 1 };

enum Index {
	kStreamCreate,
	kStreamCreateWithPriority,
	kStreamDestroy,
	kLaunchKernel,
	kLaunchKernelEx,
	kLaunchCooperativeKernel,
	kGraphLaunch,
	kMemcpyAsync,
	kMemcpyHtoDAsync,
	kMemcpyDtoHAsync,
	kMemcpyDtoDAsync,
	kMemcpy2DAsync,
	kMemcpy3DAsync,
	kMemcpyPeerAsync,
	kMemsetD8Async,
	kMemsetD16Async,
	kMemsetD32Async,
	kMemsetD2D8Async,
	kMemsetD2D16Async,
	kMemsetD2D32Async,
	kStreamWaitEvent,
	kStreamSynchronize,
	kCtxSynchronize,
	kEventSynchronize,
	kMemcpyHtoD,
	kMemcpyDtoH,
	kGetProcAddress,
	kGetProcAddressV2,
	kCount
};

struct Entry {
	const char *base; // the name cuGetProcAddress is asked for
	int since;	  // the CUDA version from which @base has the wrapper's ABI
	const char *symbol[2]; // exported: legacy, per-thread (nullptr: none)
	void *wrapper[2];
};
const Entry &entry(Index i);

// The driver's function behind each wrapper, per variant.
std::atomic<void *> real_fn[kCount][2];

// Called from dlsym before a sanitizer's runtime may have set itself up
// (ASan looks its interceptors up with dlsym(RTLD_NEXT) from its init):
// no instrumentation here.
__attribute__((no_sanitize("address", "undefined"))) DlsymFn real_dlsym()
{
	DlsymFn f = __atomic_load_n(&gpuslot_run_real_dlsym, __ATOMIC_ACQUIRE);
	if (f)
		return f;
	// dlsym's version differs by glibc and architecture; none is assumed.
	// (A plain array: an initializer_list's inline members would be
	// instrumented.)
	static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.17", "GLIBC_2.2.5"};
	for (unsigned int i = 0; !f && i < sizeof(versions) / sizeof(versions[0]); i++)
		f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", versions[i]));
	if (!f) {
		std::fprintf(stderr, "gpuslot-run: glibc's dlsym not found (dlvsym)\n");
		std::abort();
	}
	__atomic_store_n(&gpuslot_run_real_dlsym, f, __ATOMIC_RELEASE);
	return f;
}

// An entry point of libcuda.so.1 itself, never the interposer's.
void *driver_symbol(const char *name)
{
	static std::atomic<void *> handle;
	void *h = handle.load(std::memory_order_acquire);
	if (!h) {
		h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		if (!h)
			h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!h)
			return nullptr;
		handle.store(h, std::memory_order_release);
	}
	return real_dlsym()(h, name);
}

// driver_symbol() as a function of type @Fn.
template <class Fn>
Fn driver_fn(const char *name)
{
	return reinterpret_cast<Fn>(driver_symbol(name));
}

void remember(Index i, Variant v, void *driver)
{
	void *expected = nullptr;
	real_fn[i][v].compare_exchange_strong(expected, driver);
}

template <class Fn>
Fn real(Index i, Variant v)
{
	void *p = real_fn[i][v].load(std::memory_order_acquire);
	if (!p) {
		const Entry &e = entry(i);
		p = driver_symbol(e.symbol[v] ? e.symbol[v] : e.symbol[kLegacy]);
		if (p == e.wrapper[v])
			p = nullptr;
		if (p) {
			remember(i, v, p);
			p = real_fn[i][v].load(std::memory_order_acquire);
		}
	}
	return reinterpret_cast<Fn>(p);
}

pid_t this_thread()
{
	static thread_local pid_t tid = pid_t(syscall(SYS_gettid));
	return tid;
}

// How the queue keys @s: on a per-thread entry point, 0 is the calling
// thread's default stream, as CU_STREAM_PER_THREAD is on every entry point.
template <Variant V>
StreamKey key(CUstream s)
{
	void *p = s;
	if (V == kPerThread && !p)
		p = CU_STREAM_PER_THREAD;
	return {p, p == static_cast<void *>(CU_STREAM_PER_THREAD) ? this_thread() : 0};
}

// A command: sent when the queue admits it.
template <Variant V, class Fn, class... A>
CUresult gated(Index i, CUstream s, A... a)
{
	Fn fn = real<Fn>(i, V);
	if (!fn)
		return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
	LaunchQueue *q = launch_queue();
	if (!q)
		return fn(a...);
	return q->submit(key<V>(s), [&] { return fn(a...); }, CUDA_ERROR_NOT_PERMITTED);
}

// A synchronization: the queue hears of its return.
template <Variant V, class Fn, class... A>
CUresult synchronizing(Index i, SyncKind kind, A... a)
{
	Fn fn = real<Fn>(i, V);
	if (!fn)
		return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
	const CUresult r = fn(a...);
	if (LaunchQueue *q = launch_queue())
		q->synchronized(kind);
	return r;
}

// A blocking copy: a command, and a synchronization when it returns.
template <Variant V, class Fn, class... A>
CUresult blocking_copy(Index i, A... a)
{
	const CUresult r = gated<V, Fn>(i, nullptr, a...);
	if (LaunchQueue *q = launch_queue())
		q->synchronized(SyncKind::stream);
	return r;
}

// The slot's partition, which the program's streams are made on.
struct Partition {
	void *green = nullptr; // CUgreenCtx; nullptr: the slot is the whole GPU
	int device = -1;       // the runtime's number of the domain's GPU
	uint64_t generation = 0;
};

// Whether a slot the program may hold is partitioned (not the whole GPU),
// as the lock says at the first call.
bool slots_partitioned();

// Whether any slot of @mask is partitioned, as the lock says it ("all":
// the whole GPU), from the lock client: no driver call. An attribute that
// cannot be read counts as partitioned: opening the partition then says why.
bool any_partitioned(uint64_t mask)
{
	bool partitioned = false;
	for (unsigned int s = 0; s < 64; s++) {
		if (!(mask >> s & 1))
			continue;
		char text[160] = "";
		const std::string name = "slot" + std::to_string(s) + "/units";
		if (gpuslot_domain_attr(run_state().client, name.c_str(), text, sizeof(text)) < 0)
			return true;
		partitioned |= std::strncmp(text, "all", 3) != 0;
	}
	return partitioned;
}

// The cuda backend's client whose green context the program's streams are
// made on; open for the process, never read (volatile: the store stays, so
// that the client is reachable, as it is in use).
gpuslot_client *volatile partition_client;

int open_partition(Partition *out, std::string *error)
{
	if (!slots_partitioned())
		return 0; // the whole GPU: the program's own context is right
	const RunState run = run_state();
	gpuslot_options o{};
	o.size = sizeof(o);
	o.domain = run.domain;
	o.backend = GPUSLOT_BACKEND_CUDA;
	o.slot_mask = run.slot_mask;
	gpuslot_client *client = nullptr;
	if (gpuslot_open(&o, &client) < 0) {
		*error = gpuslot_last_error();
		return -EIO;
	}
	gpuslot_layout_info layout{};
	layout.size = sizeof(layout);
	// A stream serves every job of the program, whichever slot it holds:
	// the slots' one partition, or the union of theirs.
	if (gpuslot_client_layout(client, &layout) < 0 ||
	    gpuslot_slots_context(client, run.slot_mask, &out->green, &out->generation) < 0) {
		*error = gpuslot_last_error();
		gpuslot_close(client);
		*out = Partition{};
		return -EIO;
	}
	if (layout.notice && *layout.notice)
		std::fprintf(stderr, "gpuslot-run: %s\n", layout.notice);
	out->device = layout.device;
	// Open for the process: its contexts back the program's streams.
	partition_client = client;
	return 0;
}

// The partition of the program's slots. A partitioned slot's green context
// comes from a client of libgpuslot's cuda backend, opened on the first
// call (after the program has initialised the driver, never at load):
// 0, or -errno with *error saying why. Thread-safe.
int slot_partition(Partition *out, std::string *error)
{
	static std::mutex lock;
	static bool opened;
	static Partition partition;
	if (!launch_queue()) {
		*error = "gpuslot-run's variables were not set at load";
		return -ENOENT;
	}
	// A forked child (its mutex may be held by a thread that does not
	// exist there): libgpuslot serves it nothing either.
	if (!in_loader_process()) {
		*error = "a forked child of the program has no client of its own";
		return -ECHILD;
	}
	// libgpuslot's own driver calls never reach here (the dlsym hook
	// gives the library libcuda's entry points): no recursion on @lock.
	std::lock_guard<std::mutex> hold(lock);
	if (!opened) {
		const int err = open_partition(&partition, error);
		// A failure (gpuslotd restarting, say) is tried again at the
		// program's next stream.
		if (err)
			return err;
		opened = true;
		set_partition_generation(partition.generation);
	}
	*out = partition;
	return 0;
}

bool slots_partitioned()
{
	// Asked at the program's first stream, of the layout then.
	static const bool partitioned =
		launch_queue() && any_partitioned(run_state().slot_mask);
	return partitioned;
}

// The CUDA priority for the program's new streams: the slot's, clamped
// into the range of the program's current context. False: leave it.
bool slot_cuda_priority(int *priority)
{
	unsigned int levels;
	if (!stream_priority_levels(&levels))
		return false;
	using Range = CUresult (*)(int *, int *);
	static auto range = driver_fn<Range>("cuCtxGetStreamPriorityRange");
	int least = 0, greatest = 0;
	if (!range || range(&least, &greatest) != CUDA_SUCCESS)
		return false;
	*priority = priority_in_range(levels, least, greatest);
	return true;
}

std::atomic<unsigned long> streams_confined, streams_whole;

// Said once per process, on stderr.
void say_once(std::atomic<bool> &said, const std::string &what)
{
	if (!said.exchange(true))
		std::fprintf(stderr, "gpuslot-run: %s\n", what.c_str());
}

// A blocking stream cannot go on a green context (NON_BLOCKING is
// required there): it stays on the whole GPU, said once.
bool blocking(unsigned int flags)
{
	static std::atomic<bool> said;
	if (flags & CU_STREAM_NON_BLOCKING)
		return false;
	say_once(said, "a blocking stream (made without CU_STREAM_NON_BLOCKING / "
		       "cudaStreamNonBlocking) runs on the whole GPU at the slot's priority: a "
		       "green context's streams cannot synchronize with the default stream");
	return true;
}

// Whether a stream made now may go on @p's green context: the current
// context is the (active) primary context of the domain's GPU, whose
// memory and modules the green context shares. Else it stays on the whole
// GPU, said once.
bool confinable(const Partition &p)
{
	static std::atomic<bool> said_context;
	using GetCurrent = CUresult (*)(CUcontext *);
	using GetCtxDevice = CUresult (*)(CUdevice *);
	using DeviceGet = CUresult (*)(CUdevice *, int);
	using State = CUresult (*)(CUdevice, unsigned int *, int *);
	using Retain = CUresult (*)(CUcontext *, CUdevice);
	using Release = CUresult (*)(CUdevice);
	static auto get_current = driver_fn<GetCurrent>("cuCtxGetCurrent");
	static auto get_ctx_device = driver_fn<GetCtxDevice>("cuCtxGetDevice");
	static auto device_get = driver_fn<DeviceGet>("cuDeviceGet");
	static auto state = driver_fn<State>("cuDevicePrimaryCtxGetState");
	static auto retain = driver_fn<Retain>("cuDevicePrimaryCtxRetain");
	static auto release = driver_fn<Release>("cuDevicePrimaryCtxRelease_v2");
	CUcontext current = nullptr, primary = nullptr;
	CUdevice dev = -1, domain_dev = -1;
	unsigned int flags = 0;
	int active = 0;
	bool ok = get_current && get_ctx_device && device_get && state && retain && release &&
		  get_current(&current) == CUDA_SUCCESS && current &&
		  get_ctx_device(&dev) == CUDA_SUCCESS &&
		  device_get(&domain_dev, p.device) == CUDA_SUCCESS && dev == domain_dev &&
		  // Retaining an inactive primary context would create one.
		  state(dev, &flags, &active) == CUDA_SUCCESS && active;
	if (ok && retain(&primary, dev) == CUDA_SUCCESS) {
		ok = primary == current;
		release(dev);
	} else {
		ok = false;
	}
	if (!ok)
		say_once(said_context,
			 "a stream of another GPU or of a context the program made itself (not "
			 "the primary context of the slot's GPU) runs on the whole GPU at the "
			 "slot's priority");
	return ok;
}

// A stream on the slot's green context at @priority, read back: the
// stream's green context and priority are what was asked.
CUresult confined_stream(CUstream *stream, unsigned int flags, int priority, const Partition &p)
{
	using Create = CUresult (*)(CUstream *, CUgreenCtx, unsigned int, int);
	using GetGreen = CUresult (*)(CUstream, CUgreenCtx *);
	using GetPriority = CUresult (*)(CUstream, int *);
	static auto create = driver_fn<Create>("cuGreenCtxStreamCreate");
	static auto get_green = driver_fn<GetGreen>("cuStreamGetGreenCtx");
	static auto get_priority = driver_fn<GetPriority>("cuStreamGetPriority");
	auto destroy = real<decltype(&cuStreamDestroy_v2)>(kStreamDestroy, kLegacy);
	if (!create || !get_green || !get_priority || !destroy) {
		std::fprintf(stderr, "gpuslot-run: the CUDA driver has no cuGreenCtxStreamCreate or "
				     "cuStreamGetGreenCtx (CUDA 12.5 or later is needed)\n");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	const auto green = static_cast<CUgreenCtx>(p.green);
	CUstream s;
	if (CUresult r = create(&s, green, flags, priority)) {
		std::fprintf(stderr, "gpuslot-run: cuGreenCtxStreamCreate on the slot's partition: "
				     "error %d\n", int(r));
		return r;
	}
	CUgreenCtx got = nullptr;
	int got_priority = 0;
	if (get_green(s, &got) != CUDA_SUCCESS || got != green ||
	    get_priority(s, &got_priority) != CUDA_SUCCESS || got_priority != priority) {
		std::fprintf(stderr, "gpuslot-run: a stream made on the slot's partition reads back "
				     "another context or priority (%d, asked %d)\n",
			     got_priority, priority);
		destroy(s);
		return CUDA_ERROR_NOT_PERMITTED;
	}
	*stream = s;
	return CUDA_SUCCESS;
}

CUresult create_stream(CUstream *stream, unsigned int flags, int asked, bool asked_priority)
{
	int priority = asked;
	if (slot_cuda_priority(&priority)) {
		if (slots_partitioned()) {
			Partition p;
			std::string why;
			// A blocking stream never needs the partition.
			const bool is_blocking = blocking(flags);
			if (!is_blocking && slot_partition(&p, &why) < 0) {
				// A program that asked for a partition never runs
				// its streams outside it: its stream is refused.
				std::fprintf(stderr, "gpuslot-run: the slot's partition: %s; the "
						     "program's stream is refused\n", why.c_str());
				return CUDA_ERROR_NOT_PERMITTED;
			}
			if (stream && p.green && confinable(p)) {
				const CUresult r = confined_stream(stream, flags, priority, p);
				if (r == CUDA_SUCCESS)
					streams_confined.fetch_add(1, std::memory_order_relaxed);
				return r;
			}
			// A whole-GPU slot among the slots gives no context.
			static std::atomic<bool> said_whole;
			if (!p.green && !is_blocking)
				say_once(said_whole, "a slot the program may hold is the whole GPU: "
						     "its streams run on the whole GPU");
			streams_whole.fetch_add(1, std::memory_order_relaxed);
		}
		auto fn = real<decltype(&cuStreamCreateWithPriority)>(kStreamCreateWithPriority,
								      kLegacy);
		return fn ? fn(stream, flags, priority) : CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
	}
	if (asked_priority) {
		auto fn = real<decltype(&cuStreamCreateWithPriority)>(kStreamCreateWithPriority,
								      kLegacy);
		return fn ? fn(stream, flags, priority) : CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
	}
	auto fn = real<decltype(&cuStreamCreate)>(kStreamCreate, kLegacy);
	return fn ? fn(stream, flags) : CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
}

// What the driver answered for @symbol becomes the wrapper where the
// interposer stands in for it at the ABI the caller asked for.
template <class Ask>
void substitute(const char *symbol, void **pfn, int version, cuuint64_t flags, Ask ask)
{
	if (!symbol || !pfn || !*pfn)
		return;
	int i = 0;
	if (!std::strcmp(symbol, "cuGetProcAddress"))
		i = version >= 12000 ? kGetProcAddressV2 : kGetProcAddress;
	else
		while (i < kCount && std::strcmp(entry(Index(i)).base, symbol))
			i++;
	if (i == kCount || version < entry(Index(i)).since)
		return;
	// A runtime newer than the headers this was built with: the wrapper
	// is right only if the driver gives that runtime the function it
	// gives ours (the same ABI).
	if (version > CUDA_VERSION) {
		void *known = nullptr;
		if (ask(symbol, &known, CUDA_VERSION, flags) != CUDA_SUCCESS || known != *pfn)
			return;
	}
	const Entry &e = entry(Index(i));
	const Variant v =
		(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && e.symbol[kPerThread]
			? kPerThread
			: kLegacy;
	if (*pfn == e.wrapper[v])
		return;
	remember(Index(i), v, *pfn);
	*pfn = e.wrapper[v];
}

// The calling thread's stream-capture mode set to RELAXED for the life of
// this object, then put back: the interposer's own event and stream
// queries must not invalidate a graph another thread captures in global
// mode (as PyTorch's NCCL watchdog did with its event queries).
class RelaxedCapture {
public:
	RelaxedCapture()
	{
		using Exchange = CUresult (*)(CUstreamCaptureMode *);
		static auto exchange = driver_fn<Exchange>("cuThreadExchangeStreamCaptureMode");
		exchange_ = exchange;
		if (exchange_ && exchange_(&mode_) != CUDA_SUCCESS)
			exchange_ = nullptr;
	}
	~RelaxedCapture()
	{
		if (exchange_)
			exchange_(&mode_);
	}
	RelaxedCapture(const RelaxedCapture &) = delete;
	RelaxedCapture &operator=(const RelaxedCapture &) = delete;

private:
	CUresult (*exchange_)(CUstreamCaptureMode *) = nullptr;
	CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
};

// The throttle's markers: an event without timing (the cheapest kind to
// record and query) recorded after a command on its stream. Events belong
// to the context current where they were made, as streams do: the pool
// keeps each with its context's unique ID (cuCtxGetId: a context made
// again at a freed one's address has another) and gives it only to a
// stream of that one.
// Called with the throttle's mutex held, so the pool needs no lock of its own;
// used only while a higher slot preempts.
class CudaMarkers final : public Markers {
public:
	bool capturing(void *stream) override
	{
		const RelaxedCapture relaxed;
		CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
		// An error (the legacy stream during another stream's global
		// capture): leave the command alone, as a captured one.
		return !is_capturing_ ||
		       is_capturing_(static_cast<CUstream>(stream), &status) != CUDA_SUCCESS ||
		       status != CU_STREAM_CAPTURE_STATUS_NONE;
	}
	void *record(void *stream) override
	{
		const RelaxedCapture relaxed;
		CUcontext ctx = nullptr;
		if (!get_current_ || !create_ || !record_ || get_current_(&ctx) != CUDA_SUCCESS ||
		    !ctx)
			return nullptr;
		// A driver before CUDA 12.0 has no context IDs: the address.
		unsigned long long id = reinterpret_cast<uintptr_t>(ctx);
		if (get_id_ && get_id_(ctx, &id) != CUDA_SUCCESS)
			return nullptr;
		Event *e = nullptr;
		for (size_t i = 0; i < free_.size(); i++)
			if (free_[i]->ctx == id) {
				e = free_[i];
				free_[i] = free_.back();
				free_.pop_back();
				break;
			}
		if (!e) {
			CUevent ev;
			if (create_(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
				return nullptr;
			e = new Event{id, ev};
		}
		if (record_(e->event, static_cast<CUstream>(stream)) != CUDA_SUCCESS) {
			// Its context gone, or the stream of another: not
			// pooled again (a later context may reuse the address).
			if (destroy_)
				destroy_(e->event);
			delete e;
			return nullptr;
		}
		return e;
	}
	bool reached(void *marker) override
	{
		const RelaxedCapture relaxed;
		// Only CUDA_ERROR_NOT_READY means work still runs there.
		return !query_ || query_(static_cast<Event *>(marker)->event) != CUDA_ERROR_NOT_READY;
	}
	void recycle(void *marker) override { free_.push_back(static_cast<Event *>(marker)); }

private:
	struct Event {
		unsigned long long ctx; // its context's cuCtxGetId
		CUevent event;
	};
	using IsCapturing = CUresult (*)(CUstream, CUstreamCaptureStatus *);
	using GetCurrent = CUresult (*)(CUcontext *);
	using GetId = CUresult (*)(CUcontext, unsigned long long *);
	using Create = CUresult (*)(CUevent *, unsigned int);
	using Record = CUresult (*)(CUevent, CUstream);
	using Query = CUresult (*)(CUevent);
	using Destroy = CUresult (*)(CUevent);
	// Looked up on first use (the queue is made at load, before the
	// program may have loaded the driver).
	IsCapturing is_capturing_ = driver_fn<IsCapturing>("cuStreamIsCapturing");
	GetCurrent get_current_ = driver_fn<GetCurrent>("cuCtxGetCurrent");
	GetId get_id_ = driver_fn<GetId>("cuCtxGetId");
	Create create_ = driver_fn<Create>("cuEventCreate");
	Record record_ = driver_fn<Record>("cuEventRecord");
	Query query_ = driver_fn<Query>("cuEventQuery");
	Destroy destroy_ = driver_fn<Destroy>("cuEventDestroy_v2");
	std::vector<Event *> free_;
};

} // namespace

Markers *api_markers()
{
	// Made on the first marker's request, when the driver is loaded.
	class Lazy final : public Markers {
	public:
		bool capturing(void *s) override { return get().capturing(s); }
		void *record(void *s) override { return get().record(s); }
		bool reached(void *m) override { return get().reached(m); }
		void recycle(void *m) override { get().recycle(m); }

	private:
		CudaMarkers &get()
		{
			static CudaMarkers *markers = new CudaMarkers;
			return *markers;
		}
	};
	static Lazy *lazy = new Lazy;
	return lazy;
}

void stream_counts(unsigned long *confined, unsigned long *whole)
{
	*confined = streams_confined.load(std::memory_order_relaxed);
	*whole = streams_whole.load(std::memory_order_relaxed);
}

bool stream_finished(void *stream)
{
	using Query = CUresult (*)(CUstream);
	static auto query = driver_fn<Query>("cuStreamQuery");
	const RelaxedCapture relaxed;
	// An error (a stream of a failed context) leaves nothing running.
	return !query || query(static_cast<CUstream>(stream)) != CUDA_ERROR_NOT_READY;
}

} // namespace gpuslot::run

using namespace gpuslot::run;

// Stream creation: the slot's priority.
GPUSLOT_RUN_EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
	return create_stream(stream, flags, 0, false);
}
GPUSLOT_RUN_EXPORT CUresult cuStreamCreateWithPriority(CUstream *stream, unsigned int flags,
							int priority)
{
	return create_stream(stream, flags, priority, true);
}
GPUSLOT_RUN_EXPORT CUresult cuStreamDestroy_v2(CUstream stream)
{
	auto fn = real<decltype(&cuStreamDestroy_v2)>(kStreamDestroy, kLegacy);
	if (!fn)
		return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
	if (LaunchQueue *q = launch_queue())
		q->stream_destroyed(key<kLegacy>(stream));
	return fn(stream);
}

// Commands, legacy and per-thread.
#define GPUSLOT_RUN_COMMAND(name, index, stream, params, ...)                                    \
	GPUSLOT_RUN_EXPORT CUresult name params                                                  \
	{                                                                                        \
		return gated<kLegacy, decltype(&name)>(index, stream, __VA_ARGS__);              \
	}                                                                                        \
	GPUSLOT_RUN_EXPORT CUresult name##_ptsz params                                           \
	{                                                                                        \
		return gated<kPerThread, decltype(&name)>(index, stream, __VA_ARGS__);           \
	}

GPUSLOT_RUN_COMMAND(cuLaunchKernel, kLaunchKernel, s,
		    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
		     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
		     CUstream s, void **params, void **extra),
		    f, gx, gy, gz, bx, by, bz, shared, s, params, extra)
GPUSLOT_RUN_COMMAND(cuLaunchKernelEx, kLaunchKernelEx, config ? config->hStream : nullptr,
		    (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),
		    config, f, params, extra)
GPUSLOT_RUN_COMMAND(cuLaunchCooperativeKernel, kLaunchCooperativeKernel, s,
		    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
		     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
		     CUstream s, void **params),
		    f, gx, gy, gz, bx, by, bz, shared, s, params)
GPUSLOT_RUN_COMMAND(cuGraphLaunch, kGraphLaunch, s, (CUgraphExec g, CUstream s), g, s)
GPUSLOT_RUN_COMMAND(cuMemcpyAsync, kMemcpyAsync, s,
		    (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), dst, src, n, s)
GPUSLOT_RUN_COMMAND(cuMemcpyHtoDAsync_v2, kMemcpyHtoDAsync, s,
		    (CUdeviceptr dst, const void *src, size_t n, CUstream s), dst, src, n, s)
GPUSLOT_RUN_COMMAND(cuMemcpyDtoHAsync_v2, kMemcpyDtoHAsync, s,
		    (void *dst, CUdeviceptr src, size_t n, CUstream s), dst, src, n, s)
GPUSLOT_RUN_COMMAND(cuMemcpyDtoDAsync_v2, kMemcpyDtoDAsync, s,
		    (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), dst, src, n, s)
GPUSLOT_RUN_COMMAND(cuMemcpy2DAsync_v2, kMemcpy2DAsync, s,
		    (const CUDA_MEMCPY2D *copy, CUstream s), copy, s)
GPUSLOT_RUN_COMMAND(cuMemcpy3DAsync_v2, kMemcpy3DAsync, s,
		    (const CUDA_MEMCPY3D *copy, CUstream s), copy, s)
GPUSLOT_RUN_COMMAND(cuMemcpyPeerAsync, kMemcpyPeerAsync, s,
		    (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
		     size_t n, CUstream s),
		    dst, dst_ctx, src, src_ctx, n, s)
// The memsets: cudaMemsetAsync (PyTorch's zero_(), CUB's temporaries)
// reaches the driver here.
GPUSLOT_RUN_COMMAND(cuMemsetD8Async, kMemsetD8Async, s,
		    (CUdeviceptr dst, unsigned char v, size_t n, CUstream s), dst, v, n, s)
GPUSLOT_RUN_COMMAND(cuMemsetD16Async, kMemsetD16Async, s,
		    (CUdeviceptr dst, unsigned short v, size_t n, CUstream s), dst, v, n, s)
GPUSLOT_RUN_COMMAND(cuMemsetD32Async, kMemsetD32Async, s,
		    (CUdeviceptr dst, unsigned int v, size_t n, CUstream s), dst, v, n, s)
GPUSLOT_RUN_COMMAND(cuMemsetD2D8Async, kMemsetD2D8Async, s,
		    (CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h,
		     CUstream s),
		    dst, pitch, v, w, h, s)
GPUSLOT_RUN_COMMAND(cuMemsetD2D16Async, kMemsetD2D16Async, s,
		    (CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h,
		     CUstream s),
		    dst, pitch, v, w, h, s)
GPUSLOT_RUN_COMMAND(cuMemsetD2D32Async, kMemsetD2D32Async, s,
		    (CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h,
		     CUstream s),
		    dst, pitch, v, w, h, s)

// An event wait holds its stream back on the GPU: a command too.
GPUSLOT_RUN_COMMAND(cuStreamWaitEvent, kStreamWaitEvent, s,
		    (CUstream s, CUevent e, unsigned int flags), s, e, flags)

// Synchronizations.
GPUSLOT_RUN_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	return synchronizing<kLegacy, decltype(&cuStreamSynchronize)>(kStreamSynchronize,
								       SyncKind::stream, s);
}
GPUSLOT_RUN_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
	return synchronizing<kPerThread, decltype(&cuStreamSynchronize)>(kStreamSynchronize,
									  SyncKind::stream, s);
}
GPUSLOT_RUN_EXPORT CUresult cuCtxSynchronize(void)
{
	return synchronizing<kLegacy, decltype(&cuCtxSynchronize)>(kCtxSynchronize,
								    SyncKind::context);
}
GPUSLOT_RUN_EXPORT CUresult cuEventSynchronize(CUevent e)
{
	return synchronizing<kLegacy, decltype(&cuEventSynchronize)>(kEventSynchronize,
								      SyncKind::stream, e);
}
GPUSLOT_RUN_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	return blocking_copy<kLegacy, decltype(&cuMemcpyHtoD_v2)>(kMemcpyHtoD, dst, src, n);
}
GPUSLOT_RUN_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
	return blocking_copy<kPerThread, decltype(&cuMemcpyHtoD_v2)>(kMemcpyHtoD, dst, src, n);
}
GPUSLOT_RUN_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	return blocking_copy<kLegacy, decltype(&cuMemcpyDtoH_v2)>(kMemcpyDtoH, dst, src, n);
}
GPUSLOT_RUN_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
	return blocking_copy<kPerThread, decltype(&cuMemcpyDtoH_v2)>(kMemcpyDtoH, dst, src, n);
}

// cuGetProcAddress, in its two exported forms.
GPUSLOT_RUN_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
					      cuuint64_t flags)
{
	auto fn = real<GetProcV1>(kGetProcAddress, kLegacy);
	if (!fn)
		return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
	const CUresult r = fn(symbol, pfn, version, flags);
	if (r == CUDA_SUCCESS)
		substitute(symbol, pfn, version, flags,
			   [fn](const char *s, void **p, int v, cuuint64_t f) {
				   return fn(s, p, v, f);
			   });
	return r;
}
GPUSLOT_RUN_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
						 cuuint64_t flags,
						 CUdriverProcAddressQueryResult *status)
{
	auto fn = real<GetProcV2>(kGetProcAddressV2, kLegacy);
	if (!fn)
		return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
	const CUresult r = fn(symbol, pfn, version, flags, status);
	if (r == CUDA_SUCCESS && (!status || *status == CU_GET_PROC_ADDRESS_SUCCESS))
		substitute(symbol, pfn, version, flags,
			   [fn](const char *s, void **p, int v, cuuint64_t f) {
				   CUdriverProcAddressQueryResult st;
				   return fn(s, p, v, f, &st);
			   });
	return r;
}

namespace gpuslot::run {
namespace {

#define GPUSLOT_RUN_BOTH(name)                                                                 \
	{#name, #name "_ptsz"},                                                                \
	{                                                                                      \
		reinterpret_cast<void *>(&name), reinterpret_cast<void *>(&name##_ptsz)        \
	}

// Built on first use: dlsym may be asked before this library's own
// static initializers have run.
const Entry &entry(Index i)
{
	static const Entry entries[kCount] = {
	{"cuStreamCreate", 2000, {"cuStreamCreate", nullptr},
	 {reinterpret_cast<void *>(&cuStreamCreate), nullptr}},
	{"cuStreamCreateWithPriority", 5050, {"cuStreamCreateWithPriority", nullptr},
	 {reinterpret_cast<void *>(&cuStreamCreateWithPriority), nullptr}},
	{"cuStreamDestroy", 4000, {"cuStreamDestroy_v2", nullptr},
	 {reinterpret_cast<void *>(&cuStreamDestroy_v2), nullptr}},
	{"cuLaunchKernel", 4000, GPUSLOT_RUN_BOTH(cuLaunchKernel)},
	{"cuLaunchKernelEx", 11060, GPUSLOT_RUN_BOTH(cuLaunchKernelEx)},
	{"cuLaunchCooperativeKernel", 9000, GPUSLOT_RUN_BOTH(cuLaunchCooperativeKernel)},
	{"cuGraphLaunch", 10000, GPUSLOT_RUN_BOTH(cuGraphLaunch)},
	{"cuMemcpyAsync", 4000, GPUSLOT_RUN_BOTH(cuMemcpyAsync)},
	{"cuMemcpyHtoDAsync", 3020, GPUSLOT_RUN_BOTH(cuMemcpyHtoDAsync_v2)},
	{"cuMemcpyDtoHAsync", 3020, GPUSLOT_RUN_BOTH(cuMemcpyDtoHAsync_v2)},
	{"cuMemcpyDtoDAsync", 3020, GPUSLOT_RUN_BOTH(cuMemcpyDtoDAsync_v2)},
	{"cuMemcpy2DAsync", 3020, GPUSLOT_RUN_BOTH(cuMemcpy2DAsync_v2)},
	{"cuMemcpy3DAsync", 3020, GPUSLOT_RUN_BOTH(cuMemcpy3DAsync_v2)},
	{"cuMemcpyPeerAsync", 4000, GPUSLOT_RUN_BOTH(cuMemcpyPeerAsync)},
	{"cuMemsetD8Async", 3020, GPUSLOT_RUN_BOTH(cuMemsetD8Async)},
	{"cuMemsetD16Async", 3020, GPUSLOT_RUN_BOTH(cuMemsetD16Async)},
	{"cuMemsetD32Async", 3020, GPUSLOT_RUN_BOTH(cuMemsetD32Async)},
	{"cuMemsetD2D8Async", 3020, GPUSLOT_RUN_BOTH(cuMemsetD2D8Async)},
	{"cuMemsetD2D16Async", 3020, GPUSLOT_RUN_BOTH(cuMemsetD2D16Async)},
	{"cuMemsetD2D32Async", 3020, GPUSLOT_RUN_BOTH(cuMemsetD2D32Async)},
	{"cuStreamWaitEvent", 3020, GPUSLOT_RUN_BOTH(cuStreamWaitEvent)},
	{"cuStreamSynchronize", 2000, GPUSLOT_RUN_BOTH(cuStreamSynchronize)},
	{"cuCtxSynchronize", 2000, {"cuCtxSynchronize", nullptr},
	 {reinterpret_cast<void *>(&cuCtxSynchronize), nullptr}},
	{"cuEventSynchronize", 2000, {"cuEventSynchronize", nullptr},
	 {reinterpret_cast<void *>(&cuEventSynchronize), nullptr}},
	{"cuMemcpyHtoD", 3020, {"cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"},
	 {reinterpret_cast<void *>(&cuMemcpyHtoD_v2), reinterpret_cast<void *>(&cuMemcpyHtoD_v2_ptds)}},
	{"cuMemcpyDtoH", 3020, {"cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"},
	 {reinterpret_cast<void *>(&cuMemcpyDtoH_v2), reinterpret_cast<void *>(&cuMemcpyDtoH_v2_ptds)}},
	// Asked for as "cuGetProcAddress": the form depends on the version.
	{"", 11030, {"cuGetProcAddress", nullptr},
	 {reinterpret_cast<void *>(&cuGetProcAddress), nullptr}},
	{"", 12000, {"cuGetProcAddress_v2", nullptr},
	 {reinterpret_cast<void *>(&cuGetProcAddress_v2), nullptr}},
	};
	return entries[i];
}
#undef GPUSLOT_RUN_BOTH

} // namespace
} // namespace gpuslot::run

namespace gpuslot::run {

// Whether @address is in libgpuslot.so.1's text: the object of
// gpuslot_open(), which this library links.
__attribute__((no_sanitize("address", "undefined"))) bool from_libgpuslot(void *address)
{
	static void *base = [] {
		Dl_info mine{};
		return dladdr(reinterpret_cast<void *>(&gpuslot_open), &mine) ? mine.dli_fbase
									   : nullptr;
	}();
	Dl_info in{};
	return base && address && dladdr(address, &in) && in.dli_fbase == base;
}

namespace {

void *answer_cuda(void *handle, const char *name, DlsymFn real_lookup)
{
	for (int i = 0; i < kCount; i++)
		for (int v = kLegacy; v <= kPerThread; v++) {
			const Entry &e = entry(Index(i));
			if (!e.symbol[v] || std::strcmp(e.symbol[v], name))
				continue;
			void *found = real_lookup(handle, name);
			if (!found || found == e.wrapper[v])
				return nullptr;
			remember(Index(i), Variant(v), found);
			return e.wrapper[v];
		}
	return nullptr;
}

} // namespace
} // namespace gpuslot::run

// The dlsym hook's question (dlsym_hook.cc): on a handle lookup of an entry
// point the interposer stands in for, its wrapper; nullptr sends the call to
// glibc's dlsym unchanged. Every other lookup returns before anything a
// sanitizer instruments. @caller: the return address of dlsym's caller.
extern "C" __attribute__((visibility("hidden"), no_sanitize("address", "undefined"))) void *
gpuslot_run_dlsym_answer(void *handle, const char *name, void *caller)
{
	const DlsymFn real_lookup = gpuslot::run::real_dlsym();
	if (handle == RTLD_NEXT || !name || name[0] != 'c' || name[1] != 'u')
		return nullptr;
	// libgpuslot's own lookups get libcuda's entry points: the
	// interposer's setup of its partition, and a program's own libgpuslot
	// (the same library), whose calls must never pass the queue: they
	// would wait for the slot the program holds, or for the lock its own
	// gpuslot_open() holds.
	if (gpuslot::run::from_libgpuslot(caller))
		return nullptr;
	return gpuslot::run::answer_cuda(handle, name, real_lookup);
}
