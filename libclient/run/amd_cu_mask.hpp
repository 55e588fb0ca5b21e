// SPDX-License-Identifier: LGPL-2.1-or-later
// gpuslot-run on AMD: the HSA_CU_MASK that confines every queue a HIP
// program creates to its slots' CUs. ROCr applies HSA_CU_MASK when it
// creates a queue, as the CU mask of hsa_amd_queue_cu_set_mask(), so the
// CU numbers are the bits of the planner's HIP CU masks (amdkfd deals them
// over the shader engines: never physical CU numbers); its GPU index is
// ROCr's, after ROCR_VISIBLE_DEVICES.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gpuslot::run {

// A slot<i>/units file's text: "all" (*whole set, @bits empty), or the
// kernel's bitmap, 32-bit hex chunks most significant first, separated by
// commas. False on anything else.
bool parse_units_bitmap(const std::string &text, std::vector<uint32_t> *bits, bool *whole);

// "0-15,32-47": the set bits of @bits, ascending, runs as ranges.
std::string cu_list(const std::vector<uint32_t> &bits);

// ROCr's index of the GPU at @pci_bus_id among the GPU nodes of the KFD
// topology at @topology (node order, unreadable GPU nodes counted, as ROCr
// enumerates them), renumbered by @rocr_visible (ROCR_VISIBLE_DEVICES;
// nullptr or "" when unset): 0, or -errno with *error saying why (the GPU
// not in the topology, hidden by ROCR_VISIBLE_DEVICES, or a UUID entry).
int rocr_gpu_index(const std::filesystem::path &topology, const std::string &pci_bus_id,
		   const char *rocr_visible, unsigned int *index, std::string *error);

} // namespace gpuslot::run
