// SPDX-License-Identifier: GPL-2.0
// `gpuslotctl plan`: partition plans for the GPUs of a KFD topology, for
// people (with an SE x CU picture) and for machines (JSON).
#pragma once

#include <string>
#include <vector>

#include "amd/planner.hpp"
#include "amd/topology.hpp"

namespace gpuslot {

struct GpuPlan {
	GpuNode gpu;
	CuShape shape;
	MaskAlgorithm algorithm;
	Plan plan;
};

// One line per SE: a letter per CU for the slot that owns it (A = slot 0),
// '.' for a CU no slot has; shader arrays separated by '|'.
std::string draw_partitions(const GpuPlan &p);

std::string plan_text(const std::vector<GpuPlan> &plans);
std::string plan_json(const std::vector<GpuPlan> &plans);

} // namespace gpuslot
