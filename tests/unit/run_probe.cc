// SPDX-License-Identifier: GPL-2.0
// A CUDA program that knows nothing of gpuslot, for gpuslot-run's tests
// (gpuslot_run_test.cc), against the driver double (fake_libcuda.cc).
// Built twice: run_probe_linked calls the driver it is linked with
// (-lcuda); run_probe_dl reaches it as cudart does, dlopen("libcuda.so.1")
// and cuGetProcAddress, never linking it.
//
//   getproc   each cuGetProcAddress form, version and flag the CUDA 12 and
//             13 runtimes pass: a stream, its priority, a launch, a sync;
//             one line per case (run_probe_dl)
//   jobs N    N jobs of 3 kernels and a stream synchronize, then a blocking
//             copy and cuCtxSynchronize
//   burst N   N kernels on a stream of its own, then a stream synchronize
//   streams   a stream of cuStreamCreate and one of
//             cuStreamCreateWithPriority(-1): their priorities
//   hold      "started" before any CUDA call; after a line on stdin, a job;
//             "worked"; exits after another line (or EOF)
//   confine   a NON_BLOCKING stream and a blocking one, a kernel on each:
//             "confine <non-blocking> <blocking>" (their handles)
//   waitevent a cuStreamWaitEvent as the only command of a job, and what the
//             lock says during and after it (run_probe_dl)
#include <cuda.h>
#undef cuGetProcAddress
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

