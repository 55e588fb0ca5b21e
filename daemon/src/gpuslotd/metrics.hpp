// SPDX-License-Identifier: GPL-2.0
// gpuslotd's Prometheus metrics: every domain's state and counters, read
// through the attributes on either transport (the module's sysfs, or the
// socket transport's GPUSLOT_WIRE_ATTR_READ) at each scrape, served over
// HTTP with prometheus-cpp (opt-in, local by default) and/or written in the
// node-exporter textfile format, atomically. docs/metrics.md lists the
// metrics.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "device/domain_attrs.hpp"
#include "config/metrics_settings.hpp"
#include "device/module.hpp"

namespace prometheus {
struct MetricFamily;
class Exposer;
} // namespace prometheus

namespace gpuslot {

// The HTTP listener: its threads, how long a request may take to arrive
// whole, and how long a closing connection may wait for its client.
constexpr unsigned int kMetricsHttpThreads = 8;
constexpr unsigned int kMetricsRequestTimeoutMs = 5000;
constexpr unsigned int kMetricsLingerTimeoutMs = 1000;

// The metric families of @domains, as gpuslotd serves them. @transport is
// "device" or "socket" (a label of gpuslot_info).
std::vector<prometheus::MetricFamily> metric_families(const std::vector<DomainState> &domains,
						     const std::string &transport);
// The same in the text exposition format.
std::string metrics_text(const std::vector<DomainState> &domains, const std::string &transport);

// The exporter: owns the HTTP listener and the textfile writer thread.
class MetricsExporter {
public:
	using Log = std::function<void(int priority, const std::string &)>;

	MetricsExporter(MetricsSettings settings, DomainAttrs attrs, Log log);
	~MetricsExporter();
	MetricsExporter(const MetricsExporter &) = delete;
	MetricsExporter &operator=(const MetricsExporter &) = delete;

	// Listen and start the textfile writer: false with *error.
	bool start(std::string *error);
	// Every domain's state now (those that cannot be read are left out,
	// and gpuslot_scrape_errors_total counts them).
	std::vector<prometheus::MetricFamily> collect();
	// Write the textfile now: false with *error.
	bool write_textfile(std::string *error);

private:
	class Collector;
	bool start_threads(std::string *error);

	MetricsSettings settings_;
	DomainAttrs attrs_;
	Log log_;
	std::mutex mutex_; // attrs_ and scrape_errors_: scrapes come from
			   // the listener's threads and the writer
	uint64_t scrape_errors_ = 0;
	std::string last_error_;
	std::shared_ptr<Collector> collector_;
	std::unique_ptr<prometheus::Exposer> exposer_;
	std::thread writer_;
	std::mutex stop_mutex_;
	std::condition_variable stop_cv_;
	bool stop_ = false;
};

} // namespace gpuslot
