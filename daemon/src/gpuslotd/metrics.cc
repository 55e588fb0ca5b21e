// SPDX-License-Identifier: GPL-2.0
#include "gpuslotd/metrics.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <iterator>
#include <sstream>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "device/status.hpp"

namespace gpuslot {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// The labels of every series of a domain: gpu as DCGM's and AMD's
// exporters number GPUs, and the PCI address in the form DCGM writes
// (NVML's "00000000:3B:00.0") for NVIDIA domains, Linux's ("0000:3b:00.0")
// otherwise, so that a join on pci_bus_id needs no rewriting.
std::vector<ClientMetric::Label> domain_labels(const DomainState &s)
{
	std::vector<ClientMetric::Label> l{{"gpu", std::to_string(s.domain)}};
	std::string pci = s.pci_bus_id;
	if (s.unit_kind == GPUSLOT_UNIT_NV_SM_GROUP && pci.size() == 12) {
		for (char &c : pci)
			c = char(std::toupper((unsigned char)c));
		pci = "0000" + pci;
	}
	if (!pci.empty())
		l.push_back({"pci_bus_id", pci});
	return l;
}

class Families {
public:
	MetricFamily &add(const std::string &name, MetricType type, const std::string &help)
	{
		all_.push_back({name, help, type, {}});
		return all_.back();
	}
	std::vector<MetricFamily> take()
	{
		return {std::make_move_iterator(all_.begin()), std::make_move_iterator(all_.end())};
	}

private:
	std::deque<MetricFamily> all_; // add()'s references stay valid
};

void sample(MetricFamily &f, std::vector<ClientMetric::Label> labels, double v)
{
	ClientMetric m;
	m.label = std::move(labels);
	if (f.type == MetricType::Counter)
		m.counter.value = v;
	else
		m.gauge.value = v;
	f.metric.push_back(std::move(m));
}

} // namespace

