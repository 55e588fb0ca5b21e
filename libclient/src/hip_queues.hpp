// SPDX-License-Identifier: LGPL-2.1-or-later
// How many hardware queues HIP makes for itself: the hip backend's
// reservation and gpuslot-run's (for a program whose HIP it does not load)
// count them alike. No HIP header needed.
#pragma once

#include <cstdlib>

namespace gpuslot {

// HIP's pool of queues per priority: GPU_MAX_HW_QUEUES when HIP read it, or
// its default of 4. libgpuslot and gpuslot-run set it to 1 where they can
// (before HIP starts) and the variable is unset; a HIP started before keeps
// what it read. ROCclr's streams of one priority share the pool's queues
// once it holds that many.
constexpr unsigned int kHipDefaultPoolQueues = 4;

// The pool HIP makes for @env_value, GPU_MAX_HW_QUEUES as HIP reads it:
// what it cannot parse, it ignores and keeps its default.
inline unsigned int hip_pool_queues(const char *env_value)
{
	if (!env_value || !*env_value)
		return kHipDefaultPoolQueues;
	char *end;
	const long n = std::strtol(env_value, &end, 10);
	if (*end || n <= 0 || n > 1024)
		return kHipDefaultPoolQueues;
	return unsigned(n);
}

// ROCr's blit and utility queues beside the pool.
constexpr unsigned int kHipRuntimeQueues = 2;

} // namespace gpuslot
