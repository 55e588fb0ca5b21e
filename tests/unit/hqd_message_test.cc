// SPDX-License-Identifier: GPL-2.0
// The ENOSPC explanation of libgpuslot, against a recorded sysfs tree.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "hqd_message.hpp"

namespace fs = std::filesystem;

namespace {

class HqdMessage : public testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/gpuslot-sysfs-XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr);
		root_ = tmpl;
		fs::create_directories(root_ / "gpu0");
	}

	void TearDown() override { fs::remove_all(root_); }

	void write(const std::string &rel, const std::string &text)
	{
		fs::create_directories((root_ / rel).parent_path());
		std::ofstream(root_ / rel) << text;
	}

	gpuslot::HqdExplanation explain(unsigned int needed)
	{
		return gpuslot::explain_hqd_exhausted(root_, root_ / "sched_policy",
						      0, needed);
	}

	fs::path root_;
};

TEST_F(HqdMessage, NamesWhoHoldsTheBudget)
{
	write("gpu0/hqd_used", "20\n");
	write("gpu0/hqd_limit", "24\n");
	write("gpu0/debug/queues", "311 ds_infer 5\n312 planner 5\n313 tracker 4\n"
			     "311 ds_infer 2\n");
	auto e = explain(5);
	EXPECT_EQ(e.error, 0);
	EXPECT_EQ(e.text,
		  "GPU 0: hardware queue budget exhausted: 20 of 24 reserved "
		  "(pid 311 ds_infer: 7, pid 312 planner: 5, pid 313 tracker: 4); "
		  "this process needs 5. Use fewer slots per process, or raise "
		  "hqd_limit only if amdgpu runs with sched_policy=1.");
}

TEST_F(HqdMessage, SaysWhatAmdgpuRunsWithAndWhenTheLimitWasLowered)
{
	write("gpu0/hqd_used", "20\n");
	write("gpu0/hqd_limit", "10\n");
	write("gpu0/debug/queues", "311 a 20\n");
	write("sched_policy", "0\n");
	auto e = explain(1);
	EXPECT_EQ(e.error, 0);
	EXPECT_NE(e.text.find("lowered below what is reserved"), std::string::npos);
	EXPECT_NE(e.text.find("(here it runs with sched_policy=0)."),
		  std::string::npos)
		<< e.text;
}

// debug/queues is root's (debugfs): a member's message says where it is.
TEST_F(HqdMessage, WithoutTheQueuesTableItSaysWhereItIs)
{
	write("gpu0/hqd_used", "24\n");
	write("gpu0/hqd_limit", "24\n");
	auto e = explain(2);
	EXPECT_EQ(e.error, 0);
	EXPECT_EQ(e.text,
		  "GPU 0: hardware queue budget exhausted: 24 of 24 reserved (who holds it: "
		  "debug/queues, readable by root: No such file or directory); this process "
		  "needs 2. Use fewer slots per process, or raise hqd_limit only if amdgpu runs "
		  "with sched_policy=1.");
}

TEST_F(HqdMessage, ShortensLongLists)
{
	write("gpu0/hqd_used", "24\n");
	write("gpu0/hqd_limit", "24\n");
	std::string q;
	for (int pid = 100; pid < 108; pid++)
		q += std::to_string(pid) + " worker 3\n";
	write("gpu0/debug/queues", q + "... 4 more\n");
	auto e = explain(2);
	EXPECT_NE(e.text.find("pid 105 worker: 3, ...)"), std::string::npos)
		<< e.text;
	EXPECT_EQ(e.text.find("pid 106"), std::string::npos);
}

TEST_F(HqdMessage, UnreadableOrMalformedStateNamesTheFile)
{
	auto e = explain(1);
	EXPECT_EQ(e.error, ENOENT);
	EXPECT_NE(e.text.find((root_ / "gpu0/hqd_used").string()),
		  std::string::npos)
		<< e.text;

	write("gpu0/hqd_used", "twenty\n");
	e = explain(1);
	EXPECT_EQ(e.error, EINVAL);
	EXPECT_NE(e.text.find("hqd_used"), std::string::npos) << e.text;
}

} // namespace
