// SPDX-License-Identifier: LGPL-2.1-or-later
// libgpuslot-run.so's state: the slot it runs the program on, set up when
// the library is loaded (interposer.cc), used by the CUDA entry points
// (cuda_intercept.cc).
#pragma once

#include "launch_queue.hpp"

namespace gpuslot::run {

// The launch queue, or nullptr where the interposer was loaded without
// gpuslot-run's variables (it then passes every call through).
LaunchQueue *launch_queue();

// The priority the program's streams get, in levels above the default
// (gpuslot_slot_priority()); false where there is none to give.
bool stream_priority_levels(unsigned int *levels);

// Whether the work queued on @stream has finished (cuStreamQuery; in
// cuda_intercept.cc).
bool stream_finished(void *stream);

// The throttle's completion markers: CUDA events without timing, pooled
// per context (cuda_intercept.cc).
Markers *cuda_markers();

} // namespace gpuslot::run
