// SPDX-License-Identifier: GPL-2.0
#include "device/status.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "amd/plan_report.hpp"

namespace gpuslot {

std::string human_ns(uint64_t ns)
{
	char buf[32];
	if (ns < 1000000)
		snprintf(buf, sizeof(buf), "%.1f us", ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, sizeof(buf), "%.1f ms", ns / 1e6);
	else
		snprintf(buf, sizeof(buf), "%.1f s", ns / 1e9);
	return buf;
}

double wait_bucket_upper_seconds(size_t i, size_t buckets)
{
	if (i + 1 >= buckets)
		return std::numeric_limits<double>::infinity();
	return std::ldexp(1.0, int(i) + 1) / 1e9;
}

double wait_quantile_seconds(const std::vector<uint64_t> &hist, double q)
{
	uint64_t total = 0;
	for (uint64_t n : hist)
		total += n;
	if (!total || q < 0 || q > 1)
		return std::numeric_limits<double>::quiet_NaN();
	// promql/quantile.go: the first bucket whose cumulative count reaches
	// q * total; linear within it; the +Inf bucket answers with the
	// bound below it.
	const double rank = q * double(total);
	uint64_t below = 0;
	for (size_t i = 0; i < hist.size(); i++) {
		if (double(below + hist[i]) >= rank && hist[i]) {
			if (i + 1 == hist.size())
				return i ? wait_bucket_upper_seconds(i - 1, hist.size()) : 0;
			const double start = i ? wait_bucket_upper_seconds(i - 1, hist.size()) : 0;
			const double end = wait_bucket_upper_seconds(i, hist.size());
			return start + (end - start) * ((rank - double(below)) / double(hist[i]));
		}
		below += hist[i];
	}
	return std::numeric_limits<double>::quiet_NaN();
}

namespace {

// A thread name for a terminal: bytes outside ' '..'~' as \xHH.
std::string shown_name(const std::string &comm)
{
	std::string out;
	for (unsigned char c : comm) {
		if (c >= ' ' && c <= '~' && c != '\\') {
			out += char(c);
			continue;
		}
		char b[8];
		snprintf(b, sizeof(b), "\\x%02x", c);
		out += b;
	}
	return out;
}

const char *boost_name(HoldBoost b)
{
	switch (b) {
	case HoldBoost::boosted:
		return "boosted";
	case HoldBoost::overrun:
		return "overrun";
	default:
		return "unboosted";
	}
}

// What a holder's line says of its boost, where it is not the usual.
std::string boost_note(const DomainState &s, const Holder &h)
{
	if (h.boost == HoldBoost::overrun)
		return ", past max_hold_ms " + std::to_string(s.max_hold_ms) +
		       " ms or out of boost budget: boost taken away";
	if (h.boost == HoldBoost::unboosted && s.boost_priority)
		return ", not boosted (already at or above SCHED_FIFO " +
		       std::to_string(s.boost_priority) + ", or out of boost budget)";
	return "";
}

unsigned int popcount(const gpuslot_partition &p)
{
	unsigned int n = 0;
	for (uint64_t w : p.units)
		n += std::popcount(w);
	return n;
}

char slot_letter(unsigned int slot)
{
	return char(slot < 26 ? 'A' + slot : 'a' + slot - 26);
}

// The module's partitions as a plan, to draw them like `gpuslotctl plan`.
GpuPlan as_plan(const StatusGpu &g)
{
	GpuPlan p{g.gpu, g.shape, g.algorithm, {}};
	for (const auto &part : g.state.partitions) {
		PlannedPartition pp;
		if (!partition_is_whole(part))
			pp.mask = mask_from_partition(part, g.state.nr_units);
		p.plan.partitions.push_back(pp);
	}
	return p;
}

unsigned int slot_priority(const DomainState &s, unsigned int slot)
{
	return slot < s.priorities.size() ? s.priorities[slot] : 0;
}

std::string describe_partition(const StatusGpu &g, unsigned int slot)
{
	const auto &part = g.state.partitions[slot];
	if (partition_is_whole(part))
		return "whole GPU";
	std::string unit = g.state.unit_kind == GPUSLOT_UNIT_AMD_CU ? " CUs"
							     : " units";
	return std::to_string(popcount(part)) + unit + " " + partition_text(part);
}

} // namespace

std::string status_text(const std::vector<StatusGpu> &gpus)
{
	std::ostringstream out;
	for (const StatusGpu &g : gpus) {
		const DomainState &s = g.state;
		out << "gpu" << s.domain;
		if (g.has_gpu)
			out << ": " << g.gpu.gfx.name() << ", KFD node "
			    << g.gpu.node_id << ", " << g.gpu.active_cus() << " CUs, "
			    << g.gpu.shader_engines() << " SEs";
		else
			out << ": no KFD GPU maps to this domain";
		out << "\n  k " << s.k << ", generation " << s.generation
		    << ", boost "
		    << (s.boost_priority ? "SCHED_FIFO " + std::to_string(s.boost_priority)
					 : std::string("off"));
		if (s.boost_priority)
			out << " for at most "
			    << (s.max_hold_ms ? std::to_string(s.max_hold_ms) + " ms"
					      : std::string("the whole hold"))
			    << " (" << s.overruns << " overruns)";
		out << ", HQDs " << s.hqd_used << "/" << s.hqd_limit << " reserved";
		if (s.hqd_waiters)
			out << ", " << s.hqd_waiters << " waiting for queues";
		out << "\n";

		for (unsigned int slot = 0; slot < s.k; slot++) {
			out << "  " << slot_letter(slot) << " slot " << slot << "  ";
			std::string part = slot < s.partitions.size()
						   ? describe_partition(g, slot)
						   : "?";
			out << part << std::string(part.size() < 28 ? 28 - part.size() : 1, ' ')
			    << "priority " << slot_priority(s, slot) << "  ";
			bool held = false;
			for (const Holder &h : s.holders)
				if (h.slot == slot) {
					out << "held by " << h.pid << " " << shown_name(h.comm)
					    << " (tid " << h.tid << ") for "
					    << human_ns(h.held_ns) << boost_note(s, h);
					held = true;
				}
			// Without the tables: held or not, from held_mask.
			if (!held && !s.tables && slot < 64 && (s.held_mask >> slot & 1)) {
				out << "held";
				held = true;
			}
			out << (held ? "" : "free") << "\n";
		}
		for (const Holder &h : s.holders)
			if (h.slot >= s.k)
				out << "  retiring slot " << h.slot << ": held by "
				    << h.pid << " " << shown_name(h.comm) << " for "
				    << human_ns(h.held_ns) << boost_note(s, h) << "\n";
		if (!s.tables)
			for (unsigned int slot = s.k; slot < 64; slot++)
				if (s.held_mask >> slot & 1)
					out << "  retiring slot " << slot << ": held\n";

		out << "  waiters: " << s.nr_waiters;
		for (const Waiter &w : s.waiters)
			out << "\n    " << w.pid << " " << shown_name(w.comm) << " (tid " << w.tid
			    << ") waiting " << human_ns(w.waited_ns) << ", slots "
			    << (w.allowed == ~0ULL ? std::string("any") : [&] {
				       char b[24];
				       snprintf(b, sizeof(b), "0x%llx",
						(unsigned long long)w.allowed);
				       return std::string(b);
			       }());
		out << "\n";
		if (!s.tables)
			out << "  who holds and waits: not shown: " << s.tables_note << "\n";
		out << "  acquisitions " << s.acquisitions << " (" << s.contended << " waited, "
		    << s.timeouts << " timed out, " << s.interrupted << " interrupted)";
		if (double p50 = wait_quantile_seconds(s.wait_hist, 0.5); !std::isnan(p50))
			// Estimates within a power-of-two bucket, as Prometheus
			// makes them; never past the longest wait seen.
			out << ", wait p50 "
			    << human_ns(std::min<uint64_t>(uint64_t(p50 * 1e9), s.max_wait_ns))
			    << " p99 "
			    << human_ns(std::min<uint64_t>(
				       uint64_t(wait_quantile_seconds(s.wait_hist, 0.99) * 1e9),
				       s.max_wait_ns))
			    << " max " << human_ns(s.max_wait_ns);
		out << ", longest hold " << human_ns(s.max_hold_ns) << "\n";

		if (g.has_gpu && s.unit_kind == GPUSLOT_UNIT_AMD_CU) {
			bool any = false;
			for (const auto &p : s.partitions)
				any |= !partition_is_whole(p);
			if (any) {
				std::istringstream grid(draw_partitions(as_plan(g)));
				for (std::string row; std::getline(grid, row);)
					out << "  " << row << "\n";
				std::string whole;
				for (unsigned int slot = 0; slot < s.partitions.size(); slot++)
					if (partition_is_whole(s.partitions[slot]))
						whole += std::string(whole.empty() ? "" : ", ") +
							 slot_letter(slot);
				if (!whole.empty())
					out << "  (" << whole << ": the whole GPU, not drawn; '.' marks "
					    << "CUs no confined slot may use)\n";
			}
			else
				out << "  no partitions: every slot runs on the whole GPU\n";
		}
		for (const QueueUser &q : s.queues)
			out << "  queues: " << q.pid << " " << shown_name(q.comm) << " reserved "
			    << q.reserved << "\n";
		if (g.audited) {
			if (g.over.empty())
				out << "  audit: no process has more compute queues than it reserved\n";
			for (const AuditEntry &e : g.over)
				out << "  audit: " << e.pid << " " << e.comm << " has "
				    << e.queues << " compute queues but reserved "
				    << e.reserved << "\n";
		}
	}
	return out.str();
}

std::string status_json(const std::vector<StatusGpu> &gpus)
{
	nlohmann::json arr = nlohmann::json::array();
	for (const StatusGpu &g : gpus) {
		const DomainState &s = g.state;
		nlohmann::json slots = nlohmann::json::array();
		for (unsigned int slot = 0; slot < s.k; slot++) {
			nlohmann::json j = {{"slot", slot},
					    {"priority", slot_priority(s, slot)},
					    {"held", slot < 64 && (s.held_mask >> slot & 1) != 0}};
			if (slot < s.partitions.size()) {
				const auto &p = s.partitions[slot];
				j["partition"] = partition_text(p);
				j["units"] = partition_is_whole(p) ? s.nr_units
								  : popcount(p);
			}
			for (const Holder &h : s.holders)
				if (h.slot == slot)
					j["holder"] = {{"pid", h.pid},
						       {"tid", h.tid},
						       {"comm", h.comm},
						       {"held_ns", h.held_ns},
						       {"boost", boost_name(h.boost)}};
			slots.push_back(j);
		}
		nlohmann::json waiters = nlohmann::json::array();
		for (const Waiter &w : s.waiters)
			waiters.push_back({{"pid", w.pid},
					   {"tid", w.tid},
					   {"comm", w.comm},
					   {"waited_ns", w.waited_ns},
					   {"allowed", w.allowed}});
		nlohmann::json queues = nlohmann::json::array();
		for (const QueueUser &q : s.queues)
			queues.push_back({{"pid", q.pid},
					  {"comm", q.comm},
					  {"reserved", q.reserved}});
		nlohmann::json j = {{"domain", s.domain},
				    {"k", s.k},
				    {"generation", s.generation},
				    {"boost_priority", s.boost_priority},
				    {"max_hold_ms", s.max_hold_ms},
				    {"overruns", s.overruns},
				    {"unit_kind", unit_kind_name(s.unit_kind)},
				    {"nr_units", s.nr_units},
				    {"hqd_limit", s.hqd_limit},
				    {"hqd_used", s.hqd_used},
				    {"hqd_waiters", s.hqd_waiters},
				    {"nr_holders", s.nr_holders},
				    {"nr_waiters", s.nr_waiters},
				    {"held_mask", s.held_mask},
				    {"slots", slots},
				    {"tables", s.tables}};
		if (s.tables) {
			j["waiters"] = waiters;
			j["queues"] = queues;
		} else {
			j["tables_note"] = s.tables_note;
		}
		nlohmann::json quantiles = nlohmann::json::object();
		for (const auto &[name, q] : {std::pair{"0.5", 0.5}, {"0.9", 0.9}, {"0.99", 0.99}}) {
			const double v = wait_quantile_seconds(s.wait_hist, q);
			quantiles[name] = std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v);
		}
		j["stats"] = {{"acquisitions", s.acquisitions},
			      {"contended", s.contended},
			      {"timeouts", s.timeouts},
			      {"interrupted", s.interrupted},
			      {"overruns", s.overruns},
			      {"total_wait_ns", s.total_wait_ns},
			      {"max_wait_ns", s.max_wait_ns},
			      {"max_hold_ns", s.max_hold_ns}};
		if (s.tables) {
			j["stats"]["wait_hist_log2_ns"] = s.wait_hist;
			// As histogram_quantile() on gpuslot_wait_seconds.
			j["stats"]["wait_quantiles_seconds"] = quantiles;
		}
		if (!s.pci_bus_id.empty())
			j["pci_bus_id"] = s.pci_bus_id;
		if (g.has_gpu)
			j["gpu"] = {{"node", g.gpu.node_id},
				    {"gfx", g.gpu.gfx.name()},
				    {"cus", g.gpu.active_cus()},
				    {"shader_engines", g.gpu.shader_engines()}};
		if (g.audited) {
			nlohmann::json over = nlohmann::json::array();
			for (const AuditEntry &e : g.over)
				over.push_back({{"pid", e.pid},
						{"comm", e.comm},
						{"queues", e.queues},
						{"reserved", e.reserved}});
			j["over_reservation"] = over;
		}
		arr.push_back(j);
	}
	return nlohmann::json{{"gpus", arr}}.dump(2) + "\n";
}

} // namespace gpuslot
