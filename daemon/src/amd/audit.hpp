// SPDX-License-Identifier: GPL-2.0
// The queue audit: compute queues each process really has on a GPU (KFD's
// /sys/class/kfd/kfd/proc/<pid>/queues/<qid>/{type,gpuid}) against what it
// reserved in the module. A process over its reservation pushes the GPU
// past its hardware queues without the module knowing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "device/module.hpp"

namespace gpuslot {

// Compute queues per (pid, KFD gpu_id) under @proc_root. SDMA and kernel
// queues use no compute HQD and are not counted.
std::map<std::pair<int, uint32_t>, unsigned int>
count_compute_queues(const std::filesystem::path &proc_root);

struct AuditEntry {
	int pid = 0;
	std::string comm;
	unsigned int domain = 0;
	unsigned int queues = 0;   // compute queues KFD shows
	unsigned int reserved = 0; // what the process reserved
};

// The processes with more compute queues on domain @domain (KFD gpu_id
// @gpu_id) than they reserved there.
std::vector<AuditEntry>
over_reservation(const std::map<std::pair<int, uint32_t>, unsigned int> &queues,
		 uint32_t gpu_id, const DomainState &state);

std::string audit_json(const std::vector<AuditEntry> &over);
// Parses what audit_json wrote; false if it is not that.
bool parse_audit_json(const std::string &text, std::vector<AuditEntry> *out);

} // namespace gpuslot
