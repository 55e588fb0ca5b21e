// SPDX-License-Identifier: GPL-2.0
// `gpuslotctl lint`: what is wrong with CU masks an admin wrote, and what
// each problem costs at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <linux/gpuslot.h>

#include "amd/cu_mask.hpp"

namespace gpuslot {

struct LintFinding {
	enum Severity { kWarning, kError };
	Severity severity = kError;
	int slot = -1;	     // the partition, from 0; -1: the layout as a whole
	int other_slot = -1; // the second partition of an overlap
	std::string problem;	 // what is wrong
	std::string consequence; // what it does to the work on the GPU

	std::string text() const; // "slot 1: ... : ..."
};

// Checks each mask (HIP flat bits, 32 per word) on its own and every pair
// for overlap at the same priority (@priorities, one per mask; none: all
// 0). An empty result means nothing is wrong.
std::vector<LintFinding> lint_masks(const CuShape &shape,
				    MaskAlgorithm algorithm,
				    const std::vector<std::vector<uint32_t>> &masks,
				    const std::vector<unsigned int> &priorities = {});

// What a layout's priorities do (issue 32): slots that share units at the
// same priority with a whole-GPU slot (neither goes first), a priority
// that meets no lower one (it orders nothing), more kernels pending at
// once than the GPU's task slots with mixed priorities (seed 002: eviction
// stalls unrelated partitions), and priorities on AMD, where HIP makes no
// CU-masked stream at one and a plain one only one level above the
// default. @partitions: every slot's (all zero: the whole
// GPU); @task_slots: nv_task_slots() for NVIDIA, 0 unknown;
// @confined_overlap_linted: lint_masks already named overlapping confined
// partitions (AMD), so they are not named twice.
struct PriorityLintGpu {
	uint32_t unit_kind = 0; // GPUSLOT_UNIT_*
	unsigned int task_slots = 0;
	std::string what; // "compute capability 9.0", for messages
	bool confined_overlap_linted = false;
};
std::vector<LintFinding> lint_priorities(const std::vector<gpuslot_partition> &partitions,
					 const std::vector<unsigned int> &priorities,
					 const PriorityLintGpu &gpu);

// Parse "0x..." (any length, most significant digit first) into a HIP mask.
bool parse_mask(const std::string &text, std::vector<uint32_t> *out);

} // namespace gpuslot
