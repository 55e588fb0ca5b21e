// SPDX-License-Identifier: GPL-2.0
#include "amd/audit.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <fstream>

namespace fs = std::filesystem;

namespace gpuslot {
namespace {

template <class T> bool read_number(const fs::path &p, T *out)
{
	std::ifstream in(p);
	std::string s;
	if (!(in >> s))
		return false;
	auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), *out);
	return err == std::errc() && end == s.data() + s.size();
}

// enum kfd_queue_type: 0 is KFD_QUEUE_TYPE_COMPUTE.
constexpr unsigned int kKfdQueueCompute = 0;

} // namespace

std::map<std::pair<int, uint32_t>, unsigned int>
count_compute_queues(const fs::path &proc_root)
{
	std::map<std::pair<int, uint32_t>, unsigned int> out;
	std::error_code ec;
	// Processes and queues come and go while we look: skip what vanished.
	for (auto &proc : fs::directory_iterator(proc_root, ec)) {
		int pid;
		std::string name = proc.path().filename();
		auto [end, err] = std::from_chars(name.data(),
						  name.data() + name.size(), pid);
		if (err != std::errc() || end != name.data() + name.size())
			continue;
		std::error_code qec;
		for (auto &q : fs::directory_iterator(proc.path() / "queues", qec)) {
			unsigned int type;
			uint32_t gpuid;
			if (read_number(q.path() / "type", &type) &&
			    read_number(q.path() / "gpuid", &gpuid) &&
			    type == kKfdQueueCompute)
				out[{pid, gpuid}]++;
		}
	}
	return out;
}

std::vector<AuditEntry>
over_reservation(const std::map<std::pair<int, uint32_t>, unsigned int> &queues,
		 uint32_t gpu_id, const DomainState &state)
{
	std::map<int, std::pair<unsigned int, std::string>> reserved;
	for (const QueueUser &q : state.queues) {
		reserved[q.pid].first += q.reserved;
		reserved[q.pid].second = q.comm;
	}
	std::vector<AuditEntry> out;
	for (auto &[key, n] : queues) {
		if (key.second != gpu_id)
			continue;
		auto it = reserved.find(key.first);
		unsigned int r = it == reserved.end() ? 0 : it->second.first;
		if (n <= r)
			continue;
		std::string comm = it == reserved.end() ? "" : it->second.second;
		if (comm.empty()) {
			std::ifstream in("/proc/" + std::to_string(key.first) + "/comm");
			std::getline(in, comm);
		}
		out.push_back({key.first, comm, state.domain, n, r});
	}
	return out;
}

std::string audit_json(const std::vector<AuditEntry> &over)
{
	nlohmann::json a = nlohmann::json::array();
	for (const AuditEntry &e : over)
		a.push_back({{"pid", e.pid},
			     {"comm", e.comm},
			     {"domain", e.domain},
			     {"queues", e.queues},
			     {"reserved", e.reserved}});
	return nlohmann::json{{"over_reservation", a}}.dump(2) + "\n";
}

bool parse_audit_json(const std::string &text, std::vector<AuditEntry> *out)
{
	auto j = nlohmann::json::parse(text, nullptr, false);
	if (j.is_discarded() || !j.contains("over_reservation") ||
	    !j["over_reservation"].is_array())
		return false;
	out->clear();
	try {
		for (auto &e : j["over_reservation"])
			out->push_back({e.at("pid").get<int>(),
					e.at("comm").get<std::string>(),
					e.at("domain").get<unsigned int>(),
					e.at("queues").get<unsigned int>(),
					e.at("reserved").get<unsigned int>()});
	} catch (const nlohmann::json::exception &) {
		return false;
	}
	return true;
}

} // namespace gpuslot
