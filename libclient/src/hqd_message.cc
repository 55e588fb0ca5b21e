// SPDX-License-Identifier: LGPL-2.1-or-later
#include "hqd_message.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "gpuslot.h"

namespace gpuslot {
namespace {

// Callers listed by name before the rest is summed up as "...".
constexpr size_t kListed = 6;

struct Reader {
	int error = 0;
	std::string failed;

	// The whole file, or "" after recording why it could not be read.
	std::string read(const std::filesystem::path &path)
	{
		std::ifstream in(path);
		if (!in) {
			error = errno ? errno : ENOENT;
			failed = path;
			return {};
		}
		std::stringstream ss;
		ss << in.rdbuf();
		return ss.str();
	}

	unsigned long number(const std::filesystem::path &path)
	{
		std::string text = read(path);
		if (error)
			return 0;
		char *end = nullptr;
		errno = 0;
		unsigned long v = std::strtoul(text.c_str(), &end, 10);
		if (errno || end == text.c_str() || (*end && *end != '\n')) {
			error = EINVAL;
			failed = path;
		}
		return v;
	}
};

struct Reserver {
	std::string pid, comm;
	unsigned long queues;
};

// "pid comm reserved" per reserving file, summed per process.
std::vector<Reserver> parse_queues(const std::string &text)
{
	std::vector<Reserver> out;
	std::istringstream lines(text);
	for (std::string line; std::getline(lines, line);) {
		std::istringstream words(line);
		Reserver r;
		if (!(words >> r.pid >> r.comm >> r.queues))
			continue; // e.g. the "... N more" line
		bool merged = false;
		for (auto &o : out)
			if (o.pid == r.pid) {
				o.queues += r.queues;
				merged = true;
			}
		if (!merged)
			out.push_back(r);
	}
	return out;
}

} // namespace

HqdExplanation explain_hqd_exhausted(const std::filesystem::path &sysfs_root,
				     const std::filesystem::path &sched_policy_path,
				     unsigned int domain, unsigned int needed)
{
	Reader rd;
	auto dir = sysfs_root / ("gpu" + std::to_string(domain));
	unsigned long used = rd.number(dir / "hqd_used");
	unsigned long limit = rd.error ? 0 : rd.number(dir / "hqd_limit");
	std::string queues = rd.error ? "" : rd.read(dir / "queues");
	if (rd.error)
		return {rd.error, "GPU " + std::to_string(domain) +
				  ": cannot read the hardware queue budget from " +
				  rd.failed + ": " + std::strerror(rd.error)};

	std::ostringstream msg;
	msg << "GPU " << domain << ": hardware queue budget exhausted: " << used
	    << " of " << limit << " reserved";
	auto reservers = parse_queues(queues);
	if (!reservers.empty()) {
		msg << " (";
		for (size_t i = 0; i < reservers.size() && i < kListed; i++)
			msg << (i ? ", " : "") << "pid " << reservers[i].pid << ' '
			    << reservers[i].comm << ": " << reservers[i].queues;
		if (reservers.size() > kListed)
			msg << ", ...";
		msg << ')';
	}
	msg << "; this process needs " << needed << ".";
	if (used > limit)
		msg << " hqd_limit was lowered below what is reserved: new"
		       " reservations wait until use falls below it.";
	msg << " Use fewer slots per process, or raise hqd_limit only if amdgpu"
	       " runs with sched_policy=1";
	Reader policy;
	std::string value = policy.read(sched_policy_path);
	if (!policy.error && !value.empty()) {
		while (!value.empty() && value.back() == '\n')
			value.pop_back();
		msg << " (here it runs with sched_policy=" << value << ")";
	}
	msg << '.';
	return {0, msg.str()};
}

} // namespace gpuslot

extern "C" int gpuslot_hqd_explain(unsigned int domain, unsigned int needed,
				   char *buf, size_t len)
{
	auto e = gpuslot::explain_hqd_exhausted(
		"/sys/kernel/gpuslot", "/sys/module/amdgpu/parameters/sched_policy",
		domain, needed);
	if (buf && len)
		std::snprintf(buf, len, "%s", e.text.c_str());
	return e.error ? -e.error : int(e.text.size());
}
