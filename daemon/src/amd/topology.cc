// SPDX-License-Identifier: GPL-2.0
#include "amd/topology.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "config/small_file.hpp"

namespace gpuslot {

GfxVersion GfxVersion::from_target(uint32_t target)
{
	return {target / 10000, (target / 100) % 100, target % 100};
}

std::string GfxVersion::name() const
{
	static const char hex[] = "0123456789abcdef";
	std::string s = "gfx" + std::to_string(major);
	s += hex[minor % 16];
	s += hex[step % 16];
	return s;
}

namespace {

namespace fs = std::filesystem;

// Kernels before 5.15 have no gfx_target_version; these device IDs are the
// ones gpuslot's fixtures and documentation name. Others need a newer
// kernel, or an entry here.
const std::map<uint32_t, uint32_t> kGfxByDeviceId = {
	{0x66a0, 90006}, {0x66a1, 90006}, {0x66a2, 90006}, {0x66a3, 90006},
	{0x66a7, 90006}, {0x66af, 90006}, // Vega 20: Radeon VII, MI50/60
	{0x738c, 90008}, {0x738e, 90008}, // Arcturus: MI100
	{0x73bf, 100300}, // Navi 21: RX 6900 XT
};

class PropertiesFile {
public:
	explicit PropertiesFile(fs::path path) : path_(std::move(path)) {}

	// Reads the file; returns an error message or "".
	std::string load()
	{
		std::string text, error;
		if (!read_small_file(path_, &text, &error))
			return error;
		std::istringstream in(text);
		std::string line;
		for (unsigned int no = 1; std::getline(in, line); no++) {
			std::istringstream words(line);
			std::string key, value;
			if (!(words >> key >> value))
				continue;
			values_[key] = {value, no};
		}
		return {};
	}

	bool has(const std::string &key) const { return values_.count(key); }

	// The value of @key as a whole number in [lo, hi], or an error.
	std::optional<uint64_t> number(const std::string &key, uint64_t lo,
				       uint64_t hi, std::string *error) const
	{
		auto it = values_.find(key);
		if (it == values_.end()) {
			*error = path_.string() + ": key '" + key +
				 "' is missing; expected a whole number from " +
				 std::to_string(lo) + " to " + std::to_string(hi);
			return std::nullopt;
		}
		const std::string &text = it->second.first;
		uint64_t v = 0;
		auto [end, ec] = std::from_chars(text.data(),
						 text.data() + text.size(), v);
		if (ec != std::errc() || end != text.data() + text.size() ||
		    v < lo || v > hi) {
			*error = path_.string() + ":" +
				 std::to_string(it->second.second) + ": key '" +
				 key + "' is '" + text +
				 "'; expected a whole number from " +
				 std::to_string(lo) + " to " + std::to_string(hi);
			return std::nullopt;
		}
		return v;
	}

