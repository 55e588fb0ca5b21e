// SPDX-License-Identifier: LGPL-2.1-or-later
// The "none" backend: slots without GPU streams, for CPU-side gating and
// tests. It creates no queue, so it reserves none.
#include "backend.hpp"

namespace gpuslot {
namespace {

class NoneBackend : public Backend {
public:
	const char *name() const override { return "none"; }

	int build(const SlotLayout &layout, QueueBudget &, std::vector<void *> *streams,
		  std::string *) override
	{
		streams->assign(layout.k, nullptr);
		return 0;
	}

	void destroy(std::vector<void *> *streams) override { streams->clear(); }
	unsigned int reserved() const override { return 0; }
};

} // namespace

std::unique_ptr<Backend> make_none_backend()
{
	return std::make_unique<NoneBackend>();
}

} // namespace gpuslot
