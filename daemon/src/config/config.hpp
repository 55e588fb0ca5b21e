// SPDX-License-Identifier: GPL-2.0
// /etc/gpuslot/gpuslotd.conf, an INI file read with inih. The format is in
// README.md ("gpuslotd.conf") and deploy/gpuslotd.conf.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "amd/cu_mask.hpp"
#include "config/metrics_settings.hpp"

namespace gpuslot {

// What the config says about one GPU; unset keys fall back to [default],
// then to what the module has now (k) or KFD topology says (hqd_limit).
// What `layout` asks for: k partitions from `sizes` (or equal ones), or
// "slot 0 protects one task" (see slot_layout.hpp).
enum class LayoutKind { partitions, protect };

struct GpuSettings {
	std::optional<unsigned int> k;		    // 1 .. 64
	std::optional<std::string> sizes;	    // "30,10,10,10", "50%,50%", "all,25%"
	std::optional<std::string> priorities;	    // "5,0,0,0": one per slot, 0 .. 15
	std::optional<LayoutKind> layout;	    // unset: partitions
	std::optional<unsigned int> reserve_percent; // layout = protect: 0 .. 90
	std::optional<unsigned int> boost_priority; // 0 .. 98
	std::optional<unsigned int> max_boost_share; // 1 .. 100 (%)
	std::optional<unsigned int> preempt_share;   // 1 .. 100 (%)
	std::optional<unsigned int> preempt_window_ms; // 1 .. 60000
	std::optional<unsigned int> hqd_limit;	    // 1 .. 1024
	std::optional<MaskAlgorithm> mask_algorithm; // unset: auto

	// k, else the number of sizes (or priorities), else @current (the
	// module's k; at least 2 for layout = protect).
	unsigned int k_or(unsigned int current) const;
	bool protect() const { return layout == LayoutKind::protect; }
};

struct Config {
	unsigned int audit_interval_ms = 2000; // 0: no queue audit
	MetricsSettings metrics;	       // [daemon] metrics_*: off
	GpuSettings defaults;
	std::map<unsigned int, GpuSettings> gpus; // by domain

	// The settings of domain @domain: its section over [default].
	GpuSettings for_gpu(unsigned int domain) const;
};

// Parse @text; @name is used in messages ("gpuslotd.conf:7: ...").
bool parse_config(const std::string &text, const std::string &name,
		  Config *out, std::string *error);
// Read and parse @path (a regular file of at most 1 MiB). A file that does
// not exist is the defaults, unless @must_exist.
bool load_config(const std::filesystem::path &path, Config *out,
		 std::string *error, bool must_exist = false);

} // namespace gpuslot
