// SPDX-License-Identifier: GPL-2.0
// Partition sizes as people write them and read them, for AMD (CUs) and
// NVIDIA (SMs) planning alike.
#pragma once

#include <string>
#include <vector>

namespace gpuslot {

// A slot size that stands for the whole GPU ("all" in a list of sizes).
inline constexpr unsigned int kWholeGpu = ~0u;

// "30,10,10,10" (CUs) or "50%,25%,25%" (of @total_cus) into CU counts;
// with @allow_whole, "all" too, as kWholeGpu ("all,25%,25%,25%").
bool parse_sizes(const std::string &text, unsigned int total_cus,
		 std::vector<unsigned int> *out, std::string *error,
		 bool allow_whole = false);

// "5,0,0,0": one GPU stream priority per slot, each 0 ..
// GPUSLOT_MAX_SLOT_PRIORITY (15); more is more urgent.
bool parse_priorities(const std::string &text, std::vector<unsigned int> *out,
		      std::string *error);

// "30,10,10": numbers joined by commas, as parse_sizes reads them.
std::string sizes_text(const std::vector<unsigned int> &sizes);

} // namespace gpuslot
