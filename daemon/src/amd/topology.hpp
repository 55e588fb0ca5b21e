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

// A KFD node that is not a readable CPU node and could not be read.
struct UnreadableNode {
	unsigned int node_id = 0;
	std::string error;	// names the file, the key and what was expected
	std::string pci_bus_id; // where location_id could still be read, else ""
};

struct TopologyResult {
	std::vector<GpuNode> gpus;		 // CPU nodes are skipped
	std::vector<UnreadableNode> unreadable; // skipped, each with its reason
	std::string error; // empty when some GPU could be read
};

// @path: a topology root holding nodes/<N>/properties, or one node
// directory holding properties. A malformed node names the file, the key
// and what was expected: in a root it is skipped into @unreadable and the
// other GPUs are still read; it is the error when no GPU is left (or
// @path is that one node).
TopologyResult read_topology(const std::filesystem::path &path);

// The gpuslot domain of each GPU in @topo.gpus (-1: none left), out of
// @recorded.size() domains, where @recorded holds each domain's
// pci_bus_id ("" where none). In order: the domain that already names
// the GPU's PCI address (the module keeps it while gpuslotd restarts);
// else the GPU's place among the KFD GPU nodes, unreadable ones counted,
// so that a GPU that cannot be read moves no other GPU; else the first
// domain left.
std::vector<int> gpu_domains(const TopologyResult &topo,
			     const std::vector<std::string> &recorded);

} // namespace gpuslot
