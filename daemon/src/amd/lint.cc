// SPDX-License-Identifier: GPL-2.0
#include "amd/lint.hpp"

#include "device/module.hpp"
#include "amd/planner.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpuslot {

std::string LintFinding::text() const
{
	std::string who = slot < 0 ? "layout" : "slot " + std::to_string(slot);
	if (other_slot >= 0)
		who = "slots " + std::to_string(slot) + " and " +
		      std::to_string(other_slot);
	return (severity == kError ? "error: " : "warning: ") + who + ": " +
	       problem + ": " + consequence;
}

bool parse_mask(const std::string &text, std::vector<uint32_t> *out)
{
	// The module's bitmap syntax, without its "all".
	gpuslot_partition p;
	if (text == "all" || !parse_partition(text, &p))
		return false;
	size_t digits = text.size() - (text.starts_with("0x") || text.starts_with("0X") ? 2 : 0);
	*out = mask_from_partition(p, unsigned(digits * 4));
	return true;
}

namespace {

bool bit(const std::vector<uint32_t> &m, size_t i)
{
	return i / 32 < m.size() && (m[i / 32] >> (i % 32) & 1);
}

// "4", "4-7", "4, 9-11" (at most a few ranges, then "...").
std::string ranges(const std::vector<size_t> &bits)
{
	std::string out;
	int shown = 0;
	for (size_t i = 0; i < bits.size();) {
		size_t j = i;
		while (j + 1 < bits.size() && bits[j + 1] == bits[j] + 1)
			j++;
		if (shown++ == 4)
			return out + ", ...";
		out += (out.empty() ? "" : ", ") + std::to_string(bits[i]) +
		       (j > i ? "-" + std::to_string(bits[j]) : "");
		i = j + 1;
	}
	return out;
}

// "bit 4" or "bits 4-7, 9".
std::string bits(const std::vector<size_t> &v)
{
	return (v.size() == 1 ? "bit " : "bits ") + ranges(v);
}

void lint_one(const CuShape &shape, MaskAlgorithm algorithm,
	      const std::vector<CuSlot> &slots, int slot,
	      const std::vector<uint32_t> &mask, std::vector<LintFinding> *out)
{
	auto add = [&](LintFinding::Severity sev, std::string problem,
		       std::string consequence) {
		out->push_back({sev, slot, -1, std::move(problem),
				std::move(consequence)});
	};
	const size_t cus = shape.total();
	std::vector<size_t> set, past;
	for (size_t i = 0; i < mask.size() * 32; i++)
		if (bit(mask, i))
			(i < cus ? set : past).push_back(i);

	if (!past.empty())
		add(LintFinding::kWarning,
		    bits(past) + (past.size() == 1 ? " is" : " are") + " past the GPU's " +
			    std::to_string(cus) + " CUs",
		    "amdkfd ignores them, so the partition has fewer CUs than "
		    "its mask suggests");
	if (set.empty()) {
		add(LintFinding::kError, "the mask enables no CU",
		    "a queue with no CUs never runs its work: every job on this "
		    "slot hangs");
		return;
	}

	// gfx10+: ROCr (ROCm 5.3 and later) checks user bits 2w and 2w+1
	// whatever the kernel's walk; amdkfd does too from Linux 6.0 (walks
	// C and D). Under walks A and B the kernel maps single CUs.
	const bool kernel_pairs = algorithm != MaskAlgorithm::A &&
				  algorithm != MaskAlgorithm::B;
	if (shape.wgp) {
		std::vector<size_t> halves;
		for (size_t i = 0; i + 1 < cus; i += 2)
			if (bit(mask, i) != bit(mask, i + 1))
				halves.push_back(bit(mask, i) ? i : i + 1);
		// Refused: its SE balance does not matter.
		if (!halves.empty()) {
			add(LintFinding::kError,
			    "half a WGP: " + bits(halves) +
				    " without its pair (user bits 2n and 2n+1 "
				    "go together on gfx10+)",
			    std::string("ROCr (ROCm 5.3 and later, whatever the "
					"kernel) refuses the mask with "
					"HSA_STATUS_ERROR_INVALID_ARGUMENT") +
				    (kernel_pairs ?
					     ", and amdkfd (Linux 6.0 and later) with "
					     "EINVAL (\"CUs must be adjacent pairwise "
					     "enabled\"): the stream cannot be created" :
					     ": the stream cannot be created; an older "
					     "ROCr leaves WGPs half enabled, which "
					     "soft-hangs (ROCm issue 2082)"));
			return;
		}
	}
	// Under the single-CU walks the kernel writes what the bits say: a
	// WGP (register CUs 2j and 2j+1 of an SH) with one CU enabled.
	if (shape.wgp && !kernel_pairs) {
		std::map<std::tuple<unsigned, unsigned, unsigned, unsigned>, unsigned> wgp;
		for (size_t i : set)
			if (i < slots.size())
				wgp[{slots[i].xcc, slots[i].se, slots[i].sh,
				     slots[i].cu / 2}]++;
		for (auto &[w, n] : wgp) {
			auto [x, se, sh, j] = w;
			if (n == 1 && 2 * j + 1 < shape.at(x, se, sh)) {
				add(LintFinding::kError,
				    "SE " + std::to_string(x * shape.se_per_xcc + se) +
					    " SH " + std::to_string(sh) + ": WGP " +
					    std::to_string(j) + " gets one CU of its two",
				    "a WGP needs both CUs enabled to run anything: "
				    "work sent there soft-hangs (ROCm issue 2082)");
				return;
			}
		}
	}

	// A dispatch on a multi-XCC GPU (SPX) runs on every XCC in turn.
	if (shape.xccs > 1) {
		std::vector<unsigned int> per_xcc(shape.xccs, 0);
		for (size_t i : set)
			if (i < slots.size())
				per_xcc[slots[i].xcc]++;
		std::vector<size_t> empty;
		for (unsigned int x = 0; x < shape.xccs; x++)
			if (!per_xcc[x])
				empty.push_back(x);
		if (!empty.empty()) {
			std::string list;
			for (size_t x : empty)
				list += (list.empty() ? "" : ", ") + std::to_string(x);
			add(LintFinding::kError,
			    (empty.size() == 1 ? "XCC " : "XCCs ") + list +
				    (empty.size() == 1 ? " has" : " have") + " no CU",
			    "a dispatch is spread over every XCC of the node: its "
			    "share on an XCC without CUs never runs, and the job hangs");
			return;
		}
	}

	// CUs per shader engine, over all XCCs.
	std::map<unsigned int, unsigned int> per_se;
	for (size_t i : set)
		if (i < slots.size())
			per_se[slots[i].xcc * shape.se_per_xcc + slots[i].se]++;
	unsigned int lo = ~0u, hi = 0, lo_se = 0, hi_se = 0;
	for (auto [se, n] : per_se) {
		if (n < lo)
			lo = n, lo_se = se;
		if (n > hi)
			hi = n, hi_se = se;
	}
	const unsigned int unit = shape.wgp ? 2 : 1;
	if (lo == 1 && hi > 1) {
		add(LintFinding::kError,
		    "SE " + std::to_string(lo_se) + " has a single CU while SE " +
			    std::to_string(hi_se) + " has " + std::to_string(hi),
		    "work is dealt evenly over the SEs, so every job waits for "
		    "the lone CU: up to 10x slower (seed 000, Table 1); use "
		    "`gpuslotctl plan` for a balanced mask");
	} else if (hi - lo > unit) {
		add(LintFinding::kWarning,
		    "unbalanced SEs: from " + std::to_string(lo) + " CUs (SE " +
			    std::to_string(lo_se) + ") to " + std::to_string(hi) +
			    " (SE " + std::to_string(hi_se) + ")",
		    "work is dealt evenly over the SEs, so the partition runs at "
		    "the pace of its smallest SE and its other CUs idle; make it "
		    "SE-packed or SE-distributed (`gpuslotctl plan`)");
	}
}

} // namespace

