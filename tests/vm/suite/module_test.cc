// SPDX-License-Identifier: GPL-2.0
// Loading and unloading gpuslot.ko, and its module parameter.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "device.h"

namespace gpuslot::test {
namespace {

bool loaded()
{
	return access("/sys/module/gpuslot", F_OK) == 0;
}

// 13. insmod/rmmod 20 times; rmmod is refused while a file is open
TEST(Module, LoadUnloadCyclesAndBusyRefusal)
{
	ASSERT_TRUE(loaded());
	{
		Dev d;
		EXPECT_EQ(unload_module(), EWOULDBLOCK);
		EXPECT_TRUE(loaded());
		EXPECT_EQ(read_file("/sys/module/gpuslot/refcnt"), "1\n");
	}
	EXPECT_EQ(read_file("/sys/module/gpuslot/refcnt"), "0\n");

	for (int i = 0; i < 20; i++) {
		ASSERT_EQ(unload_module(), 0) << "cycle " << i;
		ASSERT_FALSE(loaded());
		ASSERT_NE(access("/dev/gpuslot", F_OK), 0);
		ASSERT_EQ(load_module(""), 0) << "cycle " << i;
		Dev d;
		auto r = d.acquire();
		ASSERT_EQ(r.err, 0);
		ASSERT_EQ(r.slot, 0u);
		ASSERT_EQ(d.release(), 0);
	}

	// The "domains" parameter: 1..16, one domain per GPU.
	ASSERT_EQ(unload_module(), 0);
	EXPECT_EQ(load_module("domains=0"), EINVAL);
	EXPECT_EQ(load_module("domains=17"), EINVAL);
	EXPECT_FALSE(loaded());
	ASSERT_EQ(load_module("domains=2"), 0);
	{
		Dev d0, d1;
		gpuslot_version v{};
		v.size = sizeof(v);
		ASSERT_EQ(d0.call(GPUSLOT_IOC_VERSION, &v), 0);
		EXPECT_EQ(v.nr_domains, 2u);
		EXPECT_EQ(d1.attach(1), 0);
		EXPECT_EQ(d1.info().domain, 1u);
		// Domains are independent locks of k = 1 each.
		EXPECT_EQ(d0.acquire().err, 0);
		EXPECT_EQ(d1.acquire().err, 0);
		EXPECT_EQ(read_attr(1, "k"), "1\n");
		EXPECT_EQ(split_lines(read_attr(1, "debug/holders")).size(),
			  1u);
		EXPECT_EQ(d1.attach(2), EINVAL);
	}
	ASSERT_EQ(unload_module(), 0);
	ASSERT_EQ(load_module(""), 0);
	EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
}

} // namespace
} // namespace gpuslot::test
