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
#include <functional>
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
	// min_partition_sms and coscheduled_alignment are NVIDIA's documented
	// guideline for the compute capability, not the driver's answer
	// (nv_sm_granularity).
	bool granularity_documented = false;
};

// The SM granularity of green contexts split with the default flags: no
// partition smaller than @min_sms, sizes in multiples of @alignment.
struct NvGranularity {
	unsigned int min_sms = 0;
	unsigned int alignment = 0;
	bool documented = false; // NVIDIA's guideline, not the driver's answer
	bool operator==(const NvGranularity &) const = default;
};

// What the driver reports (CUdevSmResource's minSmPartitionSize and
// smCoscheduledAlignment, CUDA 13.0's cuda.h) where it reports both;
// where it reports none (0: the CUdevSmResource of CUDA 12.4 to 12.6, the
// CUDA of JetPack 6 on Jetson Orin, has smCount only), the guideline of
// CUDA 13.0's Green Contexts documentation for the compute capability:
// 6.x and 7.x at least 2 SMs in multiples of 2, 8.x (Orin is 8.7) at
// least 4 in multiples of 2, 9.0 and later (Thor is 11.0) at least 8 in
// multiples of 8; {0, 0} before 6.0 or where the capability is unknown.
// docs/nvidia.md cites the pages.
NvGranularity nv_sm_granularity(unsigned int reported_min, unsigned int reported_alignment,
				unsigned int cc_major, unsigned int cc_minor);

// The splits the driver makes of @sm_count SMs in groups of exactly G SMs,
// asking @group_sizes(G) (the sizes of the groups cuDevSmResourceSplitByCount
// makes for minCount G, default flags; empty where it fails) for every G
// from the smallest partition up, in multiples of the alignment. The
// driver rounds some requests up (66 SMs gives one group of 72 on an
// H100, 2 gives groups of 4 on compute capability 8.x): those splits are
// left out, as the library could not ask for them again.
std::vector<NvSplit> nv_exact_splits(
	unsigned int sm_count, const NvGranularity &granularity,
	const std::function<std::vector<unsigned int>(unsigned int group_sms)> &group_sizes);

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
