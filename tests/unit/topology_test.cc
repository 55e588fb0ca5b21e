// SPDX-License-Identifier: GPL-2.0
// KFD topology parsing, on the recorded fixtures and on broken files.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "amd/topology.hpp"

namespace fs = std::filesystem;

namespace {

fs::path fixture(const char *name)
{
	return fs::path(GPUSLOT_FIXTURES) / "kfd" / name;
}

struct Expect {
	const char *fixture, *gfx;
	unsigned int cus, ses, sh, queues, xcc;
	bool wgp;
	const char *pci_bus_id; // from domain and location_id (bus << 8 | devfn)
};

class Fixtures : public testing::TestWithParam<Expect> {};

TEST_P(Fixtures, ShapeAndBudget)
{
	const Expect &e = GetParam();
	auto r = gpuslot::read_topology(fixture(e.fixture));
	ASSERT_EQ(r.error, "");
	ASSERT_EQ(r.gpus.size(), 1u);
	const auto &g = r.gpus[0];
	EXPECT_EQ(g.gfx.name(), e.gfx);
	EXPECT_EQ(g.active_cus(), e.cus);
	EXPECT_EQ(g.shader_engines(), e.ses);
	EXPECT_EQ(g.sh_per_se(), e.sh);
	EXPECT_EQ(g.num_cp_queues, e.queues);
	EXPECT_EQ(g.num_xcc, e.xcc);
	EXPECT_EQ(g.wgp_mode(), e.wgp);
	EXPECT_FALSE(g.gfx_from_device_id);
	EXPECT_EQ(g.pci_bus_id, e.pci_bus_id);
}

INSTANTIATE_TEST_SUITE_P(
	Kfd, Fixtures,
	testing::Values(
		Expect{"radeon-vii-gfx906", "gfx906", 60, 4, 1, 24, 1, false, "0000:03:00.0"},
		Expect{"mi100-gfx908", "gfx908", 120, 8, 1, 24, 1, false, "0000:23:00.0"},
		Expect{"mi300x-gfx942-spx", "gfx942", 304, 32, 1, 24, 8, false, "0000:47:00.0"},
		Expect{"rx6900xt-gfx1030", "gfx1030", 80, 4, 2, 8, 1, true, "0000:0b:00.0"},
		Expect{"rx7900xtx-gfx1100", "gfx1100", 96, 6, 2, 8, 1, true, "0000:86:00.0"}));

class BrokenTopology : public testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/gpuslot-kfd-XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr);
		root_ = tmpl;
	}
	void TearDown() override { fs::remove_all(root_); }

	// Node @id: the Radeon VII fixture with each text of @from replaced
	// by @to.
	fs::path node(unsigned int id, const std::vector<std::string> &from,
		      const std::string &to)
	{
		std::ifstream in(fixture("radeon-vii-gfx906") / "properties");
		std::string text((std::istreambuf_iterator<char>(in)), {});
		for (const std::string &f : from) {
			size_t at = text.find(f);
			EXPECT_NE(at, std::string::npos) << f;
			if (at != std::string::npos)
				text.replace(at, f.size(), to);
		}
		fs::path dir = root_ / "nodes" / std::to_string(id);
		fs::create_directories(dir);
		std::ofstream(dir / "properties") << text;
		return dir;
	}

	std::string error_of(const std::vector<std::string> &from,
			     const std::string &to)
	{
		fs::remove_all(root_ / "nodes");
		node(1, from, to);
		return gpuslot::read_topology(root_).error;
	}

	fs::path root_;
};

TEST_F(BrokenTopology, CpuNodesAreSkippedAndNodesSorted)
{
	node(0, {"simd_count 240"}, "simd_count 0");
	node(2, {}, "");
	node(10, {}, "");
	auto r = gpuslot::read_topology(root_);
	ASSERT_EQ(r.error, "");
	ASSERT_EQ(r.gpus.size(), 2u);
	EXPECT_EQ(r.gpus[0].node_id, 2u);
	EXPECT_EQ(r.gpus[1].node_id, 10u);
}

TEST_F(BrokenTopology, ErrorsNameTheFileTheKeyAndWhatWasExpected)
{
	std::string e = error_of({"simd_per_cu 4\n"}, "");
	EXPECT_NE(e.find("nodes/1/properties: key 'simd_per_cu' is missing; "
			 "expected a whole number from 1 to 16"),
		  std::string::npos) << e;
	e = error_of({"num_cp_queues 24"}, "num_cp_queues many");
	EXPECT_NE(e.find("key 'num_cp_queues' is 'many'; expected a whole number"),
		  std::string::npos) << e;
	EXPECT_NE(e.find("properties:"), std::string::npos) << e;
	e = error_of({"simd_per_cu 4"}, "simd_per_cu 0");
	EXPECT_NE(e.find("'simd_per_cu' is '0'"), std::string::npos) << e;
	e = error_of({"array_count 4"}, "array_count 99999");
	EXPECT_NE(e.find("'array_count' is '99999'"), std::string::npos) << e;
	e = error_of({"simd_count 240"}, "simd_count 241");
	EXPECT_NE(e.find("not a multiple of simd_per_cu"), std::string::npos) << e;
	e = error_of({"simd_arrays_per_engine 1"}, "simd_arrays_per_engine 3");
	EXPECT_NE(e.find("not a multiple of simd_arrays_per_engine"),
		  std::string::npos) << e;
	e = error_of({"simd_count 240"}, "simd_count 4000");
	EXPECT_NE(e.find("do not fit"), std::string::npos) << e;
	e = error_of({"gfx_target_version 90006"}, "gfx_target_version -1");
	EXPECT_NE(e.find("'gfx_target_version' is '-1'"), std::string::npos) << e;

	EXPECT_NE(gpuslot::read_topology(root_ / "missing").error.find(
			  "neither a topology root"),
		  std::string::npos);
	fs::remove_all(root_ / "nodes");
	fs::create_directories(root_ / "nodes");
	EXPECT_NE(gpuslot::read_topology(root_).error.find("no GPU node"),
		  std::string::npos);
}

