// SPDX-License-Identifier: LGPL-2.1-or-later
// The interposers' state: the slot they run the program on, set up when
// the library is loaded (interposer.cc), used by the API's entry points:
// cuda_intercept.cc in libgpuslot-run.so (the CUDA driver), hip_intercept.cc
// in libgpuslot-run-hip.so (HIP). Each API's file defines stream_counts(),
// stream_finished() and api_markers(); the partition (green contexts) and
// from_libgpuslot() are cuda_intercept.cc's own.
#pragma once

#include <cstdint>
#include <string>

#include "launch_queue.hpp"

struct gpuslot_client;

namespace gpuslot::run {

// The launch queue, or nullptr where the interposer was loaded without
// gpuslot-run's variables (it then passes every call through).
LaunchQueue *launch_queue();

// The priority the program's streams get, in levels above the default
// (gpuslot_slot_priority()); false where there is none to give.
bool stream_priority_levels(unsigned int *levels);

// A stream priority @levels above @least, clamped at @greatest, in the
// numbering CUDA and HIP share (lower is more urgent): the slot's priority
// in the range the API reports.
int priority_in_range(unsigned int levels, int least, int greatest);

// What the interposer was loaded with, for the API's file: the lock's
// client (backend none), the domain and the slots the program may hold.
// Meaningful where launch_queue() is not nullptr.
struct RunState {
	gpuslot_client *client = nullptr;
	uint32_t domain = 0;
	uint64_t slot_mask = 0;
};
RunState run_state();

// Whether this is the process that loaded the interposer (not a forked
// child, whose client is its parent's).
bool in_loader_process();

// The layout generation of the partition the program's streams are made on
// (the CUDA interposer's green context): an acquire that finds another
// says so once.
void set_partition_generation(uint64_t generation);

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
