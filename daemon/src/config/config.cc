// SPDX-License-Identifier: GPL-2.0
#include "config/config.hpp"
#include "config/small_file.hpp"

#include <fcntl.h>
#include <ini.h>
#include <unistd.h>
#include <linux/gpuslot.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "amd/planner.hpp"
#include "plan/slot_layout.hpp"

namespace gpuslot {

unsigned int GpuSettings::k_or(unsigned int current) const
{
	if (k)
		return *k;
	if (sizes)
		return unsigned(std::count(sizes->begin(), sizes->end(), ',') + 1);
	if (priorities)
		return unsigned(std::count(priorities->begin(), priorities->end(), ',') + 1);
	return protect() ? std::max(current, 2u) : current;
}

GpuSettings Config::for_gpu(unsigned int domain) const
{
	GpuSettings s = defaults;
	auto it = gpus.find(domain);
	if (it == gpus.end())
		return s;
	const GpuSettings &g = it->second;
	if (g.k)
		s.k = g.k;
	// The layout keys go together: a [gpuN] that sets any of them
	// replaces all of [default]'s (protect there, sizes here, or the
	// reverse, would never agree).
	if (g.sizes || g.priorities || g.layout || g.reserve_percent) {
		s.sizes = g.sizes;
		s.priorities = g.priorities;
		s.layout = g.layout;
		s.reserve_percent = g.reserve_percent;
	}
	if (g.boost_priority)
		s.boost_priority = g.boost_priority;
	if (g.max_boost_share)
		s.max_boost_share = g.max_boost_share;
	if (g.preempt_share)
		s.preempt_share = g.preempt_share;
	if (g.preempt_window_ms)
		s.preempt_window_ms = g.preempt_window_ms;
	if (g.hqd_limit)
		s.hqd_limit = g.hqd_limit;
	if (g.mask_algorithm)
		s.mask_algorithm = g.mask_algorithm;
	return s;
}

namespace {

struct ParseState {
	Config config;
	std::set<std::string> seen; // "section.key"
	std::string error;	    // the first one
	std::string error_key;	    // the key it is about
};

bool number(const char *text, unsigned int lo, unsigned int hi,
	    unsigned int *out)
{
	const char *end = text + strlen(text);
	auto [p, err] = std::from_chars(text, end, *out);
	return err == std::errc() && p == end && p != text && *out >= lo &&
	       *out <= hi;
}

// inih calls this per key; returning 0 marks the line as an error.
int on_key(void *user, const char *section, const char *key,
	   const char *value)
{
	auto *st = static_cast<ParseState *>(user);
	auto fail = [&](const std::string &what) {
		if (st->error.empty()) {
			st->error = what;
			st->error_key = key;
		}
		return 0;
	};
	const std::string sec = section, name = key;
	if (!st->seen.insert(sec + "." + name).second)
		return fail("'" + name + "' is set twice in [" + sec + "]");

	if (sec == "daemon") {
		if (name.starts_with("metrics_")) {
			std::string err;
			return parse_metrics_key(name, value, &st->config.metrics, &err) ? 1
											 : fail(err);
		}
		if (name != "audit_interval_ms")
			return fail("unknown key '" + name +
				    "' in [daemon]; known: audit_interval_ms, metrics_listen, "
				    "metrics_textfile, metrics_textfile_interval_ms");
		if (!number(value, 0, 3600000, &st->config.audit_interval_ms) ||
		    (st->config.audit_interval_ms &&
		     st->config.audit_interval_ms < 100))
			return fail("audit_interval_ms '" + std::string(value) +
				    "': expected 0 (no audit) or 100 to 3600000");
		return 1;
	}

	GpuSettings *g;
	unsigned int domain;
	if (sec == "default") {
		g = &st->config.defaults;
	} else if (sec.starts_with("gpu") &&
		   number(sec.c_str() + 3, 0, 15, &domain) &&
		   sec == "gpu" + std::to_string(domain)) {
		g = &st->config.gpus[domain];
	} else {
		return fail("unknown section [" + sec +
			    "]; known: [daemon], [default], [gpu0] .. [gpu15]");
	}

	// An empty value leaves the key unset.
	if (!*value)
		return 1;
	unsigned int v;
	if (name == "k") {
		if (!number(value, 1, GPUSLOT_MAX_SLOTS, &v))
			return fail("k '" + std::string(value) +
				    "': expected a whole number from 1 to 64");
		g->k = v;
	} else if (name == "sizes") {
		std::vector<unsigned int> sizes;
		std::string err;
		// Percentages are checked against the GPU when planning.
		if (!parse_sizes(value, 100, &sizes, &err, true))
			return fail("sizes '" + std::string(value) + "': " + err +
				    "; expected one size per slot: CUs (AMD) or SMs "
				    "(NVIDIA) such as 30,10,10,10, percentages such as "
				    "50%,25%,25%, or all for a slot on the whole GPU "
				    "(all,25%,25%,25%)");
		g->sizes = value;
	} else if (name == "priorities") {
		std::vector<unsigned int> prios;
		std::string err;
		if (!parse_priorities(value, &prios, &err))
			return fail("priorities '" + std::string(value) + "': " + err +
				    "; expected one GPU stream priority per slot, "
				    "comma-separated, each 0 to 15 (more is more "
				    "urgent), such as 5,0,0,0");
		g->priorities = value;
	} else if (name == "layout") {
		if (std::string(value) == "partitions")
			g->layout = LayoutKind::partitions;
		else if (std::string(value) == "protect")
			g->layout = LayoutKind::protect;
		else
			return fail("layout '" + std::string(value) +
				    "': expected partitions (k partitions from sizes "
				    "and priorities) or protect (slot 0 on the whole "
				    "GPU at a higher priority, the others confined "
				    "to leave it a reserve)");
	} else if (name == "reserve") {
		std::string t = value;
		if (t.empty() || t.back() != '%' ||
		    !number(t.substr(0, t.size() - 1).c_str(), 0, 90, &v))
			return fail("reserve '" + t +
				    "': expected a percentage of the GPU from 0% to "
				    "90% that no confined slot may use (layout = "
				    "protect), such as 25%");
		g->reserve_percent = v;
	} else if (name == "boost_priority") {
		if (!number(value, 0, GPUSLOT_MAX_BOOST_PRIORITY, &v))
			return fail("boost_priority '" + std::string(value) +
				    "': expected 0 (no boost) or a SCHED_FIFO "
				    "priority from 1 to 98 (99 is kept for what "
				    "ends a boost at max_hold_ms: the module's "
				    "expiry thread, gpuslotd's socket server)");
		g->boost_priority = v;
	} else if (name == "max_boost_share") {
		if (!number(value, 1, 100, &v))
			return fail("max_boost_share '" + std::string(value) +
				    "': expected the share of time a thread may "
				    "run boosted, 1 to 100 (percent; 100: no "
				    "budget)");
		g->max_boost_share = v;
	} else if (name == "preempt_share") {
		if (!number(value, 1, 100, &v))
			return fail("preempt_share '" + std::string(value) +
				    "': expected the share of GPU time a slot's work "
				    "may hold the lower slots back, 1 to 100 "
				    "(percent; 100: no budget)");
		g->preempt_share = v;
	} else if (name == "preempt_window_ms") {
		if (!number(value, 1, 60000, &v))
			return fail("preempt_window_ms '" + std::string(value) +
				    "': expected the window of the preemption "
				    "budget, 1 to 60000 ms");
		g->preempt_window_ms = v;
	} else if (name == "hqd_limit") {
		if (!number(value, 1, 1024, &v))
			return fail("hqd_limit '" + std::string(value) +
				    "': expected 1 to 1024 (empty: num_cp_queues "
				    "of the GPU)");
		g->hqd_limit = v;
	} else if (name == "mask_algorithm") {
		MaskAlgorithm a;
		if (std::string(value) == "auto")
			g->mask_algorithm.reset();
		else if (parse_algorithm(value, &a))
			g->mask_algorithm = a;
		else
			return fail("mask_algorithm '" + std::string(value) +
				    "': expected auto, A (Linux <= 5.14), B "
				    "(5.15-5.19), C (6.0-6.5) or D (6.6 and later, "
				    "and every MI300)");
	} else {
		return fail("unknown key '" + name + "' in [" + sec +
			    "]; known: k, sizes, boost_priority, "
			    "max_boost_share, preempt_share, "
			    "preempt_window_ms, hqd_limit, mask_algorithm");
	}
	return 1;
}

} // namespace

bool parse_config(const std::string &text, const std::string &name,
		  Config *out, std::string *error)
{
	ParseState st;
	int line = ini_parse_string(text.c_str(), on_key, &st);
	if (line) {
		// inih gives the line of the first error, ours or its own: the
		// message is ours if that line sets the key it is about.
		std::istringstream in(text);
		std::string l;
		for (int i = 0; i < line; i++)
			std::getline(in, l);
		l.erase(0, l.find_first_not_of(" \t"));
		bool ours = !st.error.empty() && l.starts_with(st.error_key) &&
			    l.find_first_not_of(" \t", st.error_key.size()) ==
				    l.find_first_of("=:", st.error_key.size());
		*error = name + ":" + std::to_string(line) + ": " +
			 (ours ? st.error
			       : "expected '[section]', 'key = value' or a comment");
		return false;
	}
	// k, sizes and priorities may come from different sections; they
	// must agree, and layout = protect plans sizes and priorities itself.
	auto agree = [&](const std::string &section, const GpuSettings &s) {
		std::vector<unsigned int> sizes, prios;
		std::string err;
		if (s.sizes)
			parse_sizes(*s.sizes, 100, &sizes, &err, true);
		if (s.priorities)
			parse_priorities(*s.priorities, &prios, &err);
		const std::string where = name + ": [" + section + "]";
		if (s.protect() && (s.sizes || s.priorities)) {
			*error = where + " has layout = protect and " +
				 (s.sizes ? "sizes" : "priorities") +
				 ": protect plans both itself (slot 0 on the whole GPU at "
				 "priority " + std::to_string(kProtectPriority) +
				 ", the others confined); remove one of the two";
			return false;
		}
		if (s.reserve_percent && !s.protect()) {
			*error = where + " has reserve but not layout = protect: a reserve "
				 "is what protect leaves free for slot 0; for other layouts "
				 "give sizes (all,25%,25%,25% leaves 25%)";
			return false;
		}
		if (s.protect() && s.k && *s.k < 2) {
			*error = where + " has layout = protect and k 1: protect needs slot 0 "
				 "and at least one confined slot (k >= 2)";
			return false;
		}
		if (s.k && s.sizes && sizes.size() != *s.k) {
			*error = where + " has k " + std::to_string(*s.k) + " but " +
				 std::to_string(sizes.size()) +
				 " sizes; give as many sizes as k, or one of the two";
			return false;
		}
		const unsigned int k = s.k ? *s.k : unsigned(sizes.size());
		if (s.priorities && k && prios.size() != k) {
			*error = where + " has " +
				 (s.k ? "k " + std::to_string(k)
				      : std::to_string(k) + " sizes") +
				 " but " + std::to_string(prios.size()) +
				 " priorities; give one priority per slot";
			return false;
		}
		return true;
	};
	if (!agree("default", st.config.defaults))
		return false;
	for (auto &entry : st.config.gpus)
		if (!agree("gpu" + std::to_string(entry.first),
			   st.config.for_gpu(entry.first)))
			return false;
	*out = std::move(st.config);
	return true;
}

bool load_config(const std::filesystem::path &path, Config *out,
		 std::string *error, bool must_exist)
{
	std::string text;
	int err = 0;
	if (!read_small_file(path, &text, error, &err)) {
		if (err == ENOENT && !must_exist) {
			*out = Config{};
			return true;
		}
		return false;
	}
	return parse_config(text, path.string(), out, error);
}

} // namespace gpuslot
