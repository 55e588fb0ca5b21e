// SPDX-License-Identifier: LGPL-2.1-or-later
// Which of a runtime's devices is a domain's GPU: the one at the PCI
// address gpuslotd recorded for the domain, looked up through the runtime,
// so that its device numbering (and *_VISIBLE_DEVICES, which renumbers) can
// never point a domain's slots at another GPU.
#pragma once

#include <functional>
#include <string>

#include "backend.hpp"

namespace gpuslot {

struct RuntimeDevices {
	const char *runtime;	 // "HIP", "CUDA": for messages
	const char *visible_env; // the variable that hides devices
	int count;		 // devices the runtime sees
	// The runtime's device at @pci_bus_id into *ordinal: true, or false
	// when the runtime does not see that GPU.
	std::function<bool(const std::string &pci_bus_id, int *ordinal)> by_pci_bus_id;
};

// The ordinal of @choice's GPU among @rt's devices, or -ENODEV with *error.
int resolve_device(const DeviceChoice &choice, const RuntimeDevices &rt, int *ordinal,
		   std::string *error);

} // namespace gpuslot
