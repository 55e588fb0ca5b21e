// SPDX-License-Identifier: GPL-2.0
#include "config/metrics_settings.hpp"

#include <arpa/inet.h>

#include <charconv>

namespace gpuslot {

namespace {

bool whole(const std::string &text, unsigned long lo, unsigned long hi, unsigned long *out)
{
	const char *end = text.data() + text.size();
	auto [p, err] = std::from_chars(text.data(), end, *out);
	return err == std::errc() && p == end && p != text.data() && *out >= lo && *out <= hi;
}

// "PORT", "IPV4:PORT" or "[IPV6]:PORT", numeric only (no name lookups at
// start), as civetweb's listening_ports takes it.
bool parse_listen(const std::string &v, std::string *out)
{
	unsigned long port;
	if (whole(v, 1, 65535, &port)) {
		*out = "127.0.0.1:" + v;
		return true;
	}
	const size_t colon = v.rfind(':');
	if (colon == std::string::npos || !whole(v.substr(colon + 1), 1, 65535, &port))
		return false;
	std::string host = v.substr(0, colon);
	unsigned char buf[sizeof(in6_addr)];
	if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
		if (inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) != 1)
			return false;
	} else if (inet_pton(AF_INET, host.c_str(), buf) != 1) {
		return false;
	}
	*out = v;
	return true;
}

} // namespace

bool parse_metrics_key(const std::string &key, const std::string &value, MetricsSettings *out,
		       std::string *error)
{
	if (key == "metrics_listen") {
		if (value.empty()) {
			out->listen.clear();
			return true;
		}
		if (!parse_listen(value, &out->listen)) {
			*error = "metrics_listen '" + value +
				 "': expected a port (127.0.0.1 only), 127.0.0.1:PORT, "
				 "[::1]:PORT or another numeric ADDRESS:PORT; empty: no listener";
			return false;
		}
		return true;
	}
	if (key == "metrics_textfile") {
		const std::filesystem::path p = value;
		if (!value.empty() && (!p.is_absolute() || p.extension() != ".prom" ||
				       p.filename() == ".prom")) {
			*error = "metrics_textfile '" + value +
				 "': expected an absolute path ending in .prom (node-exporter's "
				 "textfile collector reads only those), e.g. "
				 "/var/lib/prometheus/node-exporter/gpuslot.prom; empty: none";
			return false;
		}
		out->textfile = p;
		return true;
	}
	if (key == "metrics_textfile_interval_ms") {
		unsigned long v;
		if (!whole(value, 1000, 3600000, &v)) {
			*error = "metrics_textfile_interval_ms '" + value +
				 "': expected 1000 to 3600000";
			return false;
		}
		out->textfile_interval_ms = unsigned(v);
		return true;
	}
	*error = "unknown key '" + key +
		 "' in [daemon]; known: audit_interval_ms, metrics_listen, metrics_textfile, "
		 "metrics_textfile_interval_ms";
	return false;
}

} // namespace gpuslot
