// SPDX-License-Identifier: GPL-2.0
// What the arm64 unit tests cannot see under qemu-user (tests/arm64/).
#pragma once

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace gpuslot_test {

// /proc/self/stat's start time (field 22), as the calling thread reads it.
inline std::string self_stat_start_time()
{
	std::ifstream f("/proc/self/stat");
	std::string s;
	std::getline(f, s);
	const auto close = s.rfind(')');
	if (close == std::string::npos)
		return "";
	int field = 2;
	for (size_t i = close + 1; i < s.size(); i++)
		if (s[i] == ' ' && ++field == 22)
			return s.substr(i + 1, s.find(' ', i + 1) - i - 1);
	return "";
}

// Whether /proc/self/stat gives the calling thread's start time instead of
// the process's: qemu-user (7.2) fakes the file so. gpuslotd knows a
// process across pid reuse by that start time; in a test whose server
// thread is started again (a restart), the new thread reads another start
// time and the kept holds look like a dead process's. Natively the two
// reads agree. A thread started 20 ms later, two clock ticks at 100 Hz,
// differs where the file is per thread.
inline bool proc_start_time_is_per_thread()
{
	static const bool per_thread = [] {
		const std::string here = self_stat_start_time();
		std::this_thread::sleep_for(std::chrono::milliseconds(20));
		std::string there;
		std::thread t([&there] { there = self_stat_start_time(); });
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
