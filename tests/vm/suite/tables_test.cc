// SPDX-License-Identifier: GPL-2.0
// The tables (debug/holders, debug/waiters, debug/queues: debugfs on the
// module) against what a thread can put in its name, and across PID
// namespaces.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "device.h"

namespace gpuslot::test {
namespace {

std::string domain_file(const char *attr)
{
	return read_attr(0, attr);
}

class Tables : public testing::Test {
protected:
	void SetUp() override
	{
		reset_domain(0);
		*child_failed_line() = 0;
	}
	void TearDown() override { reset_domain(0); }
};

// Defect 11: a thread named "a 1\n3 1 1 f" must not add a holder line for
// slot 3 owned by pid 1; every name is one escaped word.
TEST_F(Tables, ThreadNamesCannotForgeLines)
{
	const char *forged = "a 1\n3 1 1 f";
	const std::string escaped = "a\\x201\\x0a3\\x201\\x201\\x20f";
	Dev h;
	ASSERT_EQ(h.reserve(1).err, 0);
	ASSERT_EQ(h.acquire().err, 0);
	Pipe ready, go;
	pid_t child = spawn([&] {
		prctl(PR_SET_NAME, forged);
		Dev d;
		CHILD_REQUIRE(d.reserve(2).err == 0);
		ready.put(1);
		CHILD_REQUIRE(d.acquire().err == 0); // waits behind h
		CHILD_REQUIRE(go.get() == 1);
		return 0;
	});
	ASSERT_EQ(ready.get(), 1);
	ASSERT_TRUE(wait_waiters(1));

	auto waiters = split_lines(domain_file("debug/waiters"));
	ASSERT_EQ(waiters.size(), 1u);
	auto ww = split_words(waiters[0]);
	ASSERT_EQ(ww.size(), 5u);
	EXPECT_EQ(ww[2], escaped);
	auto queues = split_lines(domain_file("debug/queues"));
	ASSERT_EQ(queues.size(), 2u);
	EXPECT_EQ(split_words(queues[1]), (std::vector<std::string>{
		std::to_string(child), escaped, "2"}));

	ASSERT_EQ(h.release(), 0);
	ASSERT_TRUE(wait_until([] { return domain_file("debug/waiters").empty(); }));
	auto holders = split_lines(domain_file("debug/holders"));
	ASSERT_EQ(holders.size(), 1u) << domain_file("debug/holders");
	auto hw = split_words(holders[0]);
	ASSERT_EQ(hw.size(), 6u);
	EXPECT_EQ(hw[1], std::to_string(child));
	EXPECT_EQ(hw[3], escaped);
	go.put(1);
	EXPECT_EQ(wait_child(child), 0) << *child_failed_line();

	// An empty name and a backslash.
	child = spawn([&] {
		prctl(PR_SET_NAME, "");
		Dev d;
		CHILD_REQUIRE(d.acquire().err == 0);
		auto w = split_words(domain_file("debug/holders"));
		CHILD_REQUIRE(w.size() == 6 && w[3] == "\\x00");
		CHILD_REQUIRE(d.release() == 0);
		prctl(PR_SET_NAME, "a\\b");
		CHILD_REQUIRE(d.acquire().err == 0);
		w = split_words(domain_file("debug/holders"));
		CHILD_REQUIRE(w.size() == 6 && w[3] == "a\\x5cb");
		return 0;
	});
	EXPECT_EQ(wait_child(child), 0) << *child_failed_line();
	EXPECT_EQ(h.unreserve(1), 0);
}

// Defect 8, as issue 29 settles it: the tables are root's (debugfs, the
// socket's admin-only debug/ names) and show every PID in the initial PID
// namespace, whoever reads them: a holder that is pid 1 of a child
// namespace is listed under its pid outside it, to readers inside too.
TEST_F(Tables, PidsAreThoseOfTheInitialNamespace)
{
	if (wait_child(spawn([] { return unshare(CLONE_NEWPID) ? errno : 0; })) ==
	    EINVAL)
		GTEST_SKIP() << "this kernel has no PID namespaces (CONFIG_PID_NS)";
	Pipe outer_pid, inner_saw, go;
	pid_t parent = spawn([&] {
		CHILD_REQUIRE(unshare(CLONE_NEWPID) == 0);
		Pipe inner_ready;
		pid_t inner = spawn([&] {
			CHILD_REQUIRE(getpid() == 1);
			Dev d;
			CHILD_REQUIRE(d.acquire().err == 0);
			CHILD_REQUIRE(d.reserve(1).err == 0);
			auto w = split_words(domain_file("debug/holders"));
			auto q = split_words(domain_file("debug/queues"));
			CHILD_REQUIRE(w.size() == 6 && w[1] == w[2] && w[1] != "1");
			CHILD_REQUIRE(q.size() == 3 && q[0] == w[1]);
			inner_saw.put(std::stoi(w[1]));
			inner_ready.put(1);
			CHILD_REQUIRE(go.get() == 1);
			return 0;
		});
		CHILD_REQUIRE(inner_ready.get() == 1);
		outer_pid.put(inner);
		return wait_child(inner);
	});
	int inner = outer_pid.get();
	ASSERT_GT(inner, 1);
	EXPECT_EQ(inner_saw.get(), inner);
	auto w = split_words(domain_file("debug/holders"));
	ASSERT_EQ(w.size(), 6u);
	EXPECT_EQ(w[1], std::to_string(inner));
	EXPECT_EQ(w[2], std::to_string(inner));
	auto q = split_words(domain_file("debug/queues"));
	ASSERT_EQ(q.size(), 3u);
	EXPECT_EQ(q[0], std::to_string(inner));
	go.put(1);
	EXPECT_EQ(wait_child(parent), 0) << *child_failed_line();
}

// The GPU a domain stands for: gpuslotd writes its PCI address, clients
// match their runtime's device by it; anything but DDDD:BB:DD.F is refused.
TEST_F(Tables, PciBusIdTakesOnePciAddressOrNothing)
{
	const std::string path = sysfs_path(0, "pci_bus_id");
	write_file(path, "\n");
	EXPECT_EQ(read_file(path), "\n");
	EXPECT_EQ(write_file(path, "0000:03:00.0\n"), 0);
	EXPECT_EQ(read_file(path), "0000:03:00.0\n");
	EXPECT_EQ(write_file(path, "00AB:c1:1f.7"), 0);
	EXPECT_EQ(read_file(path), "00ab:c1:1f.7\n");
	for (const char *bad : {"0000:03:00", "0:3:0.0", "0000:03:20.0", "0000:03:00.8",
				"0x00:03:00.0", "0000-03:00.0", "0000:03:00.0 x", "garbage"}) {
		EXPECT_EQ(write_file(path, bad), EINVAL) << bad;
		EXPECT_EQ(read_file(path), "00ab:c1:1f.7\n") << bad;
	}
	EXPECT_EQ(write_file(path, "\n"), 0);
	EXPECT_EQ(read_file(path), "\n");
}

// Issue 28 item 13: ffff:ff:1f.7 is a PCI address like any other (Hyper-V
// gives passed-through GPUs arbitrary 16-bit domains); it reads back as
// written, not as the empty "unknown".
TEST_F(Tables, PciBusIdOfTheHighestAddressReadsBack)
{
	const std::string path = sysfs_path(0, "pci_bus_id");
	for (const char *id : {"ffff:ff:1f.7", "ffff:ff:1f.6", "0000:00:00.0", "ffff:ff:1f.7"}) {
		EXPECT_EQ(write_file(path, std::string(id) + "\n"), 0) << id;
		EXPECT_EQ(read_file(path), std::string(id) + "\n") << id;
	}
	EXPECT_EQ(write_file(path, "\n"), 0);
	EXPECT_EQ(read_file(path), "\n");
}

} // namespace
} // namespace gpuslot::test
