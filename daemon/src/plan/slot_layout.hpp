// SPDX-License-Identifier: GPL-2.0
// A layout as gpuslotd.conf and gpuslotctl ask for it (issue 32): per slot
// a partition or the whole GPU, and a GPU stream priority. The confined
// slots go through the planners (planner.hpp for AMD CUs, nv_plan.hpp for
// NVIDIA SM groups); a whole-GPU slot is a partition of every unit, which
// the module lets sit beside confined slots at any priority.
//
// `layout = protect` is "slot 0 protects one task": slot 0 on the whole GPU
// at a higher priority, the other slots confined to what a reserve leaves,
// at priority 0. Measured on the H100 (issue 32): a job of six 2048^2
// matmuls beside three processes looping 4096^2 matmuls took p99 44-48 ms
// at equal priority, 6.5-7.1 ms at stream priority -5 on the whole GPU and
// 5.7-6.1 ms with the three confined to 96 of the 128 SMs: priority does
// most of the work, a reserve (SMs always free when the task's kernels
// arrive; running blocks are never preempted) about 10 % more.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "amd/cu_mask.hpp"
#include "nvidia/nv_plan.hpp"
#include "amd/planner.hpp"

namespace gpuslot {

// layout = protect: slot 0's priority. The GPU takes work strictly by
// priority level, so any level above the confined slots' 0 puts slot 0's
// kernels first where they meet; 1 is a level every CUDA GPU with stream
// priorities offers (Hopper offers 5 above the default).
inline constexpr unsigned int kProtectPriority = 1;
// layout = protect: the share of the GPU no confined slot may use. 25 % is
// the reserve of issue 32's runs on the H100 (docs/results-ch6.md, commits
// 0d64469 and f511c3a): the protected camera's p99 0.82x stream priorities'
// over capacity with slot 0 held across frames, 0.86-0.88x with a lock per
// frame; no other reserve has been measured yet.
inline constexpr unsigned int kDefaultProtectReservePercent = 25;

struct SlotSpec {
	bool whole = false;	// the whole GPU
	unsigned int units = 0; // confined: CUs or SMs; 0: an equal share
	unsigned int priority = 0;
};

struct LayoutSpec {
	std::vector<SlotSpec> slots; // k of them
	bool protect = false;
	unsigned int reserve_percent = 0; // protect
	std::vector<std::string> notes;	  // what the settings could not say
};

// The layout @settings ask for @k slots of a GPU of @total units (CUs or
// SMs). Sizes or priorities written for another k (an admin changed k) are
// left out with a note. @raise_whole_slot: protect gives slot 0, on the
// whole GPU, priority kProtectPriority (NVIDIA); false on AMD, where a
// plain HIP stream could have it but every client that builds slot 0's
// stream would take a queue of HIP's high-priority pool, an HQD the budget
// may not have (an admin can still ask: sizes = all,... priorities = 1,...).
bool layout_spec(const GpuSettings &settings, unsigned int k, unsigned int total,
		 bool raise_whole_slot, LayoutSpec *out, std::string *error);

// AMD: every slot's partition (whole ones with an empty mask and whole =
// true), with the planner's notes named by slot, and what the priorities
// mean on this GPU.
Plan plan_slots(const CuShape &shape, MaskAlgorithm algorithm, const LayoutSpec &spec);

// NVIDIA: the same in SM groups of one split (a whole slot has no groups
// and all the SMs).
NvPlan plan_nv_slots(const NvGpu &gpu, const LayoutSpec &spec);

// "5,0,0,0".
std::string priorities_text(const std::vector<unsigned int> &priorities);

} // namespace gpuslot
