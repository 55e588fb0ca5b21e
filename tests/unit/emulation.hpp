// SPDX-License-Identifier: GPL-2.0
// What the arm64 unit tests cannot see under qemu-user (tests/arm64/).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "peers.hpp"

namespace gpuslot_test {

// Whether /proc/self/stat gives the calling thread's start time instead of
// the process's: qemu-user (7.2) fakes the file so. gpuslotd knows a
// process across pid reuse by that start time; in a test whose server
// thread is started again (a restart), the new thread reads another start
// time and the kept holds look like a dead process's. Natively the two
// reads agree. A thread started 20 ms later, two clock ticks at 100 Hz,
// differs where the file is per thread.
inline bool proc_start_time_is_per_thread()
{
	// gpuslotd's own reader of the start time (/proc/<pid>/stat of this
	// process, which qemu fakes as it does /proc/self/stat).
	static const bool per_thread = [] {
		const uint64_t here = gpuslot::proc_start_time(getpid());
		std::this_thread::sleep_for(std::chrono::milliseconds(20));
		uint64_t there = 0;
		std::thread t([&there] { there = gpuslot::proc_start_time(getpid()); });
		t.join();
		return here != there;
	}();
	return per_thread;
}

// Skips the test under an emulator whose /proc/self/stat is per thread;
// natively such a file is a failure, never a skip, so that no host quietly
// loses the restart tests.
#ifdef GPUSLOT_UNDER_EMULATOR
#define GPUSLOT_SKIP_IF_START_TIME_PER_THREAD()                                                     \
	do {                                                                                        \
		if (gpuslot_test::proc_start_time_is_per_thread())                                  \
			GTEST_SKIP() << "/proc/self/stat has the calling thread's start time here "     \
					"(qemu-user): a restarted server thread cannot tell its "         \
					"holders' process; runs natively on amd64";                      \
	} while (0)
#else
#define GPUSLOT_SKIP_IF_START_TIME_PER_THREAD()                                                     \
	do {                                                                                        \
		if (gpuslot_test::proc_start_time_is_per_thread()) {                                \
			ADD_FAILURE() << "/proc/self/stat has the calling thread's start time, "         \
					 "not the process's, on a host with no emulator";               \
			return;                                                                     \
		}                                                                                   \
	} while (0)
#endif

} // namespace gpuslot_test
