// SPDX-License-Identifier: LGPL-2.1-or-later
#include "hip_backend.hpp"

#include <linux/gpuslot.h>

#include <cerrno>

#include "device_choice.hpp"

namespace gpuslot {
namespace {

class HipBackend : public Backend {
public:
	HipBackend(const HipRuntime &rt, const DeviceChoice &device)
		: rt_(rt), api_(rt.api), choice_(device)
	{
	}

	const char *name() const override { return "hip"; }
	unsigned int runtime_queues() const override
	{
		return rt_.pool_queues + kHipRuntimeQueues;
	}

	// A masked stream is a hardware queue of its own. A plain stream at
	// the default priority shares HIP's default pool, counted in
	// runtime_queues(); one above the default takes a queue of HIP's
	// high-priority pool (ROCclr's queuePool_[High]), which such streams
	// share once it holds pool_queues queues. Each is counted as a queue
	// of its own all the same: StreamSets gives queues back slot by slot,
	// so the count must add up per slot, and over-reserving is the safe
	// side of a budget.
	unsigned int set_queues(const SlotLayout &layout, uint64_t slots) const override
	{
		unsigned int n = 0;
		for (unsigned int s = 0; s < layout.k; s++)
			n += (slots >> s & 1) && (!layout.masks[s].empty() || layout.priority(s));
		return n;
	}

	std::string notice() const override
	{
		if (!rt_.preloaded || rt_.pool_queues <= 1)
			return "";
		return "HIP was loaded before gpuslot_open: its default queue pool takes " +
		       std::to_string(rt_.pool_queues) +
		       " hardware queues (reserved); set GPU_MAX_HW_QUEUES=1 in the "
		       "environment before the program starts";
	}

	int build(const SlotLayout &layout, uint64_t slots, StreamSet *set,
		  std::string *error) override
	{
		if (layout.unit_kind != GPUSLOT_UNIT_AMD_CU &&
		    layout.unit_kind != GPUSLOT_UNIT_NONE) {
			*error = "the layout's partitions are not AMD CUs (unit kind " +
				 std::to_string(layout.unit_kind) +
				 "): the hip backend cannot build streams for it";
			return -EOPNOTSUPP;
		}
		// HIP offers no priority for a CU-masked stream:
		// hipExtStreamCreateWithCUMask takes none, and
		// hipStreamCreateWithPriority takes no CU mask (ROCm 5.2 to 7);
		// the HSA queue's priority behind a stream is not reachable
		// through HIP. A slot on the whole GPU has no mask and gets a
		// plain stream at its priority. A slot whose priority the stream
		// cannot have is refused, not served at the default.
		bool raised = false;
		for (unsigned int slot = 0; slot < layout.k; slot++) {
			if (!(slots >> slot & 1) || !layout.priority(slot))
				continue;
			if (!layout.masks[slot].empty()) {
				*error = "slot " + std::to_string(slot) + " has priority " +
					 std::to_string(layout.priority(slot)) +
					 ": HIP offers no stream priority for a CU-masked stream "
					 "(hipExtStreamCreateWithCUMask has no priority argument), so "
					 "the hip backend serves a priority other than 0 only on a slot "
					 "on the whole GPU";
				return -EOPNOTSUPP;
			}
			raised = true;
		}
		if (int err = resolve(error))
			return err;
		// HIP's levels: hipStreamCreate's stream has priority 0 (ROCclr's
		// Normal), lower numbers are more urgent, down to @greatest; p
		// levels above the default is 0 - p.
		int least = 0, greatest = 0;
		if (raised) {
			if (int err = api_.priority_range(&least, &greatest)) {
				*error = std::string("hipDeviceGetStreamPriorityRange: ") +
					 api_.error_string(err);
				return -EIO;
			}
			for (unsigned int slot = 0; slot < layout.k; slot++)
				if ((slots >> slot & 1) && -int(layout.priority(slot)) < greatest) {
					*error = "slot " + std::to_string(slot) + " has priority " +
						 std::to_string(layout.priority(slot)) + ": HIP offers " +
						 std::to_string(-greatest) +
						 " level(s) above the default (priorities " +
						 std::to_string(least) + " to " + std::to_string(greatest) +
						 ", the default 0), so the hip backend serves priorities 0 to " +
						 std::to_string(-greatest);
					return -EOPNOTSUPP;
				}
		}
		// hipSetDevice is per thread: the caller's device comes back.
		int before = -1;
		const bool had_device = api_.get_device(&before) == 0;
		if (int err = api_.set_device(device_)) {
			*error = "hipSetDevice(" + std::to_string(device_) +
				 "): " + api_.error_string(err);
			return -ENODEV;
		}
		set->start(layout);
		int ret = 0;
		for (unsigned int slot = 0; slot < layout.k && !ret; slot++) {
			if (!(slots >> slot & 1))
				continue;
			const auto &mask = layout.masks[slot];
			const unsigned int p = layout.priority(slot);
			void *s = nullptr;
			int err = !mask.empty() ? api_.stream_create_with_cu_mask(
							  &s, uint32_t(mask.size()), mask.data())
				  : p	      ? api_.stream_create_with_priority(&s, -int(p))
					      : api_.stream_create(&s);
			if (err) {
				*error = std::string(!mask.empty() ? "hipExtStreamCreateWithCUMask"
						     : p	   ? "hipStreamCreateWithPriority"
								   : "hipStreamCreate") +
					 " for slot " + std::to_string(slot) + ": " +
					 api_.error_string(err);
				ret = -EIO;
				break;
			}
			set->streams[slot] = s;
			set->slots |= 1ULL << slot;
			// The priority is what the layout says, read back from the
			// stream (HIP clamps one out of range silently).
			if (p) {
				int got = 0;
				if (int e = api_.stream_priority(s, &got); e || got != -int(p)) {
					*error = "slot " + std::to_string(slot) + "'s stream " +
						 (e ? std::string("has no priority to read back: ") +
							      api_.error_string(e)
						    : "has HIP priority " + std::to_string(got) +
							      ", not " + std::to_string(-int(p)) +
							      " (" + std::to_string(p) + " level" +
							      (p == 1 ? "" : "s") + " above the default)");
					ret = -EIO;
					break;
				}
			}
			set->priorities[slot] = p;
		}
		if (ret)
			destroy(set);
		if (had_device && before != device_)
			api_.set_device(before);
		return ret;
	}

