// SPDX-License-Identifier: GPL-2.0
// Partition sizes as people write them and read them, for AMD (CUs) and
// NVIDIA (SMs) planning alike.
#pragma once

#include <string>
#include <vector>

namespace gpuslot {

// "30,10,10,10" (CUs) or "50%,25%,25%" (of @total_cus) into CU counts.
bool parse_sizes(const std::string &text, unsigned int total_cus,
		 std::vector<unsigned int> *out, std::string *error);

// "30,10,10": numbers joined by commas, as parse_sizes reads them.
std::string sizes_text(const std::vector<unsigned int> &sizes);

} // namespace gpuslot
