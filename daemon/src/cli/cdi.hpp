// SPDX-License-Identifier: GPL-2.0
// `gpuslotctl cdi generate`: a Container Device Interface spec
// (https://github.com/cncf-tags/container-device-interface) of kind
// gpuslot.dev/gpu, one device per GPU domain and "all", giving a container
// what a libgpuslot client needs on this host: the module's /dev/gpuslot,
// or gpuslotd's socket directory, and the environment libgpuslot reads.
// docs/containers.md says how engines use it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace gpuslot {

// The CDI version of the spec: the oldest that has every field it uses,
// so that Debian 12's podman 4.3.1 (which knows 0.3.0 to 0.5.0) reads it.
inline constexpr const char kCdiVersion[] = "0.5.0";
inline constexpr const char kCdiKind[] = "gpuslot.dev/gpu";

struct CdiOptions {
	bool socket = false;			   // the transport on this host
	std::filesystem::path device = "/dev/gpuslot"; // the module's device
	std::filesystem::path socket_dir = "/run/gpuslot";
	std::vector<unsigned int> domains; // those this host has, in order
};

// The spec as JSON (which is YAML too: CDI reads .json and .yaml files).
std::string cdi_spec_json(const CdiOptions &o);

} // namespace gpuslot
