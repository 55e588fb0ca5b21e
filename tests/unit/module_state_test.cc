// SPDX-License-Identifier: GPL-2.0
// Reading the module's sysfs (a recorded tree), partition text, the queue
// audit over a KFD proc tree, and the status picture.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "audit.hpp"
#include "module.hpp"
#include "status.hpp"

namespace fs = std::filesystem;

namespace {

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
		write("stats", "acquisitions 10\nmax_hold_ns 9\noverruns 2\nwait_hist_log2_ns 0 1\n");
		write("hqd_limit", "24\n");
		write("hqd_used", "6\n");
		write("hqd_waiters", "0\n");
		write("units", "amd-cu 60 1\n");
		write("partitions", "0 0x111111111111111\n1 0x222222222222222\n2 all\n");
		write("holders", "1 700 701 Web\\x20Content 1500000 overrun\n");
		write("waiters", "800 802 planner 2500 0xffffffffffffffff\n... 4 more\n");
		write("queues", "700 Web\\x20Content 6\n");
	}
	void TearDown() override { fs::remove_all(root_); }

	void write(const std::string &attr, const std::string &text)
	{
		fs::create_directories(root_ / "gpu0");
		std::ofstream(root_ / "gpu0" / attr) << text;
	}

	fs::path root_;
};

TEST_F(ModuleState, ParsesEveryFile)
{
	gpuslot::DomainState s;
	std::string err;
	ASSERT_TRUE(gpuslot::read_domain_state(root_, 0, &s, &err)) << err;
	EXPECT_EQ(gpuslot::list_domains(root_), std::vector<unsigned int>{0});
	EXPECT_EQ(s.k, 3u);
	EXPECT_EQ(s.generation, 9u);
	EXPECT_EQ(s.unit_kind, unsigned(GPUSLOT_UNIT_AMD_CU));
	EXPECT_EQ(s.nr_units, 60u);
	ASSERT_EQ(s.partitions.size(), 3u);
	EXPECT_EQ(s.partitions[0].units[0], 0x111111111111111ULL);
	EXPECT_TRUE(gpuslot::partition_is_whole(s.partitions[2]));
	ASSERT_EQ(s.holders.size(), 1u);
	EXPECT_EQ(s.holders[0].comm, "Web Content"); // a name with a space
	EXPECT_EQ(s.holders[0].held_ns, 1500000u);
	EXPECT_EQ(s.holders[0].boost, gpuslot::HoldBoost::overrun);
	EXPECT_EQ(s.max_hold_ms, 500u);
	EXPECT_EQ(s.overruns, 2u);
	EXPECT_EQ(s.acquisitions, 10u); // every counter of stats, for metrics
	EXPECT_EQ(s.max_hold_ns, 9u);
	EXPECT_EQ(s.wait_hist, (std::vector<uint64_t>{0, 1}));
	EXPECT_EQ(s.pci_bus_id, ""); // an older module has none
	EXPECT_EQ(s.queues[0].comm, "Web Content");
	ASSERT_EQ(s.waiters.size(), 1u);
	EXPECT_EQ(s.waiters[0].allowed, ~0ULL);
	EXPECT_EQ(s.more_waiters, 4u);
	ASSERT_EQ(s.queues.size(), 1u);
	EXPECT_EQ(s.queues[0].reserved, 6u);
}

// The module escapes names; a line that is not exactly what it writes is
// refused, never read as something else.
TEST_F(ModuleState, NamesAreUnescapedAndStrayWordsRefused)
{
	write("holders", "0 5 6 a\\x0a3\\x5c 9 boosted\n1 7 7 \\x00 1 unboosted\n");
	gpuslot::DomainState s;
	std::string err;
	ASSERT_TRUE(gpuslot::read_domain_state(root_, 0, &s, &err)) << err;
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
				"0 5 6 a 9 fast\n"}) {
		write("holders", bad);
		EXPECT_FALSE(gpuslot::read_domain_state(root_, 0, &s, &err)) << bad;
	}
	write("holders", "");
	write("queues", "700 a b 6\n");
	EXPECT_FALSE(gpuslot::read_domain_state(root_, 0, &s, &err));
	write("queues", "");
	write("waiters", "1 1 a b 5 0x1\n");
	EXPECT_FALSE(gpuslot::read_domain_state(root_, 0, &s, &err));
}

TEST_F(ModuleState, ABadFileIsNamedWithItsLine)
{
	write("holders", "1 700 701 x 5 boosted\nbroken\n");
	gpuslot::DomainState s;
	std::string err;
	EXPECT_FALSE(gpuslot::read_domain_state(root_, 0, &s, &err));
	EXPECT_NE(err.find("gpu0/holders:2: cannot parse 'broken'"), std::string::npos) << err;
	write("holders", "");
	write("k", "three\n");
	EXPECT_FALSE(gpuslot::read_domain_state(root_, 0, &s, &err));
	EXPECT_NE(err.find("gpu0/k:1: expected a number, got 'three'"), std::string::npos) << err;
	fs::remove(root_ / "gpu0" / "k");
	EXPECT_FALSE(gpuslot::read_domain_state(root_, 0, &s, &err));
	EXPECT_NE(err.find("gpu0/k: cannot be read"), std::string::npos) << err;
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
	ASSERT_TRUE(gpuslot::read_domain_state(root_, 0, &g.state, &err)) << err;
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
	EXPECT_NE(t.find("B slot 1  15 CUs 0x222222222222222"), std::string::npos) << t;
	EXPECT_NE(t.find("held by 700 Web Content (tid 701) for 1.5 ms"), std::string::npos) << t;
	EXPECT_NE(t.find("C slot 2  whole GPU"), std::string::npos) << t;
	EXPECT_NE(t.find("waiters: 5"), std::string::npos) << t;
	// Slot A owns SE 0, B SE 1; slot C is the whole GPU and not drawn.
	EXPECT_NE(t.find("SE0  |AAAAAAAAAAAAAAA|"), std::string::npos) << t;
	EXPECT_NE(t.find("SE1  |BBBBBBBBBBBBBBB|"), std::string::npos) << t;
	EXPECT_NE(t.find("SE2  |...............|"), std::string::npos) << t;
	EXPECT_NE(t.find("audit: 700 Web Content has 8 compute queues but reserved 6"),
		  std::string::npos) << t;
	auto j = nlohmann::json::parse(gpuslot::status_json({g}));
	EXPECT_EQ(j["gpus"][0]["slots"][1]["holder"]["comm"], "Web Content");
	EXPECT_EQ(j["gpus"][0]["slots"][2]["partition"], "all");
	EXPECT_EQ(j["gpus"][0]["over_reservation"][0]["queues"], 8);
}

} // namespace
