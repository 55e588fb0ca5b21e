// SPDX-License-Identifier: GPL-2.0
#include "cli/cdi.hpp"

#include <nlohmann/json.hpp>

namespace gpuslot {

std::string cdi_spec_json(const CdiOptions &o)
{
	using nlohmann::json;
	// What every device needs: the lock itself. On the device transport
	// the module's node (one for all domains: a holder is an open file
	// of it); on the socket transport each of its domains' sockets
	// (gpu<N>.sock), bound alone: never gpuslotd's directory, whose state
	// file (gpuslotd.state) a container could flock to keep gpuslotd
	// from starting, or write. Read-only: connect(2) needs no write access
	// to the mount, and nothing in the container may replace a socket.
	json common = json::object();
	auto socket_mounts = [&](const std::vector<unsigned int> &domains) {
		json mounts = json::array();
		for (unsigned int d : domains) {
			const std::string name = "gpu" + std::to_string(d) + ".sock";
			mounts.push_back({{"hostPath", (o.socket_dir / name).string()},
					  {"containerPath", "/run/gpuslot/" + name},
					  {"options", json::array({"bind", "ro", "nosuid", "nodev",
								  "noexec"})}});
		}
		return mounts;
	};
	if (o.socket) {
		// libgpuslot and gpuslotctl pick the socket even where an
		// image has a /dev/gpuslot of its own.
		common["env"] = json::array(
			{"GPUSLOT_TRANSPORT=socket", "GPUSLOT_SOCKET_DIR=/run/gpuslot"});
	} else {
		json node = {{"path", "/dev/gpuslot"}};
		if (o.device != "/dev/gpuslot") // hostPath is CDI 0.5.0's
			node["hostPath"] = o.device.string();
		common["deviceNodes"] = json::array({node});
		common["env"] = json::array({"GPUSLOT_TRANSPORT=device"});
	}

	json devices = json::array();
	auto device = [&](const std::string &name, const std::string &domains,
			  const std::vector<unsigned int> &which) {
		json edits = common;
		if (o.socket)
			edits["mounts"] = socket_mounts(which);
		// Which domain(s) the container was given, for the program to
		// pass as gpuslot_options.domain (libgpuslot does not read it:
		// the lock does not fence domains, see docs/containers.md).
		edits["env"].push_back("GPUSLOT_DOMAINS=" + domains);
		devices.push_back({{"name", name}, {"containerEdits", edits}});
	};
	std::string all;
	for (unsigned int d : o.domains) {
		device(std::to_string(d), std::to_string(d), {d});
		all += (all.empty() ? "" : ",") + std::to_string(d);
	}
	if (!o.domains.empty())
		device("all", all, o.domains);
	json spec = {{"cdiVersion", kCdiVersion}, {"kind", kCdiKind}, {"devices", devices}};
	return spec.dump(2) + "\n";
}

} // namespace gpuslot
