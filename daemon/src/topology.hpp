// SPDX-License-Identifier: GPL-2.0
// GPUs as KFD topology describes them (/sys/class/kfd/kfd/topology).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gpuslot {

// Graphics core version, from KFD's gfx_target_version (major*10000 +
// minor*100 + step: 90006 is 9.0.6, gfx906).
struct GfxVersion {
	unsigned int major = 0, minor = 0, step = 0;

	static GfxVersion from_target(uint32_t target);
	uint32_t target() const { return major * 10000 + minor * 100 + step; }
	auto operator<=>(const GfxVersion &) const = default;
	std::string name() const; // "gfx906", "gfx90a", "gfx1100"
};

// One GPU node of KFD topology, with the shape gpuslot plans on.
struct GpuNode {
	std::filesystem::path dir; // the node directory
	unsigned int node_id = 0;
	GfxVersion gfx;
	bool gfx_from_device_id = false; // no gfx_target_version (5.14)
	uint32_t device_id = 0;
	unsigned int simd_count = 0;
	unsigned int simd_per_cu = 0;
	unsigned int array_count = 0;		  // shader arrays, all XCCs
	unsigned int simd_arrays_per_engine = 0; // SH per SE
	unsigned int cu_per_simd_array = 0;	  // design maximum per SH
	unsigned int num_cp_queues = 0;		  // the HQD budget
	unsigned int num_xcc = 1;
	unsigned int drm_render_minor = 0;
	uint32_t gpu_id = 0; // the node's gpu_id file: KFD's name in proc/<pid>/queues
	// The PCI address, DDDD:BB:DD.F, from "domain" and "location_id"
	// (bus << 8 | devfn); "" when the node has no location_id.
	std::string pci_bus_id;

	unsigned int active_cus() const { return simd_count / simd_per_cu; }
	unsigned int shader_engines() const
	{
		return array_count / simd_arrays_per_engine;
	}
	unsigned int se_per_xcc() const { return shader_engines() / num_xcc; }
	unsigned int sh_per_se() const { return simd_arrays_per_engine; }
	// RDNA (gfx10+) dispatches to WGPs: CUs are allocated in pairs.
	bool wgp_mode() const { return gfx.major >= 10; }
};

struct TopologyResult {
	std::vector<GpuNode> gpus; // CPU nodes are skipped
	std::string error;	   // empty on success
};

// @path: a topology root holding nodes/<N>/properties, or one node
// directory holding properties. A malformed node is an error naming the
// file, the key and what was expected.
TopologyResult read_topology(const std::filesystem::path &path);

} // namespace gpuslot
