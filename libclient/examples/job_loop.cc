// SPDX-License-Identifier: LGPL-2.1-or-later
// The per-job loop of a gpuslot client, in C++: the slot is released when
// it leaves scope, whatever the job does.
//
// usage: gpuslot_example_cpp [JOBS] [BACKEND: auto|none|hip]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <gpuslot.hpp>

// Stands in for launching kernels on @stream and waiting for them.
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
	gpuslot::Options o;
	o.backend = backend == "none"  ? GPUSLOT_BACKEND_NONE
		    : backend == "hip" ? GPUSLOT_BACKEND_HIP
				       : GPUSLOT_BACKEND_AUTO;
	try {
		gpuslot::Client client(o);
		long done = 0, skipped = 0;
		for (long i = 0; i < jobs; i++) {
			auto slot = client.acquire_for(33ms);
			if (!slot) {
				skipped++; // the frame is stale
				continue;
			}
			run(slot->stream());
			done++;
		} // the slot is released here
		std::printf("%ld jobs done, %ld skipped\n", done, skipped);
		return 0;
	} catch (const gpuslot::Error &e) {
		std::fprintf(stderr, "%s\n", e.what());
		return 1;
	}
}
