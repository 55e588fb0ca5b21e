// SPDX-License-Identifier: GPL-2.0
// Reading the module's sysfs and debugfs (a tree written as the module
// shows them), partition text and the %*pb bitmaps, the queue audit over a
// KFD proc tree, and the status picture.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "amd/audit.hpp"
#include "device/module.hpp"
#include "device/status.hpp"

namespace fs = std::filesystem;

namespace {

// A domain as the module shows it: /sys/class/gpuslot/gpu0/ (one value per
// file, slot<i>/ and stats/ directories) and the debugfs tables of
// /sys/kernel/debug/gpuslot/gpu0/, written into a temporary directory.
class ModuleState : public testing::Test {
protected:
	void SetUp() override
	{
		root_ = fs::path(testing::TempDir()) / ("gpuslot-" + std::to_string(getpid()));
		fs::remove_all(root_);
		write("k", "3\n");
		write("generation", "9\n");
		write("boost_priority", "50\n");
		write("max_hold_ms", "500\n");
		write("max_boost_share", "50\n");
		write("hqd_limit", "24\n");
		write("hqd_used", "6\n");
		write("hqd_waiters", "0\n");
		write("pci_bus_id", "\n");
		write("unit_kind", "amd-cu\n");
		write("unit_size", "1\n");
		write("nr_units", "60\n");
		write("nr_holders", "1\n");
		write("nr_waiters", "120\n");
		write("held_mask", "0x2\n");
		for (const char *c : {"contended", "timeouts", "interrupted", "total_wait_ns",
				      "max_wait_ns"})
			write(std::string("stats/") + c, "0\n");
		write("stats/acquisitions", "10\n");
		write("stats/max_hold_ns", "9\n");
		write("stats/overruns", "2\n");
		// %*pb over 60 bits: a 7-digit chunk, then 8 digits.
		write("slot0/units", "1111111,11111111\n");
		write("slot0/priority", "0\n");
		write("slot1/units", "2222222,22222222\n");
		write("slot1/priority", "0\n");
		write("slot2/units", "all\n");
		write("slot2/priority", "3\n");
		// A retired slot's files stay (ENXIO on the module): never read.
		write("slot3/units", "garbage\n");
		table("holders", "1 700 701 Web\\x20Content 1500000 overrun\n");
		// Past a page, in full: debugfs tables are never cut.
		std::string waiters;
		for (int i = 0; i < 120; i++)
			waiters += std::to_string(800 + i) + " " + std::to_string(900 + i) +
				   " planner 2500 0xffffffffffffffff\n";
		ASSERT_GT(waiters.size(), 4096u);
		table("waiters", waiters);
		table("queues", "700 Web\\x20Content 6\n");
		// As debugfs writes it: bucket i from 2^i ns.
		std::string hist = "1 0\n2 1\n";
		for (int i = 2; i < GPUSLOT_HIST_BUCKETS; i++)
			hist += std::to_string(1ULL << i) + " 0\n";
		table("wait_hist", hist);
	}
	void TearDown() override { fs::remove_all(root_); }

	void write(const std::string &attr, const std::string &text)
	{
		fs::create_directories((sysfs() / "gpu0" / attr).parent_path());
		std::ofstream(sysfs() / "gpu0" / attr) << text;
	}
	void table(const std::string &name, const std::string &text)
	{
		fs::create_directories(debugfs() / "gpu0");
		std::ofstream(debugfs() / "gpu0" / name) << text;
	}
	fs::path sysfs() const { return root_ / "class"; }
	fs::path debugfs() const { return root_ / "debug"; }
	bool read(gpuslot::DomainState *s, std::string *err)
	{
		return gpuslot::read_domain_state(sysfs(), 0, s, err, debugfs());
	}