std::vector<MetricFamily> metric_families(const std::vector<DomainState> &domains,
					  const std::string &transport)
{
	Families f;
	auto &info = f.add("gpuslot_domain_info", MetricType::Gauge,
			   "A gpuslot GPU domain: its unit kind and the transport serving it "
			   "(always 1).");
	auto &k = f.add("gpuslot_slots", MetricType::Gauge, "Slots (k) of the domain.");
	auto &gen = f.add("gpuslot_layout_generation", MetricType::Gauge,
			  "Layout generation: grows at every change of k or the partitions.");
	auto &held = f.add("gpuslot_slots_held", MetricType::Gauge, "Slots held now.");
	auto &waiters = f.add("gpuslot_waiters", MetricType::Gauge,
			      "Threads waiting for a slot now.");
	auto &acq = f.add("gpuslot_acquisitions_total", MetricType::Counter,
			  "Slots granted.");
	auto &contended = f.add("gpuslot_contended_acquisitions_total", MetricType::Counter,
				"Slots granted after waiting in the FIFO.");
	auto &timeouts = f.add("gpuslot_acquire_timeouts_total", MetricType::Counter,
			       "Acquires that timed out.");
	auto &interrupted = f.add("gpuslot_acquire_interruptions_total", MetricType::Counter,
				  "Acquires ended by a signal or a cancel.");
	auto &overruns = f.add("gpuslot_hold_overruns_total", MetricType::Counter,
			       "Holds that outlived max_hold_ms (their boost was taken away).");
	auto &wait = f.add("gpuslot_wait_seconds", MetricType::Histogram,
			   "Time from an acquire to its grant.");
	auto &wait_max = f.add("gpuslot_wait_max_seconds", MetricType::Gauge,
			       "Longest wait for a slot so far.");
	auto &hold_max = f.add("gpuslot_hold_max_seconds", MetricType::Gauge,
			       "Longest hold of a slot so far.");
	auto &hold = f.add("gpuslot_slot_hold_seconds", MetricType::Gauge,
			   "How long the slot's current hold has lasted (0: free).");
	auto &units = f.add("gpuslot_slot_units", MetricType::Gauge,
			    "Units (AMD CUs, NVIDIA SM groups) of the slot's partition.");
	auto &stream_prio = f.add("gpuslot_slot_priority", MetricType::Gauge,
				  "GPU stream priority of the slot's work, 0 (default) to 15 "
				  "(more is more urgent).");
	auto &prio = f.add("gpuslot_slot_boost_priority", MetricType::Gauge,
			   "SCHED_FIFO priority the slot's holder runs at (0: free or not "
			   "boosted).");
	auto &boost = f.add("gpuslot_boost_priority", MetricType::Gauge,
			    "SCHED_FIFO priority of holders (0: no boost).");
	auto &max_hold = f.add("gpuslot_max_hold_seconds", MetricType::Gauge,
			       "How long a hold keeps its boost (0: the whole hold).");
	auto &hqd_limit = f.add("gpuslot_hqd_limit", MetricType::Gauge,
				"Hardware queues clients may reserve.");
	auto &hqd_used = f.add("gpuslot_hqd_reserved", MetricType::Gauge,
			       "Hardware queues reserved now.");
	auto &hqd_waiters = f.add("gpuslot_hqd_waiters", MetricType::Gauge,
				  "Clients waiting for hardware queues now.");

	for (const DomainState &s : domains) {
		const auto l = domain_labels(s);
		auto with = [&](std::vector<ClientMetric::Label> more) {
			auto all = l;
			all.insert(all.end(), more.begin(), more.end());
			return all;
		};
		sample(info, with({{"transport", transport}, {"unit_kind", unit_kind_name(s.unit_kind)}}),
		       1);
		sample(k, l, s.k);
		sample(gen, l, double(s.generation));
		sample(held, l, double(s.nr_holders));
		sample(waiters, l, double(s.nr_waiters));
		sample(acq, l, double(s.acquisitions));
		sample(contended, l, double(s.contended));
		sample(timeouts, l, double(s.timeouts));
		sample(interrupted, l, double(s.interrupted));
		sample(overruns, l, double(s.overruns));
		sample(wait_max, l, double(s.max_wait_ns) / 1e9);
		sample(hold_max, l, double(s.max_hold_ns) / 1e9);
		sample(boost, l, s.boost_priority);
		sample(max_hold, l, s.max_hold_ms / 1e3);
		sample(hqd_limit, l, s.hqd_limit);
		sample(hqd_used, l, s.hqd_used);
		sample(hqd_waiters, l, s.hqd_waiters);

		ClientMetric h;
		h.label = l;
		uint64_t cumulative = 0;
		for (size_t i = 0; i < s.wait_hist.size(); i++) {
			cumulative += s.wait_hist[i];
			h.histogram.bucket.push_back(
				{cumulative, wait_bucket_upper_seconds(i, s.wait_hist.size())});
		}
		h.histogram.sample_count = cumulative;
		h.histogram.sample_sum = double(s.total_wait_ns) / 1e9;
		if (!s.wait_hist.empty())
			wait.metric.push_back(std::move(h));

		for (unsigned int slot = 0; slot < s.k; slot++) {
			const auto sl = with({{"slot", std::to_string(slot)}});
			double held_s = 0, priority = 0;
			for (const Holder &x : s.holders)
				if (x.slot == slot) {
					held_s = double(x.held_ns) / 1e9;
					if (x.boost == HoldBoost::boosted)
						priority = s.boost_priority;
				}
			// Who holds a slot and how long: the debug/ tables,
			// which only root (gpuslotd) reads.
			if (s.tables) {
				sample(hold, sl, held_s);
				sample(prio, sl, priority);
			}
			sample(stream_prio, sl, slot < s.priorities.size() ? s.priorities[slot] : 0);
			if (slot < s.partitions.size()) {
				unsigned int n = 0;
				for (uint64_t w : s.partitions[slot].units)
					n += unsigned(__builtin_popcountll(w));
				sample(units, sl, partition_is_whole(s.partitions[slot]) ? s.nr_units : n);
			}
		}
	}
	return f.take();
}

std::string metrics_text(const std::vector<DomainState> &domains, const std::string &transport)
{
	std::ostringstream out;
	prometheus::TextSerializer().Serialize(out, metric_families(domains, transport));
	return out.str();
}

class MetricsExporter::Collector : public prometheus::Collectable {
public:
	explicit Collector(MetricsExporter *owner) : owner_(owner) {}
	std::vector<MetricFamily> Collect() const override { return owner_->collect(); }

private:
	MetricsExporter *owner_;
};

MetricsExporter::MetricsExporter(MetricsSettings settings, DomainAttrs attrs, Log log)
	: settings_(std::move(settings)), attrs_(std::move(attrs)), log_(std::move(log))
{
}

MetricsExporter::~MetricsExporter()
{
	exposer_.reset(); // no scrape runs past here
	{
		std::lock_guard lock(stop_mutex_);
		stop_ = true;
	}
	stop_cv_.notify_all();
	if (writer_.joinable())
		writer_.join();
}

