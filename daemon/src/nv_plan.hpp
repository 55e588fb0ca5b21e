// SPDX-License-Identifier: GPL-2.0
// k SM partitions of an NVIDIA GPU, as green contexts can make them.
//
// A green context cannot pick SMs: the driver splits the GPU into groups
// (cuDevSmResourceSplitByCount) and a context takes whole groups. gpuslot
// splits with CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, whose unit is
// a TPC (2 SMs), into floor(SMs / G) groups of G SMs, numbered 0.. in the
// driver's deterministic order, and gives each slot a set of groups: the
// layout's unit is a group (GPUSLOT_UNIT_NV_SM_GROUP, unit_size G).
// Reference: ../shared/reference/nvidia.md sections 1.3-1.4.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuslot {

// What cuDeviceGetDevResource(CU_DEV_RESOURCE_TYPE_SM) says of a device.
struct NvGpu {
	int ordinal = 0;
	std::string name;
	unsigned int sm_count = 0;
	unsigned int min_partition_sms = 0;     // without the IGNORE flag
	unsigned int coscheduled_alignment = 0; // likewise
	std::string pci_bus_id; // DDDD:BB:DD.F, lower case; "" unknown
};

// SMs of a TPC: the split's granularity with the IGNORE flag.
constexpr unsigned int kNvTpcSms = 2;

// Groups of @group_sms SMs the IGNORE split makes of @sm_count SMs (the
// driver rounds the request up to whole TPCs; measured on an H200: 66 x 2,
// 16 x 8 + 4, 11 x 12, 3 x 34 + 30, 2 x 66).
unsigned int nv_split_groups(unsigned int sm_count, unsigned int group_sms);

struct NvPlan {
	unsigned int group_sms = 0; // G, the layout's unit_size
	unsigned int groups = 0;    // the split's groups, the layout's nr_units
	std::vector<std::vector<unsigned int>> slot_groups; // per slot
	std::vector<unsigned int> slot_sms;
	std::vector<std::string> notes;
	std::string error; // empty on success
};

// @sizes: SMs per slot; empty for k equal partitions.
NvPlan plan_nv_partitions(const NvGpu &gpu, unsigned int k,
			  const std::vector<unsigned int> &sizes);

} // namespace gpuslot
