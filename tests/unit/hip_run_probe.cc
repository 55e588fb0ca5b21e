// SPDX-License-Identifier: GPL-2.0
// A HIP program that knows nothing of gpuslot, for gpuslot-run's tests on
// an AMD domain: linked with the HIP double (fake_libamdhip.cc) as hipcc
// links libamdhip64, its launches are what <<<>>> and hipLaunchKernelGGL
// reach (hipLaunchKernel). Modes:
//   jobs N   N jobs of 3 kernels on a created stream, each ended by
//            hipStreamSynchronize; then a blocking copy and
//            hipDeviceSynchronize
//   burst N  N kernels back to back on one created stream, one
//            synchronization at the end
//   streams  streams made by hipStreamCreate, hipStreamCreateWithFlags and
//            hipStreamCreateWithPriority (asking -1): their priorities
//   commands every command the interposer gates, each a job of its own on
//            a created stream (ended by hipStreamSynchronize; the event
//            wait by hipDeviceSynchronize), then each blocking copy
//   wait     says "waiting" and the GPU_MAX_HW_QUEUES it was started with,
//            then waits for its stdin to close (a program that lives while
//            the test looks at the lock)
#include <hip/hip_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void check(hipError_t r, const char *what)
{
	if (r != hipSuccess) {
		std::fprintf(stderr, "hip_run_probe: %s: error %d\n", what, int(r));
		std::exit(1);
	}
}

void kernel_body() {}

void launch(hipStream_t s)
{
	check(hipLaunchKernel(reinterpret_cast<const void *>(&kernel_body), dim3(1), dim3(1),
			      nullptr, 0, s),
	      "hipLaunchKernel");
}

void jobs(int n)
{
	hipStream_t s;
	check(hipStreamCreate(&s), "hipStreamCreate");
	for (int j = 0; j < n; j++) {
		for (int k = 0; k < 3; k++)
			launch(s);
		check(hipStreamSynchronize(s), "hipStreamSynchronize");
	}
	char out[8];
	check(hipMemcpyDtoH(out, nullptr, sizeof(out)), "hipMemcpyDtoH");
	check(hipDeviceSynchronize(), "hipDeviceSynchronize");
	std::printf("jobs %d\n", n);
}

void burst(int n)
{
	hipStream_t s;
	check(hipStreamCreateWithFlags(&s, hipStreamNonBlocking), "hipStreamCreateWithFlags");
	for (int k = 0; k < n; k++)
		launch(s);
	check(hipStreamSynchronize(s), "hipStreamSynchronize");
	std::printf("burst %d\n", n);
}

void streams()
{
	hipStream_t a, b, c;
	check(hipStreamCreate(&a), "hipStreamCreate");
	check(hipStreamCreateWithFlags(&b, hipStreamNonBlocking), "hipStreamCreateWithFlags");
	check(hipStreamCreateWithPriority(&c, hipStreamDefault, -1), "hipStreamCreateWithPriority");
	int pa = 1, pb = 1, pc = 1;
	check(hipStreamGetPriority(a, &pa), "hipStreamGetPriority");
	check(hipStreamGetPriority(b, &pb), "hipStreamGetPriority");
	check(hipStreamGetPriority(c, &pc), "hipStreamGetPriority");
	std::printf("streams %d %d %d\n", pa, pb, pc);
	check(hipStreamDestroy(a), "hipStreamDestroy");
	check(hipStreamDestroy(b), "hipStreamDestroy");
	check(hipStreamDestroy(c), "hipStreamDestroy");
}

void commands()
{
	hipStream_t s;
	check(hipStreamCreate(&s), "hipStreamCreate");
	char buf[8] = {};
	void *dev = buf; // the double moves nothing
	hipEvent_t e;
	check(hipEventCreateWithFlags(&e, hipEventDisableTiming), "hipEventCreateWithFlags");
	// Each command a job of its own: under --per-sync every one of them
	// must acquire.
	auto job = [&](hipError_t r, const char *what) {
		check(r, what);
		check(hipStreamSynchronize(s), "hipStreamSynchronize");
	};
	job(hipModuleLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr),
	    "hipModuleLaunchKernel");
	launch(s);
	check(hipStreamSynchronize(s), "hipStreamSynchronize");
	job(hipLaunchCooperativeKernel(reinterpret_cast<const void *>(&kernel_body), dim3(1),
				       dim3(1), nullptr, 0u, s),
	    "hipLaunchCooperativeKernel");
	job(hipGraphLaunch(nullptr, s), "hipGraphLaunch");
	job(hipMemcpyAsync(dev, buf, sizeof(buf), hipMemcpyHostToDevice, s), "hipMemcpyAsync");
	job(hipMemcpyHtoDAsync(dev, buf, sizeof(buf), s), "hipMemcpyHtoDAsync");
	job(hipMemcpyDtoHAsync(buf, dev, sizeof(buf), s), "hipMemcpyDtoHAsync");
	job(hipMemcpyDtoDAsync(dev, dev, sizeof(buf), s), "hipMemcpyDtoDAsync");
	job(hipMemsetAsync(dev, 0, sizeof(buf), s), "hipMemsetAsync");
	job(hipMemsetD32Async(dev, 0, sizeof(buf) / 4, s), "hipMemsetD32Async");
	check(hipEventRecord(e, s), "hipEventRecord");
	check(hipStreamWaitEvent(s, e, 0), "hipStreamWaitEvent");
	check(hipEventSynchronize(e), "hipEventSynchronize");
	check(hipDeviceSynchronize(), "hipDeviceSynchronize");
	check(hipMemcpy(dev, buf, sizeof(buf), hipMemcpyHostToDevice), "hipMemcpy");
	check(hipMemcpyHtoD(dev, buf, sizeof(buf)), "hipMemcpyHtoD");
	check(hipMemcpyDtoH(buf, dev, sizeof(buf)), "hipMemcpyDtoH");
	check(hipEventDestroy(e), "hipEventDestroy");
	check(hipStreamDestroy(s), "hipStreamDestroy");
	std::printf("commands\n");
}

void wait_for_stdin()
{
	const char *pool = std::getenv("GPU_MAX_HW_QUEUES");
	std::printf("waiting GPU_MAX_HW_QUEUES=%s\n", pool ? pool : "(unset)");
	std::fflush(stdout);
	while (std::getchar() != EOF) {
	}
}

} // namespace

int main(int argc, char **argv)
{
	const std::string mode = argc > 1 ? argv[1] : "";
	if (mode == "jobs" && argc == 3)
		jobs(std::atoi(argv[2]));
	else if (mode == "burst" && argc == 3)
		burst(std::atoi(argv[2]));
	else if (mode == "streams")
		streams();
	else if (mode == "commands")
		commands();
	else if (mode == "wait")
		wait_for_stdin();
	else {
		std::fprintf(stderr, "usage: hip_run_probe jobs N|burst N|streams|commands|wait\n");
		return 2;
	}
	return 0;
}