	fs::path root_;
};

TEST_F(ModuleState, ParsesEveryFile)
{
	gpuslot::DomainState s;
	std::string err;
	ASSERT_TRUE(read(&s, &err)) << err;
	EXPECT_EQ(gpuslot::list_domains(sysfs()), std::vector<unsigned int>{0});
	EXPECT_EQ(s.k, 3u);
	EXPECT_EQ(s.generation, 9u);
	EXPECT_EQ(s.unit_kind, unsigned(GPUSLOT_UNIT_AMD_CU));
	EXPECT_EQ(s.nr_units, 60u);
	EXPECT_EQ(s.unit_size, 1u);
	ASSERT_EQ(s.partitions.size(), 3u);
	EXPECT_EQ(s.partitions[0].units[0], 0x111111111111111ULL);
	EXPECT_EQ(s.partitions[1].units[0], 0x222222222222222ULL);
	EXPECT_TRUE(gpuslot::partition_is_whole(s.partitions[2]));
	EXPECT_EQ(s.priorities, (std::vector<unsigned int>{0, 0, 3}));
	EXPECT_EQ(s.nr_holders, 1u);
	EXPECT_EQ(s.nr_waiters, 120u);
	EXPECT_EQ(s.held_mask, 0x2u);
	ASSERT_TRUE(s.tables) << s.tables_note;
	ASSERT_EQ(s.holders.size(), 1u);
	EXPECT_EQ(s.holders[0].comm, "Web Content"); // a name with a space
	EXPECT_EQ(s.holders[0].held_ns, 1500000u);
	EXPECT_EQ(s.holders[0].boost, gpuslot::HoldBoost::overrun);
	EXPECT_EQ(s.max_hold_ms, 500u);
	EXPECT_EQ(s.overruns, 2u);
	EXPECT_EQ(s.acquisitions, 10u); // every counter of stats/, for metrics
	EXPECT_EQ(s.max_hold_ns, 9u);
	ASSERT_EQ(s.wait_hist.size(), size_t(GPUSLOT_HIST_BUCKETS));
	EXPECT_EQ(s.wait_hist[1], 1u);
	EXPECT_EQ(s.pci_bus_id, ""); // no GPU named for the domain yet
	ASSERT_EQ(s.waiters.size(), 120u);
	EXPECT_EQ(s.waiters[119].pid, 919);
	EXPECT_EQ(s.waiters[0].allowed, ~0ULL);
	ASSERT_EQ(s.queues.size(), 1u);
	EXPECT_EQ(s.queues[0].comm, "Web Content");
	EXPECT_EQ(s.queues[0].reserved, 6u);
}

// A member reads the one-value files; debugfs says EACCES (root's, 0400):
// the state is read without the tables, and says why.
TEST_F(ModuleState, WithoutTheTablesTheCountsRemainAndSayWhy)
{
	if (geteuid() == 0)
		fs::remove_all(debugfs()); // root reads 0000 files: take debugfs away
	else
		fs::permissions(debugfs() / "gpu0" / "holders", fs::perms::none);
	gpuslot::DomainState s;
	std::string err;
	ASSERT_TRUE(read(&s, &err)) << err;
	EXPECT_FALSE(s.tables);
	EXPECT_NE(s.tables_note.find(geteuid() == 0 ? "is debugfs mounted" : "root's only"),
		  std::string::npos) << s.tables_note;
	EXPECT_TRUE(s.holders.empty());
	EXPECT_TRUE(s.wait_hist.empty());
	EXPECT_EQ(s.nr_waiters, 120u);
	gpuslot::StatusGpu g;
	g.state = s;
	const std::string text = gpuslot::status_text({g});
	EXPECT_NE(text.find("B slot 1  15 CUs 0x222222222222222    priority 0  held\n"),
		  std::string::npos) << text;
	EXPECT_NE(text.find("A slot 0  15 CUs 0x111111111111111    priority 0  free\n"),
		  std::string::npos) << text;
	EXPECT_NE(text.find("waiters: 120\n  who holds and waits: not shown: "), std::string::npos)
		<< text;
	auto j = nlohmann::json::parse(gpuslot::status_json({g}));
	EXPECT_EQ(j["gpus"][0]["tables"], false);
	EXPECT_EQ(j["gpus"][0]["slots"][1]["held"], true);
	EXPECT_EQ(j["gpus"][0]["nr_waiters"], 120);
	EXPECT_FALSE(j["gpus"][0].contains("waiters"));
}

// The module escapes names; a line that is not exactly what it writes is
// refused, never read as something else.
TEST_F(ModuleState, NamesAreUnescapedAndStrayWordsRefused)
{
	table("holders", "0 5 6 a\\x0a3\\x5c 9 boosted\n1 7 7 \\x00 1 unboosted\n");
	gpuslot::DomainState s;
	std::string err;
	ASSERT_TRUE(read(&s, &err)) << err;
	ASSERT_EQ(s.holders.size(), 2u);
	EXPECT_EQ(s.holders[0].comm, "a\n3\\");
	EXPECT_EQ(s.holders[1].comm, "");
	gpuslot::StatusGpu g;
	g.state = s;
	std::string text = gpuslot::status_text({g});
	EXPECT_NE(text.find("held by 5 a\\x0a3\\x5c (tid 6)"), std::string::npos) << text;
	EXPECT_NE(text.find("not boosted"), std::string::npos) << text;
	for (const char *bad : {"0 5 6 Web Content 9 boosted\n", "0 5 6 a 9\n",
				"0 5 6 a\\x 9 boosted\n", "0 5 6 a\\x0g 9 boosted\n",
				"0 5 6 a\\y00 9 boosted\n", "0 5 6 a\\x00b 9 boosted\n",
				"0 5 6 a 9 fast\n", "... 3 more\n"}) {
		table("holders", bad);
		EXPECT_FALSE(read(&s, &err)) << bad;
	}
	table("holders", "");
	table("queues", "700 a b 6\n");
	EXPECT_FALSE(read(&s, &err));
	table("queues", "");
	table("waiters", "1 1 a b 5 0x1\n");
	EXPECT_FALSE(read(&s, &err));
	table("waiters", "");
	table("wait_hist", "1 0\n4 1\n"); // bucket 1 starts at 2 ns
	EXPECT_FALSE(read(&s, &err));
	EXPECT_NE(err.find("wait_hist:2: cannot parse '4 1'"), std::string::npos) << err;
}

TEST_F(ModuleState, ABadFileIsNamedWithItsLine)
{
	table("holders", "1 700 701 x 5 boosted\nbroken\n");
	gpuslot::DomainState s;
	std::string err;
	EXPECT_FALSE(read(&s, &err));
	EXPECT_NE(err.find("debug/gpu0/holders:2: cannot parse 'broken'"), std::string::npos) << err;
	table("holders", "");
	write("k", "three\n");
	EXPECT_FALSE(read(&s, &err));
	EXPECT_NE(err.find("class/gpu0/k:1: expected a number, got 'three'"), std::string::npos)
		<< err;
	fs::remove(sysfs() / "gpu0" / "k");
	EXPECT_FALSE(read(&s, &err));
	EXPECT_NE(err.find("gpu0/k: cannot be read"), std::string::npos) << err;
	write("k", "3\n");
	write("slot1/units", "0x222222222222222\n"); // the old format, not %*pb
	EXPECT_FALSE(read(&s, &err));
	EXPECT_NE(err.find("gpu0/slot1/units:1: expected 'all' or a bitmap"), std::string::npos)
		<< err;
	write("slot1/units", "2222222,22222222\n");
	write("slot2/priority", "16\n");
	EXPECT_FALSE(read(&s, &err));
	EXPECT_NE(err.find("gpu0/slot2/priority:1: priority 16 is past 15"), std::string::npos)
		<< err;
	write("slot2/priority", "3\n");
	write("unit_kind", "tpu\n");
	EXPECT_FALSE(read(&s, &err));
	EXPECT_NE(err.find("unit_kind:1: expected none, amd-cu or nv-sm-group, got 'tpu'"),
		  std::string::npos) << err;
}

TEST(PartitionBitmap, IsTheKernelsPbFormat)
{
	gpuslot_partition p{};
	EXPECT_EQ(gpuslot::partition_bitmap_text(p, 60), "all");
	p.units[0] = 0xfffffULL;
	EXPECT_EQ(gpuslot::partition_bitmap_text(p, 60), "0000000,000fffff");
	EXPECT_EQ(gpuslot::partition_bitmap_text(p, 32), "000fffff");
	EXPECT_EQ(gpuslot::partition_bitmap_text(p, 15), "fffff"); // bits past 15: the caller's
	p.units[0] = 0x3;
	EXPECT_EQ(gpuslot::partition_bitmap_text(p, 4), "3");
	p = {};
	p.units[15] = 1ULL << 63;
	const std::string t = gpuslot::partition_bitmap_text(p, 1024);
	EXPECT_EQ(t.substr(0, 9), "80000000,");
	EXPECT_EQ(t.size(), 32 * 9 - 1u);
	gpuslot_partition back;
	ASSERT_TRUE(gpuslot::parse_partition_bitmap(t, &back));
	EXPECT_EQ(memcmp(&p, &back, sizeof(p)), 0);
	ASSERT_TRUE(gpuslot::parse_partition_bitmap("f,00000001\n", &back));
	EXPECT_EQ(back.units[0], 0xf00000001ULL);
	ASSERT_TRUE(gpuslot::parse_partition_bitmap("all", &back));
	EXPECT_TRUE(gpuslot::partition_is_whole(back));
	for (const char *bad : {"", "0x3", "1,,2", "123456789", "g", ",1"})
		EXPECT_FALSE(gpuslot::parse_partition_bitmap(bad, &back)) << bad;
}

TEST(PartitionText, RoundTripsUpToTheLastUnit)
{
	gpuslot_partition p{};
	EXPECT_EQ(gpuslot::partition_text(p), "all");
	p.units[4] = 0x3;
	p.units[0] = 0x10;
	std::string t = gpuslot::partition_text(p);
	EXPECT_EQ(t, "0x3" + std::string(4 * 16 - 2, '0') + "10");
	gpuslot_partition back;
	ASSERT_TRUE(gpuslot::parse_partition(t, &back));
	EXPECT_EQ(memcmp(&p, &back, sizeof(p)), 0);
	EXPECT_FALSE(gpuslot::parse_partition("0xz", &back));
	EXPECT_FALSE(gpuslot::parse_partition(std::string(257, '1'), &back));

	// Planner masks (32-bit words) and module bitmaps agree.
	std::vector<uint32_t> mask{0x89abcdef, 0x01234567, 0x1};
	auto q = gpuslot::partition_from_mask(mask);
	EXPECT_EQ(q.units[0], 0x0123456789abcdefULL);
	EXPECT_EQ(q.units[1], 1u);
	EXPECT_EQ(gpuslot::mask_from_partition(q, 65), mask);
}

TEST(Audit, CountsComputeQueuesAndFindsWhoIsOver)
{
	fs::path proc = fs::path(testing::TempDir()) / ("kfd-" + std::to_string(getpid()));
	fs::remove_all(proc);
	auto queue = [&](int pid, int q, int type, int gpuid) {
		fs::path d = proc / std::to_string(pid) / "queues" / std::to_string(q);
		fs::create_directories(d);
		std::ofstream(d / "type") << type; // KFD writes no newline
		std::ofstream(d / "gpuid") << gpuid;
	};
	queue(700, 0, 0, 1234);
	queue(700, 1, 0, 1234);
	queue(700, 2, 1, 1234); // SDMA: no compute HQD
	queue(700, 3, 0, 9999); // another GPU
	queue(900, 0, 0, 1234);
	fs::create_directories(proc / "not-a-pid" / "queues");
	auto counts = gpuslot::count_compute_queues(proc);
	EXPECT_EQ((counts[{700, 1234}]), 2u);
	EXPECT_EQ((counts[{700, 9999}]), 1u);
	EXPECT_EQ((counts[{900, 1234}]), 1u);

	gpuslot::DomainState s;
	s.domain = 2;
	s.queues = {{700, "infer", 1}, {900, "plan", 1}};
	auto over = gpuslot::over_reservation(counts, 1234, s);
	ASSERT_EQ(over.size(), 1u);
	EXPECT_EQ(over[0].pid, 700);
	EXPECT_EQ(over[0].comm, "infer");
	EXPECT_EQ(over[0].queues, 2u);
	EXPECT_EQ(over[0].reserved, 1u);
	EXPECT_EQ(over[0].domain, 2u);

	std::vector<gpuslot::AuditEntry> back;
	ASSERT_TRUE(gpuslot::parse_audit_json(gpuslot::audit_json(over), &back));
	ASSERT_EQ(back.size(), 1u);
	EXPECT_EQ(back[0].comm, "infer");
	EXPECT_FALSE(gpuslot::parse_audit_json("{\"over\": 1}", &back));
	EXPECT_FALSE(gpuslot::parse_audit_json("not json", &back));
	fs::remove_all(proc);
}

TEST_F(ModuleState, StatusDrawsTheSlotsOnTheGpu)
{
	gpuslot::StatusGpu g;
	std::string err;
	ASSERT_TRUE(read(&g.state, &err)) << err;
	auto topo = gpuslot::read_topology(fs::path(GPUSLOT_FIXTURES) / "kfd" /
					   "radeon-vii-gfx906");
	ASSERT_EQ(topo.error, "");
	g.has_gpu = true;
	g.gpu = topo.gpus[0];
	g.shape = gpuslot::uniform_shape(g.gpu);
	g.audited = true;
	g.over = {{700, "Web Content", 0, 8, 6}};
	std::string t = gpuslot::status_text({g});
	EXPECT_NE(t.find("k 3, generation 9, boost SCHED_FIFO 50 for at most 500 ms "
			 "(2 overruns), HQDs 6/24 reserved"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("for 1.5 ms, past max_hold_ms 500 ms or out of boost budget: boost taken away"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("B slot 1  15 CUs 0x222222222222222    priority 0  held by 700"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("held by 700 Web Content (tid 701) for 1.5 ms"), std::string::npos) << t;
	EXPECT_NE(t.find("C slot 2  whole GPU                   priority 3  free"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("(C: the whole GPU, not drawn; '.' marks CUs no confined slot may use)"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("waiters: 120\n    800 planner (tid 900) waiting 2.5 us, slots any"),
		  std::string::npos) << t;
	// Slot A owns SE 0, B SE 1; slot C is the whole GPU and not drawn.
	EXPECT_NE(t.find("SE0  |AAAAAAAAAAAAAAA|"), std::string::npos) << t;
	EXPECT_NE(t.find("SE1  |BBBBBBBBBBBBBBB|"), std::string::npos) << t;
	EXPECT_NE(t.find("SE2  |...............|"), std::string::npos) << t;
	EXPECT_NE(t.find("audit: 700 Web Content has 8 compute queues but reserved 6"),
		  std::string::npos) << t;
	auto j = nlohmann::json::parse(gpuslot::status_json({g}));
	EXPECT_EQ(j["gpus"][0]["slots"][1]["holder"]["comm"], "Web Content");
	EXPECT_EQ(j["gpus"][0]["slots"][2]["partition"], "all");
	EXPECT_EQ(j["gpus"][0]["slots"][2]["priority"], 3);
	EXPECT_EQ(j["gpus"][0]["tables"], true);
	EXPECT_EQ(j["gpus"][0]["over_reservation"][0]["queues"], 8);
}

} // namespace
