// SPDX-License-Identifier: GPL-2.0
#include "sizes.hpp"

#include <sstream>

namespace gpuslot {

bool parse_sizes(const std::string &text, unsigned int total_cus,
		 std::vector<unsigned int> *out, std::string *error)
{
	out->clear();
	std::istringstream in(text);
	for (std::string item; std::getline(in, item, ',');) {
		bool percent = !item.empty() && item.back() == '%';
		if (percent)
			item.pop_back();
		if (item.empty() ||
		    item.find_first_not_of("0123456789") != std::string::npos ||
		    item.size() > 6) {
			*error = "size '" + item + (percent ? "%" : "") +
				 "' is not a whole number of CUs or a percentage";
			return false;
		}
		unsigned long v = std::stoul(item);
		if (percent)
			v = v * total_cus / 100;
		if (v == 0) {
			*error = "a partition of 0 CUs";
			return false;
		}
		out->push_back(unsigned(v));
	}
	if (out->empty()) {
		*error = "no sizes given";
		return false;
	}
	return true;
}

std::string sizes_text(const std::vector<unsigned int> &sizes)
{
	std::string out;
	for (unsigned int s : sizes)
		out += (out.empty() ? "" : ",") + std::to_string(s);
	return out;
}

} // namespace gpuslot
