// SPDX-License-Identifier: GPL-2.0
// k SM partitions of an NVIDIA GPU, as green contexts can make them.
//
// A green context cannot pick SMs: the driver splits the GPU into groups
// (cuDevSmResourceSplitByCount) and a context takes whole groups of one
// split. gpuslot splits with the default flags, so every group is made of
// SMs the hardware co-schedules (smCoscheduledAlignment of them, 8 on
// Hopper, all in one GPC): thread-block clusters of that size run on any
// slot. The finer IGNORE_SM_COSCHEDULING split (2-SM TPCs) is not used:
// on an H100 its partitions refuse clusters of 8, and cuDNN and cuBLAS
// kernels chosen for the whole GPU fail on them (docs/nvidia.md).
//
// How many groups of G SMs a split makes depends on the GPU's GPCs, not on
// arithmetic (an H100: 15 of 8, 8 of 16, 4 of 32, 2 of 64), so the planner
// takes the driver's own answers (NvGpu::splits, read by gpuslotd) and
// gives each slot a set of groups of one split: the layout's unit is a
// group (GPUSLOT_UNIT_NV_SM_GROUP, unit_size G).
// Reference: ../shared/reference/nvidia.md sections 1.3-1.4.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuslot {

// One split the driver makes with the default flags: @groups groups of
// exactly @group_sms SMs (minCount = group_sms).
struct NvSplit {
	unsigned int group_sms = 0;
	unsigned int groups = 0;
	bool operator==(const NvSplit &) const = default;
};

// What cuDeviceGetDevResource(CU_DEV_RESOURCE_TYPE_SM) says of a device.
struct NvGpu {
	int ordinal = 0;
	std::string name;
	unsigned int sm_count = 0;
	unsigned int min_partition_sms = 0;
	unsigned int coscheduled_alignment = 0; // SMs of a co-scheduled group
	std::string pci_bus_id; // DDDD:BB:DD.F, lower case; "" unknown
	// Every split whose groups have exactly the SMs asked for, asked in
	// multiples of coscheduled_alignment, smallest first.
	std::vector<NvSplit> splits;
	// Compute capability; 0.0 where unknown.
	unsigned int cc_major = 0, cc_minor = 0;
};

// The kernels the GPU's work distributor considers at once (its task
// slots; CUDA's "maximum number of resident grids per device"): 128 on
// compute capability 6.0, 7.0, 7.5 and 8.0 or later, 32 on 3.5-5.2 and
// 6.1, 16 on 3.0, 5.3, 6.2 and 7.2 (Jetson); 0 where unknown. Seed 002:
// past them, kernels of a higher priority evict lower-priority ones, and a
// partition that shares no SM with them stalls.
unsigned int nv_task_slots(unsigned int cc_major, unsigned int cc_minor);

struct NvPlan {
	unsigned int group_sms = 0; // G, the layout's unit_size
	unsigned int groups = 0;    // the split's groups, the layout's nr_units
	std::vector<std::vector<unsigned int>> slot_groups; // per slot
	std::vector<unsigned int> slot_sms;
	std::vector<bool> whole;	     // per slot: the whole GPU (no groups)
	std::vector<unsigned int> priorities; // per slot (plan_nv_slots)
	std::vector<std::string> notes;
	std::string error; // empty on success
};

// @sizes: SMs per slot; empty for k equal partitions.
NvPlan plan_nv_partitions(const NvGpu &gpu, unsigned int k,
			  const std::vector<unsigned int> &sizes);

// "15 x 8, 8 x 16, ..." for people.
std::string nv_splits_text(const std::vector<NvSplit> &splits);

} // namespace gpuslot
