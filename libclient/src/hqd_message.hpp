// SPDX-License-Identifier: LGPL-2.1-or-later
// Why a hardware-queue reservation was refused, in words a person can act
// on, from the domain's attributes (either transport), or from a recorded
// sysfs tree in tests.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace gpuslot {

struct HqdExplanation {
	int error; // 0, or the errno of the read that failed
	std::string text;
};

// A domain attribute's text (LockFile::read_attr): 0 or an errno.
using AttrReader = std::function<int(const std::string &name, std::string *text)>;

// From the attributes hqd_used, hqd_limit and debug/queues that @read_attr gives
// (@where names them in an error); @sched_policy_path is amdgpu's module
// parameter (absent when amdgpu is not loaded).
HqdExplanation explain_hqd_exhausted(const AttrReader &read_attr, const std::string &where,
				     const std::filesystem::path &sched_policy_path,
				     unsigned int domain, unsigned int needed);
// The same from a sysfs tree: @sysfs_root/gpu<domain>/.
HqdExplanation explain_hqd_exhausted(const std::filesystem::path &sysfs_root,
				     const std::filesystem::path &sched_policy_path,
				     unsigned int domain, unsigned int needed);

} // namespace gpuslot