namespace {

using GetProcV1 = CUresult (*)(const char *, void **, int, cuuint64_t);
using GetProcV2 = CUresult (*)(const char *, void **, int, cuuint64_t,
			       CUdriverProcAddressQueryResult *);

struct Cuda {
	decltype(&cuInit) init;
	decltype(&cuStreamCreate) stream_create;
	decltype(&cuStreamCreateWithPriority) stream_create_priority;
	decltype(&cuStreamGetPriority) stream_priority;
	decltype(&cuLaunchKernel) launch;
	decltype(&cuStreamSynchronize) stream_sync;
	decltype(&cuCtxSynchronize) ctx_sync;
	decltype(&cuMemcpyDtoH_v2) copy_dtoh;
};

[[noreturn]] void die(const std::string &what)
{
	std::fprintf(stderr, "run_probe: %s\n", what.c_str());
	std::exit(3);
}

void check(CUresult r, const char *what)
{
	if (r != CUDA_SUCCESS)
		die(std::string(what) + " failed: " + std::to_string(int(r)));
}

#ifdef RUN_PROBE_DLOPEN
void *driver()
{
	static void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		die(dlerror());
	return h;
}

// As cudart asks: by base name, the runtime's version and the stream flags.
struct Asker {
	GetProcV2 v2 = nullptr;
	GetProcV1 v1 = nullptr;
	int version;
	cuuint64_t flags;
	template <class T>
	void get(const char *symbol, T *out)
	{
		void *p = nullptr;
		CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		const CUresult r = v2 ? v2(symbol, &p, version, flags, &status)
				      : v1(symbol, &p, version, flags);
		if (r != CUDA_SUCCESS || !p || (v2 && status != CU_GET_PROC_ADDRESS_SUCCESS))
			die(std::string("cuGetProcAddress(") + symbol + ") failed");
		*out = reinterpret_cast<T>(p);
	}
	Cuda cuda()
	{
		Cuda c{};
		get("cuInit", &c.init);
		get("cuStreamCreate", &c.stream_create);
		get("cuStreamCreateWithPriority", &c.stream_create_priority);
		get("cuStreamGetPriority", &c.stream_priority);
		get("cuLaunchKernel", &c.launch);
		get("cuStreamSynchronize", &c.stream_sync);
		get("cuCtxSynchronize", &c.ctx_sync);
		get("cuMemcpyDtoH", &c.copy_dtoh);
		return c;
	}
};

Asker cudart_13()
{
	Asker a;
	a.v2 = reinterpret_cast<GetProcV2>(dlsym(driver(), "cuGetProcAddress_v2"));
	a.version = 13000;
	a.flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
	if (!a.v2)
		die("no cuGetProcAddress_v2");
	return a;
}

Cuda load()
{
	return cudart_13().cuda();
}

const char *lock_state()
{
	using State = const char *(*)();
	static auto f = reinterpret_cast<State>(dlsym(driver(), "fake_cuda_lock_state"));
	return f ? f() : " lock=?";
}

void getproc()
{
	struct Case {
		const char *form; // v2, v1, or v2 found through cuGetProcAddress itself
		int version;
		cuuint64_t flags;
	};
	const Case cases[] = {
		// CUDA 12.x runtimes: cuGetProcAddress_v2
		{"v2", 12000, CU_GET_PROC_ADDRESS_DEFAULT},
		{"v2", 12080, CU_GET_PROC_ADDRESS_LEGACY_STREAM},
		{"v2", 12080, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
		// CUDA 13.x runtimes
		{"v2", 13000, CU_GET_PROC_ADDRESS_DEFAULT},
		{"v2", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM},
		{"v2", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
		// A runtime newer than the interposer's headers
		{"v2", 13090, CU_GET_PROC_ADDRESS_LEGACY_STREAM},
		// the 4-argument form (CUDA 11.3 .. 11.8 runtimes; 12 and 13 export it)
		{"v1", 11080, CU_GET_PROC_ADDRESS_DEFAULT},
		{"v1", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
		// cuGetProcAddress asked for itself, then used
		{"self", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
		{"self", 11080, CU_GET_PROC_ADDRESS_LEGACY_STREAM},
	};
	for (const Case &c : cases) {
		Asker a;
		a.version = c.version;
		a.flags = c.flags;
		if (!std::strcmp(c.form, "v1")) {
			a.v1 = reinterpret_cast<GetProcV1>(dlsym(driver(), "cuGetProcAddress"));
		} else {
			a.v2 = reinterpret_cast<GetProcV2>(dlsym(driver(), "cuGetProcAddress_v2"));
			if (!std::strcmp(c.form, "self")) {
				void *p = nullptr;
				CUdriverProcAddressQueryResult st;
				check(a.v2("cuGetProcAddress", &p, c.version, 0, &st),
				      "cuGetProcAddress(cuGetProcAddress)");
				if (c.version >= 12000)
					a.v2 = reinterpret_cast<GetProcV2>(p);
				else
					a.v1 = reinterpret_cast<GetProcV1>(p), a.v2 = nullptr;
			}
		}
		if (!a.v1 && !a.v2)
			die("no cuGetProcAddress");
		const Cuda cuda = a.cuda();
		check(cuda.init(0), "cuInit");
		CUstream s;
		check(cuda.stream_create(&s, 0), "cuStreamCreate");
		int priority = 1;
		check(cuda.stream_priority(s, &priority), "cuStreamGetPriority");
		check(cuda.launch(nullptr, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), "cuLaunchKernel");
		const std::string during = lock_state();
		check(cuda.stream_sync(s), "cuStreamSynchronize");
		std::printf("case form=%s version=%d flags=%llu priority=%d during=%s after=%s\n",
			    c.form, c.version, (unsigned long long)c.flags, priority,
			    during.c_str() + 1, lock_state() + 1);
	}
}

void waitevent()
{
	Asker a = cudart_13();
	const Cuda cuda = a.cuda();
	decltype(&cuStreamWaitEvent) wait;
	a.get("cuStreamWaitEvent", &wait);
	check(cuda.init(0), "cuInit");
	CUstream s;
	check(cuda.stream_create(&s, 0), "cuStreamCreate");
	check(wait(s, nullptr, 0), "cuStreamWaitEvent");
	const std::string during = lock_state();
	check(cuda.stream_sync(s), "cuStreamSynchronize");
	std::printf("waitevent during=%s after=%s\n", during.c_str() + 1, lock_state() + 1);
}
#else
Cuda load()
{
	return Cuda{cuInit, cuStreamCreate, cuStreamCreateWithPriority, cuStreamGetPriority,
		    cuLaunchKernel, cuStreamSynchronize, cuCtxSynchronize, cuMemcpyDtoH_v2};
}
#endif

void jobs(const Cuda &cuda, int n)
{
	check(cuda.init(0), "cuInit");
	CUstream s;
	check(cuda.stream_create(&s, 0), "cuStreamCreate");
	for (int j = 0; j < n; j++) {
		for (int k = 0; k < 3; k++)
			check(cuda.launch(nullptr, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr),
			      "cuLaunchKernel");
		check(cuda.stream_sync(s), "cuStreamSynchronize");
	}
	char out[8];
	check(cuda.copy_dtoh(out, 0, sizeof(out)), "cuMemcpyDtoH");
	check(cuda.ctx_sync(), "cuCtxSynchronize");
	std::printf("jobs %d\n", n);
}

void burst(const Cuda &cuda, int n)
{
	check(cuda.init(0), "cuInit");
	CUstream s;
	check(cuda.stream_create(&s, 0), "cuStreamCreate");
	for (int k = 0; k < n; k++)
		check(cuda.launch(nullptr, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), "cuLaunchKernel");
	check(cuda.stream_sync(s), "cuStreamSynchronize");
	std::printf("burst %d\n", n);
}

void streams(const Cuda &cuda)
{
	check(cuda.init(0), "cuInit");
	CUstream a, b;
	check(cuda.stream_create(&a, 0), "cuStreamCreate");
	check(cuda.stream_create_priority(&b, 0, -1), "cuStreamCreateWithPriority");
	int pa = 1, pb = 1;
	check(cuda.stream_priority(a, &pa), "cuStreamGetPriority");
	check(cuda.stream_priority(b, &pb), "cuStreamGetPriority");
	std::printf("streams %d %d\n", pa, pb);
}

void confine(const Cuda &cuda)
{
	check(cuda.init(0), "cuInit");
	CUstream nb, b;
	check(cuda.stream_create(&nb, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	check(cuda.stream_create_priority(&b, 0, 0), "cuStreamCreateWithPriority");
	for (CUstream s : {nb, b}) {
		check(cuda.launch(nullptr, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr),
		      "cuLaunchKernel");
		check(cuda.stream_sync(s), "cuStreamSynchronize");
	}
	std::printf("confine %p %p\n", static_cast<void *>(nb), static_cast<void *>(b));
}

void hold()
{
	std::printf("started\n");
	std::fflush(stdout);
	std::string line;
	std::getline(std::cin, line);
	const Cuda cuda = load();
	jobs(cuda, 1);
	std::printf("worked\n");
	std::fflush(stdout);
	std::getline(std::cin, line);
}

} // namespace

int main(int argc, char **argv)
{
	const std::string mode = argc > 1 ? argv[1] : "";
	if (mode == "jobs" && argc == 3)
		jobs(load(), std::atoi(argv[2]));
	else if (mode == "burst" && argc == 3)
		burst(load(), std::atoi(argv[2]));
	else if (mode == "streams")
		streams(load());
	else if (mode == "hold")
		hold();
	else if (mode == "confine")
		confine(load());
#ifdef RUN_PROBE_DLOPEN
	else if (mode == "getproc")
		getproc();
	else if (mode == "waitevent")
		waitevent();
#endif
	else
		die("usage: run_probe getproc|jobs N|burst N|streams|confine|hold|waitevent");
	return 0;
}
