// SPDX-License-Identifier: GPL-2.0
// Layouts in the module: SET_LAYOUT/GET_LAYOUT and the sysfs files of a
// domain's layout (unit_kind, nr_units, unit_size, slot<i>/units, commit).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "device.h"

namespace gpuslot::test {
namespace {

std::string domain_file(const char *attr)
{
	return read_attr(0, attr);
}

bool same_partition(const gpuslot_partition &a, const gpuslot_partition &b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

class Layouts : public DomainTest {};

TEST_F(Layouts, SetAndGetRoundTripAndSysfs)
{
	Dev admin;
	const uint64_t gen0 = admin.info().generation;
	Layout l = cu_layout(60, {0x00000000000000fULL, 0x0000000000000f0ULL,
				  0x0fffffffffff00ULL});
	l.hqd_limit = 20;
	ASSERT_EQ(admin.set_layout(l), 0);
	EXPECT_EQ(l.generation, gen0 + 1);

	Layout got;
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_EQ(got.k, 3u);
	EXPECT_EQ(got.unit_kind, unsigned(GPUSLOT_UNIT_AMD_CU));
	EXPECT_EQ(got.unit_size, 1u);
	EXPECT_EQ(got.nr_units, 60u);
	EXPECT_EQ(got.hqd_limit, 20u);
	EXPECT_EQ(got.generation, l.generation);
	ASSERT_EQ(got.partitions.size(), 3u);
	for (unsigned int s = 0; s < 3; s++)
		EXPECT_TRUE(same_partition(got.partitions[s], l.partitions[s]))
			<< "slot " << s;

	EXPECT_EQ(domain_file("k"), "3\n");
	EXPECT_EQ(domain_file("hqd_limit"), "20\n");
	EXPECT_EQ(units_text(), "amd-cu 60 1\n");
	EXPECT_EQ(partitions_text(),
		  "0 0xf\n1 0xf0\n2 0xfffffffffff00\n");
	EXPECT_EQ(domain_file("generation"), std::to_string(l.generation) + "\n");

	// A short buffer gets the first partitions only.
	ASSERT_EQ(admin.get_layout(got, 1), 0);
	ASSERT_EQ(got.partitions.size(), 1u);
	EXPECT_EQ(got.k, 3u);

	// The same layout again is no new generation; hqd_limit 0 keeps 20.
	Layout again = l;
	again.hqd_limit = 0;
	ASSERT_EQ(admin.set_layout(again), 0);
	EXPECT_EQ(again.generation, l.generation);
	EXPECT_EQ(domain_file("hqd_limit"), "20\n");

	// Any user reads the layout.
	pid_t pid = spawn([] {
		Dev user;
		CHILD_REQUIRE(setresuid(65534, 65534, 65534) == 0);
		Layout mine;
		CHILD_REQUIRE(user.get_layout(mine) == 0 && mine.k == 3);
		Layout attempt = cu_layout(60, {0x1, 0x2});
		CHILD_REQUIRE(user.set_layout(attempt) == EPERM);
		return 0;
	});
	EXPECT_EQ(wait_child(pid), 0) << *child_failed_line();
	EXPECT_EQ(domain_file("k"), "3\n");
}

TEST_F(Layouts, PartitionsBeyondSixtyFourUnits)
{
	// An MI300X has 304 CUs: bitmaps span several words.
	Dev admin;
	Layout l;
	l.k = 2;
	l.unit_kind = GPUSLOT_UNIT_AMD_CU;
	l.unit_size = 1;
	l.nr_units = 304;
	l.partitions = {unit_range(0, 152), unit_range(152, 152)};
	ASSERT_EQ(admin.set_layout(l), 0);
	auto lines = split_lines(partitions_text());
	ASSERT_EQ(lines.size(), 2u);
	// 152 bits: 38 hex digits of f.
	EXPECT_EQ(lines[0], "0 0x" + std::string(38, 'f'));
	// Units 152..303: 0xfff...f followed by 152 zero bits.
	EXPECT_EQ(lines[1], "1 0x" + std::string(38, 'f') + std::string(38, '0'));
	Layout got;
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_TRUE(same_partition(got.partitions[1], l.partitions[1]));
}

TEST_F(Layouts, BadLayoutsAreRefusedAndChangeNothing)
{
	Dev admin;
	Layout good = cu_layout(60, {0xff, 0xff00});
	good.hqd_limit = 12;
	ASSERT_EQ(admin.set_layout(good), 0);
	const std::string before = partitions_text();

	struct Case {
		const char *what;
		Layout layout;
	};
	std::vector<Case> cases;
	auto add = [&](const char *what, auto edit) {
		Layout l = cu_layout(60, {0xf, 0xf0, 0xf00});
		edit(l);
		cases.push_back({what, l});
	};
	add("overlap", [](Layout &l) { l.partitions[2].units[0] = 0x1f0; });
	add("unit past nr_units",
	    [](Layout &l) { l.partitions[1].units[0] = 1ULL << 60; });
	add("unit in a high word",
	    [](Layout &l) { l.partitions[1].units[3] = 1; });
	add("fewer partitions than k", [](Layout &l) { l.k = 4; });
	add("k 0", [](Layout &l) { l.k = 0; l.partitions.clear(); });
	add("k 65", [](Layout &l) { l.k = 65; });
	add("unknown kind", [](Layout &l) { l.unit_kind = 3; });
	add("cu unit size 2", [](Layout &l) { l.unit_size = 2; });
	add("sm group size 0", [](Layout &l) {
		l.unit_kind = GPUSLOT_UNIT_NV_SM_GROUP;
		l.unit_size = 0;
	});
	add("nr_units 0", [](Layout &l) { l.nr_units = 0; });
	add("nr_units 1025", [](Layout &l) { l.nr_units = 1025; });
	add("hqd_limit 1025", [](Layout &l) { l.hqd_limit = 1025; });
	add("partitions with kind none", [](Layout &l) {
		l.unit_kind = GPUSLOT_UNIT_NONE;
		l.unit_size = 0;
		l.nr_units = 0;
	});
	for (auto &c : cases) {
		uint64_t gen = admin.info().generation;
		EXPECT_EQ(admin.set_layout(c.layout), EINVAL) << c.what;
		EXPECT_EQ(admin.info().generation, gen) << c.what;
		EXPECT_EQ(partitions_text(), before) << c.what;
		EXPECT_EQ(domain_file("hqd_limit"), "12\n") << c.what;
	}

	// Flags, reserved bits and a bad pointer.
	gpuslot_layout a{};
	a.size = sizeof(a);
	a.flags = 1;
	EXPECT_EQ(admin.call(GPUSLOT_IOC_GET_LAYOUT, &a), EINVAL);
	a.flags = 0;
	a.k = 2;
	a.unit_kind = GPUSLOT_UNIT_AMD_CU;
	a.unit_size = 1;
	a.nr_units = 60;
	a.nr_partitions = 2;
	// A bad pointer faults in the kernel; on the socket the caller's own
	// process reads it (the partitions travel in the message).
	if (!on_socket()) {
		a.partitions = 16; // unmapped
		EXPECT_EQ(admin.call(GPUSLOT_IOC_SET_LAYOUT, &a), EFAULT);
		EXPECT_EQ(admin.call(GPUSLOT_IOC_GET_LAYOUT, &a), EFAULT);
	}
	a.size = GPUSLOT_LAYOUT_SIZE_VER0 - 8;
	EXPECT_EQ(admin.call(GPUSLOT_IOC_GET_LAYOUT, &a), EINVAL);
	EXPECT_EQ(partitions_text(), before);
}

TEST_F(Layouts, WritingKResetsPartitionsToWholeGpu)
{
	Dev admin;
	Layout l = cu_layout(60, {0xf, 0xf0, 0xf00, 0xf000});
	ASSERT_EQ(admin.set_layout(l), 0);
	ASSERT_EQ(write_attr(0, "k", "3"), 0);
	EXPECT_EQ(partitions_text(), "0 all\n1 all\n2 all\n");
	// The unit kind stays for the daemon's next plan and for sysfs edits.
	EXPECT_EQ(units_text(), "amd-cu 60 1\n");
	EXPECT_EQ(admin.info().generation, l.generation + 1);

	// The same k again still resets partitions, as a new generation.
	ASSERT_EQ(admin.set_layout(l), 0);
	uint64_t gen = l.generation;
	ASSERT_EQ(write_attr(0, "k", "4"), 0);
	EXPECT_EQ(partitions_text(), "0 all\n1 all\n2 all\n3 all\n");
	EXPECT_EQ(admin.info().generation, gen + 1);
	// ... but not when there was nothing to reset.
	ASSERT_EQ(write_attr(0, "k", "4"), 0);
	EXPECT_EQ(admin.info().generation, gen + 1);
}

TEST_F(Layouts, AdminEditsPartitionsThroughSysfs)
{
	// Before any layout there is no unit kind to edit against.
	EXPECT_EQ(stage_partitions(0, "0 0xf\n"), EINVAL);
	EXPECT_EQ(write_attr(0, "commit", read_attr(0, "generation")), ENODATA);

	Dev admin;
	Layout l = cu_layout(60, {0xf, 0xf0, 0xf00});
	ASSERT_EQ(admin.set_layout(l), 0);

	// Two slots staged apply as one change.
	ASSERT_EQ(stage_partitions(0, "1 0xff000\n2 all\n"), 0);
	EXPECT_EQ(partitions_text(), "0 0xf\n1 0xff000\n2 all\n");
	EXPECT_EQ(admin.info().generation, l.generation + 1);
	ASSERT_EQ(stage_partitions(0, "2 F00"), 0);
	EXPECT_EQ(partitions_text(), "0 0xf\n1 0xff000\n2 0xf00\n");

	const std::string before = partitions_text();
	const uint64_t gen = admin.info().generation;
	const std::string huge(300, 'f');
	struct Bad {
		const char *file, *text;
		int err;
	};
	for (const Bad &bad : std::vector<Bad>{
		     {"slot3/units", "1", ENXIO},	// k is 3
		     {"slot0/units", "0", EINVAL},	// no unit: not "all"
		     {"slot0/units", "\n", EINVAL},
		     {"slot0/units", "0x1", EINVAL},	// %*pb has no 0x
		     {"slot0/units", "g", EINVAL},
		     {"slot0/units", "10000000,00000000", EINVAL}, // unit 60 of 0..59
		     {"slot0/units", "1,00000000,00000000", EINVAL},
		     {"slot0/units", "all x", EINVAL},
		     {"slot0/units", huge.c_str(), EINVAL},
	     }) {
		EXPECT_EQ(write_attr(0, bad.file, bad.text), bad.err) << bad.file << " " << bad.text;
		EXPECT_EQ(partitions_text(), before) << bad.text;
		EXPECT_EQ(admin.info().generation, gen) << bad.text;
	}
	// No write was staged.
	EXPECT_EQ(write_attr(0, "commit", std::to_string(gen)), ENODATA);

	// Slots 0 and 2 would share unit 8: the commit is refused, nothing
	// changes, and the staging stays for a fix.
	EXPECT_EQ(stage_partitions(0, "0 0x100"), EINVAL);
	EXPECT_EQ(partitions_text(), before);
	EXPECT_EQ(admin.info().generation, gen);
	ASSERT_EQ(stage_partitions(0, "2 0xe00"), 0);
	EXPECT_EQ(partitions_text(), "0 0x100\n1 0xff000\n2 0xe00\n");
	EXPECT_EQ(admin.info().generation, gen + 1);
	ASSERT_EQ(stage_partitions(0, "0 0xf\n2 0xf00"), 0);

	// Only root writes: a file (or connection) that root opened does not
	// make a write after dropping root an admin's.
	const std::string restored = partitions_text();
	pid_t pid = spawn([&] {
		Dev mine;
		int fd = on_socket() ? mine.fd() : open(sysfs_path(0, "slot0/units").c_str(), O_WRONLY);
		CHILD_REQUIRE(fd >= 0);
		CHILD_REQUIRE(setresuid(65534, 65534, 65534) == 0);
		if (on_socket()) {
			CHILD_REQUIRE(mine.file().write_attr("slot0/units", "all") == EPERM);
		} else {
			CHILD_REQUIRE(write(fd, "all", 3) < 0 && errno == EPERM);
		}
		return 0;
	});
	EXPECT_EQ(wait_child(pid), 0) << *child_failed_line();
	EXPECT_EQ(partitions_text(), restored);
	EXPECT_EQ(write_attr(0, "commit", read_attr(0, "generation")), ENODATA);
}

TEST_F(Layouts, LayoutChangeReachesWaitersHoldersAndPollers)
{
	Dev admin, holder, waiter;
	Layout one = cu_layout(60, {0});
	ASSERT_EQ(admin.set_layout(one), 0);
	auto held = holder.acquire();
	ASSERT_EQ(held.err, 0);

	// A poller of "generation" wakes on the change (gpuslotd and
	// clients wait on it rather than re-reading). The socket has no
	// pollable attributes: gpuslotd itself makes the changes there.
	int fd = on_socket() ? -1 : open(sysfs_path(0, "generation").c_str(), O_RDONLY);
	char buf[32];
	if (!on_socket()) {
		ASSERT_GE(fd, 0);
		ASSERT_GT(read(fd, buf, sizeof(buf)), 0);
	}

	std::thread t([&] {
		auto r = waiter.acquire();
		EXPECT_EQ(r.err, 0);
		EXPECT_EQ(r.slot, 1u);
		EXPECT_EQ(r.generation, one.generation + 1);
		EXPECT_EQ(waiter.release(), 0);
	});
	ASSERT_TRUE(wait_waiters(1));
	Layout two = cu_layout(60, {0x3fffffff, 0xfffffffc0000000ULL});
	ASSERT_EQ(admin.set_layout(two), 0);
	t.join();

	if (!on_socket()) {
		pollfd p{fd, POLLPRI | POLLERR, 0};
		EXPECT_EQ(poll(&p, 1, 1000), 1);
		close(fd);
	}

	// The holder keeps slot 0 through the change and sees the new
	// generation on its next acquire.
	EXPECT_EQ(holder.release(), 0);
	auto again = holder.acquire();
	ASSERT_EQ(again.err, 0);
	EXPECT_EQ(again.generation, two.generation);
	EXPECT_EQ(holder.release(), 0);
}

// An expected generation makes SET_LAYOUT a compare-and-set: a layout that
// someone changed since the caller read it is not overwritten (EAGAIN).
TEST_F(Layouts, AnExpectedGenerationRefusesToOverwriteANewerLayout)
{
	Dev d;
	Layout four = cu_layout(60, {0x111111111111111ULL, 0x222222222222222ULL,
				     0x444444444444444ULL, 0x888888888888888ULL});
	four.k = 4;
	ASSERT_EQ(d.set_layout(four), 0);
	const uint64_t read = d.info().generation;
	// An admin writes k between the daemon's read and its set.
	ASSERT_EQ(write_attr(0, "k", "3"), 0);
	gpuslot_layout a{};
	a.size = sizeof(a);
	a.k = 2;
	a.flags = GPUSLOT_LAYOUT_EXPECT_GENERATION;
	a.expected_generation = read;
	EXPECT_EQ(d.call(GPUSLOT_IOC_SET_LAYOUT, &a), EAGAIN);
	EXPECT_EQ(read_attr(0, "k"), "3\n");
	EXPECT_EQ(d.info().generation, read + 1);
	// Read again, set again: accepted.
	a.expected_generation = d.info().generation;
	EXPECT_EQ(d.call(GPUSLOT_IOC_SET_LAYOUT, &a), 0);
	EXPECT_EQ(read_attr(0, "k"), "2\n");
	// Without the flag SET wants the field 0; GET takes no flag.
	a.flags = 0;
	EXPECT_EQ(d.call(GPUSLOT_IOC_SET_LAYOUT, &a), EINVAL);
	gpuslot_layout g{};
	g.size = sizeof(g);
	g.flags = GPUSLOT_LAYOUT_EXPECT_GENERATION;
	EXPECT_EQ(d.call(GPUSLOT_IOC_GET_LAYOUT, &g), EINVAL);
}

// Issue 28 item 13: the header says GET ignores expected_generation, so a
// caller that fills one struct for both (read, then compare-and-set) reads
// the layout whatever the field holds.
TEST_F(Layouts, GetLayoutIgnoresTheExpectedGeneration)
{
	Dev d;
	ASSERT_EQ(write_attr(0, "k", "3"), 0);
	const uint64_t gen = d.info().generation;
	for (uint64_t expected : {uint64_t(1), gen, gen + 1, ~uint64_t(0)}) {
		gpuslot_layout g{};
		g.size = sizeof(g);
		g.expected_generation = expected;
		EXPECT_EQ(d.call(GPUSLOT_IOC_GET_LAYOUT, &g), 0) << expected;
		EXPECT_EQ(g.k, 3u) << expected;
		EXPECT_EQ(g.generation, gen) << expected;
	}
}

// Issue 32: a slot is a partition and a GPU stream priority. A layout's
// priorities round-trip, are zero from k on, and a change of priority
// alone is a new generation (clients make their streams again).
TEST_F(Layouts, SlotPrioritiesRoundTripAndAreANewGeneration)
{
	Dev admin;
	Layout l = cu_layout(60, {0, 0xff00, 0xff0000});
	l.priority[0] = GPUSLOT_MAX_SLOT_PRIORITY;
	l.priority[1] = 3;
	ASSERT_EQ(admin.set_layout(l), 0);
	Layout got;
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_EQ(got.generation, l.generation);
	EXPECT_EQ(got.priority[0], GPUSLOT_MAX_SLOT_PRIORITY);
	EXPECT_EQ(got.priority[1], 3);
	EXPECT_EQ(got.priority[2], 0);
	for (unsigned int s = 3; s < GPUSLOT_MAX_SLOTS; s++)
		EXPECT_EQ(got.priority[s], 0) << s;

	// The same layout again: no new generation.
	Layout again = l;
	ASSERT_EQ(admin.set_layout(again), 0);
	EXPECT_EQ(again.generation, l.generation);
	// Only a priority changes: a new one.
	Layout reprioritised = l;
	reprioritised.priority[2] = 1;
	ASSERT_EQ(admin.set_layout(reprioritised), 0);
	EXPECT_EQ(reprioritised.generation, l.generation + 1);
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_EQ(got.priority[2], 1);

	// Priorities with unit kind NONE: every slot is the whole GPU.
	Layout none;
	none.k = 2;
	none.priority[1] = 7;
	ASSERT_EQ(admin.set_layout(none), 0);
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_EQ(got.priority[0], 0);
	EXPECT_EQ(got.priority[1], 7);

	// GET writes every entry, whatever the caller's struct held.
	gpuslot_layout g{};
	g.size = sizeof(g);
	memset(g.priority, 0xff, sizeof(g.priority));
	ASSERT_EQ(admin.call(GPUSLOT_IOC_GET_LAYOUT, &g), 0);
	EXPECT_EQ(g.priority[1], 7);
	for (unsigned int s = 2; s < GPUSLOT_MAX_SLOTS; s++)
		EXPECT_EQ(g.priority[s], 0) << s;
}

// A priority over GPUSLOT_MAX_SLOT_PRIORITY, or one for a slot at or past
// k, is refused with EINVAL, and nothing changes.
TEST_F(Layouts, ABadPriorityIsRefusedAndChangesNothing)
{
	Dev admin;
	Layout good = cu_layout(60, {0xff, 0xff00});
	good.priority[0] = 2;
	ASSERT_EQ(admin.set_layout(good), 0);
	for (int bad : {0, 1}) {
		Layout l = cu_layout(60, {0xf, 0xf0, 0xf00});
		if (bad == 0)
			l.priority[1] = GPUSLOT_MAX_SLOT_PRIORITY + 1;
		else
			l.priority[3] = 1; // k is 3
		EXPECT_EQ(admin.set_layout(l), EINVAL) << bad;
		Layout got;
		ASSERT_EQ(admin.get_layout(got), 0);
		EXPECT_EQ(got.k, 2u) << bad;
		EXPECT_EQ(got.generation, good.generation) << bad;
		EXPECT_EQ(got.priority[0], 2) << bad;
		EXPECT_EQ(got.partitions[0].units[0], 0xffu) << bad;
	}
	Layout l = cu_layout(60, {0xf});
	l.priority[0] = 255;
	EXPECT_EQ(admin.set_layout(l), EINVAL);
	EXPECT_EQ(admin.info().generation, good.generation);
}

// Overlapping partitions are first class at different priorities: the GPU
// orders their work where they meet. At the same priority they isolate
// nothing and are refused; the whole GPU sits beside anything.
TEST_F(Layouts, PartitionsMayOverlapOnlyAtDifferentPriorities)
{
	Dev admin;
	// Slot 0 on most of the GPU at high priority, slots 1 and 2 confined
	// and disjoint at low priority, slot 1 inside slot 0's units.
	Layout overlap = cu_layout(60, {0x0fffffffffffffffULL, 0xff, 0xff00});
	overlap.priority[0] = 5;
	ASSERT_EQ(admin.set_layout(overlap), 0);
	Layout got;
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_EQ(got.partitions[0].units[0], 0x0fffffffffffffffULL);
	EXPECT_EQ(got.priority[0], 5);

	// The same partitions at one priority: refused, nothing changed.
	Layout same = overlap;
	same.priority[0] = 0;
	EXPECT_EQ(admin.set_layout(same), EINVAL);
	// Two confined slots that meet at an equal nonzero priority too.
	Layout equal = cu_layout(60, {0x1ff, 0xff00, 0x100});
	equal.priority[0] = 4;
	equal.priority[2] = 4;
	EXPECT_EQ(admin.set_layout(equal), EINVAL);
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_EQ(got.generation, overlap.generation);
	EXPECT_EQ(got.priority[0], 5);

	// The whole GPU beside confined slots at the same priority: fine.
	Layout whole = cu_layout(60, {0, 0xff, 0xff00});
	ASSERT_EQ(admin.set_layout(whole), 0);
}

// A SET of an API-1-sized struct (64 bytes, before the priorities) sets
// every slot to priority 0; SET_K and a write of k reset priorities with
// the partitions.
TEST_F(Layouts, AShortSetAndKResetEveryPriority)
{
	Dev admin;
	Layout l = cu_layout(60, {0xf, 0xf0});
	l.priority[0] = 9;
	l.priority[1] = 1;
	ASSERT_EQ(admin.set_layout(l), 0);
	gpuslot_layout a{};
	a.size = 64;
	a.k = 2;
	a.unit_kind = GPUSLOT_UNIT_AMD_CU;
	a.unit_size = 1;
	a.nr_units = 60;
	a.nr_partitions = 2;
	a.partitions = reinterpret_cast<uintptr_t>(l.partitions.data());
	a.priority[0] = 9; // past the size: not sent
	ASSERT_EQ(admin.call(GPUSLOT_IOC_SET_LAYOUT, &a), 0);
	EXPECT_EQ(a.generation, l.generation + 1);
	Layout got;
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_EQ(got.priority[0], 0);
	EXPECT_EQ(got.priority[1], 0);
	EXPECT_EQ(got.partitions[1].units[0], 0xf0u);
	// GET at size 64 writes nothing past it.
	gpuslot_layout g{};
	g.size = 64;
	memset(g.priority, 0xaa, sizeof(g.priority));
	ASSERT_EQ(admin.call(GPUSLOT_IOC_GET_LAYOUT, &g), 0);
	EXPECT_EQ(g.priority[0], 0xaa);

	// SET_K: priorities go with the partitions, as a new generation even
	// when only a priority was left to reset.
	Layout p = l;
	p.partitions = {gpuslot_partition{}, gpuslot_partition{}};
	ASSERT_EQ(admin.set_layout(p), 0);
	uint64_t gen = 0;
	ASSERT_EQ(admin.set_k(2, &gen), 0);
	EXPECT_EQ(gen, p.generation + 1);
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_EQ(got.priority[0], 0);
	EXPECT_EQ(got.priority[1], 0);
	// The k file.
	ASSERT_EQ(admin.set_layout(l), 0);
	ASSERT_EQ(write_attr(0, "k", "3"), 0);
	ASSERT_EQ(admin.get_layout(got), 0);
	EXPECT_EQ(got.k, 3u);
	for (unsigned int s = 0; s < 3; s++)
		EXPECT_EQ(got.priority[s], 0) << s;
}

} // namespace
} // namespace gpuslot::test
