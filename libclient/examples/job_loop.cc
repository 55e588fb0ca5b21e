// SPDX-License-Identifier: LGPL-2.1-or-later
// The per-job loop of a gpuslot client, in C++, in several threads of one
// process: they share one client (its streams, its queue reservation), and
// each slot is released when it leaves scope, whatever the job does, after
// the work queued on its stream has finished.
//
// usage: gpuslot_example_cpp [JOBS] [BACKEND: auto|none|hip|cuda] [THREADS]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gpuslot.hpp>

// Stands in for launching kernels on @stream.
static void run(void *stream)
{
	(void)stream;
	std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

int main(int argc, char **argv)
{
	using namespace std::chrono_literals;
	const long jobs = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 10;
	const std::string backend = argc > 2 ? argv[2] : "auto";
	const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
	gpuslot::Options o;
	o.backend = backend == "none"	 ? GPUSLOT_BACKEND_NONE
		    : backend == "hip"	 ? GPUSLOT_BACKEND_HIP
		    : backend == "cuda" ? GPUSLOT_BACKEND_CUDA
					 : GPUSLOT_BACKEND_AUTO;
	try {
		gpuslot::Client client(o);
		std::atomic<long> next{0}, done{0}, skipped{0};
		std::vector<std::thread> workers;
		for (int t = 0; t < threads; t++)
			workers.emplace_back([&] {
				while (next++ < jobs) {
					auto slot = client.acquire_for(33ms);
					if (!slot) {
						skipped++; // the frame is stale
						continue;
					}
					run(slot->stream());
					done++;
				} // the slot is released here
			});
		for (auto &w : workers)
			w.join();
		std::printf("%ld jobs done, %ld skipped\n", done.load(), skipped.load());
		return 0;
	} catch (const gpuslot::Error &e) {
		std::fprintf(stderr, "%s\n", e.what());
		return 1;
	}
}
