// SPDX-License-Identifier: LGPL-2.1-or-later
#include "cuda_backend.hpp"

#include <linux/gpuslot.h>

#include <cerrno>

#include "device_choice.hpp"

namespace gpuslot {

namespace {

// The groups a unit mask names, ascending: what cuDevResourceGenerateDesc
// is given.
std::vector<unsigned int> mask_units(const std::vector<uint32_t> &mask)
{
	std::vector<unsigned int> idx;
	for (unsigned int i = 0; i < mask.size() * 32; i++)
		if (mask[i / 32] >> (i % 32) & 1)
			idx.push_back(i);
	return idx;
}

// A green context is what the layout says, read back from it: @want SMs,
// and clusters as large as on the whole GPU (@coscheduled; a context of
// IGNORE_SM_COSCHEDULING groups reads back 2 on an H100, and cuDNN and
// cuBLAS kernels fail on it). A driver before CUDA 13.0 reports no
// alignment (0) for the device or the context: there is nothing to compare.
// False with *error naming @what.
bool as_planned(const std::string &what, unsigned int sms, unsigned int got_coscheduled,
		unsigned int want, unsigned int coscheduled, std::string *error)
{
	if (sms == want && got_coscheduled >= coscheduled)
		return true;
	*error = what + " has " + std::to_string(sms) + " SMs co-scheduled in groups of " +
		 std::to_string(got_coscheduled) + "; its layout says " + std::to_string(want) +
		 " SMs in groups of " + std::to_string(coscheduled);
	return false;
}

} // namespace

int CudaBackend::resolve(std::string *error)
{
	if (ordinal_ >= 0)
		return 0;
	int count = 0;
	if (int err = api_.device_count(&count)) {
		*error = std::string("cuInit/cuDeviceGetCount: ") + api_.error_string(err);
		return -ENODEV;
	}
	RuntimeDevices rt{"CUDA", "CUDA_VISIBLE_DEVICES", count,
			  [this](const std::string &id, int *ordinal) {
				  return api_.device_by_pci_bus_id(ordinal, id.c_str()) == 0;
			  }};
	int ordinal;
	if (int err = resolve_device(choice_, rt, &ordinal, error))
		return err;
	if (int err = api_.open_device(ordinal)) {
		*error = "CUDA device " + std::to_string(ordinal) + ": " + api_.error_string(err);
		return -ENODEV;
	}
	ordinal_ = ordinal;
	return 0;
}

int CudaBackend::build(const SlotLayout &layout, uint64_t slots, StreamSet *set,
		       std::string *error)
{
	if (layout.unit_kind != GPUSLOT_UNIT_NV_SM_GROUP &&
	    layout.unit_kind != GPUSLOT_UNIT_NONE) {
		*error = "the layout's partitions are not NVIDIA SM groups (unit kind " +
			 std::to_string(layout.unit_kind) +
			 "): the cuda backend cannot build streams for it";
		return -EOPNOTSUPP;
	}
	if (int err = resolve(error))
		return err;
	bool partitioned = false;
	unsigned int coscheduled = 0;
	for (unsigned int s = 0; s < layout.k; s++)
		partitioned |= (slots >> s & 1) && !layout.masks[s].empty();
	if (partitioned) {
		CudaSplit split;
		if (int err = api_.split(ordinal_, layout.unit_size, &split)) {
			*error = "cuDevSmResourceSplitByCount(" + std::to_string(layout.unit_size) +
				 " SMs): " + api_.error_string(err);
			return -EIO;
		}
		if (int err = check_split(layout, split, error))
			return err;
		coscheduled = split.device_coscheduled;
		coscheduled_ = coscheduled;
	}
	// Slot priorities: p levels above the default is CUDA's least - p;
	// the device offers least - greatest levels.
	int least = 0, greatest = 0;
	bool prioritised = false;
	for (unsigned int s = 0; s < layout.k; s++)
		prioritised |= (slots >> s & 1) && layout.priority(s);
	if (prioritised) {
		if (int err = api_.priority_range(ordinal_, &least, &greatest)) {
			*error = std::string("cuCtxGetStreamPriorityRange: ") + api_.error_string(err);
			return -EIO;
		}
		for (unsigned int s = 0; s < layout.k; s++) {
			const unsigned int p = layout.priority(s);
			if ((slots >> s & 1) && int(p) > least - greatest) {
				*error = "slot " + std::to_string(s) + "'s priority " +
					 std::to_string(p) + " is beyond this GPU's stream "
					 "priorities: CUDA offers " +
					 std::to_string(least - greatest) +
					 " levels above the default (priorities " +
					 std::to_string(least) + " .. " + std::to_string(greatest) +
					 "); plan slot priorities 0 .. " +
					 std::to_string(least - greatest);
				return -EOPNOTSUPP;
			}
		}
	}
	set->start(layout);
	for (unsigned int slot = 0; slot < layout.k; slot++) {
		if (!(slots >> slot & 1))
			continue;
		const int cuda_priority = least - int(layout.priority(slot));
		const std::vector<unsigned int> idx = mask_units(layout.masks[slot]);
		void *stream = nullptr, *gctx = nullptr;
		unsigned int sms = 0, got_coscheduled = 0;
		int err = idx.empty() ? api_.plain_stream(ordinal_, cuda_priority, &stream)
				      : api_.green_stream(ordinal_, idx.data(), unsigned(idx.size()),
							  cuda_priority, &stream, &gctx, &sms,
							  &got_coscheduled);
		if (err) {
			*error = std::string(idx.empty() ? "a stream" : "a green context") +
				 " for slot " + std::to_string(slot) + ": " + api_.error_string(err);
			destroy(set);
			return -EIO;
		}
		if (gctx && !as_planned("slot " + std::to_string(slot) + "'s green context", sms,
					got_coscheduled, unsigned(idx.size()) * layout.unit_size,
					coscheduled, error)) {
			api_.destroy(stream, gctx);
			destroy(set);
			return -EIO;
		}
		// The priority is what the layout says, read back from the
		// stream (the driver clamps a priority out of range silently).
		int got_priority = 0;
		if (int e = api_.stream_priority(stream, &got_priority);
		    e || got_priority != cuda_priority) {
			*error = "slot " + std::to_string(slot) + "'s stream " +
				 (e ? std::string("has no priority to read back: ") +
					      api_.error_string(e)
				    : "has CUDA priority " + std::to_string(got_priority) +
					      "; its layout says " +
					      std::to_string(layout.priority(slot)) +
					      " levels above the default, CUDA priority " +
					      std::to_string(cuda_priority));
			api_.destroy(stream, gctx);
			destroy(set);
			return -EIO;
		}
		set->streams[slot] = stream;
		set->contexts[slot] = gctx;
		set->units[slot] = sms;
		set->priorities[slot] = layout.priority(slot);
		set->slots |= 1ULL << slot;
	}
	notice_ = partitioned && !api_.mps_running()
			  ? "no MPS control daemon runs: green-context partitions of different "
			    "processes time-slice instead of running side by side "
			    "(start nvidia-cuda-mps-control -d)"
			  : "";
	return 0;
}

int CudaBackend::build_union(const SlotLayout &layout, uint64_t slots, StreamSet::Union *out,
			     std::string *error)
{
	if (ordinal_ < 0) {
		*error = "no streams were built yet";
		return -EINVAL;
	}
	// The union of the slots' masks.
	std::vector<uint32_t> mask;
	for (unsigned int s = 0; s < layout.k; s++) {
		if (!(slots >> s & 1))
			continue;
		const std::vector<uint32_t> &m = layout.masks[s];
		if (mask.size() < m.size())
			mask.resize(m.size());
		for (size_t w = 0; w < m.size(); w++)
			mask[w] |= m[w];
	}
	const std::vector<unsigned int> idx = mask_units(mask);
	if (idx.empty()) {
		*error = "the slots have no partition to unite";
		return -EINVAL;
	}
	void *stream = nullptr, *gctx = nullptr;
	unsigned int sms = 0, coscheduled = 0;
	if (int err = api_.green_stream(ordinal_, idx.data(), unsigned(idx.size()), 0, &stream,
					&gctx, &sms, &coscheduled)) {
		*error = std::string("a green context of the slots' partitions: ") +
			 api_.error_string(err);
		return -EIO;
	}
	if (!as_planned("the green context of the slots' partitions", sms, coscheduled,
			unsigned(idx.size()) * layout.unit_size, coscheduled_, error)) {
		api_.destroy(stream, gctx);
		return -EIO;
	}
	*out = {slots, stream, gctx};
	return 0;
}

void CudaBackend::destroy_union(const StreamSet::Union &u)
{
	api_.stream_synchronize(u.stream);
	api_.destroy(u.stream, u.context);
}

int CudaBackend::check_split(const SlotLayout &layout, const CudaSplit &split,
			     std::string *error) const
{
	const std::string asked = std::to_string(layout.unit_size) + " SMs";
	// The layout names groups of this split: both must agree.
	if (split.groups != layout.nr_units || split.group_sms != layout.unit_size) {
		*error = "the driver splits this GPU into " + std::to_string(split.groups) +
			 " groups of " +
			 (split.group_sms ? std::to_string(split.group_sms) : "unequal") +
			 " SMs when asked for " + asked + ", the layout into " +
			 std::to_string(layout.nr_units) + " of " + asked +
			 ": it was planned for another GPU or driver";
		return -EIO;
	}
	return 0;
}

int CudaBackend::synchronize(void *stream, std::string *error)
{
	if (int err = api_.stream_synchronize(stream)) {
		*error = std::string("cuStreamSynchronize: ") + api_.error_string(err);
		return -EIO;
	}
	return 0;
}

int CudaBackend::make_markers(void *stream, std::unique_ptr<Markers> *markers,
			      std::string *error)
{
	if (api_.events_ready && !api_.events_ready())
		markers->reset();
	else
		*markers = make_event_markers(api_.events, stream);
	if (!*markers) {
		*error = "the CUDA driver lacks an entry point of the launch markers (cuStreamGetCtx, "
			 "cuEventCreate, cuEventRecord, cuEventQuery, cuEventDestroy, "
			 "cuStreamIsCapturing, cuThreadExchangeStreamCaptureMode)";
		return -EOPNOTSUPP;
	}
	return 0;
}

void CudaBackend::destroy_slot(StreamSet *set, unsigned int slot)
{
	api_.stream_synchronize(set->streams[slot]);
	api_.destroy(set->streams[slot], set->contexts[slot]);
	set->streams[slot] = nullptr;
	set->contexts[slot] = nullptr;
	set->slots &= ~(1ULL << slot);
}

} // namespace gpuslot
