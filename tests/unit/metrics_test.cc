// SPDX-License-Identifier: GPL-2.0
// gpuslotd's Prometheus metrics from a domain's state, the wait quantiles
// gpuslotctl computes as histogram_quantile() does, and the CDI spec.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cdi.hpp"
#include "gpuslotd/metrics.hpp"
#include "device/status.hpp"

namespace {

gpuslot::DomainState domain()
{
	gpuslot::DomainState s;
	s.domain = 1;
	s.k = 2;
	s.generation = 7;
	s.boost_priority = 50;
	s.max_hold_ms = 500;
	s.unit_kind = GPUSLOT_UNIT_AMD_CU;
	s.nr_units = 60;
	s.partitions.resize(2);
	s.partitions[0].units[0] = 0x111;
	s.priorities = {2, 0};
	s.tables = true; // gpuslotd reads them as root
	s.holders.push_back({0, 700, 701, "perception", 1500000, gpuslot::HoldBoost::boosted});
	s.waiters.push_back({800, 802, "planner", 2500, ~0ULL});
	s.nr_holders = 1;
	s.nr_waiters = 3; // the sysfs count, whatever the table has
	s.held_mask = 1;
	s.acquisitions = 10;
	s.contended = 4;
	s.timeouts = 1;
	s.interrupted = 2;
	s.overruns = 3;
	s.total_wait_ns = 100;
	s.max_wait_ns = 15;
	s.max_hold_ns = 2000000000;
	s.wait_hist.assign(32, 0);
	s.wait_hist[3] = 6; // [8, 16) ns
	s.wait_hist[4] = 4; // [16, 32) ns
	s.hqd_limit = 24;
	s.hqd_used = 6;
	s.pci_bus_id = "0000:03:00.0";
	return s;
}

bool has_line(const std::string &text, const std::string &line)
{
	return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(Metrics, EveryDomainSeriesHasGpuAndPciBusIdAndNoProcessLabel)
{
	const std::string t = gpuslot::metrics_text({domain()}, "device");
	const std::string l = "gpu=\"1\",pci_bus_id=\"0000:03:00.0\"";
	EXPECT_TRUE(has_line(t, "gpuslot_slots{" + l + "} 2")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_slots_held{" + l + "} 1")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_waiters{" + l + "} 3")) << t; // nr_waiters
	EXPECT_TRUE(has_line(t, "gpuslot_acquisitions_total{" + l + "} 10")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_contended_acquisitions_total{" + l + "} 4")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_acquire_timeouts_total{" + l + "} 1")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_acquire_interruptions_total{" + l + "} 2")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_hold_overruns_total{" + l + "} 3")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_hold_max_seconds{" + l + "} 2")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_hqd_reserved{" + l + "} 6")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_slot_units{" + l + ",slot=\"0\"} 3")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_slot_units{" + l + ",slot=\"1\"} 60")) << t; // whole GPU
	EXPECT_TRUE(has_line(t, "gpuslot_slot_boost_priority{" + l + ",slot=\"0\"} 50")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_slot_boost_priority{" + l + ",slot=\"1\"} 0")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_slot_hold_seconds{" + l + ",slot=\"0\"} 0.0015")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_slot_priority{" + l + ",slot=\"0\"} 2")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_slot_priority{" + l + ",slot=\"1\"} 0")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_domain_info{" + l +
					",transport=\"device\",unit_kind=\"amd-cu\"} 1"))
		<< t;
	EXPECT_EQ(t.find("pid"), std::string::npos);
	EXPECT_EQ(t.find("perception"), std::string::npos);
	EXPECT_EQ(t.find("planner"), std::string::npos);
}

// Read without the debug/ tables (not root): the counts stay, who holds
// what is left out rather than shown as free.
TEST(Metrics, WithoutTheTablesHoldsAreLeftOutNotZero)
{
	auto s = domain();
	s.tables = false;
	s.holders.clear();
	s.waiters.clear();
	const std::string t = gpuslot::metrics_text({s}, "device");
	const std::string l = "gpu=\"1\",pci_bus_id=\"0000:03:00.0\"";
	EXPECT_TRUE(has_line(t, "gpuslot_slots_held{" + l + "} 1")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_waiters{" + l + "} 3")) << t;
	EXPECT_EQ(t.find("gpuslot_slot_hold_seconds{"), std::string::npos) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_slot_priority{" + l + ",slot=\"0\"} 2")) << t;
}