std::vector<MetricFamily> MetricsExporter::collect()
{
	std::lock_guard lock(mutex_);
	std::vector<DomainState> states;
	for (unsigned int d : attrs_.domains()) {
		DomainState s;
		std::string error;
		if (read_domain_state(attrs_, d, &s, &error)) {
			states.push_back(std::move(s));
			continue;
		}
		scrape_errors_++;
		if (error != last_error_) // once per different error, not per scrape
			log_(LOG_WARNING, "metrics: " + error);
		last_error_ = error;
	}
	auto families = metric_families(states, attrs_.on_socket() ? "socket" : "device");
	MetricFamily errors{"gpuslot_scrape_errors_total",
			    "Domains gpuslotd could not read for a scrape.",
			    MetricType::Counter,
			    {}};
	ClientMetric m;
	m.counter.value = double(scrape_errors_);
	errors.metric.push_back(m);
	families.push_back(std::move(errors));
	return families;
}

bool MetricsExporter::write_textfile(std::string *error)
{
	std::ostringstream text;
	prometheus::TextSerializer().Serialize(text, collect());
	const std::string body = text.str();
	// node-exporter reads only *.prom: the temporary name is never read,
	// and rename() replaces the file in one step.
	const std::filesystem::path tmp =
		settings_.textfile.parent_path() /
		("." + settings_.textfile.filename().string() + "." + std::to_string(getpid()));
	int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		*error = tmp.string() + ": " + strerror(errno);
		return false;
	}
	size_t done = 0;
	while (done < body.size()) {
		ssize_t n = ::write(fd, body.data() + done, body.size() - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*error = tmp.string() + ": " + strerror(n < 0 ? errno : EIO);
			::close(fd);
			::unlink(tmp.c_str());
			return false;
		}
		done += size_t(n);
	}
	if (::fsync(fd) || ::close(fd) || ::rename(tmp.c_str(), settings_.textfile.c_str())) {
		*error = settings_.textfile.string() + ": " + strerror(errno);
		::unlink(tmp.c_str());
		return false;
	}
	return true;
}

bool MetricsExporter::start(std::string *error)
{
	// The listener's and the writer's threads take no signal: gpuslotd's
	// SIGHUP, SIGTERM and SIGINT go to its main thread (a signalfd there
	// on the device transport, which a thread with the default action
	// would beat to it, ending gpuslotd).
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	const bool ok = start_threads(error);
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	return ok;
}

bool MetricsExporter::start_threads(std::string *error)
{
	collector_ = std::make_shared<Collector>(this);
	if (!settings_.listen.empty()) {
		try {
			// civetweb's options: one port, no files; threads enough
			// that a few clients which connect and send nothing (or
			// trickle) leave scrapes a thread, and a request that
			// has not come whole within the timeout is dropped, so
			// that no client keeps a thread for long (issue 38: two
			// idle clients of any local user held civetweb's two
			// threads for 30 s each, and again at every reconnect).
			exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
				"listening_ports", settings_.listen, "num_threads",
				std::to_string(kMetricsHttpThreads), "request_timeout_ms",
				std::to_string(kMetricsRequestTimeoutMs), "linger_timeout_ms",
				std::to_string(kMetricsLingerTimeoutMs)});
		} catch (const std::exception &e) {
			*error = "metrics_listen " + settings_.listen + ": cannot listen (" +
				 e.what() + ")";
			return false;
		}
		exposer_->RegisterCollectable(collector_);
		log_(LOG_INFO, "metrics: serving Prometheus metrics on http://" + settings_.listen +
				       "/metrics");
	}
	if (!settings_.textfile.empty()) {
		if (!write_textfile(error))
			return false;
		log_(LOG_INFO, "metrics: writing " + settings_.textfile.string() + " every " +
				       std::to_string(settings_.textfile_interval_ms) + " ms");
		writer_ = std::thread([this] {
			std::string last;
			std::unique_lock lock(stop_mutex_);
			while (!stop_cv_.wait_for(lock,
						  std::chrono::milliseconds(settings_.textfile_interval_ms),
						  [this] { return stop_; })) {
				lock.unlock();
				std::string err;
				if (!write_textfile(&err) && err != last)
					log_(LOG_WARNING, "metrics: " + err);
				last = err;
				lock.lock();
			}
		});
	}
	return true;
}

} // namespace gpuslot
