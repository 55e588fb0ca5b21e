// SPDX-License-Identifier: GPL-2.0
// gpuslotd.conf: what it accepts, and the message for each kind of mistake.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/config.hpp"

namespace {

gpuslot::Config parse_ok(const std::string &text)
{
	gpuslot::Config c;
	std::string err;
	EXPECT_TRUE(gpuslot::parse_config(text, "t.conf", &c, &err)) << err;
	return c;
}

std::string parse_error(const std::string &text)
{
	gpuslot::Config c;
	std::string err;
	EXPECT_FALSE(gpuslot::parse_config(text, "t.conf", &c, &err)) << text;
	return err;
}

TEST(Config, EmptyIsTheDefaults)
{
	auto c = parse_ok("");
	EXPECT_EQ(c.audit_interval_ms, 2000u);
	EXPECT_FALSE(c.for_gpu(0).k);
	EXPECT_FALSE(c.for_gpu(3).hqd_limit);
}

TEST(Config, GpuSectionsOverrideTheDefault)
{
	auto c = parse_ok("# comment\n[daemon]\naudit_interval_ms = 0\n"
			  "[default]\nk = 4\nboost_priority = 40 ; inline\n"
			  "max_boost_share = 30\npreempt_share = 10\n"
			  "[gpu1]\nk = 2\nsizes = 75%,25%\nhqd_limit = 8\npreempt_window_ms = 100\n"
			  "mask_algorithm = D\nmax_boost_share = 100\n"
			  "[gpu2]\nsizes =\nmask_algorithm = auto\n");
	EXPECT_EQ(c.audit_interval_ms, 0u);
	EXPECT_EQ(*c.for_gpu(0).k, 4u);
	EXPECT_EQ(*c.for_gpu(0).boost_priority, 40u);
	EXPECT_FALSE(c.for_gpu(0).sizes);
	EXPECT_EQ(*c.for_gpu(1).k, 2u);
	EXPECT_EQ(*c.for_gpu(1).sizes, "75%,25%");
	EXPECT_EQ(*c.for_gpu(1).boost_priority, 40u);
	EXPECT_EQ(*c.for_gpu(1).hqd_limit, 8u);
	EXPECT_EQ(*c.for_gpu(2).k, 4u); // an empty value leaves the key unset
	EXPECT_EQ(*c.for_gpu(1).mask_algorithm, gpuslot::MaskAlgorithm::D);
	EXPECT_FALSE(c.for_gpu(2).mask_algorithm); // auto: chosen per GPU
	EXPECT_EQ(*c.for_gpu(0).max_boost_share, 30u);
	EXPECT_EQ(*c.for_gpu(1).max_boost_share, 100u);
	EXPECT_EQ(*c.for_gpu(1).preempt_share, 10u);
	EXPECT_EQ(*c.for_gpu(1).preempt_window_ms, 100u);
	EXPECT_FALSE(c.for_gpu(0).preempt_window_ms);
}

TEST(Config, EveryMistakeNamesTheLineAndWhatIsAllowed)
{
	struct Case {
		const char *text, *message;
	} cases[] = {
		{"[default]\nk = 0\n", "t.conf:2: k '0': expected a whole number from 1 to 64"},
		{"[default]\nk = 65\n", "t.conf:2: k '65'"},
		{"[default]\nk = four\n", "t.conf:2: k 'four'"},
		{"[default]\nk = -1\n", "t.conf:2: k '-1'"},
		{"[default]\nboost_priority = 100\n", "t.conf:2: boost_priority '100': expected 0 (no boost)"},
		// 99 is what ends a boost: the expiry thread, the socket server.
		{"[default]\nboost_priority = 99\n", "t.conf:2: boost_priority '99': expected 0 (no boost) or a SCHED_FIFO priority from 1 to 98"},
		{"[gpu1]\nmax_boost_share = 0\n", "t.conf:2: max_boost_share '0': expected the share of time"},
		{"[default]\nmax_boost_share = 101\n", "t.conf:2: max_boost_share '101'"},
		{"[default]\npreempt_share = 0\n", "t.conf:2: preempt_share '0': expected the share of GPU time"},
		{"[gpu0]\npreempt_share = 101\n", "t.conf:2: preempt_share '101'"},
		{"[default]\npreempt_window_ms = 0\n", "t.conf:2: preempt_window_ms '0': expected the window"},
		{"[default]\npreempt_window_ms = 60001\n", "t.conf:2: preempt_window_ms '60001'"},
		{"[default]\nhqd_limit = 0\n", "t.conf:2: hqd_limit '0': expected 1 to 1024"},
		{"[default]\nmask_algorithm = E\n",
		 "t.conf:2: mask_algorithm 'E': expected auto, A (Linux <= 5.14)"},
		{"[gpu0]\nmask_algorithm = d\n", "t.conf:2: mask_algorithm 'd'"},
		{"[default]\nhqd_limit = 1025\n", "t.conf:2: hqd_limit '1025'"},
		{"[default]\nsizes = 30,x\n", "t.conf:2: sizes '30,x'"},
		{"[default]\nsizes = 30,0\n", "a partition of 0 CUs"},
		{"[default]\nslots = 4\n", "t.conf:2: unknown key 'slots' in [default]; known: k, sizes"},
		{"[gpu16]\nk = 2\n", "t.conf:2: unknown section [gpu16]"},
		{"[gpu01]\nk = 2\n", "t.conf:2: unknown section [gpu01]"},
		{"[gpus]\nk = 2\n", "unknown section [gpus]"},
		{"k = 2\n", "t.conf:1: unknown section []"},
		{"[daemon]\naudit_interval_ms = 50\n", "t.conf:2: audit_interval_ms '50': expected 0 (no audit) or 100"},
		{"[daemon]\nk = 2\n", "t.conf:2: unknown key 'k' in [daemon]"},
		{"[default]\nk = 2\nk = 3\n", "t.conf:3: 'k' is set twice in [default]"},
		{"[default]\nk 2\n", "t.conf:2: expected '[section]', 'key = value' or a comment"},
		{"[default\nk = 2\n", "t.conf:1: expected '[section]'"},
		{"[default]\nk = 3\nsizes = 50%,50%\n", "t.conf: [default] has k 3 but 2 sizes"},
		{"[default]\nk = 3\n[gpu0]\nsizes = 10,10\n", "t.conf: [gpu0] has k 3 but 2 sizes"},
		// Issue 32: priorities, sizes with all, layout = protect.
		{"[default]\npriorities = 5,16\n",
		 "t.conf:2: priorities '5,16': priority '16' is not 0 to 15 (the slot's GPU stream "
		 "priority; more is more urgent); expected one GPU stream priority per slot, "
		 "comma-separated, each 0 to 15"},
		{"[default]\npriorities = 5,x\n", "t.conf:2: priorities '5,x': priority 'x' is not 0 to 15"},
		{"[default]\npriorities = -1\n", "t.conf:2: priorities '-1'"},
		{"[default]\npriorities = 1,\n", "a priority is missing after the last ','"},
		{"[gpu2]\npriorities = 5,0,0\nk = 4\n", "t.conf: [gpu2] has k 4 but 3 priorities; give one priority per slot"},
		{"[default]\nsizes = all,50%\npriorities = 1,0,0\n",
		 "t.conf: [default] has 2 sizes but 3 priorities"},
		{"[default]\nsizes = al,25%\n", "t.conf:2: sizes 'al,25%': size 'al' is not a whole number"},
		{"[default]\nsizes = all,25%\n[gpu0]\nk = 3\n", "t.conf: [gpu0] has k 3 but 2 sizes"},
		{"[default]\nlayout = guard\n",
		 "t.conf:2: layout 'guard': expected partitions (k partitions from sizes and "
		 "priorities) or protect"},
		{"[default]\nlayout = protect\nsizes = all,50%\n",
		 "t.conf: [default] has layout = protect and sizes: protect plans both itself"},
		{"[gpu1]\nlayout = protect\npriorities = 1,0\n",
		 "t.conf: [gpu1] has layout = protect and priorities"},
		{"[default]\nlayout = protect\nk = 1\n", "protect needs slot 0 and at least one confined slot (k >= 2)"},
		{"[default]\nreserve = 25%\n", "t.conf: [default] has reserve but not layout = protect"},
		{"[default]\nlayout = protect\nreserve = 25\n",
		 "t.conf:3: reserve '25': expected a percentage of the GPU from 0% to 90%"},
		{"[default]\nlayout = protect\nreserve = 95%\n", "t.conf:3: reserve '95%'"},
	};
	for (const auto &c : cases)
		EXPECT_NE(parse_error(c.text).find(c.message), std::string::npos)
			<< c.text << "\n-> " << parse_error(c.text);
}

TEST(Config, PrioritiesAndWholeGpuSizesPerSlot)
{
	auto c = parse_ok("[default]\nsizes = all,25%,25%,25%\npriorities = 5,0,0,0\n"
			  "[gpu1]\nk = 2\nsizes = 50%,50%\npriorities = 0,3\n"
			  "[gpu2]\nlayout = protect\nreserve = 30%\nk = 4\n"
			  "[gpu3]\nlayout = protect\n");
	EXPECT_EQ(*c.for_gpu(0).sizes, "all,25%,25%,25%");
	EXPECT_EQ(*c.for_gpu(0).priorities, "5,0,0,0");
	EXPECT_EQ(c.for_gpu(0).k_or(1), 4u); // the number of sizes
	EXPECT_EQ(*c.for_gpu(1).priorities, "0,3");
	EXPECT_EQ(c.for_gpu(1).k_or(1), 2u);
	EXPECT_FALSE(c.for_gpu(0).protect());
	EXPECT_TRUE(c.for_gpu(2).protect());
	EXPECT_EQ(*c.for_gpu(2).reserve_percent, 30u);
	// A [gpuN] that sets a layout key replaces [default]'s sizes and
	// priorities: protect plans both itself.
	EXPECT_FALSE(c.for_gpu(2).sizes);
	EXPECT_FALSE(c.for_gpu(2).priorities);
	EXPECT_EQ(c.for_gpu(2).k_or(1), 4u);
	// protect without k: the module's k, but at least slot 0 and one more.
	EXPECT_EQ(c.for_gpu(3).k_or(1), 2u);
	EXPECT_EQ(c.for_gpu(3).k_or(5), 5u);
	EXPECT_FALSE(c.for_gpu(3).reserve_percent); // the default reserve
	// Priorities alone give k; unset priorities are all 0.
	EXPECT_EQ(parse_ok("[default]\npriorities = 1,0,0\n").for_gpu(0).k_or(1), 3u);
	EXPECT_FALSE(parse_ok("[default]\nk = 2\n").for_gpu(0).priorities);
}

TEST(Config, MetricsAreOffUnlessAskedAndLocalByDefault)
{
	EXPECT_FALSE(parse_ok("").metrics.enabled());
	EXPECT_FALSE(parse_ok("[daemon]\nmetrics_listen =\nmetrics_textfile =\n").metrics.enabled());
	auto c = parse_ok("[daemon]\nmetrics_listen = 9842\n");
	EXPECT_EQ(c.metrics.listen, "127.0.0.1:9842"); // a bare port: loopback only
	EXPECT_EQ(parse_ok("[daemon]\nmetrics_listen = [::1]:9842\n").metrics.listen, "[::1]:9842");
	EXPECT_EQ(parse_ok("[daemon]\nmetrics_listen = 0.0.0.0:9842\n").metrics.listen,
		  "0.0.0.0:9842");
	c = parse_ok("[daemon]\nmetrics_textfile = /var/lib/prometheus/node-exporter/gpuslot.prom\n"
		     "metrics_textfile_interval_ms = 5000\n");
	EXPECT_EQ(c.metrics.textfile, "/var/lib/prometheus/node-exporter/gpuslot.prom");
	EXPECT_EQ(c.metrics.textfile_interval_ms, 5000u);
	EXPECT_TRUE(c.metrics.enabled());
}

TEST(Config, BadMetricsKeysNameTheLineAndWhatIsAllowed)
{
	const std::pair<const char *, const char *> cases[] = {
		{"metrics_listen = localhost:9842", "t.conf:2: metrics_listen 'localhost:9842': expected"},
		{"metrics_listen = 65536", "expected a port (127.0.0.1 only)"},
		{"metrics_listen = 127.0.0.1", "metrics_listen '127.0.0.1'"},
		{"metrics_listen = ::1:9842", "[::1]:PORT"},
		{"metrics_textfile = gpuslot.prom", "expected an absolute path ending in .prom"},
		{"metrics_textfile = /var/lib/x/gpuslot.txt", "node-exporter's textfile collector"},
		{"metrics_textfile_interval_ms = 999", "expected 1000 to 3600000"},
		{"metrics_port = 9842", "unknown key 'metrics_port' in [daemon]; known: audit_interval_ms, "
					"metrics_listen, metrics_textfile, metrics_textfile_interval_ms"},
	};
	for (const auto &[line, want] : cases)
		EXPECT_NE(parse_error(std::string("[daemon]\n") + line + "\n").find(want),
			  std::string::npos)
			<< line << ": " << parse_error(std::string("[daemon]\n") + line + "\n");
}

TEST(Config, MissingFileIsTheDefaultsAndUnreadableIsAnError)
{
	gpuslot::Config c;
	std::string err;
	EXPECT_TRUE(gpuslot::load_config("/nonexistent/gpuslotd.conf", &c, &err));
	EXPECT_FALSE(gpuslot::load_config("/proc/self/mem", &c, &err));
	EXPECT_NE(err, "");
	auto dir = testing::TempDir() + "/gpuslotd.conf";
	std::ofstream(dir) << "[default]\nk = 99\n";
	EXPECT_FALSE(gpuslot::load_config(dir, &c, &err));
	EXPECT_NE(err.find(dir + ":2: k '99'"), std::string::npos) << err;
}

} // namespace

