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
	else {
		std::fprintf(stderr, "usage: hip_run_probe jobs N|burst N|streams\n");
		return 2;
	}
	return 0;
}
