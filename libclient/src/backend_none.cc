// SPDX-License-Identifier: LGPL-2.1-or-later
// The "none" backend: slots without GPU streams, for CPU-side gating,
// gpuslot-run's interposers and tests. It creates no queue, so it reserves
// only what the caller says the process's own runtime makes
// (gpuslot_options.runtime_queues), and has nothing to wait for at release.
#include "backend.hpp"

namespace gpuslot {

uint64_t layout_slots(const SlotLayout &layout, uint64_t wanted)
{
	const uint64_t all = layout.k >= 64 ? ~0ULL : (1ULL << layout.k) - 1;
	return wanted ? all & wanted : all;
}

namespace {

class NoneBackend : public Backend {
public:
	explicit NoneBackend(unsigned int runtime_queues) : runtime_queues_(runtime_queues) {}

	const char *name() const override { return "none"; }
	unsigned int runtime_queues() const override { return runtime_queues_; }
	unsigned int set_queues(const SlotLayout &, uint64_t) const override { return 0; }

	int build(const SlotLayout &layout, uint64_t slots, StreamSet *set,
		  std::string *) override
	{
		set->start(layout);
		set->slots = slots;
		// No stream, but the priority the slot's work would run at.
		for (unsigned int s = 0; s < layout.k; s++)
			set->priorities[s] = layout.priority(s);
		return 0;
	}

	int synchronize(void *, std::string *) override { return 0; }
	void destroy_slot(StreamSet *set, unsigned int slot) override
	{
		set->slots &= ~(1ULL << slot);
	}

private:
	unsigned int runtime_queues_;
};

} // namespace

std::unique_ptr<Backend> make_none_backend(unsigned int runtime_queues)
{
	return std::make_unique<NoneBackend>(runtime_queues);
}

} // namespace gpuslot