// A config path that is not a small regular file is refused with the
// reason, without waiting on it or reading it without end.
TEST(Config, OnlySmallRegularFilesAreRead)
{
	namespace fs = std::filesystem;
	const fs::path dir = fs::path(testing::TempDir()) /
			     ("gpuslot-conf-" + std::to_string(getpid()));
	fs::remove_all(dir);
	fs::create_directories(dir);
	gpuslot::Config c;
	std::string err;
	// Missing: the defaults for gpuslotd, an error for --check-config.
	EXPECT_TRUE(gpuslot::load_config(dir / "none.conf", &c, &err));
	EXPECT_FALSE(gpuslot::load_config(dir / "none.conf", &c, &err, true));
	EXPECT_NE(err.find("none.conf: No such file or directory"), std::string::npos) << err;
	EXPECT_FALSE(gpuslot::load_config(dir, &c, &err));
	EXPECT_NE(err.find("Is a directory"), std::string::npos) << err;
	ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
	EXPECT_FALSE(gpuslot::load_config(dir / "fifo", &c, &err)); // no writer: must not hang
	EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
	EXPECT_FALSE(gpuslot::load_config("/dev/zero", &c, &err));
	EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
	{
		std::ofstream big(dir / "big.conf");
		big << "[default]\n" << std::string(2 << 20, '#') << "\n";
	}
	EXPECT_FALSE(gpuslot::load_config(dir / "big.conf", &c, &err));
	EXPECT_NE(err.find("larger than 1024 KiB"), std::string::npos) << err;
	fs::remove_all(dir);
}
