// SPDX-License-Identifier: LGPL-2.1-or-later
#include "cuda_backend.hpp"

#include <linux/gpuslot.h>

#include <cerrno>

namespace gpuslot {

int CudaBackend::build(const SlotLayout &layout, QueueBudget &, std::vector<void *> *streams,
		       std::string *error)
{
	if (layout.unit_kind != GPUSLOT_UNIT_NV_SM_GROUP &&
	    layout.unit_kind != GPUSLOT_UNIT_NONE) {
		*error = "the layout's partitions are not NVIDIA SM groups (unit kind " +
			 std::to_string(layout.unit_kind) +
			 "): the cuda backend cannot build streams for it";
		return -EOPNOTSUPP;
	}
	if (int err = api_.open_device(ordinal_)) {
		*error = "CUDA device " + std::to_string(ordinal_) + ": " + api_.error_string(err);
		return -ENODEV;
	}
	bool partitioned = false;
	for (const auto &m : layout.masks)
		partitioned |= !m.empty();
	if (partitioned) {
		unsigned int groups = 0;
		if (int err = api_.split(ordinal_, layout.unit_size, &groups)) {
			*error = "cuDevSmResourceSplitByCount(" + std::to_string(layout.unit_size) +
				 " SMs): " + api_.error_string(err);
			return -EIO;
		}
		// The layout names groups of this split: both must agree.
		if (groups != layout.nr_units) {
			*error = "the driver splits this GPU into " + std::to_string(groups) +
				 " groups of " + std::to_string(layout.unit_size) +
				 " SMs, the layout into " + std::to_string(layout.nr_units) +
				 ": it was planned for another GPU";
			return -EIO;
		}
	}
	streams->clear();
	green_.clear();
	sms_.clear();
	for (unsigned int slot = 0; slot < layout.k; slot++) {
		const auto &mask = layout.masks[slot];
		std::vector<unsigned int> idx;
		for (unsigned int i = 0; i < mask.size() * 32; i++)
			if (mask[i / 32] >> (i % 32) & 1)
				idx.push_back(i);
		void *stream = nullptr, *gctx = nullptr;
		unsigned int sms = 0;
		int err = idx.empty() ? api_.plain_stream(ordinal_, &stream)
				      : api_.green_stream(ordinal_, idx.data(), unsigned(idx.size()),
							  &stream, &gctx, &sms);
		if (err) {
			*error = std::string(idx.empty() ? "a stream" : "a green context") +
				 " for slot " + std::to_string(slot) + ": " + api_.error_string(err);
			destroy(streams);
			return -EIO;
		}
		streams->push_back(stream);
		green_.push_back(gctx);
		sms_.push_back(sms);
	}
	notice_ = partitioned && !api_.mps_running()
			  ? "no MPS control daemon runs: green-context partitions of different "
			    "processes time-slice instead of running side by side "
			    "(start nvidia-cuda-mps-control -d)"
			  : "";
	return 0;
}

void CudaBackend::destroy(std::vector<void *> *streams)
{
	for (size_t i = 0; i < streams->size(); i++) {
		api_.stream_synchronize((*streams)[i]);
		api_.destroy((*streams)[i], i < green_.size() ? green_[i] : nullptr);
	}
	streams->clear();
	green_.clear();
	sms_.clear();
}

} // namespace gpuslot
