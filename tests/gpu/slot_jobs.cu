// SPDX-License-Identifier: GPL-2.0
// GPU jobs through libgpuslot, with timestamps taken by the kernels
// themselves (%globaltimer, ns), for tests/gpu/run_socket.sh on an NVIDIA
// GPU without the module (gpuslotd's socket transport):
//
//   slot_jobs jobs THREADS JOBS [nosync]
//	THREADS threads of one client each run JOBS jobs: acquire, a 1 ms
//	kernel on the slot's stream, release (which waits for the kernel
//	unless nosync). Prints each kernel's slot, start and end; run_socket.sh
//	runs two such processes at k = 1 and counts the kernels of different
//	holders that overlapped in time: none may, with the release rule.
//   slot_jobs hold MS NAME
//	acquire, run kernels on the slot's stream for MS ms, release; prints
//	the grant and the kernels' first start and last end, in ns of the
//	GPU clock (%globaltimer), and the grant by the host's CLOCK_REALTIME,
//	for the caller to compare across processes.
#include <cuda_runtime.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpuslot.h"

namespace {

__device__ unsigned long long globaltimer()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// Spin for @ns; block 0 records when the kernel started and ended.
__global__ void stamp(unsigned long long *out, unsigned long long ns)
{
	const unsigned long long start = globaltimer();
	while (globaltimer() - start < ns)
		;
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		out[0] = start;
		out[1] = globaltimer();
	}
}

__global__ void now_kernel(unsigned long long *out)
{
	*out = globaltimer();
}

void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "slot_jobs: %s: %s\n", what, cudaGetErrorString(e));
		exit(2);
	}
}

gpuslot_client *open_client()
{
	gpuslot_options o{};
	o.size = sizeof(o);
	o.backend = GPUSLOT_BACKEND_CUDA;
	gpuslot_client *c;
	if (gpuslot_open(&o, &c)) {
		fprintf(stderr, "slot_jobs: %s\n", gpuslot_last_error());
		exit(2);
	}
	gpuslot_layout_info info{};
	info.size = sizeof(info);
	gpuslot_client_layout(c, &info);
	fprintf(stderr, "slot_jobs: k %u, %u units, backend %s%s%s\n", info.k, info.nr_units,
		info.backend, *info.notice ? "; " : "", info.notice);
	return c;
}

int overlap(int threads, int jobs, bool nosync)
{
	gpuslot_client *c = open_client();
	struct Hold {
		unsigned int slot;
		unsigned long long start, end;
	};
	std::mutex lock;
	std::vector<Hold> holds;
	std::atomic<int> failures{0};
	std::vector<std::thread> workers;
	for (int t = 0; t < threads; t++)
		workers.emplace_back([&, t] {
			unsigned long long *d;
			check(cudaMallocManaged(&d, 2 * sizeof(*d) * jobs), "cudaMallocManaged");
			std::vector<unsigned int> slots(jobs);
			for (int j = 0; j < jobs; j++) {
				gpuslot_slot s{};
				s.size = sizeof(s);
				if (gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s)) {
					failures++;
					continue;
				}
				slots[j] = s.index;
				stamp<<<8, 32, 0, static_cast<cudaStream_t>(s.stream)>>>(d + 2 * j,
											 1000000);
				if (gpuslot_release_slot(c, &s, nosync ? GPUSLOT_RELEASE_NO_SYNC : 0))
					failures++;
			}
			check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
			std::lock_guard<std::mutex> hold(lock);
			for (int j = 0; j < jobs; j++)
				holds.push_back({slots[j], d[2 * j], d[2 * j + 1]});
			cudaFree(d);
		});
	for (auto &w : workers)
		w.join();
	for (const Hold &h : holds)
		printf("%u %llu %llu\n", h.slot, h.start, h.end);
	fprintf(stderr, "slot_jobs: %zu kernels, %d failed calls\n", holds.size(),
		failures.load());
	gpuslot_close(c);
	return failures ? 1 : 0;
}

int hold(int ms, const char *name)
{
	gpuslot_client *c = open_client();
	unsigned long long *d;
	check(cudaMallocManaged(&d, 4 * sizeof(*d)), "cudaMallocManaged");
	now_kernel<<<1, 1>>>(d + 2);
	check(cudaDeviceSynchronize(), "clock");
	const unsigned long long asked = d[2];
	gpuslot_slot s{};
	s.size = sizeof(s);
	if (gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s)) {
		fprintf(stderr, "slot_jobs: %s\n", gpuslot_last_error());
		return 2;
	}
	timespec host;
	clock_gettime(CLOCK_REALTIME, &host);
	const unsigned long long host_granted =
		(unsigned long long)host.tv_sec * 1000000000ULL + host.tv_nsec;
	auto stream = static_cast<cudaStream_t>(s.stream);
	now_kernel<<<1, 1, 0, stream>>>(d + 3);
	// Blocks for the whole partition: 132 SMs at most.
	stamp<<<132, 64, 0, stream>>>(d, (unsigned long long)ms * 1000000);
	check(cudaStreamSynchronize(stream), "job");
	printf("%s slot %u units %u asked %llu granted %llu start %llu end %llu host_granted %llu\n",
	       name, s.index, s.units, asked, d[3], d[0], d[1], host_granted);
	fflush(stdout);
	gpuslot_release_slot(c, &s, 0);
	gpuslot_close(c);
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "jobs"))
		return overlap(atoi(argv[2]), atoi(argv[3]), argc > 4 && !strcmp(argv[4], "nosync"));
	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: slot_jobs jobs THREADS JOBS [nosync] | hold MS NAME\n");
	return 2;
}
