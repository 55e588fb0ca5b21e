// SPDX-License-Identifier: GPL-2.0
#include "nvidia/nv_plan.hpp"

#include <algorithm>
#include <numeric>

#include "plan/sizes.hpp"

namespace gpuslot {

namespace {

// The largest split whose groups divide every size and are enough for all
// of them.
const NvSplit *fitting_split(const std::vector<NvSplit> &splits,
			     const std::vector<unsigned int> &sizes)
{
	unsigned int common = 0, total = 0;
	for (unsigned int s : sizes) {
		common = std::gcd(common, s);
		total += s;
	}
	const NvSplit *best = nullptr;
	for (const NvSplit &sp : splits)
		if (sp.group_sms && common % sp.group_sms == 0 &&
		    sp.groups >= total / sp.group_sms &&
		    (!best || sp.group_sms > best->group_sms))
			best = &sp;
	return best;
}

std::string cc_text(const NvGpu &gpu)
{
	return gpu.cc_major ? "compute capability " + std::to_string(gpu.cc_major) + "." +
				      std::to_string(gpu.cc_minor)
			    : "this GPU";
}

// "at least 4 SMs, in multiples of 2, on compute capability 8.7"
std::string granularity_text(const NvGpu &gpu, unsigned int min)
{
	return "at least " + std::to_string(min) + " SMs, in multiples of " +
	       std::to_string(gpu.coscheduled_alignment) + ", on " + cc_text(gpu) +
	       (gpu.granularity_documented ? " (NVIDIA's guideline)" : "");
}

} // namespace

NvGranularity nv_sm_granularity(unsigned int reported_min, unsigned int reported_alignment,
				unsigned int cc_major, unsigned int)
{
	if (reported_min && reported_alignment)
		return {reported_min, reported_alignment, false};
	if (cc_major >= 9)
		return {8, 8, true};
	if (cc_major == 8)
		return {4, 2, true};
	if (cc_major == 6 || cc_major == 7)
		return {2, 2, true};
	return {};
}

std::vector<NvSplit> nv_exact_splits(
	unsigned int sm_count, const NvGranularity &granularity,
	const std::function<std::vector<unsigned int>(unsigned int group_sms)> &group_sizes)
{
	std::vector<NvSplit> out;
	const unsigned int unit = granularity.alignment;
	if (!unit)
		return out;
	const unsigned int first = std::max((granularity.min_sms + unit - 1) / unit * unit, unit);
	for (unsigned int g = first; g <= sm_count; g += unit) {
		const std::vector<unsigned int> sizes = group_sizes(g);
		if (!sizes.empty() &&
		    std::all_of(sizes.begin(), sizes.end(), [g](unsigned int s) { return s == g; }))
			out.push_back({g, unsigned(sizes.size())});
	}
	return out;
}

unsigned int nv_task_slots(unsigned int major, unsigned int minor)
{
	switch (major * 10 + minor) {
	case 30: case 53: case 62: case 72:
		return 16;
	case 35: case 37: case 50: case 52: case 61:
		return 32;
	case 0:
		return 0;
	}
	return major >= 6 ? 128 : 0;
}

std::string nv_splits_text(const std::vector<NvSplit> &splits)
{
	std::string out;
	for (const NvSplit &sp : splits)
		out += (out.empty() ? "" : ", ") + std::to_string(sp.groups) + " x " +
		       std::to_string(sp.group_sms);
	return out.empty() ? "none" : out;
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
	const unsigned int sms = gpu.sm_count, unit = gpu.coscheduled_alignment;
	// The smallest partition: one co-scheduled group, or more where the
	// driver says so (4 SMs in groups of 2 on compute capability 8.x).
	const unsigned int min = std::max(gpu.min_partition_sms, unit);
	if (!unit || gpu.splits.empty()) {
		p.error = "the driver reports no co-scheduled split of this GPU's " +
			  std::to_string(sms) + " SMs (alignment " + std::to_string(unit) +
			  "): it cannot be partitioned";
		return p;
	}
	std::vector<unsigned int> sizes = sizes_in;
	if (sizes.empty()) {
		// One group per slot: the largest group the driver makes k of.
		const NvSplit *best = nullptr;
		for (const NvSplit &sp : gpu.splits)
			if (sp.groups >= k && (!best || sp.group_sms > best->group_sms))
				best = &sp;
		if (!best) {
			const unsigned int most =
				std::max_element(gpu.splits.begin(), gpu.splits.end(),
						 [](auto &a, auto &b) { return a.groups < b.groups; })
					->groups;
			p.error = "k = " + std::to_string(k) + " partitions: the driver splits " +
				  std::to_string(sms) + " SMs into at most " + std::to_string(most) +
				  " co-scheduled groups (" + nv_splits_text(gpu.splits) +
				  "); a green context takes " + granularity_text(gpu, min) +
				  ": plan at most " + std::to_string(most) +
				  " partitions, or put slots on the whole GPU (sizes = all,...)";
			return p;
		}
		sizes.assign(k, best->group_sms);
	}
	// Whole co-scheduled groups: sizes are multiples of the alignment.
	unsigned int total = 0;
	for (unsigned int &s : sizes) {
		const unsigned int whole = s / unit * unit;
		if (!whole) {
			p.error = "a partition of " + std::to_string(s) +
				  " SMs is less than one co-scheduled group (" + std::to_string(unit) +
				  " SMs on this GPU)";
			return p;
		}
		if (whole < min) {
			p.error = "a partition of " + std::to_string(s) +
				  " SMs is less than the smallest green context the driver makes: " +
				  granularity_text(gpu, min);
			return p;
		}
		if (whole != s)
			p.notes.push_back(std::to_string(s) + " SMs rounded down to " +
					  std::to_string(whole) + ": partitions take whole groups of " +
					  std::to_string(unit) + " co-scheduled SMs");
		s = whole;
		total += s;
	}
	if (total > sms) {
		p.error = "the sizes add up to " + std::to_string(total) + " SMs, more than the " +
			  std::to_string(sms) + " the GPU has";
		return p;
	}
	// Not every SM is in a co-scheduled group (an H100 has 120 of its 132
	// in groups of 8): shrink the largest partition until the sizes fit.
	const std::string asked = sizes_text(sizes);
	const NvSplit *split;
	while (!(split = fitting_split(gpu.splits, sizes))) {
		auto largest = std::max_element(sizes.begin(), sizes.end());
		if (*largest < min + unit) {
			p.error = "partitions of " + asked + " SMs do not fit the co-scheduled groups the "
				  "driver makes of this GPU (" + nv_splits_text(gpu.splits) + ")";
			return p;
		}
		*largest -= unit;
	}
	if (sizes_text(sizes) != asked)
		p.notes.push_back("partitions of " + asked + " SMs do not fit the co-scheduled groups "
				  "the driver makes (" + nv_splits_text(gpu.splits) +
				  "): planned " + sizes_text(sizes));
	p.group_sms = split->group_sms;
	p.groups = split->groups;
	unsigned int next = 0, used = 0;
	for (unsigned int s : sizes) {
		std::vector<unsigned int> mine;
		for (unsigned int i = 0; i < s / p.group_sms; i++)
			mine.push_back(next++);
		p.slot_groups.push_back(mine);
		p.slot_sms.push_back(s);
		p.whole.push_back(false);
		p.priorities.push_back(0);
		used += s;
	}
	if (gpu.granularity_documented)
		p.notes.push_back("the driver reports no partition granularity (CUDA before 13.0): "
				  "planned with " + granularity_text(gpu, min));
	if (used < sms)
		p.notes.push_back(std::to_string(sms - used) + " of " + std::to_string(sms) +
				  " SMs belong to no slot (the split makes " +
				  std::to_string(p.groups) + " groups of " +
				  std::to_string(p.group_sms) + " SMs)");
	return p;
}

} // namespace gpuslot
