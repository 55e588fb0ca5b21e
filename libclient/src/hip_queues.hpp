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
// once it holds that many (Device::acquireQueue).
constexpr unsigned int kHipDefaultPoolQueues = 4;
// A pool that, with the runtime's own queues, is more than any budget holds
// (GPUSLOT_MAX_HQD): what a negative number (no bound at all) or one past
// it is counted as.
constexpr unsigned int kHipUnboundedPoolQueues = 1024;

// The pool HIP makes for @env_value, GPU_MAX_HW_QUEUES as ROCclr reads it
// (Flag::setValue): unset or empty, its default; else atoi() of it, so
// "3x" is 3 and what is no number is 0, counted as 1 (the one queue a
// working HIP makes); a negative number wraps to a pool without bound.
inline unsigned int hip_pool_queues(const char *env_value)
{
	if (!env_value || !*env_value)
		return kHipDefaultPoolQueues;
	const long n = std::atol(env_value);
	if (n < 0 || n > long(kHipUnboundedPoolQueues))
		return kHipUnboundedPoolQueues;
	return n ? unsigned(n) : 1u;
}

// The queues HIP makes beside its pools, once per process and GPU: ROCr's
// blit and utility queues, and ROCclr's device queue (its cooperative
// queue, one per device and never pooled: internal transfers and
// hipLaunchCooperativeKernel run there).
constexpr unsigned int kHipRuntimeQueues = 3;

} // namespace gpuslot
