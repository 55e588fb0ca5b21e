// SPDX-License-Identifier: GPL-2.0
// `gpuslotctl status`: per GPU the slots, holders, waiters, queue budget
// and partitions (as an SE x CU picture), for people and as JSON.
#pragma once

#include <string>
#include <vector>

#include "audit.hpp"
#include "cu_mask.hpp"
#include "module.hpp"
#include "topology.hpp"

namespace gpuslot {

struct StatusGpu {
	DomainState state;
	bool has_gpu = false; // a KFD GPU maps to this domain
	GpuNode gpu;
	CuShape shape;
	MaskAlgorithm algorithm = MaskAlgorithm::C;
	std::vector<AuditEntry> over; // from gpuslotd's last audit
	bool audited = false;
};

// "3.2 ms", "12 s": a duration for people.
std::string human_ns(uint64_t ns);

std::string status_text(const std::vector<StatusGpu> &gpus);
std::string status_json(const std::vector<StatusGpu> &gpus);

} // namespace gpuslot
