// SPDX-License-Identifier: LGPL-2.1-or-later
#include "cuda_backend.hpp"

#include <linux/gpuslot.h>

#include <cerrno>

#include "device_choice.hpp"

namespace gpuslot {

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
	for (unsigned int s = 0; s < layout.k; s++)
		partitioned |= (slots >> s & 1) && !layout.masks[s].empty();
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
	set->start(layout);
	for (unsigned int slot = 0; slot < layout.k; slot++) {
		if (!(slots >> slot & 1))
			continue;
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
			destroy(set);
			return -EIO;
		}
		set->streams[slot] = stream;
		set->contexts[slot] = gctx;
		set->units[slot] = sms;
		set->slots |= 1ULL << slot;
	}
	notice_ = partitioned && !api_.mps_running()
			  ? "no MPS control daemon runs: green-context partitions of different "
			    "processes time-slice instead of running side by side "
			    "(start nvidia-cuda-mps-control -d)"
			  : "";
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

void CudaBackend::destroy_slot(StreamSet *set, unsigned int slot)
{
	api_.stream_synchronize(set->streams[slot]);
	api_.destroy(set->streams[slot], set->contexts[slot]);
	set->streams[slot] = nullptr;
	set->contexts[slot] = nullptr;
	set->slots &= ~(1ULL << slot);
}

} // namespace gpuslot
