// SPDX-License-Identifier: LGPL-2.1-or-later
// Why a hardware-queue reservation was refused, in words a person can act
// on. The sysfs root is a parameter so tests can use a recorded tree.
#pragma once

#include <filesystem>
#include <string>

namespace gpuslot {

struct HqdExplanation {
	int error; // 0, or the errno of the read that failed
	std::string text;
};

// @sysfs_root is normally /sys/kernel/gpuslot; @sched_policy_path is
// amdgpu's module parameter (absent when amdgpu is not loaded).
HqdExplanation explain_hqd_exhausted(const std::filesystem::path &sysfs_root,
				     const std::filesystem::path &sched_policy_path,
				     unsigned int domain, unsigned int needed);

} // namespace gpuslot
