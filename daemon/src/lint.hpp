// SPDX-License-Identifier: GPL-2.0
// `gpuslotctl lint`: what is wrong with CU masks an admin wrote, and what
// each problem costs at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cu_mask.hpp"

namespace gpuslot {

struct LintFinding {
	enum Severity { kWarning, kError };
	Severity severity = kError;
	int slot = -1;	     // the partition, from 0
	int other_slot = -1; // the second partition of an overlap
	std::string problem;	 // what is wrong
	std::string consequence; // what it does to the work on the GPU

	std::string text() const; // "slot 1: ... : ..."
};

// Checks each mask (HIP flat bits, 32 per word) on its own and every pair
// for overlap. An empty result means nothing is wrong.
std::vector<LintFinding> lint_masks(const CuShape &shape,
				    MaskAlgorithm algorithm,
				    const std::vector<std::vector<uint32_t>> &masks);

// Parse "0x..." (any length, most significant digit first) into a HIP mask.
bool parse_mask(const std::string &text, std::vector<uint32_t> *out);

} // namespace gpuslot
