// SPDX-License-Identifier: GPL-2.0
// Preemptive slots (issue 40) through libgpuslot, on either transport (the
// module's read-only page, gpuslotd's sealed memfd): a holder reports its
// work, every client reads the domain's state and whether a slot of its
// priority yields, and the hold's end clears the work.
#include <gtest/gtest.h>

#include <cerrno>

#include "device.h"
#include "gpuslot.h"

namespace gpuslot::test {
namespace {

// The budget is work_test.cc's: here preempt_share is 100 (no bound), so
// that no read comes after the default budget's 250 ms ran out (a TCG
// guest is slow enough for that), and back to the default after.
class ClientWork : public DomainTest {
protected:
	void SetUp() override
	{
		DomainTest::SetUp();
		ASSERT_EQ(write_attr(0, "preempt_share", "100"), 0);
	}
	void TearDown() override
	{
		EXPECT_EQ(write_attr(0, "preempt_share", "25"), 0);
		DomainTest::TearDown();
	}
	Dev admin;
};

gpuslot_work_info work_of(gpuslot_client *c)
{
	gpuslot_work_info i{};
	i.size = sizeof(i);
	EXPECT_EQ(gpuslot_work_snapshot(c, &i), 0) << gpuslot_last_error();
	return i;
}

TEST_F(ClientWork, AHolderReportsWorkAndEveryClientReadsIt)
{
	Layout l;
	l.k = 2;
	l.priority[0] = 1; // slot 1 (priority 0) yields to slot 0
	ASSERT_EQ(admin.set_layout(l), 0);
	gpuslot_options o{};
	o.size = sizeof(o);
	o.backend = GPUSLOT_BACKEND_NONE;
	gpuslot_client *holder = nullptr, *reader = nullptr;
	ASSERT_EQ(gpuslot_open(&o, &holder), 0) << gpuslot_last_error();
	o.slot_mask = 2; // another client of its own streams
	ASSERT_EQ(gpuslot_open(&o, &reader), 0) << gpuslot_last_error();
	EXPECT_EQ(gpuslot_work_preempts(reader, 0), 0);
	gpuslot_slot high{};
	high.size = sizeof(high);
	ASSERT_EQ(gpuslot_acquire_slot(holder, GPUSLOT_WAIT_FOREVER, 1, &high), 0)
		<< gpuslot_last_error();
	ASSERT_EQ(gpuslot_set_work(holder, &high, 1), 0) << gpuslot_last_error();
	gpuslot_work_info w = work_of(reader);
	EXPECT_EQ(w.k, 2u);
	EXPECT_EQ(w.generation, l.generation);
	EXPECT_EQ(w.held_mask, 1u);
	EXPECT_EQ(w.work_mask, 1u);
	EXPECT_EQ(w.preempt_mask, 1u); // a fresh budget
	EXPECT_EQ(w.preempt_level, 2u);
	EXPECT_EQ(gpuslot_work_preempts(reader, 0), 1);
	EXPECT_EQ(gpuslot_work_preempts(reader, 1), 0);
	ASSERT_EQ(gpuslot_set_work(holder, &high, 0), 0) << gpuslot_last_error();
	EXPECT_EQ(work_of(reader).work_mask, 0u);
	ASSERT_EQ(gpuslot_set_work(holder, &high, 1), 0) << gpuslot_last_error();
	// The hold's end clears the work; a slot not held reports nothing.
	ASSERT_EQ(gpuslot_release_slot(holder, &high, 0), 0) << gpuslot_last_error();
	w = work_of(reader);
	EXPECT_EQ(w.work_mask, 0u);
	EXPECT_EQ(w.held_mask, 0u);
	EXPECT_EQ(gpuslot_work_preempts(reader, 0), 0);
	EXPECT_EQ(gpuslot_set_work(holder, &high, 1), -EINVAL);
	gpuslot_close(reader);
	gpuslot_close(holder);
}

} // namespace
} // namespace gpuslot::test
