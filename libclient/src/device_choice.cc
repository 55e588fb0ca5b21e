// SPDX-License-Identifier: LGPL-2.1-or-later
#include "device_choice.hpp"

#include <cerrno>
#include <cstdlib>

namespace gpuslot {

int resolve_device(const DeviceChoice &choice, const RuntimeDevices &rt, int *ordinal,
		   std::string *error)
{
	const std::string gpu = "domain " + std::to_string(choice.domain) + "'s GPU";
	const char *visible = getenv(rt.visible_env);
	const std::string hidden =
		visible ? std::string(" (") + rt.visible_env + "=" + visible + " hides it?)" : "";
	if (rt.count <= 0) {
		*error = std::string(rt.runtime) + " sees no GPU" + hidden;
		return -ENODEV;
	}
	if (choice.ordinal >= 0) {
		if (choice.ordinal >= rt.count) {
			*error = std::string(rt.runtime) + " device " + std::to_string(choice.ordinal) +
				 " does not exist: " + rt.runtime + " sees " +
				 std::to_string(rt.count) + hidden;
			return -ENODEV;
		}
		*ordinal = choice.ordinal;
		return 0;
	}
	if (!choice.pci_bus_id.empty()) {
		if (!rt.by_pci_bus_id(choice.pci_bus_id, ordinal)) {
			*error = gpu + " " + choice.pci_bus_id + " is not visible to " + rt.runtime +
				 " in this process" + hidden;
			return -ENODEV;
		}
		return 0;
	}
	// Nobody recorded which GPU it is: only one answer is safe.
	if (rt.count == 1) {
		*ordinal = 0;
		return 0;
	}
	*error = gpu + " is unknown (gpuslotd records it in pci_bus_id) and " + rt.runtime +
		 " sees " + std::to_string(rt.count) +
		 " GPUs: start gpuslotd, or name the device with GPUSLOT_OPEN_GPU_INDEX";
	return -ENODEV;
}

} // namespace gpuslot
