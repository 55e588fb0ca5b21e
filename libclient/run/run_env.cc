// SPDX-License-Identifier: LGPL-2.1-or-later
#include "run_env.hpp"

#include <cerrno>
#include <cstdlib>

#include "gpuslot.h"
#include "hip_queues.hpp"

namespace gpuslot::run {

std::optional<unsigned long> parse_number(const std::string &text, unsigned long max)
{
	if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
		return std::nullopt;
	const unsigned long v = std::strtoul(text.c_str(), nullptr, 10);
	if (v > max)
		return std::nullopt;
	return v;
}

std::optional<uint64_t> parse_slot_list(const std::string &text, std::string *error)
{
	uint64_t mask = 0;
	size_t at = 0;
	while (true) {
		const size_t comma = text.find(',', at);
		const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos
										 : comma - at);
		const size_t dash = item.find('-');
		auto first = parse_number(item.substr(0, dash), 63);
		auto last = dash == std::string::npos ? first : parse_number(item.substr(dash + 1), 63);
		if (!first || !last || *last < *first) {
			*error = "\"" + text + "\" is not a slot list: slots are numbers 0 .. 63, "
			       "separated by commas, with ranges such as 1-3";
			return std::nullopt;
		}
		for (unsigned long s = *first; s <= *last; s++)
			mask |= 1ULL << s;
		if (comma == std::string::npos)
			return mask;
		at = comma + 1;
	}
}

std::string slot_list(uint64_t mask)
{
	std::string out;
	for (unsigned int s = 0; s < 64; s++)
		if (mask >> s & 1) {
			// Appended piece by piece: GCC 12's -Wrestrict misreads
			// `"," + std::to_string(s)` at -O3 (a false positive).
			if (!out.empty())
				out += ',';
			out += std::to_string(s);
		}
	return out;
}

unsigned int hip_program_queues(unsigned int pool, unsigned int levels)
{
	return pool * (levels ? 2 : 1) + kHipRuntimeQueues;
}

bool streams_priority_levels(gpuslot_client *c, uint64_t mask, unsigned int *levels,
			     std::string *error)
{
	bool first = true;
	for (unsigned int s = 0; s < 64; s++) {
		if (!(mask >> s & 1))
			continue;
		const int p = gpuslot_slot_priority(c, s);
		if (p < 0) {
			*error = "slot " + std::to_string(s) + ": " + gpuslot_last_error();
			return false;
		}
		if (first || unsigned(p) < *levels)
			*levels = unsigned(p);
		first = false;
	}
	return true;
}

} // namespace gpuslot::run
