// SPDX-License-Identifier: GPL-2.0
// k compute-unit partitions that avoid the known pitfalls (seed 000 §4-5,
// dissertation 6.1.3): SE-packed when a partition fills whole shader
// engines, SE-distributed otherwise with per-SE counts within one of each
// other, never a lone CU on an SE while the partition has more on another
// (up to 10x slower), whole WGPs on gfx10+.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "amd/cu_mask.hpp"
#include "plan/sizes.hpp"

namespace gpuslot {

// HIP's stream priorities above hipStreamCreate's default: ROCclr has Low,
// Normal (the default) and High, and HIP has no priority for a CU-masked
// stream at all; libgpuslot reads the range at run time, the planner's
// notes and lint go by this.
inline constexpr unsigned int kHipLevelsAboveDefault = 1;

struct PlannedPartition {
	unsigned int requested_cus = 0;
	unsigned int cus = 0;
	bool se_packed = false;
	std::vector<unsigned int> cus_per_se; // per SE, all XCCs in order
	std::vector<uint32_t> mask;	      // HIP flat bits, 32 per word
	bool whole = false;		      // the whole GPU (mask empty)
	unsigned int priority = 0;	      // the slot's GPU stream priority

	std::string mask_hex() const; // "0x..." most significant word first
};

struct Plan {
	std::vector<PlannedPartition> partitions;
	std::vector<std::string> notes; // rounding and assumptions
	std::string error;		// empty on success
};

// @sizes: CUs per partition; empty for @k equal partitions.
Plan plan_partitions(const CuShape &shape, MaskAlgorithm algorithm,
		     unsigned int k, const std::vector<unsigned int> &sizes);

} // namespace gpuslot
