// SPDX-License-Identifier: GPL-2.0
// libgpuslot (none backend) against the real module: layout, acquire and
// release in C and C++, timeouts, rebuilding on a new generation, fork
// safety and the error messages.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <string>

#include "device.h"
#include "gpuslot.h"
#include "gpuslot.hpp"

namespace gpuslot::test {
namespace {

std::string domain_file(const char *attr)
{
	return read_file(sysfs_path(0, attr));
}

gpuslot_options none_options()
{
	gpuslot_options o{};
	o.size = sizeof(o);
	o.backend = GPUSLOT_BACKEND_NONE;
	o.gpu_index = -1;
	return o;
}

std::string last_error()
{
	return gpuslot_last_error();
}

class Client : public testing::Test {
protected:
	void SetUp() override
	{
		reset_domain(0);
		*child_failed_line() = 0;
	}
	void TearDown() override
	{
		EXPECT_TRUE(wait_until([] { return domain_file("holders").empty(); }));
		reset_domain(0);
		EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
	}
	Dev admin;
};

TEST_F(Client, ReadsTheLayoutAndAcquiresInCAndCpp)
{
	Layout l = cu_layout(60, {0x111111111111111ULL, 0x222222222222222ULL,
				  0x444444444444444ULL, 0});
	ASSERT_EQ(admin.set_layout(l), 0);

	gpuslot_options o = none_options();
	gpuslot_client *c = nullptr;
	ASSERT_EQ(gpuslot_open(&o, &c), 0) << last_error();
	gpuslot_layout_info info;
	ASSERT_EQ(gpuslot_client_layout(c, &info), 0);
	EXPECT_EQ(info.k, 4u);
	EXPECT_EQ(info.unit_kind, unsigned(GPUSLOT_UNIT_AMD_CU));
	EXPECT_EQ(info.nr_units, 60u);
	EXPECT_EQ(info.generation, l.generation);
	EXPECT_EQ(info.hqd_reserved, 0u);
	EXPECT_STREQ(info.backend, "none");

	gpuslot_slot s;
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s), 0) << last_error();
	EXPECT_EQ(s.index, 0u);
	EXPECT_EQ(s.units, 15u);
	EXPECT_EQ(s.stream, nullptr);
	EXPECT_EQ(s.generation, l.generation);
	EXPECT_EQ(split_lines(domain_file("holders")).size(), 1u);
	ASSERT_EQ(gpuslot_release_slot(c), 0);
	// The whole-GPU slot reports every unit.
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 1u << 3, &s), 0) << last_error();
	EXPECT_EQ(s.index, 3u);
	EXPECT_EQ(s.units, 60u);
	ASSERT_EQ(gpuslot_release_slot(c), 0);
	gpuslot_close(c);

	gpuslot::Options opts;
	opts.backend = GPUSLOT_BACKEND_NONE;
	gpuslot::Client client(opts);
	{
		auto slot = client.acquire(1u << 2);
		EXPECT_EQ(slot.index(), 2u);
		EXPECT_EQ(domain_file("holders").substr(0, 2), "2 ");
	}
	EXPECT_EQ(domain_file("holders"), "");
	auto moved = client.acquire();
	gpuslot::Slot other = std::move(moved);
	EXPECT_EQ(split_lines(domain_file("holders")).size(), 1u);
	other.release();
	EXPECT_EQ(domain_file("holders"), "");
}

TEST_F(Client, TryAndTimeout)
{
	Dev holder;
	ASSERT_EQ(holder.acquire().err, 0);
	gpuslot_options o = none_options();
	gpuslot_client *c;
	ASSERT_EQ(gpuslot_open(&o, &c), 0) << last_error();
	gpuslot_slot s;
	EXPECT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), -EAGAIN);
	EXPECT_EQ(last_error(), "gpuslot: no slot free now");
	EXPECT_EQ(gpuslot_acquire_slot(c, 20 * 1000 * 1000, 0, &s), -ETIMEDOUT);
	EXPECT_EQ(last_error(), "gpuslot: no slot within the timeout");
	EXPECT_EQ(gpuslot_acquire_slot(c, -2, 0, &s), -EINVAL);
	gpuslot_close(c);

	gpuslot::Options opts;
	opts.backend = GPUSLOT_BACKEND_NONE;
	gpuslot::Client client(opts);
	EXPECT_FALSE(client.try_acquire());
	EXPECT_FALSE(client.acquire_for(std::chrono::milliseconds(10)));
	ASSERT_EQ(holder.release(), 0);
	EXPECT_TRUE(client.try_acquire());
}

TEST_F(Client, ANewGenerationRebuildsTheStreamsOnce)
{
	Layout four = cu_layout(60, {0x111111111111111ULL, 0x222222222222222ULL,
				     0x444444444444444ULL, 0x888888888888888ULL});
	ASSERT_EQ(admin.set_layout(four), 0);
	gpuslot::Options opts;
	opts.backend = GPUSLOT_BACKEND_NONE;
	gpuslot::Client client(opts);
	EXPECT_EQ(client.layout().rebuilds, 0u);

	Layout two = cu_layout(60, {0x333333333333333ULL, 0xcccccccccccccccULL});
	ASSERT_EQ(admin.set_layout(two), 0);
	{
		auto slot = client.acquire();
		EXPECT_EQ(slot.generation(), two.generation);
		EXPECT_EQ(slot.units(), 30u);
	}
	auto l = client.layout();
	EXPECT_EQ(l.k, 2u);
	EXPECT_EQ(l.generation, two.generation);
	EXPECT_EQ(l.rebuilds, 1u);
	client.acquire().release();
	EXPECT_EQ(client.layout().rebuilds, 1u);
}

