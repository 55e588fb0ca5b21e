// SPDX-License-Identifier: GPL-2.0
#include "nv_plan.hpp"

#include <numeric>

namespace gpuslot {

unsigned int nv_split_groups(unsigned int sm_count, unsigned int group_sms)
{
	const unsigned int g = (group_sms + kNvTpcSms - 1) / kNvTpcSms * kNvTpcSms;
	return g ? sm_count / g : 0;
}

NvPlan plan_nv_partitions(const NvGpu &gpu, unsigned int k,
			  const std::vector<unsigned int> &sizes_in)
{
	NvPlan p;
	if (k < 1 || k > 64) {
		p.error = "k must be 1 to 64, not " + std::to_string(k);
		return p;
	}
	if (!sizes_in.empty() && sizes_in.size() != k) {
		p.error = std::to_string(sizes_in.size()) + " sizes for k = " + std::to_string(k);
		return p;
	}
	const unsigned int sms = gpu.sm_count;
	std::vector<unsigned int> sizes = sizes_in;
	if (sizes.empty()) {
		// One group per slot: the largest whole-TPC group k times over.
		unsigned int g = sms / k / kNvTpcSms * kNvTpcSms;
		if (!g) {
			p.error = "k = " + std::to_string(k) + " leaves less than one TPC (" +
				  std::to_string(kNvTpcSms) + " SMs) per slot on " +
				  std::to_string(sms) + " SMs";
			return p;
		}
		sizes.assign(k, g);
	}
	// Whole TPCs, then the largest group that divides every size.
	unsigned int g = 0, total = 0;
	for (unsigned int &s : sizes) {
		unsigned int even = s / kNvTpcSms * kNvTpcSms;
		if (!even) {
			p.error = "a partition of " + std::to_string(s) +
				  " SMs is less than one TPC (" + std::to_string(kNvTpcSms) + " SMs)";
			return p;
		}
		if (even != s)
			p.notes.push_back(std::to_string(s) + " SMs rounded down to " +
					  std::to_string(even) + ": green contexts take whole TPCs");
		s = even;
		g = std::gcd(g, s);
		total += s;
	}
	if (total > sms) {
		p.error = "the sizes add up to " + std::to_string(total) + " SMs, more than the " +
			  std::to_string(sms) + " the GPU has";
		return p;
	}
	p.group_sms = g;
	p.groups = nv_split_groups(sms, g);
	unsigned int next = 0;
	for (unsigned int s : sizes) {
		std::vector<unsigned int> mine;
		for (unsigned int i = 0; i < s / g; i++)
			mine.push_back(next++);
		p.slot_groups.push_back(mine);
		p.slot_sms.push_back(s);
	}
	if (total < sms)
		p.notes.push_back(std::to_string(sms - total) +
				  " SMs belong to no slot (groups of " + std::to_string(g) +
				  " SMs do not cover all " + std::to_string(sms) + ")");
	return p;
}

} // namespace gpuslot
