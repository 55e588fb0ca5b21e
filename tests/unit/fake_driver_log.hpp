// SPDX-License-Identifier: GPL-2.0
// What the GPU driver doubles (fake_libcuda.cc, fake_libamdhip.cc) share:
// their clock and its waits, the simulated kernel length and the log the tests read, a
// line "<pid> <CLOCK_MONOTONIC ns> <call> key=value..." per call in
// FAKE_CUDA_LOG, and whether the lock's slot is free at a command
// (FAKE_CUDA_LOCK_DIR). Each double is a library of its own: these are
// inline, one copy in each.
#pragma once

#include <fcntl.h>
#include <linux/gpuslot.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "lock_file.hpp"

namespace fake_driver {

inline uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
}

// Waits until the double's clock reaches @t (a synchronization's end).
inline void sleep_until(uint64_t t)
{
	while (now_ns() < t)
		usleep(100);
}

// How long a kernel runs on the double's GPU (FAKE_CUDA_KERNEL_US, 1 ms).
inline uint64_t kernel_ns()
{
	const char *us = std::getenv("FAKE_CUDA_KERNEL_US");
	return (us ? std::strtoull(us, nullptr, 10) : 1000) * 1000;
}

// One line of the log; @who names the double in its own error.
inline void log(const char *who, const std::string &line)
{
	const char *path = std::getenv("FAKE_CUDA_LOG");
	if (!path)
		return;
	const std::string out = std::to_string(getpid()) + " " + std::to_string(now_ns()) + " " +
				line + "\n";
	const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, out.data(), out.size()) != ssize_t(out.size()))
		std::perror(who);
	close(fd);
}

// " lock=busy|free" where FAKE_CUDA_LOCK_DIR is set, else "".
inline std::string lock_state()
{
	const char *dir = std::getenv("FAKE_CUDA_LOCK_DIR");
	if (!dir)
		return "";
	std::unique_ptr<gpuslot::LockFile> f;
	std::string error;
	if (gpuslot::open_lock_file(gpuslot::Transport::socket, dir, 0, &f, &error))
		return " lock=error";
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.flags = GPUSLOT_ACQUIRE_TRY;
	const int err = f->call(GPUSLOT_IOC_ACQUIRE, &a);
	return err == 0 ? " lock=free" : err == EAGAIN ? " lock=busy" : " lock=error";
}

} // namespace fake_driver
