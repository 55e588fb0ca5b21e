// SPDX-License-Identifier: LGPL-2.1-or-later
#include "amd_cu_mask.hpp"

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "amd/topology.hpp"

namespace gpuslot::run {

bool parse_units_bitmap(const std::string &text, std::vector<uint32_t> *bits, bool *whole)
{
	std::string t = text;
	while (!t.empty() && (t.back() == '\n' || t.back() == ' '))
		t.pop_back();
	bits->clear();
	*whole = t == "all";
	if (*whole)
		return true;
	std::vector<uint32_t> chunks; // most significant first
	size_t at = 0;
	for (;;) {
		const size_t comma = t.find(',', at);
		const std::string c = t.substr(at, comma == std::string::npos ? t.npos : comma - at);
		uint32_t v = 0;
		auto [end, err] = std::from_chars(c.data(), c.data() + c.size(), v, 16);
		if (c.empty() || c.size() > 8 || err != std::errc() || end != c.data() + c.size())
			return false;
		chunks.push_back(v);
		if (comma == std::string::npos)
			break;
		at = comma + 1;
	}
	bits->assign(chunks.rbegin(), chunks.rend());
	return true;
}

std::string cu_list(const std::vector<uint32_t> &bits)
{
	std::string out;
	const unsigned int n = unsigned(bits.size()) * 32;
	for (unsigned int i = 0; i < n;) {
		if (!(bits[i / 32] >> (i % 32) & 1)) {
			i++;
			continue;
		}
		unsigned int j = i;
		while (j + 1 < n && (bits[(j + 1) / 32] >> ((j + 1) % 32) & 1))
			j++;
		out += (out.empty() ? "" : ",") + std::to_string(i) +
		       (j > i ? "-" + std::to_string(j) : "");
		i = j + 1;
	}
	return out;
}

int rocr_gpu_index(const std::filesystem::path &topology, const std::string &pci_bus_id,
		   const char *rocr_visible, unsigned int *index, std::string *error)
{
	const TopologyResult topo = read_topology(topology);
	// Every GPU node ROCr would see, readable here or not, by node id.
	std::vector<std::pair<unsigned int, std::string>> gpus;
	for (const GpuNode &g : topo.gpus)
		gpus.push_back({g.node_id, g.pci_bus_id});
	for (const UnreadableNode &u : topo.unreadable)
		gpus.push_back({u.node_id, u.pci_bus_id});
	std::sort(gpus.begin(), gpus.end());
	auto mine = std::find_if(gpus.begin(), gpus.end(), [&](const auto &g) {
		return !strcasecmp(g.second.c_str(), pci_bus_id.c_str());
	});
	if (pci_bus_id.empty() || mine == gpus.end()) {
		*error = "the domain's GPU (" + (pci_bus_id.empty() ? "no pci_bus_id" : pci_bus_id) +
			 ") is not among the KFD topology's GPUs at " + topology.string() +
			 (topo.error.empty() ? "" : " (" + topo.error + ")");
		return -ENODEV;
	}
	const unsigned int enumerated = unsigned(mine - gpus.begin());
	if (!rocr_visible || !*rocr_visible) {
		*index = enumerated;
		return 0;
	}
	// ROCR_VISIBLE_DEVICES: the GPUs ROCr shows, in this order.
	const std::string list = rocr_visible;
	unsigned int position = 0;
	for (size_t at = 0; at <= list.size(); position++) {
		size_t comma = list.find(',', at);
		if (comma == std::string::npos)
			comma = list.size();
		const std::string item = list.substr(at, comma - at);
		unsigned int v = 0;
		auto [end, err] = std::from_chars(item.data(), item.data() + item.size(), v);
		if (item.empty() || err != std::errc() || end != item.data() + item.size()) {
			*error = "ROCR_VISIBLE_DEVICES entry \"" + item +
				 "\" is not a device index (gpuslot-run places HSA_CU_MASK by index "
				 "only)";
			return -EINVAL;
		}
		if (v == enumerated) {
			*index = position;
			return 0;
		}
		at = comma + 1;
	}
	*error = "ROCR_VISIBLE_DEVICES=" + list + " hides the domain's GPU (ROCr's device " +
		 std::to_string(enumerated) + ", " + pci_bus_id + ")";
	return -ENODEV;
}

} // namespace gpuslot::run