TEST_F(Client, AForkedChildGetsEchildAndTheParentKeepsItsSlot)
{
	ASSERT_EQ(write_file(sysfs_path(0, "k"), "2"), 0);
	gpuslot_options o = none_options();
	gpuslot_client *c;
	ASSERT_EQ(gpuslot_open(&o, &c), 0) << last_error();
	gpuslot_slot s;
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s), 0);
	pid_t pid = spawn([&] {
		gpuslot_slot t;
		CHILD_REQUIRE(gpuslot_acquire_slot(c, 0, 0, &t) == -ECHILD);
		CHILD_REQUIRE(std::string(gpuslot_last_error()).find(
				      "a forked child opens its own") != std::string::npos);
		CHILD_REQUIRE(gpuslot_release_slot(c) == -ECHILD);
		gpuslot_close(c);
		gpuslot_client *mine;
		gpuslot_options o2 = none_options();
		CHILD_REQUIRE(gpuslot_open(&o2, &mine) == 0);
		CHILD_REQUIRE(gpuslot_acquire_slot(mine, 0, 0, &t) == 0 && t.index == 1);
		gpuslot_close(mine);
		return 0;
	});
	EXPECT_EQ(wait_child(pid), 0) << "child line " << *child_failed_line();
	auto holders = split_lines(domain_file("holders"));
	ASSERT_EQ(holders.size(), 1u);
	EXPECT_EQ(split_words(holders[0])[0], "0");
	EXPECT_EQ(gpuslot_release_slot(c), 0);
	gpuslot_close(c);
}

TEST_F(Client, ErrorsSayWhatToDo)
{
	gpuslot_client *c;
	gpuslot_options o = none_options();
	o.size = 8;
	EXPECT_EQ(gpuslot_open(&o, &c), -EINVAL);
	EXPECT_NE(last_error().find("set it to sizeof(struct gpuslot_options)"), std::string::npos);
	o = none_options();
	o.domain = 5;
	EXPECT_EQ(gpuslot_open(&o, &c), -EINVAL);
	EXPECT_EQ(last_error(), "gpuslot: no GPU domain 5: Invalid argument");
	o = none_options();
	o.device = "/dev/nonexistent";
	EXPECT_EQ(gpuslot_open(&o, &c), -ENOENT);
	EXPECT_NE(last_error().find("load the gpuslot module"), std::string::npos);
	o = none_options();
	o.backend = GPUSLOT_BACKEND_CUDA;
	EXPECT_EQ(gpuslot_open(&o, &c), -EOPNOTSUPP);

	// AUTO on an AMD layout needs HIP, and says so rather than running
	// jobs without partitions.
	Layout l = cu_layout(60, {0xf, 0xf0});
	ASSERT_EQ(admin.set_layout(l), 0);
	o = none_options();
	o.backend = GPUSLOT_BACKEND_AUTO;
	EXPECT_EQ(gpuslot_open(&o, &c), -ENODEV);
	EXPECT_NE(last_error().find("use GPUSLOT_BACKEND_NONE"), std::string::npos) << last_error();

	o = none_options();
	ASSERT_EQ(gpuslot_open(&o, &c), 0);
	gpuslot_slot s;
	EXPECT_EQ(gpuslot_release_slot(c), -EPERM);
	EXPECT_EQ(last_error(), "gpuslot: this client holds no slot");
	EXPECT_EQ(gpuslot_acquire_slot(c, 0, 1u << 5, &s), -EINVAL);
	EXPECT_EQ(last_error(), "gpuslot: allowed_mask allows no slot below k");
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), 0);
	EXPECT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), -EDEADLK);
	EXPECT_NE(last_error().find("open one client per thread"), std::string::npos);
	gpuslot_close(c); // releases the slot

	try {
		gpuslot::Options opts;
		opts.domain = 9;
		gpuslot::Client bad(opts);
		ADD_FAILURE() << "no exception";
	} catch (const gpuslot::Error &e) {
		EXPECT_EQ(e.code(), -EINVAL);
		EXPECT_EQ(std::string(e.what()), "gpuslot: no GPU domain 9: Invalid argument");
	}
}

TEST_F(Client, TheExamplesRun)
{
	for (const char *ex : {"/bin/gpuslot_example_c", "/bin/gpuslot_example_cpp"}) {
		FILE *p = popen((std::string(ex) + " 20 none 2>&1").c_str(), "r");
		ASSERT_NE(p, nullptr);
		char buf[256] = "";
		size_t n = fread(buf, 1, sizeof(buf) - 1, p);
		buf[n] = '\0';
		EXPECT_EQ(WEXITSTATUS(pclose(p)), 0) << ex << ": " << buf;
		EXPECT_EQ(std::string(buf), "20 jobs done, 0 skipped\n") << ex;
	}
}

} // namespace
} // namespace gpuslot::test
