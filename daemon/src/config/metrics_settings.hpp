// SPDX-License-Identifier: GPL-2.0
// The metrics keys of gpuslotd.conf's [daemon] section (metrics.hpp serves
// them). Apart from metrics.hpp so that the config parser needs no
// Prometheus library.
#pragma once

#include <filesystem>
#include <string>

namespace gpuslot {

// [daemon] metrics_* in gpuslotd.conf.
struct MetricsSettings {
	std::string listen;		    // "127.0.0.1:9842", "[::1]:9842"; "" off
	std::filesystem::path textfile;	    // ".../gpuslot.prom"; "" off
	unsigned int textfile_interval_ms = 15000;

	bool enabled() const { return !listen.empty() || !textfile.empty(); }
};

// One [daemon] key starting with "metrics_": false with *error (the
// message for the config's line) on a bad key or value. A bare port
// listens on 127.0.0.1 only.
bool parse_metrics_key(const std::string &key, const std::string &value, MetricsSettings *out,
		       std::string *error);

} // namespace gpuslot