	const fs::path &path() const { return path_; }

private:
	fs::path path_;
	std::map<std::string, std::pair<std::string, unsigned int>> values_;
};

// "DDDD:BB:DD.F" from a node's location_id (bus << 8 | devfn) and domain.
std::string pci_text(uint64_t pci_domain, uint64_t loc)
{
	char buf[16];
	snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", unsigned(pci_domain),
		 unsigned(loc >> 8), unsigned(loc >> 3 & 0x1f), unsigned(loc & 7));
	return buf;
}

// The PCI address of a node that could not be read otherwise, or "".
std::string pci_of(const fs::path &dir)
{
	PropertiesFile props(dir / "properties");
	std::string error;
	if (!props.load().empty() || !props.has("location_id"))
		return "";
	auto loc = props.number("location_id", 0, 0xffff, &error);
	auto dom = props.has("domain") ? props.number("domain", 0, 0xffff, &error) :
					 std::optional<uint64_t>(0);
	return loc && dom ? pci_text(*dom, *loc) : "";
}

// Parses a node; returns false for a CPU node, sets *error for a bad one.
bool parse_node(const fs::path &dir, unsigned int node_id, GpuNode *out,
		std::string *error)
{
	PropertiesFile props(dir / "properties");
	if (std::string e = props.load(); !e.empty()) {
		*error = e;
		return false;
	}
	auto simd = props.number("simd_count", 0, 1 << 20, error);
	if (!simd)
		return false;
	if (*simd == 0)
		return false; // a CPU node

	GpuNode n;
	n.dir = dir;
	n.node_id = node_id;
	n.simd_count = unsigned(*simd);
	struct Field {
		const char *key;
		unsigned int *dst;
		uint64_t lo, hi;
	} fields[] = {
		{"simd_per_cu", &n.simd_per_cu, 1, 16},
		{"array_count", &n.array_count, 1, 1024},
		{"simd_arrays_per_engine", &n.simd_arrays_per_engine, 1, 16},
		{"cu_per_simd_array", &n.cu_per_simd_array, 1, 64},
		{"num_cp_queues", &n.num_cp_queues, 1, 1024},
		{"drm_render_minor", &n.drm_render_minor, 0, 1u << 20},
	};
	for (auto &f : fields) {
		auto v = props.number(f.key, f.lo, f.hi, error);
		if (!v)
			return false;
		*f.dst = unsigned(*v);
	}
	// num_xcc appeared with multi-XCC GPUs; older kernels have one XCC.
	if (props.has("num_xcc")) {
		auto v = props.number("num_xcc", 1, 64, error);
		if (!v)
			return false;
		n.num_xcc = unsigned(*v);
	}
	auto dev = props.number("device_id", 1, 0xffff, error);
	if (!dev)
		return false;
	n.device_id = uint32_t(*dev);
	if (props.has("gfx_target_version")) {
		auto v = props.number("gfx_target_version", 80000, 999999, error);
		if (!v)
			return false;
		n.gfx = GfxVersion::from_target(uint32_t(*v));
	} else {
		auto it = kGfxByDeviceId.find(n.device_id);
		if (it == kGfxByDeviceId.end()) {
			*error = props.path().string() +
				 ": key 'gfx_target_version' is missing (a kernel "
				 "before 5.15) and device_id " +
				 std::to_string(n.device_id) +
				 " is not one gpuslot knows; expected "
				 "gfx_target_version";
			return false;
		}
		n.gfx = GfxVersion::from_target(it->second);
		n.gfx_from_device_id = true;
	}

	// Clients find their runtime's device by this address.
	if (props.has("location_id")) {
		auto loc = props.number("location_id", 0, 0xffff, error);
		if (!loc)
			return false;
		uint64_t pci_domain = 0;
		if (props.has("domain")) {
			auto d = props.number("domain", 0, 0xffff, error);
			if (!d)
				return false;
			pci_domain = *d;
		}
		n.pci_bus_id = pci_text(pci_domain, *loc);
	}

	auto bad = [&](const std::string &what) {
		*error = props.path().string() + ": " + what;
		return false;
	};
	// gpu_id sits beside properties; recorded fixtures may lack it.
	if (std::ifstream in(dir / "gpu_id"); in) {
		std::string text;
		in >> text;
		auto [end, err] = std::from_chars(text.data(),
						  text.data() + text.size(), n.gpu_id);
		if (err != std::errc() || end != text.data() + text.size()) {
			*error = (dir / "gpu_id").string() + ": expected a number, got '" +
				 text + "'";
			return false;
		}
	}
	if (n.simd_count % n.simd_per_cu)
		return bad("simd_count " + std::to_string(n.simd_count) +
			   " is not a multiple of simd_per_cu " +
			   std::to_string(n.simd_per_cu));
	if (n.array_count % n.simd_arrays_per_engine)
		return bad("array_count " + std::to_string(n.array_count) +
			   " is not a multiple of simd_arrays_per_engine " +
			   std::to_string(n.simd_arrays_per_engine));
	if (n.shader_engines() % n.num_xcc)
		return bad(std::to_string(n.shader_engines()) +
			   " shader engines do not divide among num_xcc " +
			   std::to_string(n.num_xcc) + " XCCs");
	if (n.active_cus() > n.array_count * n.cu_per_simd_array)
		return bad(std::to_string(n.active_cus()) +
			   " active CUs do not fit in " +
			   std::to_string(n.array_count) + " arrays of at most " +
			   std::to_string(n.cu_per_simd_array) + " CUs");
	if (n.active_cus() < n.array_count)
		return bad(std::to_string(n.active_cus()) +
			   " active CUs leave a shader array empty");
	*out = n;
	return true;
}

} // namespace

