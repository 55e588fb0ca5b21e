// SPDX-License-Identifier: GPL-2.0
#include "plan/slot_layout.hpp"

#include <linux/gpuslot.h>

#include <algorithm>
#include <numeric>

#include "plan/sizes.hpp"

namespace gpuslot {

std::string priorities_text(const std::vector<unsigned int> &priorities)
{
	std::string out;
	for (unsigned int p : priorities)
		out += (out.empty() ? "" : ",") + std::to_string(p);
	return out;
}

bool layout_spec(const GpuSettings &s, unsigned int k, unsigned int total,
		 bool raise_whole_slot, LayoutSpec *out, std::string *error)
{
	LayoutSpec spec;
	if (k < 1 || k > GPUSLOT_MAX_SLOTS) {
		*error = "k must be 1 to 64, not " + std::to_string(k);
		return false;
	}
	spec.slots.assign(k, SlotSpec{});
	if (s.protect()) {
		if (k < 2) {
			*error = "layout protect needs slot 0 and at least one confined slot: k >= 2, "
				 "not " + std::to_string(k);
			return false;
		}
		spec.protect = true;
		spec.reserve_percent = s.reserve_percent.value_or(kDefaultProtectReservePercent);
		const unsigned int each = total * (100 - spec.reserve_percent) / 100 / (k - 1);
		if (!each) {
			*error = "layout protect: " + std::to_string(k - 1) + " confined slots do not fit in " +
				 std::to_string(100 - spec.reserve_percent) + "% of " +
				 std::to_string(total) + " units";
			return false;
		}
		spec.slots[0] = {true, 0, raise_whole_slot ? kProtectPriority : 0};
		for (unsigned int j = 1; j < k; j++)
			spec.slots[j] = {false, each, 0};
		*out = std::move(spec);
		return true;
	}
	if (s.sizes) {
		std::vector<unsigned int> sizes;
		std::string err;
		if (!parse_sizes(*s.sizes, total, &sizes, &err, true)) {
			*error = "sizes '" + *s.sizes + "': " + err;
			return false;
		}
		if (sizes.size() != k) {
			spec.notes.push_back("sizes '" + *s.sizes + "' are for k = " +
					     std::to_string(sizes.size()) + ", not " + std::to_string(k) +
					     ": planning k equal partitions");
		} else {
			for (unsigned int j = 0; j < k; j++) {
				spec.slots[j].whole = sizes[j] == kWholeGpu;
				spec.slots[j].units = spec.slots[j].whole ? 0 : sizes[j];
			}
		}
	}
	if (s.priorities) {
		std::vector<unsigned int> prios;
		std::string err;
		if (!parse_priorities(*s.priorities, &prios, &err)) {
			*error = "priorities '" + *s.priorities + "': " + err;
			return false;
		}
		if (prios.size() != k)
			spec.notes.push_back("priorities '" + *s.priorities + "' are for k = " +
					     std::to_string(prios.size()) + ", not " +
					     std::to_string(k) + ": every slot at priority 0");
		else
			for (unsigned int j = 0; j < k; j++)
				spec.slots[j].priority = prios[j];
	}
	*out = std::move(spec);
	return true;
}

namespace {

// "partition 2: ..." from a planner that saw only the confined slots, as
// "slot 3: ..." of the whole layout.
std::string renamed(const std::string &note, const std::vector<unsigned int> &slot_of)
{
	const std::string head = "partition ";
	if (!note.starts_with(head))
		return note;
	size_t end = head.size();
	while (end < note.size() && isdigit((unsigned char)note[end]))
		end++;
	if (end == head.size())
		return note;
	const unsigned long j = std::stoul(note.substr(head.size(), end - head.size()));
	if (j >= slot_of.size())
		return note;
	return "slot " + std::to_string(slot_of[j]) + note.substr(end);
}

void add_unique(std::vector<std::string> *notes, const std::string &n)
{
	if (std::find(notes->begin(), notes->end(), n) == notes->end())
		notes->push_back(n);
}

std::string slot_list(const std::vector<unsigned int> &slots)
{
	if (slots.size() == 1)
		return "slot " + std::to_string(slots[0]);
	std::string out = "slots ";
	for (size_t i = 0; i < slots.size(); i++)
		out += (i ? (i + 1 == slots.size() ? " and " : ", ") : "") +
		       std::to_string(slots[i]);
	return out;
}

// Why protect looks as it does, with this GPU's numbers.
void protect_notes(const LayoutSpec &spec, unsigned int total, unsigned int confined_units,
		   const std::string &unit, bool priorities_offered, unsigned int task_slots,
		   std::vector<std::string> *notes)
{
	const unsigned int k = unsigned(spec.slots.size());
	const unsigned int reserve = total - confined_units;
	const std::string others = k == 2 ? "slot 1" : "slots 1-" + std::to_string(k - 1);
	if (priorities_offered)
		notes->push_back(
			"layout protect: slot 0 runs on the whole GPU (" + std::to_string(total) + " " +
			unit + ") at priority " + std::to_string(spec.slots[0].priority) + ", " +
			others + " at priority 0 confined to " + std::to_string(confined_units) + " " +
			unit + ": where they meet the GPU starts slot 0's kernels first (stream "
			"priority), and the " + std::to_string(reserve) + " " + unit +
			" no confined slot may use (the reserve, " + std::to_string(spec.reserve_percent) +
			"% asked) are free whenever slot 0's work arrives, since a running block is "
			"never preempted");
	else
		notes->push_back(
			"layout protect: slot 0 runs on the whole GPU (" + std::to_string(total) + " " +
			unit + "), " + others + " confined to " + std::to_string(confined_units) + " " +
			unit + ", all at priority 0: HIP makes no CU-masked stream at a priority, and "
			"slot 0's plain stream could have one (libgpuslot makes it with "
			"hipStreamCreateWithPriority: sizes = all,... priorities = 1,0,...) but then "
			"every client that builds slot 0's stream takes a queue of HIP's high-priority "
			"pool, one more HQD each, and it is not measured on an AMD GPU; what protects "
			"slot 0 here is the reserve of " + std::to_string(reserve) + " " + unit +
			" no confined slot may use (" + std::to_string(spec.reserve_percent) +
			"% asked)");
	notes->push_back(
		"layout protect, why: on the H100 (issue 32) a job of six 2048^2 matmuls beside "
		"three processes looping 4096^2 matmuls took p99 44-48 ms at equal priority, "
		"6.5-7.1 ms at a higher stream priority on the whole GPU, 5.7-6.1 ms with the "
		"three confined to 96 of 128 SMs: priority does most of the work, the reserve "
		"about 10 % more");
	notes->push_back("layout protect: the reserve's default (" +
			 std::to_string(kDefaultProtectReservePercent) +
			 "%) is the one measured on the H100 (issue 32, docs/results-ch6.md): the "
			 "protected camera's p99 0.82x what stream priorities gave over capacity "
			 "(0.86x with a lock per frame); other reserves are not measured yet");
	notes->push_back("layout protect: let the protected task hold slot 0 across its jobs "
			 "(acquire with a mask of slot 0 only, release and acquire again now and "
			 "then at a job boundary): no other task can take slot 0 while it is held, "
			 "each job saves the round trip to the lock (0.2-0.6 ms a job on the H100 "
			 "beside MPS); its boost ends at max_hold_ms, and a new layout, or on the "
			 "socket transport a restarted gpuslotd, reaches it only when it acquires "
			 "again");
	if (priorities_offered && task_slots)
		notes->push_back(
			"seed 002's bound holds: gpuslot's k = " + std::to_string(k) +
			" slots have at most " + std::to_string(k) +
			" kernels pending at once (one stream per slot, one holder per slot), "
			"within the GPU's " + std::to_string(task_slots) +
			" task slots, so slot 0's kernels never evict the confined slots' from "
			"them; other streams on the GPU count too");
	else if (priorities_offered)
		notes->push_back(
			"seed 002's bound: gpuslot's k = " + std::to_string(k) + " slots have at most " +
			std::to_string(k) + " kernels pending at once; keep that (and any other "
			"streams) within the GPU's task slots (128 from compute capability 6.0; 32 "
			"or 16 on some), or higher-priority kernels evict the confined slots' from "
			"them");
}

} // namespace

Plan plan_slots(const CuShape &shape, MaskAlgorithm algorithm, const LayoutSpec &spec)
{
	Plan out;
	const unsigned int total = shape.total();
	std::vector<unsigned int> confined, sizes;
	bool equal = true;
	for (unsigned int j = 0; j < spec.slots.size(); j++)
		if (!spec.slots[j].whole) {
			confined.push_back(j);
			sizes.push_back(spec.slots[j].units);
			equal &= spec.slots[j].units == 0;
		}
	Plan p;
	if (!confined.empty()) {
		p = plan_partitions(shape, algorithm, unsigned(confined.size()),
				    equal ? std::vector<unsigned int>{} : sizes);
		if (!p.error.empty()) {
			out.error = renamed(p.error, confined);
			return out;
		}
	}
	for (const auto &n : spec.notes)
		out.notes.push_back(n);
	for (const auto &n : p.notes)
		add_unique(&out.notes, renamed(n, confined));
	unsigned int next = 0, confined_cus = 0;
	std::vector<unsigned int> prioritized, beyond;
	for (unsigned int j = 0; j < spec.slots.size(); j++) {
		PlannedPartition part;
		if (spec.slots[j].whole) {
			part.whole = true;
			part.cus = part.requested_cus = total;
		} else {
			part = p.partitions[next++];
			confined_cus += part.cus;
		}
		part.priority = spec.slots[j].priority;
		if (part.priority && !part.whole)
			prioritized.push_back(j);
		else if (part.priority > kHipLevelsAboveDefault)
			beyond.push_back(j);
		out.partitions.push_back(std::move(part));
	}
	if (!prioritized.empty())
		out.notes.push_back(
			slot_list(prioritized) + ": HIP makes no CU-masked stream at a priority "
			"(hipExtStreamCreateWithCUMask takes none), so libgpuslot refuses a "
			"priority other than 0 on a confined slot of an AMD GPU and clients of " +
			(prioritized.size() == 1 ? "that slot" : "those slots") +
			" fail; give them priority 0 (a slot on the whole GPU may have one)");
	if (!beyond.empty())
		out.notes.push_back(
			slot_list(beyond) + ": HIP offers " + std::to_string(kHipLevelsAboveDefault) +
			" priority level above the default for a plain stream (ROCclr's high "
			"priority), so libgpuslot refuses more on a slot on the whole GPU and "
			"clients of " + (beyond.size() == 1 ? "that slot" : "those slots") +
			" fail; give them priority 0 or 1");
	if (spec.protect)
		protect_notes(spec, total, confined_cus, "CUs", false, 0, &out.notes);
	return out;
}

NvPlan plan_nv_slots(const NvGpu &gpu, const LayoutSpec &spec)
{
	NvPlan out;
	std::vector<unsigned int> confined, sizes;
	bool equal = true, any_whole = false;
	for (unsigned int j = 0; j < spec.slots.size(); j++) {
		if (spec.slots[j].whole) {
			any_whole = true;
			continue;
		}
		confined.push_back(j);
		sizes.push_back(spec.slots[j].units);
		equal &= spec.slots[j].units == 0;
	}
	NvPlan p;
	if (!confined.empty()) {
		p = plan_nv_partitions(gpu, unsigned(confined.size()),
				       equal ? std::vector<unsigned int>{} : sizes);
		if (!p.error.empty()) {
			out.error = p.error;
			return out;
		}
	} else if (gpu.splits.empty()) {
		out.error = "the driver reports no co-scheduled split of this GPU's " +
			    std::to_string(gpu.sm_count) + " SMs: it cannot be partitioned";
		return out;
	} else {
		// Every slot on the whole GPU: the units are the finest split's
		// groups, none of them named by a slot.
		p.group_sms = gpu.splits.front().group_sms;
		p.groups = gpu.splits.front().groups;
	}
	out.group_sms = p.group_sms;
	out.groups = p.groups;
	for (const auto &n : spec.notes)
		out.notes.push_back(n);
	unsigned int next = 0, confined_sms = 0;
	for (unsigned int j = 0; j < spec.slots.size(); j++) {
		if (spec.slots[j].whole) {
			out.slot_groups.push_back({});
			out.slot_sms.push_back(gpu.sm_count);
			out.whole.push_back(true);
		} else {
			out.slot_groups.push_back(p.slot_groups[next]);
			out.slot_sms.push_back(p.slot_sms[next]);
			confined_sms += p.slot_sms[next];
			out.whole.push_back(false);
			next++;
		}
		out.priorities.push_back(spec.slots[j].priority);
	}
	for (const auto &n : p.notes) {
		// With a whole-GPU slot, SMs of no confined slot are its own.
		if (any_whole && n.find(" belong to no slot") != std::string::npos)
			continue;
		add_unique(&out.notes, n);
	}
	if (any_whole && !confined.empty() && confined_sms < gpu.sm_count)
		out.notes.push_back(std::to_string(gpu.sm_count - confined_sms) + " of " +
				    std::to_string(gpu.sm_count) +
				    " SMs belong to no confined slot: only the whole-GPU slot runs there");
	if (spec.protect)
		protect_notes(spec, gpu.sm_count, confined_sms, "SMs", true,
			      nv_task_slots(gpu.cc_major, gpu.cc_minor), &out.notes);
	return out;
}

} // namespace gpuslot
