// SPDX-License-Identifier: GPL-2.0
#include "amd/plan_report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

namespace gpuslot {
namespace {

// CUs per shader array the picture has room for: more than a CU mask can
// reach (16), as KFD may report.
constexpr unsigned int kArrayCus = 64;

// Owner slot of every (xcc, se, sh, cu), or -1.
std::vector<int> owners(const GpuPlan &p)
{
	const CuShape &s = p.shape;
	std::vector<int> own(s.xccs * s.se_per_xcc * s.sh_per_se * kArrayCus, -1);
	auto slots = mask_bit_slots(s, p.algorithm);
	for (size_t j = 0; j < p.plan.partitions.size(); j++) {
		const auto &mask = p.plan.partitions[j].mask;
		for (size_t i = 0; i < slots.size() && i / 32 < mask.size(); i++) {
			if (!(mask[i / 32] >> (i % 32) & 1))
				continue;
			const CuSlot &c = slots[i];
			// Walks A and B map single CUs even on gfx10+.
			unsigned int width = s.wgp && p.algorithm != MaskAlgorithm::A &&
						     p.algorithm != MaskAlgorithm::B ? 2 : 1;
			for (unsigned int w = 0; w < width; w++)
				own[((c.xcc * s.se_per_xcc + c.se) * s.sh_per_se +
				     c.sh) * kArrayCus + c.cu + w] = int(j);
		}
	}
	return own;
}

} // namespace

std::string draw_partitions(const GpuPlan &p)
{
	const CuShape &s = p.shape;
	auto own = owners(p);
	std::ostringstream out;
	for (unsigned int x = 0; x < s.xccs; x++)
		for (unsigned int se = 0; se < s.se_per_xcc; se++) {
			if (s.xccs > 1)
				out << "XCC" << x << ' ';
			out << "SE" << se << (se < 10 ? "  " : " ");
			for (unsigned int sh = 0; sh < s.sh_per_se; sh++) {
				out << '|';
				for (unsigned int cu = 0;
				     cu < std::min(s.at(x, se, sh), kArrayCus); cu++) {
					int o = own[((x * s.se_per_xcc + se) *
						     s.sh_per_se + sh) * kArrayCus + cu];
					out << (o < 0 ? '.' : char(o < 26 ? 'A' + o : 'a' + o - 26));
				}
			}
			out << "|\n";
		}
	return out.str();
}

std::string plan_text(const std::vector<GpuPlan> &plans)
{
	std::ostringstream out;
	for (const GpuPlan &p : plans) {
		const GpuNode &g = p.gpu;
		out << "GPU node " << g.node_id << ": " << g.gfx.name() << ", "
		    << g.active_cus() << " CUs, " << g.shader_engines()
		    << " SEs x " << g.sh_per_se() << " SH"
		    << (g.num_xcc > 1 ? ", " + std::to_string(g.num_xcc) + " XCCs" : "")
		    << (g.wgp_mode() ? ", WGP pairs" : "") << "; mask algorithm "
		    << algorithm_name(p.algorithm) << "\n";
		if (!p.plan.error.empty()) {
			out << "  cannot plan: " << p.plan.error << "\n";
			continue;
		}
		bool any_whole = false;
		for (size_t j = 0; j < p.plan.partitions.size(); j++) {
			const auto &part = p.plan.partitions[j];
			out << "  slot " << j << " (" << char(j < 26 ? 'A' + j : 'a' + j - 26) << "): ";
			if (part.whole) {
				any_whole = true;
				out << "whole GPU (" << part.cus << " CUs); priority " << part.priority
				    << "\n";
				continue;
			}
			out << part.cus << " CUs, "
			    << (part.se_packed ? "SE-packed" : "SE-distributed")
			    << ", mask " << part.mask_hex() << ", CUs per SE";
			for (unsigned int c : part.cus_per_se)
				out << ' ' << c;
			out << "; priority " << part.priority << "\n";
		}
		out << draw_partitions(p);
		if (any_whole)
			out << "  (whole-GPU slots are not drawn; '.' marks CUs no confined slot "
			       "may use)\n";
		for (const auto &n : p.plan.notes)
			out << "  note: " << n << "\n";
	}
	return out.str();
}

std::string plan_json(const std::vector<GpuPlan> &plans)
{
	nlohmann::json gpus = nlohmann::json::array();
	for (const GpuPlan &p : plans) {
		const GpuNode &g = p.gpu;
		nlohmann::json parts = nlohmann::json::array();
		for (size_t j = 0; j < p.plan.partitions.size(); j++) {
			const auto &part = p.plan.partitions[j];
			parts.push_back({{"slot", j},
					 {"whole", part.whole},
					 {"priority", part.priority},
					 {"cus", part.cus},
					 {"requested_cus", part.requested_cus},
					 {"se_packed", part.se_packed},
					 {"mask", part.whole ? std::string("all") : part.mask_hex()},
					 {"cus_per_se", part.cus_per_se}});
		}
		nlohmann::json gpu = {{"node", g.node_id},
				      {"gfx", g.gfx.name()},
				      {"cus", g.active_cus()},
				      {"shader_engines", g.shader_engines()},
				      {"sh_per_se", g.sh_per_se()},
				      {"xccs", g.num_xcc},
				      {"hqd_budget", g.num_cp_queues},
				      {"mask_algorithm", algorithm_name(p.algorithm)},
				      {"partitions", parts},
				      {"notes", p.plan.notes}};
		if (!p.plan.error.empty())
			gpu["error"] = p.plan.error;
		gpus.push_back(gpu);
	}
	return nlohmann::json{{"gpus", gpus}}.dump(2) + "\n";
}

} // namespace gpuslot
