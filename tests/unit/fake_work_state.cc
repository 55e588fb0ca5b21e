// SPDX-License-Identifier: GPL-2.0
// libgpuslot's work-state calls as gpuslot-run's tests want them
// (gpuslot_run_test.cc), preloaded ahead of libgpuslot so that the
// interposer's references bind here: a higher slot preempts while the file
// FAKE_WORK_PREEMPTS names exists, and every work edge the interposer tells
// is a line of FAKE_CUDA_LOG ("<pid> <ns> gpuslot_set_work slot=S
// pending=P", the driver double's format). The lock itself is the real one.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpuslot.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT int gpuslot_set_work(struct gpuslot_client *, const struct gpuslot_slot *slot,
				 int pending)
{
	const char *path = std::getenv("FAKE_CUDA_LOG");
	if (!path)
		return 0;
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	const std::string line = std::to_string(getpid()) + " " +
				 std::to_string(uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec)) +
				 " gpuslot_set_work slot=" + std::to_string(slot->index) +
				 " pending=" + std::to_string(pending) + "\n";
	const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	const bool written = write(fd, line.data(), line.size()) == ssize_t(line.size());
	close(fd);
	return written ? 0 : -1;
}

FAKE_EXPORT int gpuslot_work_preempts(struct gpuslot_client *, uint32_t)
{
	const char *path = std::getenv("FAKE_WORK_PREEMPTS");
	return path && access(path, F_OK) == 0;
}