	int synchronize(void *stream, std::string *error) override
	{
		if (int err = api_.stream_synchronize(stream)) {
			*error = std::string("hipStreamSynchronize: ") + api_.error_string(err);
			return -EIO;
		}
		return 0;
	}

	void destroy_slot(StreamSet *set, unsigned int slot) override
	{
		// hipStreamDestroy waits for the stream's work anyway; syncing
		// first keeps that explicit.
		api_.stream_synchronize(set->streams[slot]);
		api_.stream_destroy(set->streams[slot]);
		set->streams[slot] = nullptr;
		set->slots &= ~(1ULL << slot);
	}

	int device_ordinal() const override { return device_; }

	// Events made with the streams' device current (HIP makes an event
	// on the current device), the caller's device back after.
	int make_markers(void *stream, std::unique_ptr<Markers> *markers,
			 std::string *error) override
	{
		EventOps ops = api_.events;
		if (ops.create) {
			ops.create = [create = ops.create, api = api_, device = device_](void *s,
											 void **e) {
				int before = -1;
				const bool had = api.get_device(&before) == 0;
				if (int err = api.set_device(device))
					return err;
				const int ret = create(s, e);
				if (had && before != device)
					api.set_device(before);
				return ret;
			};
		}
		*markers = make_event_markers(ops, stream);
		if (!*markers) {
			*error = rt_.soname + " lacks an entry point of the launch markers "
					      "(hipEventCreateWithFlags, hipEventRecord, "
					      "hipEventQuery, hipEventDestroy, hipStreamIsCapturing)";
			return -EOPNOTSUPP;
		}
		return 0;
	}

private:
	int resolve(std::string *error)
	{
		if (device_ >= 0)
			return 0;
		int count = 0;
		if (api_.device_count(&count))
			count = 0;
		RuntimeDevices rt{"HIP", "HIP_VISIBLE_DEVICES", count,
				  [this](const std::string &id, int *ordinal) {
					  return api_.device_by_pci_bus_id(ordinal, id.c_str()) == 0;
				  }};
		return resolve_device(choice_, rt, &device_, error);
	}

	HipRuntime rt_;
	HipApi api_;
	DeviceChoice choice_;
	int device_ = -1;
};

} // namespace

std::unique_ptr<Backend> make_hip_backend(const HipRuntime &rt, const DeviceChoice &device)
{
	return std::make_unique<HipBackend>(rt, device);
}

} // namespace gpuslot
