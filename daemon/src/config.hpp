// SPDX-License-Identifier: GPL-2.0
// /etc/gpuslot/gpuslotd.conf, an INI file read with inih. The format is in
// README.md ("gpuslotd.conf") and deploy/gpuslotd.conf.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "cu_mask.hpp"
#include "metrics_settings.hpp"

namespace gpuslot {

// What the config says about one GPU; unset keys fall back to [default],
// then to what the module has now (k) or KFD topology says (hqd_limit).
struct GpuSettings {
	std::optional<unsigned int> k;		    // 1 .. 64
	std::optional<std::string> sizes;	    // "30,10,10,10", "50%,50%"
	std::optional<unsigned int> boost_priority; // 0 .. 98
	std::optional<unsigned int> max_boost_share; // 1 .. 100 (%)
	std::optional<unsigned int> hqd_limit;	    // 1 .. 1024
	std::optional<MaskAlgorithm> mask_algorithm; // unset: auto

	// k, else the number of sizes, else @current (the module's k).
	unsigned int k_or(unsigned int current) const;
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
