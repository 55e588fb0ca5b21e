// SPDX-License-Identifier: GPL-2.0
// What `gpuslotctl plan` prints, for people and for machines.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "amd/plan_report.hpp"

namespace {

gpuslot::GpuPlan plan_for(const char *fixture, unsigned int k)
{
	auto r = gpuslot::read_topology(std::filesystem::path(GPUSLOT_FIXTURES) /
					"kfd" / fixture);
	EXPECT_EQ(r.error, "");
	gpuslot::GpuPlan p{r.gpus.at(0), gpuslot::uniform_shape(r.gpus.at(0)),
			   gpuslot::MaskAlgorithm::C, {}};
	p.plan = gpuslot::plan_partitions(p.shape, p.algorithm, k, {});
	return p;
}

TEST(PlanReport, RadeonViiPictures)
{
	EXPECT_EQ(gpuslot::draw_partitions(plan_for("radeon-vii-gfx906", 2)),
		  "SE0  |AAAAAAAAAAAAAAA|\n"
		  "SE1  |AAAAAAAAAAAAAAA|\n"
		  "SE2  |BBBBBBBBBBBBBBB|\n"
		  "SE3  |BBBBBBBBBBBBBBB|\n");
	EXPECT_EQ(gpuslot::draw_partitions(plan_for("radeon-vii-gfx906", 3)),
		  "SE0  |AAAAABBBBBCCCCC|\n"
		  "SE1  |AAAAABBBBBCCCCC|\n"
		  "SE2  |AAAAABBBBBCCCCC|\n"
		  "SE3  |AAAAABBBBBCCCCC|\n");
	// RDNA: WGP pairs, two shader arrays per SE.
	EXPECT_EQ(gpuslot::draw_partitions(plan_for("rx6900xt-gfx1030", 4)),
		  "SE0  |AAAAAAAAAA|AAAAAAAAAA|\n"
		  "SE1  |BBBBBBBBBB|BBBBBBBBBB|\n"
		  "SE2  |CCCCCCCCCC|CCCCCCCCCC|\n"
		  "SE3  |DDDDDDDDDD|DDDDDDDDDD|\n");
}

TEST(PlanReport, JsonHasCusMaskAndPerSeCounts)
{
	auto j = nlohmann::json::parse(
		gpuslot::plan_json({plan_for("radeon-vii-gfx906", 3)}));
	const auto &gpu = j["gpus"][0];
	EXPECT_EQ(gpu["gfx"], "gfx906");
	EXPECT_EQ(gpu["hqd_budget"], 24);
	ASSERT_EQ(gpu["partitions"].size(), 3u);
	for (const auto &p : gpu["partitions"]) {
		EXPECT_EQ(p["cus"], 20);
		EXPECT_EQ(p["se_packed"], false);
		EXPECT_EQ(p["cus_per_se"], nlohmann::json({5, 5, 5, 5}));
		EXPECT_EQ(p["mask"].get<std::string>().rfind("0x", 0), 0u);
	}
	EXPECT_EQ(gpu["partitions"][0]["mask"], "0xfffff");
}

TEST(PlanReport, TextNamesTheAlgorithmAndSlots)
{
	std::string t = gpuslot::plan_text({plan_for("radeon-vii-gfx906", 4)});
	EXPECT_NE(t.find("gfx906, 60 CUs, 4 SEs x 1 SH; mask algorithm C"),
		  std::string::npos) << t;
	EXPECT_NE(t.find("slot 3 (D): 15 CUs, SE-packed, mask 0x888888888888888, "
			 "CUs per SE 0 0 0 15"),
		  std::string::npos) << t;
}

} // namespace