TopologyResult read_topology(const fs::path &path)
{
	TopologyResult r;
	std::error_code ec;
	if (fs::exists(path / "properties", ec)) {
		GpuNode n;
		if (parse_node(path, 0, &n, &r.error))
			r.gpus.push_back(n);
		else if (r.error.empty())
			r.error = (path / "properties").string() +
				  ": a CPU node (simd_count 0); expected a GPU node";
		return r;
	}
	fs::path nodes = path / "nodes";
	if (!fs::is_directory(nodes, ec)) {
		r.error = path.string() +
			  ": neither a topology root (with nodes/) nor a node "
			  "directory (with properties)";
		return r;
	}
	std::vector<std::pair<unsigned int, fs::path>> dirs;
	for (auto &e : fs::directory_iterator(nodes, ec)) {
		const std::string name = e.path().filename();
		unsigned int id = 0;
		auto [end, err] = std::from_chars(name.data(),
						  name.data() + name.size(), id);
		if (err == std::errc() && end == name.data() + name.size())
			dirs.push_back({id, e.path()});
	}
	std::sort(dirs.begin(), dirs.end());
	for (auto &[id, dir] : dirs) {
		GpuNode n;
		std::string error;
		if (parse_node(dir, id, &n, &error))
			r.gpus.push_back(n);
		else if (!error.empty())
			r.unreadable.push_back({id, error, pci_of(dir)});
	}
	if (r.gpus.empty())
		r.error = r.unreadable.empty() ? nodes.string() + ": no GPU node" :
						 r.unreadable.front().error;
	return r;
}

std::vector<int> gpu_domains(const TopologyResult &topo,
			     const std::vector<std::string> &recorded)
{
	const size_t nr = recorded.size();
	std::vector<int> out(topo.gpus.size(), -1);
	std::vector<bool> taken(nr, false);
	for (size_t g = 0; g < topo.gpus.size(); g++) {
		const std::string &pci = topo.gpus[g].pci_bus_id;
		for (size_t d = 0; !pci.empty() && d < nr; d++)
			if (!taken[d] && recorded[d] == pci) {
				out[g] = int(d);
				taken[d] = true;
				break;
			}
	}
	// A domain that names a GPU of this host stays that GPU's, even
	// while it cannot be read.
	for (const UnreadableNode &u : topo.unreadable)
		for (size_t d = 0; !u.pci_bus_id.empty() && d < nr; d++)
			if (recorded[d] == u.pci_bus_id)
				taken[d] = true;
	// Places among the GPU nodes, unreadable ones counted.
	std::vector<unsigned int> ids;
	for (const GpuNode &n : topo.gpus)
		ids.push_back(n.node_id);
	for (const UnreadableNode &u : topo.unreadable)
		ids.push_back(u.node_id);
	std::sort(ids.begin(), ids.end());
	for (size_t g = 0; g < topo.gpus.size(); g++) {
		if (out[g] >= 0)
			continue;
		size_t place = size_t(std::lower_bound(ids.begin(), ids.end(),
						       topo.gpus[g].node_id) - ids.begin());
		if (place < nr && !taken[place] &&
		    (recorded[place].empty() || recorded[place] == topo.gpus[g].pci_bus_id)) {
			out[g] = int(place);
			taken[place] = true;
		}
	}
	for (size_t g = 0; g < topo.gpus.size(); g++)
		for (size_t d = 0; out[g] < 0 && d < nr; d++)
			if (!taken[d]) {
				out[g] = int(d);
				taken[d] = true;
			}
	return out;
}

} // namespace gpuslot