std::vector<LintFinding> lint_masks(const CuShape &shape,
				    MaskAlgorithm algorithm,
				    const std::vector<std::vector<uint32_t>> &masks,
				    const std::vector<unsigned int> &priorities)
{
	auto prio = [&](size_t j) { return j < priorities.size() ? priorities[j] : 0u; };
	std::vector<LintFinding> out;
	const auto slots = mask_bit_slots(shape, algorithm);
	for (size_t j = 0; j < masks.size(); j++)
		lint_one(shape, algorithm, slots, int(j), masks[j], &out);

	const size_t cus = shape.total();
	for (size_t a = 0; a < masks.size(); a++)
		for (size_t b = a + 1; b < masks.size(); b++) {
			std::vector<size_t> shared;
			for (size_t i = 0; i < cus; i++)
				if (bit(masks[a], i) && bit(masks[b], i))
					shared.push_back(i);
			// At different priorities an overlap is a layout of
			// its own (lint_priorities() says what it does).
			if (shared.empty() || prio(a) != prio(b))
				continue;
			out.push_back({LintFinding::kError, int(a), int(b),
				       "they share " + bits(shared) + " at the same priority " +
					       std::to_string(prio(a)),
				       "the two slots' jobs compete for those CUs and "
				       "neither goes first, so neither is isolated from "
				       "the other; the module refuses partitions that "
				       "overlap at the same priority"});
		}
	return out;
}

namespace {

bool shares_units(const gpuslot_partition &a, const gpuslot_partition &b)
{
	if (partition_is_whole(a) || partition_is_whole(b))
		return true;
	for (size_t w = 0; w < GPUSLOT_UNIT_WORDS; w++)
		if (a.units[w] & b.units[w])
			return true;
	return false;
}

} // namespace

