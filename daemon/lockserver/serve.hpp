// SPDX-License-Identifier: GPL-2.0
// gpuslotd on the socket transport: where the module cannot load, it plans
// each GPU's layout as on the device and serves the lock itself
// (LockServer), one socket per GPU domain.
//
// An admin's k over the socket is re-planned as on the device; an admin's
// partitions are kept. Not yet on this transport: reload, and the queue
// audit.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "gpuslotd/daemon.hpp"

namespace gpuslot {

struct SocketServeOptions {
	std::filesystem::path socket_dir = "/run/gpuslot";
	std::string group = "gpuslot"; // the sockets' group; "" keeps ours
};

// What a dead socket-mode gpuslotd left in @options.socket_dir: its boosts
// given back (ExecStopPost). gpuslotd's exit status.
int restore_socket_boosts(const SocketServeOptions &options, const Daemon::Log &log);

// Plan, serve until SIGTERM/SIGINT, and return gpuslotd's exit status.
int serve_socket_transport(const DaemonOptions &daemon, const SocketServeOptions &options,
			   const Daemon::Log &log);

} // namespace gpuslot
