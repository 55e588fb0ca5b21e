// SPDX-License-Identifier: LGPL-2.1-or-later
#include "hip_backend.hpp"

#include <linux/gpuslot.h>

#include <cerrno>

namespace gpuslot {
namespace {

class HipBackend : public Backend {
public:
	HipBackend(const HipApi &api, int device) : api_(api), device_(device) {}

	const char *name() const override { return "hip"; }
	unsigned int reserved() const override { return reserved_; }

	int build(const SlotLayout &layout, QueueBudget &budget,
		  std::vector<void *> *streams, std::string *error) override
	{
		if (layout.unit_kind != GPUSLOT_UNIT_AMD_CU &&
		    layout.unit_kind != GPUSLOT_UNIT_NONE) {
			*error = "the layout's partitions are not AMD CUs (unit kind " +
				 std::to_string(layout.unit_kind) +
				 "): the hip backend cannot build streams for it";
			return -EOPNOTSUPP;
		}
		unsigned int masked = 0;
		for (const auto &m : layout.masks)
			masked += !m.empty();
		// Reserve before creating anything: past the budget the
		// firmware time-slices every queue on the GPU.
		const unsigned int need = masked + kHipDefaultPool + kHipRuntimeQueues;
		if (need > reserved_) {
			if (int err = budget.reserve(need - reserved_, error))
				return err;
			reserved_ = need;
		}
		if (int err = api_.set_device(device_)) {
			*error = "hipSetDevice(" + std::to_string(device_) +
				 "): " + api_.error_string(err);
			return -ENODEV;
		}
		streams->clear();
		for (unsigned int slot = 0; slot < layout.k; slot++) {
			const auto &mask = layout.masks[slot];
			void *s = nullptr;
			int err = mask.empty()
					  ? api_.stream_create(&s)
					  : api_.stream_create_with_cu_mask(
						    &s, uint32_t(mask.size()), mask.data());
			if (err) {
				*error = std::string(mask.empty() ? "hipStreamCreate"
								  : "hipExtStreamCreateWithCUMask") +
					 " for slot " + std::to_string(slot) + ": " +
					 api_.error_string(err);
				destroy(streams);
				return -EIO;
			}
			streams->push_back(s);
		}
		// A smaller layout than before needs fewer queues.
		if (reserved_ > need) {
			budget.unreserve(reserved_ - need);
			reserved_ = need;
		}
		return 0;
	}

	void destroy(std::vector<void *> *streams) override
	{
		// hipStreamDestroy waits for the stream's work anyway; syncing
		// first keeps that explicit.
		for (void *s : *streams) {
			api_.stream_synchronize(s);
			api_.stream_destroy(s);
		}
		streams->clear();
	}

private:
	HipApi api_;
	int device_;
	unsigned int reserved_ = 0;
};

} // namespace

std::unique_ptr<Backend> make_hip_backend(const HipApi &api, int device)
{
	return std::make_unique<HipBackend>(api, device);
}

} // namespace gpuslot