std::vector<LintFinding> lint_priorities(const std::vector<gpuslot_partition> &parts,
					 const std::vector<unsigned int> &priorities,
					 const PriorityLintGpu &gpu)
{
	std::vector<LintFinding> out;
	const size_t k = parts.size();
	auto prio = [&](size_t j) { return j < priorities.size() ? priorities[j] : 0u; };
	auto whole = [&](size_t j) { return partition_is_whole(parts[j]); };
	const std::string unit = gpu.unit_kind == GPUSLOT_UNIT_AMD_CU ? "CUs" : "SMs";

	for (size_t a = 0; a < k; a++)
		for (size_t b = a + 1; b < k; b++) {
			if (!shares_units(parts[a], parts[b]) || prio(a) != prio(b) ||
			    (whole(a) && whole(b)))
				continue; // apart, ordered, or k-exclusion on the whole GPU
			if (!whole(a) && !whole(b)) {
				if (!gpu.confined_overlap_linted)
					out.push_back({LintFinding::kError, int(a), int(b),
						       "their partitions share units at the same "
						       "priority " + std::to_string(prio(a)),
						       "neither goes first where they meet, so "
						       "neither is isolated from the other; the "
						       "module refuses partitions that overlap at "
						       "the same priority"});
				continue;
			}
			const size_t w = whole(a) ? a : b, c = whole(a) ? b : a;
			out.push_back({LintFinding::kWarning, int(std::min(a, b)), int(std::max(a, b)),
				       "slot " + std::to_string(w) + " is the whole GPU and slot " +
					       std::to_string(c) + " shares its " + unit +
					       " at the same priority " + std::to_string(prio(a)),
				       "where they meet neither goes first, so the overlap "
				       "protects neither; give the slot to protect a higher "
				       "priority (gpuslotctl plan --layout protect)"});
		}

	// A priority above another slot's that meets none of them.
	for (size_t a = 0; a < k; a++) {
		bool lower = false, meets_lower = false;
		for (size_t b = 0; b < k; b++)
			if (b != a && prio(b) < prio(a)) {
				lower = true;
				meets_lower |= shares_units(parts[a], parts[b]);
			}
		if (lower && !meets_lower)
			out.push_back({LintFinding::kWarning, int(a), -1,
				       "priority " + std::to_string(prio(a)) +
					       " orders nothing: no slot of a lower priority "
					       "shares its " + unit,
				       "the GPU orders kernels by priority only where they "
				       "compete for the same " + unit +
					       (gpu.unit_kind == GPUSLOT_UNIT_AMD_CU
							? std::string("")
							: "; across partitions a higher priority "
							  "can only evict the others' kernels from "
							  "the GPU's task slots (seed 002)")});
	}

	std::vector<unsigned int> levels;
	for (size_t j = 0; j < k; j++)
		if (std::find(levels.begin(), levels.end(), prio(j)) == levels.end())
			levels.push_back(prio(j));
	if (gpu.unit_kind == GPUSLOT_UNIT_AMD_CU) {
		std::string list, beyond;
		for (size_t j = 0; j < k; j++) {
			if (prio(j) && !whole(j))
				list += (list.empty() ? "" : ", ") + std::to_string(j);
			else if (prio(j) > kHipLevelsAboveDefault)
				beyond += (beyond.empty() ? "" : ", ") + std::to_string(j);
		}
		if (!list.empty())
			out.push_back({LintFinding::kWarning, -1, -1,
				       "confined slot(s) " + list + " have a priority other than 0 "
				       "on an AMD GPU",
				       "HIP makes no CU-masked stream at a priority "
				       "(hipExtStreamCreateWithCUMask takes none): libgpuslot "
				       "refuses those slots, and their clients fail"});
		if (!beyond.empty())
			out.push_back({LintFinding::kWarning, -1, -1,
				       "slot(s) " + beyond + " on the whole GPU have a priority above " +
					       std::to_string(kHipLevelsAboveDefault) +
					       " on an AMD GPU",
				       "a plain HIP stream has " +
					       std::to_string(kHipLevelsAboveDefault) +
					       " level above the default (ROCclr's high priority): "
					       "libgpuslot refuses those slots, and their clients fail"});
	} else if (levels.size() > 1 && gpu.task_slots && k > gpu.task_slots) {
		std::sort(levels.begin(), levels.end());
		size_t above = 0;
		for (size_t j = 0; j < k; j++)
			above += prio(j) > levels.front();
		out.push_back({LintFinding::kWarning, -1, -1,
			       "k = " + std::to_string(k) + " slots can have " + std::to_string(k) +
				       " kernels pending at once (one stream per slot, as libgpuslot "
				       "makes them), " + std::to_string(above) +
				       " of them above the lowest priority, more than the " +
				       std::to_string(gpu.task_slots) + " task slots of a " +
				       gpu.what + " GPU",
			       "once the task slots are full, kernels of a higher priority "
			       "evict lower-priority ones, and a partition that shares no SM "
			       "with them stalls until one ends (seed 002, Fig. 12); use k <= " +
				       std::to_string(gpu.task_slots) + " or one priority"});
	}
	return out;
}

} // namespace gpuslot
