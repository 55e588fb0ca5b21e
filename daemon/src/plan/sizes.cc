// SPDX-License-Identifier: GPL-2.0
#include "plan/sizes.hpp"

#include <linux/gpuslot.h>

#include <sstream>

namespace gpuslot {

bool parse_sizes(const std::string &text, unsigned int total_cus,
		 std::vector<unsigned int> *out, std::string *error, bool allow_whole)
{
	out->clear();
	std::istringstream in(text);
	for (std::string item; std::getline(in, item, ',');) {
		item.erase(0, item.find_first_not_of(' '));
		item.erase(item.find_last_not_of(' ') + 1);
		if (item == "all") {
			if (!allow_whole) {
				*error = "size 'all' (the whole GPU) is for layouts: give CUs or a "
					 "percentage here";
				return false;
			}
			out->push_back(kWholeGpu);
			continue;
		}
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
	if (out->empty() || text.back() == ',') {
		*error = out->empty() ? "no sizes given" : "a size is missing after the last ','";
		return false;
	}
	return true;
}

bool parse_priorities(const std::string &text, std::vector<unsigned int> *out,
		      std::string *error)
{
	out->clear();
	std::istringstream in(text);
	for (std::string item; std::getline(in, item, ',');) {
		item.erase(0, item.find_first_not_of(' '));
		item.erase(item.find_last_not_of(' ') + 1);
		if (item.empty() || item.size() > 2 ||
		    item.find_first_not_of("0123456789") != std::string::npos ||
		    std::stoul(item) > GPUSLOT_MAX_SLOT_PRIORITY) {
			*error = "priority '" + item + "' is not 0 to " +
				 std::to_string(GPUSLOT_MAX_SLOT_PRIORITY) +
				 " (the slot's GPU stream priority; more is more urgent)";
			return false;
		}
		out->push_back(unsigned(std::stoul(item)));
	}
	if (out->empty() || text.back() == ',') {
		*error = out->empty() ? "no priorities given"
				      : "a priority is missing after the last ','";
		return false;
	}
	if (out->size() > GPUSLOT_MAX_SLOTS) {
		*error = std::to_string(out->size()) + " priorities: at most one per slot, 64";
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