TEST(Metrics, TheWaitHistogramIsCumulativeInSeconds)
{
	const std::string t = gpuslot::metrics_text({domain()}, "socket");
	const std::string l = "gpu=\"1\",pci_bus_id=\"0000:03:00.0\"";
	EXPECT_TRUE(has_line(t, "# TYPE gpuslot_wait_seconds histogram")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_wait_seconds_bucket{" + l + ",le=\"8e-09\"} 0")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_wait_seconds_bucket{" + l + ",le=\"1.6e-08\"} 6")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_wait_seconds_bucket{" + l + ",le=\"3.2e-08\"} 10")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_wait_seconds_bucket{" + l + ",le=\"+Inf\"} 10")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_wait_seconds_count{" + l + "} 10")) << t;
	EXPECT_TRUE(has_line(t, "gpuslot_wait_seconds_sum{" + l + "} 1e-07")) << t;
	// 32 buckets, the last +Inf.
	int buckets = 0;
	for (size_t at = 0; (at = t.find("gpuslot_wait_seconds_bucket{", at)) != std::string::npos; at++)
		buckets++;
	EXPECT_EQ(buckets, 32);
}

TEST(Metrics, NvidiaDomainsCarryThePciBusIdAsDcgmWritesIt)
{
	auto s = domain();
	s.unit_kind = GPUSLOT_UNIT_NV_SM_GROUP;
	s.pci_bus_id = "0000:3b:00.0";
	const std::string t = gpuslot::metrics_text({s}, "device");
	EXPECT_TRUE(has_line(t, "gpuslot_slots{gpu=\"1\",pci_bus_id=\"00000000:3B:00.0\"} 2")) << t;
}

TEST(Metrics, QuantilesInterpolateWithinABucketAsPrometheusDoes)
{
	std::vector<uint64_t> h(32, 0);
	EXPECT_TRUE(std::isnan(gpuslot::wait_quantile_seconds(h, 0.5)));
	h[3] = 6; // [8, 16) ns
	h[4] = 4; // [16, 32) ns
	// rank 5 of 10: 5/6 into [8, 16) ns.
	EXPECT_DOUBLE_EQ(gpuslot::wait_quantile_seconds(h, 0.5), (8 + 8 * 5.0 / 6) / 1e9);
	// rank 9: 3/4 into [16, 32) ns.
	EXPECT_DOUBLE_EQ(gpuslot::wait_quantile_seconds(h, 0.9), (16 + 16 * 3.0 / 4) / 1e9);
	// In the +Inf bucket: the bound below it.
	std::vector<uint64_t> slow(32, 0);
	slow[31] = 1;
	EXPECT_DOUBLE_EQ(gpuslot::wait_quantile_seconds(slow, 0.5), std::ldexp(1.0, 31) / 1e9);
}

// A free TCP port on 127.0.0.1 (the kernel's pick, given back).
unsigned int free_port()
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	EXPECT_EQ(bind(s, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	EXPECT_EQ(getsockname(s, reinterpret_cast<sockaddr *>(&a), &len), 0);
	close(s);
	return ntohs(a.sin_port);
}

// A connection to 127.0.0.1:@port whose reads and writes give up after
// @timeout_s (no test waits for ever).
int http_connect(unsigned int port, int timeout_s)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	timeval tv{timeout_s, 0};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_port = htons(uint16_t(port));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	EXPECT_EQ(connect(s, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	return s;
}

// Issue 38: clients of any local user that connect and send nothing, or
// trickle a request a byte at a time, each hold one of civetweb's threads
// until the request timeout: more of them than there are threads still
// leave a scrape its answer within a few request timeouts (old: 2
// threads, 30 s each, and the scrape waited behind every one).
TEST(MetricsHttp, SlowClientsDoNotKeepAScrapeOut)
{
	const std::filesystem::path sysfs =
		std::filesystem::temp_directory_path() / ("gpuslot-metrics-" + std::to_string(getpid()));
	std::filesystem::create_directories(sysfs); // no domains: an empty answer
	gpuslot::MetricsSettings settings;
	const unsigned int port = free_port();
	settings.listen = "127.0.0.1:" + std::to_string(port);
	gpuslot::MetricsExporter exporter(settings, gpuslot::DomainAttrs::module(sysfs),
					  [](int, const std::string &) {});
	std::string error;
	ASSERT_TRUE(exporter.start(&error)) << error;

	std::vector<int> idle;
	for (unsigned int i = 0; i < gpuslot::kMetricsHttpThreads + 2; i++)
		idle.push_back(http_connect(port, 5));
	std::atomic<bool> stop{false};
	std::thread trickle([&] {
		const int s = http_connect(port, 5);
		const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
		for (size_t i = 0; !stop; i++) {
			char c = i < request.size() ? request[i] : 'a';
			if (send(s, &c, 1, MSG_NOSIGNAL) != 1)
				break;
			usleep(100000);
		}
		close(s);
	});
	usleep(200000); // the slow ones are in first

	const auto start = std::chrono::steady_clock::now();
	const int limit_s = 3 * gpuslot::kMetricsRequestTimeoutMs / 1000;
	const int s = http_connect(port, limit_s);
	const std::string get = "GET /metrics HTTP/1.0\r\n\r\n";
	ASSERT_EQ(send(s, get.data(), get.size(), MSG_NOSIGNAL), ssize_t(get.size()));
	std::string answer;
	char buf[4096];
	for (ssize_t n; (n = recv(s, buf, sizeof(buf), 0)) > 0;)
		answer.append(buf, size_t(n));
	close(s);
	const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
		std::chrono::steady_clock::now() - start);
	stop = true;
	trickle.join();
	for (int i : idle)
		close(i);
	std::filesystem::remove_all(sysfs);
	EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u)
		<< "no scrape answer within " << limit_s << " s, behind "
		<< gpuslot::kMetricsHttpThreads + 3 << " slow clients (" << took.count()
		<< " ms): " << answer.substr(0, 80);
	EXPECT_NE(answer.find("gpuslot_scrape_errors_total"), std::string::npos);
}

TEST(Cdi, TheSpecIsCdi050WithADevicePerDomainAndAll)
{
	gpuslot::CdiOptions o;
	o.socket = true;
	o.socket_dir = "/run/gpuslot";
	o.domains = {0, 1};
	auto j = nlohmann::json::parse(gpuslot::cdi_spec_json(o));
	EXPECT_EQ(j["cdiVersion"], "0.5.0"); // Debian 12's podman refuses 0.6.0
	EXPECT_EQ(j["kind"], "gpuslot.dev/gpu");
	ASSERT_EQ(j["devices"].size(), 3u);
	EXPECT_EQ(j["devices"][0]["name"], "0");
	EXPECT_EQ(j["devices"][2]["name"], "all");
	const auto &e = j["devices"][1]["containerEdits"];
	// Its domain's socket alone: never the directory, which holds
	// gpuslotd.state.
	ASSERT_EQ(e["mounts"].size(), 1u);
	EXPECT_EQ(e["mounts"][0]["hostPath"], "/run/gpuslot/gpu1.sock");
	EXPECT_EQ(e["mounts"][0]["containerPath"], "/run/gpuslot/gpu1.sock");
	const auto &all = j["devices"][2]["containerEdits"]["mounts"];
	ASSERT_EQ(all.size(), 2u);
	EXPECT_EQ(all[0]["hostPath"], "/run/gpuslot/gpu0.sock");
	EXPECT_EQ(all[1]["hostPath"], "/run/gpuslot/gpu1.sock");
	EXPECT_NE(std::find(e["mounts"][0]["options"].begin(), e["mounts"][0]["options"].end(), "ro"),
		  e["mounts"][0]["options"].end());
	EXPECT_NE(std::find(e["env"].begin(), e["env"].end(), "GPUSLOT_DOMAINS=1"), e["env"].end());
	EXPECT_FALSE(e.contains("deviceNodes"));
	EXPECT_NE(std::find(j["devices"][2]["containerEdits"]["env"].begin(),
			    j["devices"][2]["containerEdits"]["env"].end(), "GPUSLOT_DOMAINS=0,1"),
		  j["devices"][2]["containerEdits"]["env"].end());

	o.socket = false;
	j = nlohmann::json::parse(gpuslot::cdi_spec_json(o));
	const auto &d = j["devices"][0]["containerEdits"];
	EXPECT_EQ(d["deviceNodes"][0]["path"], "/dev/gpuslot");
	EXPECT_FALSE(d["deviceNodes"][0].contains("hostPath")); // 0.5.0's field, only when needed
	EXPECT_FALSE(d.contains("mounts"));
}

} // namespace