// A properties path that is not a readable small file gets the real
// reason, and nothing waits on it.
TEST_F(BrokenTopology, APropertiesFileThatIsNoFileSaysWhy)
{
	fs::remove_all(root_ / "nodes");
	fs::create_directories(root_ / "nodes" / "1" / "properties");
	std::string e = gpuslot::read_topology(root_).error;
	EXPECT_NE(e.find("nodes/1/properties: Is a directory"), std::string::npos) << e;
	fs::remove_all(root_ / "nodes");
	fs::create_directories(root_ / "nodes" / "1");
	ASSERT_EQ(mkfifo((root_ / "nodes" / "1" / "properties").c_str(), 0600), 0);
	e = gpuslot::read_topology(root_).error;
	EXPECT_NE(e.find("properties: not a regular file"), std::string::npos) << e;
}

TEST_F(BrokenTopology, OldKernelsWithoutGfxVersionUseTheDeviceId)
{
	fs::path dir = node(1, {"gfx_target_version 90006\n"}, "");
	auto r = gpuslot::read_topology(dir);
	ASSERT_EQ(r.error, "");
	EXPECT_TRUE(r.gpus[0].gfx_from_device_id);
	EXPECT_EQ(r.gpus[0].gfx.name(), "gfx906");
	EXPECT_NE(error_of({"gfx_target_version 90006\n", "device_id 26287"},
			   "device_id 4660")
			  .find("is not one gpuslot knows"),
		  std::string::npos);
}

// Two fixture GPUs, one of them broken (issue 31): the other is still read,
// the broken one is named with its reason and its PCI address, and it
// keeps its place so that no other GPU changes domain.
TEST_F(BrokenTopology, OneUnreadableGpuDoesNotTakeTheOthersDown)
{
	auto copy = [&](unsigned int id, const char *from, const std::string &key,
			const std::string &value) {
		std::ifstream in(fixture(from) / "properties");
		std::string text((std::istreambuf_iterator<char>(in)), {});
		if (!key.empty()) {
			size_t at = text.find(key + " ");
			EXPECT_NE(at, std::string::npos);
			text.replace(at, text.find('\n', at) - at, key + " " + value);
		}
		fs::create_directories(root_ / "nodes" / std::to_string(id));
		std::ofstream(root_ / "nodes" / std::to_string(id) / "properties") << text;
	};
	copy(0, "radeon-vii-gfx906", "simd_count", "0"); // the CPU
	copy(1, "rx6900xt-gfx1030", "simd_per_cu", "zero");
	copy(2, "rx7900xtx-gfx1100", "", "");
	auto r = gpuslot::read_topology(root_);
	ASSERT_EQ(r.error, "");
	ASSERT_EQ(r.gpus.size(), 1u);
	EXPECT_EQ(r.gpus[0].node_id, 2u);
	EXPECT_EQ(r.gpus[0].gfx.name(), "gfx1100");
	ASSERT_EQ(r.unreadable.size(), 1u);
	EXPECT_EQ(r.unreadable[0].node_id, 1u);
	EXPECT_NE(r.unreadable[0].error.find("nodes/1/properties:"), std::string::npos);
	EXPECT_NE(r.unreadable[0].error.find("'simd_per_cu' is 'zero'"), std::string::npos);
	EXPECT_EQ(r.unreadable[0].pci_bus_id, "0000:0b:00.0");

	// Domains: the RX 7900 XTX keeps domain 1, the one it had with both
	// GPUs readable, on a fresh module and on one that recorded it.
	EXPECT_EQ(gpuslot::gpu_domains(r, {"", ""}), std::vector<int>{1});
	EXPECT_EQ(gpuslot::gpu_domains(r, {"0000:0b:00.0", "0000:86:00.0"}),
		  std::vector<int>{1});
	// Recorded elsewhere: the PCI address wins over the place.
	EXPECT_EQ(gpuslot::gpu_domains(r, {"0000:86:00.0", "0000:0b:00.0"}),
		  std::vector<int>{0});
	// One domain: the readable GPU gets it, unless the module records it
	// as the broken GPU's.
	EXPECT_EQ(gpuslot::gpu_domains(r, {""}), std::vector<int>{0});
	EXPECT_EQ(gpuslot::gpu_domains(r, {"0000:0b:00.0"}), std::vector<int>{-1});

	// With both readable: node order, as before.
	copy(1, "rx6900xt-gfx1030", "", "");
	r = gpuslot::read_topology(root_);
	ASSERT_EQ(r.gpus.size(), 2u);
	EXPECT_EQ(gpuslot::gpu_domains(r, {"", ""}), (std::vector<int>{0, 1}));
	// Nothing readable: the first node's reason is the error.
	copy(2, "rx7900xtx-gfx1100", "simd_count", "7");
	copy(1, "rx6900xt-gfx1030", "array_count", "x");
	r = gpuslot::read_topology(root_);
	EXPECT_NE(r.error.find("nodes/1/properties"), std::string::npos) << r.error;
}

} // namespace
