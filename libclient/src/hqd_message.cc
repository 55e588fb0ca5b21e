// SPDX-License-Identifier: LGPL-2.1-or-later
#include "hqd_message.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "gpuslot.h"
#include "lock_file.hpp"

namespace gpuslot {
namespace {

// Callers listed by name before the rest is summed up as "...".
constexpr size_t kListed = 6;

// Attributes through @read; the first failure is kept.
struct Reader {
	const AttrReader &read_attr;
	std::string where; // prefix of a failed attribute's name, for messages
	int error = 0;
	std::string failed;

	// The whole text, or "" after recording why it could not be read.
	std::string read(const std::string &name)
	{
		std::string text;
		if (int err = read_attr(name, &text)) {
			error = err;
			failed = where + name;
			return {};
		}
		return text;
	}

	unsigned long number(const std::string &name)
	{
		std::string text = read(name);
		if (error)
			return 0;
		char *end = nullptr;
		errno = 0;
		unsigned long v = std::strtoul(text.c_str(), &end, 10);
		if (errno || end == text.c_str() || (*end && *end != '\n')) {
			error = EINVAL;
			failed = where + name;
		}
		return v;
	}
};

// A whole file: 0 or errno.
int read_whole_file(const std::filesystem::path &path, std::string *text)
{
	std::ifstream in(path);
	if (!in)
		return errno ? errno : ENOENT;
	std::stringstream ss;
	ss << in.rdbuf();
	*text = ss.str();
	return 0;
}

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
	const auto dir = sysfs_root / ("gpu" + std::to_string(domain));
	return explain_hqd_exhausted(
		[&dir](const std::string &name, std::string *text) {
			return read_whole_file(dir / name, text);
		},
		dir.string() + "/", sched_policy_path, domain, needed);
}

HqdExplanation explain_hqd_exhausted(const AttrReader &read_attr, const std::string &where,
				     const std::filesystem::path &sched_policy_path,
				     unsigned int domain, unsigned int needed)
{
	Reader rd{read_attr, where, 0, {}};
	unsigned long used = rd.number("hqd_used");
	unsigned long limit = rd.error ? 0 : rd.number("hqd_limit");
	// Who holds the budget is a debugfs table, root's only: a member's
	// message goes without it, and says where it is.
	std::string queues;
	const int queues_error = rd.error ? 0 : read_attr("debug/queues", &queues);
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
	} else if (queues_error) {
		msg << " (who holds it: debug/queues, readable by root" <<
			(queues_error == EACCES ? "" : std::string(": ") + std::strerror(queues_error))
		    << ")";
	}
	msg << "; this process needs " << needed << ".";
	if (used > limit)
		msg << " hqd_limit was lowered below what is reserved: new"
		       " reservations wait until use falls below it.";
	msg << " Use fewer slots per process, or raise hqd_limit only if amdgpu"
	       " runs with sched_policy=1";
	std::string value;
	if (!read_whole_file(sched_policy_path, &value) && !value.empty()) {
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
	// The budget of whichever transport serves @domain: the module's
	// sysfs, or gpuslotd's socket.
	const char *dir = getenv("GPUSLOT_SOCKET_DIR");
	const std::string socket_dir = dir && *dir ? dir : "/run/gpuslot";
	std::unique_ptr<gpuslot::LockFile> file;
	gpuslot::Transport transport;
	std::string error;
	gpuslot::HqdExplanation e{};
	if (gpuslot::choose_transport("/dev/gpuslot", socket_dir, domain, &transport, &error) ||
	    gpuslot::open_lock_file(transport,
				    transport == gpuslot::Transport::device ? "/dev/gpuslot"
									    : socket_dir,
				    domain, &file, &error))
		e = {ENODEV, "GPU " + std::to_string(domain) + ": " + error};
	else
		e = gpuslot::explain_hqd_exhausted(
			[&file](const std::string &name, std::string *text) {
				return file->read_attr(name, text);
			},
			"", "/sys/module/amdgpu/parameters/sched_policy", domain, needed);
	if (buf && len)
		std::snprintf(buf, len, "%s", e.text.c_str());
	return e.error ? -e.error : int(e.text.size());
}
