// SPDX-License-Identifier: GPL-2.0
// The ioctl ABI's edges: struct sizes, structs the kernel cannot write
// back, and the file's other operations.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "device.h"

namespace gpuslot::test {
namespace {

class Ioctl : public testing::Test {
protected:
	void SetUp() override { reset_domain(0); }
	void TearDown() override { reset_domain(0); }
};

// Defect 7: the kernel does not scan gigabytes of a caller's memory for
// zeros: a size over one page is E2BIG, zero tail or not.
TEST_F(Ioctl, ASizeOverAPageIsRefusedWithE2big)
{
	Dev d;
	std::vector<uint64_t> buf(1 << 17, 0); // 1 MiB of zeros
	auto *v = reinterpret_cast<gpuslot_version *>(buf.data());
	v->size = GPUSLOT_MAX_STRUCT_SIZE;
	EXPECT_EQ(d.call(GPUSLOT_IOC_VERSION, v), 0);
	EXPECT_EQ(v->api_version, unsigned(GPUSLOT_API_VERSION));
	for (uint32_t size : {uint32_t(GPUSLOT_MAX_STRUCT_SIZE + 1), 8192u, 1u << 20}) {
		v->size = size;
		EXPECT_EQ(d.call(GPUSLOT_IOC_VERSION, v), E2BIG) << size;
		auto *a = reinterpret_cast<gpuslot_acquire *>(buf.data());
		memset(a, 0, sizeof(*a));
		a->size = size;
		EXPECT_EQ(d.call(GPUSLOT_IOC_ACQUIRE, a), E2BIG) << size;
	}
	EXPECT_EQ(d.info().nr_holders, 0u);
}

// A zeroed struct with its size set.
template <class T> T sized()
{
	T v{};
	v.size = sizeof(v);
	return v;
}

// A struct on a read-only page: the kernel can read it, not write it back.
template <class T> T *read_only(void *page, const T &value)
{
	memcpy(page, &value, sizeof(value));
	if (mprotect(page, 4096, PROT_READ))
		abort();
	return static_cast<T *>(page);
}

// Defect 10: a call that fails with EFAULT changed nothing, and a call with
// nothing to report does not fail for want of a place to report it.
TEST_F(Ioctl, ACallThatCannotReportItsResultChangesNothing)
{
	Dev d, probe;
	auto page = [] {
		void *p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			abort();
		return p;
	};
	void *p;

	// ATTACH has no output: it works on a read-only struct.
	p = page();
	EXPECT_EQ(d.call(GPUSLOT_IOC_ATTACH,
			      read_only(p, sized<gpuslot_attach>())),
		  0);
	munmap(p, 4096);

	// RELEASE: EFAULT, and the slot is still held.
	ASSERT_EQ(d.acquire().err, 0);
	p = page();
	EXPECT_EQ(d.call(GPUSLOT_IOC_RELEASE,
			      read_only(p, sized<gpuslot_release>())),
		  EFAULT);
	munmap(p, 4096);
	EXPECT_EQ(probe.info().nr_holders, 1u);
	EXPECT_EQ(d.release(), 0);

	// SET_K: EFAULT, k and the generation unchanged.
	auto before = probe.info();
	p = page();
	auto k3 = sized<gpuslot_set_k>();
	k3.k = 3;
	EXPECT_EQ(d.call(GPUSLOT_IOC_SET_K, read_only(p, k3)),
		  EFAULT);
	munmap(p, 4096);
	EXPECT_EQ(probe.info().k, before.k);
	EXPECT_EQ(probe.info().generation, before.generation);

	// SET_LAYOUT: EFAULT, nothing changed.
	p = page();
	gpuslot_layout l{};
	l.size = sizeof(l);
	l.k = 4;
	l.hqd_limit = 5;
	EXPECT_EQ(d.call(GPUSLOT_IOC_SET_LAYOUT, read_only(p, l)),
		  EFAULT);
	munmap(p, 4096);
	EXPECT_EQ(probe.info().k, before.k);
	EXPECT_EQ(probe.info().hqd_limit, before.hqd_limit);
	EXPECT_EQ(probe.info().generation, before.generation);

	// UNRESERVE_QUEUES: EFAULT, the reservation unchanged.
	ASSERT_EQ(d.reserve(2).err, 0);
	p = page();
	auto un1 = sized<gpuslot_unreserve_queues>();
	un1.count = 1;
	EXPECT_EQ(d.call(GPUSLOT_IOC_UNRESERVE_QUEUES,
			      read_only(p, un1)),
		  EFAULT);
	munmap(p, 4096);
	EXPECT_EQ(probe.info().hqd_used, 2u);
	EXPECT_EQ(d.unreserve(2), 0);

	// RESERVE_QUEUES and ACQUIRE are undone.
	p = page();
	auto re3 = sized<gpuslot_reserve_queues>();
	re3.count = 3;
	EXPECT_EQ(d.call(GPUSLOT_IOC_RESERVE_QUEUES,
			      read_only(p, re3)),
		  EFAULT);
	munmap(p, 4096);
	EXPECT_EQ(probe.info().hqd_used, 0u);
	EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
}

// Every command of API 2 and its exact number: the struct each takes, the
// first published size (the number's size bits) and whether the kernel
// writes it back (_IOWR) or only reads it (_IOW).
struct Command {
	const char *name;
	unsigned long cmd;
	unsigned int nr;
	unsigned int dir;
	unsigned int size_ver0;
};

const Command kCommands[] = {
	{"VERSION", GPUSLOT_IOC_VERSION, 0x00, _IOC_READ | _IOC_WRITE, GPUSLOT_VERSION_SIZE_VER0},
	{"ATTACH", GPUSLOT_IOC_ATTACH, 0x01, _IOC_WRITE, GPUSLOT_ATTACH_SIZE_VER0},
	{"ACQUIRE", GPUSLOT_IOC_ACQUIRE, 0x02, _IOC_READ | _IOC_WRITE, GPUSLOT_ACQUIRE_SIZE_VER0},
	{"RELEASE", GPUSLOT_IOC_RELEASE, 0x03, _IOC_READ | _IOC_WRITE, GPUSLOT_RELEASE_SIZE_VER0},
	{"SET_K", GPUSLOT_IOC_SET_K, 0x04, _IOC_READ | _IOC_WRITE, GPUSLOT_SET_K_SIZE_VER0},
	{"DOMAIN_INFO", GPUSLOT_IOC_DOMAIN_INFO, 0x05, _IOC_READ | _IOC_WRITE,
	 GPUSLOT_DOMAIN_INFO_SIZE_VER0},
	{"GET_STATS", GPUSLOT_IOC_GET_STATS, 0x06, _IOC_READ | _IOC_WRITE, GPUSLOT_STATS_SIZE_VER0},
	{"RESERVE_QUEUES", GPUSLOT_IOC_RESERVE_QUEUES, 0x07, _IOC_READ | _IOC_WRITE,
	 GPUSLOT_RESERVE_QUEUES_SIZE_VER0},
	{"UNRESERVE_QUEUES", GPUSLOT_IOC_UNRESERVE_QUEUES, 0x08, _IOC_READ | _IOC_WRITE,
	 GPUSLOT_UNRESERVE_QUEUES_SIZE_VER0},
	{"SET_LAYOUT", GPUSLOT_IOC_SET_LAYOUT, 0x09, _IOC_READ | _IOC_WRITE, GPUSLOT_LAYOUT_SIZE_VER0},
	{"GET_LAYOUT", GPUSLOT_IOC_GET_LAYOUT, 0x0A, _IOC_READ | _IOC_WRITE, GPUSLOT_LAYOUT_SIZE_VER0},
	{"ACQUIRE_ASYNC", GPUSLOT_IOC_ACQUIRE_ASYNC, 0x0B, _IOC_WRITE, GPUSLOT_ACQUIRE_SIZE_VER0},
	{"ACQUIRE_COMPLETE", GPUSLOT_IOC_ACQUIRE_COMPLETE, 0x0C, _IOC_READ | _IOC_WRITE,
	 GPUSLOT_ACQUIRE_SIZE_VER0},
	{"ACQUIRE_CANCEL", GPUSLOT_IOC_ACQUIRE_CANCEL, 0x0D, _IOC_READ | _IOC_WRITE,
	 GPUSLOT_RELEASE_SIZE_VER0},
	{"SET_WORK", GPUSLOT_IOC_SET_WORK, 0x0E, _IOC_WRITE, GPUSLOT_SET_WORK_SIZE_VER0},
};

// The header's numbers are what the table says: a typo there would make
// every test below test the wrong thing.
TEST_F(Ioctl, TheHeaderNumbersAreTheDocumentedOnes)
{
	for (auto &c : kCommands)
		EXPECT_EQ(c.cmd, _IOC(c.dir, GPUSLOT_IOC_MAGIC, c.nr, c.size_ver0)) << c.name;
	EXPECT_EQ(GPUSLOT_IOC_VERSION_LEGACY, _IOC(_IOC_NONE, GPUSLOT_IOC_MAGIC, 0, 0));
}

// Issue 29: every API-2 number is a command of the module.
TEST_F(Ioctl, EveryApi2NumberWorks)
{
	Dev d, admin;
	gpuslot_version v{};
	v.size = sizeof(v);
	EXPECT_EQ(d.call(GPUSLOT_IOC_VERSION, &v), 0);
	EXPECT_EQ(v.api_version, 2u);
	auto at = sized<gpuslot_attach>();
	EXPECT_EQ(d.call(GPUSLOT_IOC_ATTACH, &at), 0);
	auto k = sized<gpuslot_set_k>();
	k.k = 2;
	EXPECT_EQ(admin.call(GPUSLOT_IOC_SET_K, &k), 0);
	EXPECT_EQ(d.info().k, 2u); // DOMAIN_INFO
	auto a = sized<gpuslot_acquire>();
	EXPECT_EQ(d.call(GPUSLOT_IOC_ACQUIRE, &a), 0);
	EXPECT_EQ(a.slot, 0u);
	auto rel = sized<gpuslot_release>();
	EXPECT_EQ(d.call(GPUSLOT_IOC_RELEASE, &rel), 0);
	EXPECT_EQ(rel.slot, 0u);
	auto st = sized<gpuslot_stats>();
	EXPECT_EQ(d.call(GPUSLOT_IOC_GET_STATS, &st), 0);
	EXPECT_GE(st.acquisitions, 1u);
	auto re = sized<gpuslot_reserve_queues>();
	re.count = 2;
	EXPECT_EQ(d.call(GPUSLOT_IOC_RESERVE_QUEUES, &re), 0);
	EXPECT_EQ(re.reserved, 2u);
	auto un = sized<gpuslot_unreserve_queues>();
	un.count = 2;
	EXPECT_EQ(d.call(GPUSLOT_IOC_UNRESERVE_QUEUES, &un), 0);
	EXPECT_EQ(un.reserved, 0u);
	auto l = sized<gpuslot_layout>();
	l.k = 3;
	EXPECT_EQ(admin.call(GPUSLOT_IOC_SET_LAYOUT, &l), 0);
	auto g = sized<gpuslot_layout>();
	EXPECT_EQ(d.call(GPUSLOT_IOC_GET_LAYOUT, &g), 0);
	EXPECT_EQ(g.k, 3u);
	auto as = sized<gpuslot_acquire>();
	EXPECT_EQ(d.call(GPUSLOT_IOC_ACQUIRE_ASYNC, &as), 0);
	auto co = sized<gpuslot_acquire>();
	EXPECT_EQ(d.call(GPUSLOT_IOC_ACQUIRE_COMPLETE, &co), 0);
	EXPECT_EQ(co.slot, 0u);
	auto sw = sized<gpuslot_set_work>();
	sw.flags = GPUSLOT_WORK_PENDING;
	EXPECT_EQ(d.call(GPUSLOT_IOC_SET_WORK, &sw), 0);
	EXPECT_EQ(d.fdinfo()["gpuslot-work"], "pending");
	EXPECT_EQ(d.call(GPUSLOT_IOC_RELEASE, &rel), 0);
	EXPECT_EQ(d.call(GPUSLOT_IOC_ACQUIRE_ASYNC, &as), 0);
	auto ca = sized<gpuslot_release>();
	EXPECT_EQ(d.call(GPUSLOT_IOC_ACQUIRE_CANCEL, &ca), 0);
	EXPECT_EQ(ca.slot, 0u);
	EXPECT_EQ(d.info().nr_holders, 0u);
}

// API 1 libraries ask VERSION at _IO(0xC6, 0): the module answers there
// too, so that they can say what to upgrade. API 2 and every feature.
TEST_F(Ioctl, VersionLegacyAnswersApiVersionTwo)
{
	Dev d;
	auto v = sized<gpuslot_version>();
	ASSERT_EQ(d.call(GPUSLOT_IOC_VERSION_LEGACY, &v), 0);
	EXPECT_EQ(v.api_version, 2u);
	EXPECT_EQ(v.nr_domains, 1u);
	const uint64_t all = GPUSLOT_FEATURE_LOCK | GPUSLOT_FEATURE_HQD | GPUSLOT_FEATURE_LAYOUT |
			     GPUSLOT_FEATURE_ASYNC | GPUSLOT_FEATURE_DEADLINE |
			     GPUSLOT_FEATURE_SLOT_PRIORITY | GPUSLOT_FEATURE_WORK;
	EXPECT_EQ(v.features, all);
	auto v2 = sized<gpuslot_version>();
	ASSERT_EQ(d.call(GPUSLOT_IOC_VERSION, &v2), 0);
	EXPECT_EQ(v2.features, all);
}

// API 1's numbers of the other commands are no commands: an API 1 library
// learns it from ENOTTY and asks VERSION_LEGACY, nothing happens.
TEST_F(Ioctl, Api1NumbersOfTheOtherCommandsGetEnotty)
{
	Dev d;
	for (auto &c : kCommands) {
		if (c.nr == 0)
			continue;
		// Room for any struct, every member zero but the size.
		std::vector<uint64_t> buf(512, 0);
		*reinterpret_cast<uint32_t *>(buf.data()) = c.size_ver0;
		EXPECT_EQ(d.call(_IO(GPUSLOT_IOC_MAGIC, c.nr), buf.data()), ENOTTY) << c.name;
	}
	auto info = d.info();
	EXPECT_EQ(info.nr_holders, 0u);
	EXPECT_EQ(info.hqd_used, 0u);
	EXPECT_EQ(info.k, 1u);
}

// Only the exact documented numbers are commands: the right nr with
// another direction, or another size in the number (the struct's size
// field says which version it is), gets ENOTTY and does nothing.
TEST_F(Ioctl, ANumberWithAnotherDirectionOrSizeGetsEnotty)
{
	Dev d;
	const unsigned int dirs[] = {_IOC_NONE, _IOC_READ, _IOC_WRITE, _IOC_READ | _IOC_WRITE};
	for (auto &c : kCommands) {
		std::vector<uint64_t> buf(512, 0);
		*reinterpret_cast<uint32_t *>(buf.data()) = c.size_ver0;
		for (unsigned int dir : dirs) {
			if (dir == c.dir)
				continue;
			EXPECT_EQ(d.call(_IOC(dir, GPUSLOT_IOC_MAGIC, c.nr, c.size_ver0), buf.data()),
				  ENOTTY)
				<< c.name << " dir " << dir;
		}
		for (unsigned int size : {0u, c.size_ver0 - 8, c.size_ver0 + 8, 128u, 4095u}) {
			if (size == c.size_ver0)
				continue;
			EXPECT_EQ(d.call(_IOC(c.dir, GPUSLOT_IOC_MAGIC, c.nr, size), buf.data()),
				  ENOTTY)
				<< c.name << " size " << size;
		}
	}
	// Another magic with a command's nr, direction and size.
	auto a = sized<gpuslot_acquire>();
	EXPECT_EQ(d.call(_IOC(_IOC_READ | _IOC_WRITE, 'x', 0x02, GPUSLOT_ACQUIRE_SIZE_VER0), &a),
		  ENOTTY);
	auto info = d.info();
	EXPECT_EQ(info.nr_holders, 0u);
	EXPECT_EQ(info.hqd_used, 0u);
	EXPECT_EQ(info.k, 1u);
}

// Issue 29: a RESERVE_QUEUES whose result cannot be copied out gives back
// exactly what it reserved, also when another thread of the file returned
// some of the file's queues in between. Returning the caller's count
// through UNRESERVE returned nothing then (more than the file held:
// EINVAL), and the file kept queues that a failed call had reserved.
TEST_F(Ioctl, AnUncopyableReservationGivesBackExactlyWhatItReserved)
{
	Dev d, probe;
	void *p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(p, MAP_FAILED);
	auto re3 = sized<gpuslot_reserve_queues>();
	re3.count = 3;
	auto *ro = read_only(p, re3);

	// With queues of the file's own before it: those stay.
	ASSERT_EQ(d.reserve(2).err, 0);
	EXPECT_EQ(d.call(GPUSLOT_IOC_RESERVE_QUEUES, ro), EFAULT);
	EXPECT_EQ(probe.info().hqd_used, 2u);
	ASSERT_EQ(d.unreserve(2), 0);

	// Another thread of the file returns one queue as soon as the file
	// has one, which is only inside a failing RESERVE (between its
	// reservation and its undo): that call must then give back the other
	// two, and nothing stays reserved.
	std::atomic<bool> returned{false}, stop{false};
	std::thread other([&] {
		while (!stop.load() && !returned.load())
			if (d.unreserve(1) == 0)
				returned = true;
	});
	int calls = 0, err = EFAULT;
	for (; calls < 50'000 && !returned.load() && err == EFAULT; calls++)
		err = d.call(GPUSLOT_IOC_RESERVE_QUEUES, ro);
	stop = true;
	other.join();
	EXPECT_EQ(err, EFAULT);
	munmap(p, 4096);
	if (!returned.load())
		GTEST_SKIP() << "the other thread never hit a reservation in " << calls << " calls";
	EXPECT_EQ(probe.info().hqd_used, 0u) << "after " << calls << " calls";
	EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
}

// Defect 9: no .llseek on 6.12; lseek() still fails cleanly everywhere.
TEST_F(Ioctl, LseekFailsWithEspipe)
{
	Dev d;
	errno = 0;
	EXPECT_EQ(lseek(d.fd(), 0, SEEK_SET), -1);
	EXPECT_EQ(errno, ESPIPE);
}

} // namespace
} // namespace gpuslot::test
