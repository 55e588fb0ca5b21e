// SPDX-License-Identifier: GPL-2.0
// The ioctl ABI's edges: struct sizes, structs the kernel cannot write
// back, and the file's other operations.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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
