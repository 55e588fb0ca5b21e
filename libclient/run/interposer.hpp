// SPDX-License-Identifier: LGPL-2.1-or-later
// The interposers' state: the slot they run the program on, set up when
// the library is loaded (interposer.cc), used by the API's entry points:
// cuda_intercept.cc in libgpuslot-run.so (the CUDA driver), hip_intercept.cc
// in libgpuslot-run-hip.so (HIP). Each API's file defines stream_counts(),
// stream_finished() and api_markers(); the partition (slot_partition()) and
// from_libgpuslot() are the CUDA interposer's only.
#pragma once

#include <cstdint>
#include <string>

#include "launch_queue.hpp"

namespace gpuslot::run {

// The launch queue, or nullptr where the interposer was loaded without
// gpuslot-run's variables (it then passes every call through).
LaunchQueue *launch_queue();

// The priority the program's streams get, in levels above the default
// (gpuslot_slot_priority()); false where there is none to give.
bool stream_priority_levels(unsigned int *levels);

// The slot's partition, which the program's streams are made on.
struct Partition {
	void *green = nullptr; // CUgreenCtx; nullptr: the slot is the whole GPU
	int device = -1;       // the runtime's number of the domain's GPU
	uint64_t generation = 0;
};

// The partition of the program's slots. A partitioned slot's green context
// comes from a client of libgpuslot's cuda backend, opened on the first
// call (after the program has initialised the driver, never at load):
// 0, or -errno with *error saying why. Thread-safe.
int slot_partition(Partition *out, std::string *error);

// Whether a slot the program may hold is partitioned (not the whole GPU),
// as the lock says at the first call.
bool slots_partitioned();

// The program's streams made so far on the slot's partition, and those
// that stayed on the whole GPU of a partitioned slot (the API's file).
void stream_counts(unsigned long *confined, unsigned long *whole);

// Whether @address is in libgpuslot's code (cuda_intercept.cc): the dlsym
// hook then answers with libcuda's entry points, never the interposer's,
// so the library's own calls (the interposer's partition, a program's own
// client) do not pass the queue.
bool from_libgpuslot(void *address);

// Whether the work queued on @stream has finished (cuStreamQuery in
// cuda_intercept.cc, hipStreamQuery in hip_intercept.cc).
bool stream_finished(void *stream);

// The throttle's completion markers: events without timing, pooled per
// context (CUDA, cuda_intercept.cc) or per device (HIP, hip_intercept.cc).
Markers *api_markers();

} // namespace gpuslot::run
