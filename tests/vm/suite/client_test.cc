// SPDX-License-Identifier: GPL-2.0
// libgpuslot against the real module: layout, acquire and release in C and
// C++, the release rule, many threads on one client, streams that outlive
// a layout change until retired, asynchronous acquire, struct sizes, fork
// safety and the error messages. Where GPU work matters, a test double of
// a backend (RecordingBackend) stands in for HIP or CUDA.
#include <gtest/gtest.h>

#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client_internal.hpp"
#include "device.h"
#include "gpuslot.h"
#include "gpuslot.hpp"

namespace gpuslot::test {
namespace {

std::string domain_file(const char *attr)
{
	return read_attr(0, attr);
}

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

gpuslot_options none_options()
{
	gpuslot_options o{};
	o.size = sizeof(o);
	o.backend = GPUSLOT_BACKEND_NONE;
	return o;
}

gpuslot_slot new_slot()
{
	gpuslot_slot s{};
	s.size = sizeof(s);
	return s;
}

std::string last_error()
{
	return gpuslot_last_error();
}

// The test double of a GPU backend: fake streams, one queue per
// partitioned slot plus three for the runtime (as HIP's), a synchronize
// that takes @sync_ms as if the stream had work queued, and a record of
// every call.
struct Recorder {
	std::mutex lock;
	std::vector<std::string> calls;
	std::map<void *, bool> live; // stream -> not destroyed
	unsigned int builds = 0;
	unsigned int syncs = 0;
	uint64_t last_sync_end_ns = 0;
	int sync_ms = 0;
	// At each build: holders in sysfs, and the builder's policy.
	std::vector<size_t> holders_at_build;
	std::vector<int> policy_at_build;
	uintptr_t next = 0x1000;

	void record(const std::string &c)
	{
		std::lock_guard<std::mutex> hold(lock);
		calls.push_back(c);
	}
	bool is_live(void *s)
	{
		std::lock_guard<std::mutex> hold(lock);
		return live.count(s) && live[s];
	}
};

class RecordingBackend : public Backend {
public:
	explicit RecordingBackend(Recorder &r) : r_(r) {}
	const char *name() const override { return "recording"; }
	unsigned int runtime_queues() const override { return 3; }
	unsigned int set_queues(const SlotLayout &l, uint64_t slots) const override
	{
		unsigned int n = 0;
		for (unsigned int s = 0; s < l.k; s++)
			n += (slots >> s & 1) && !l.masks[s].empty();
		return n;
	}
	int build(const SlotLayout &l, uint64_t slots, StreamSet *set, std::string *) override
	{
		std::lock_guard<std::mutex> hold(r_.lock);
		r_.builds++;
		r_.holders_at_build.push_back(split_lines(domain_file("debug/holders")).size());
		r_.policy_at_build.push_back(sched_getscheduler(0) & ~SCHED_RESET_ON_FORK);
		set->start(l);
		set->slots = slots;
		for (unsigned int s = 0; s < l.k; s++) {
			if (!(slots >> s & 1))
				continue;
			set->streams[s] = reinterpret_cast<void *>(r_.next++);
			r_.live[set->streams[s]] = true;
		}
		return 0;
	}
	int synchronize(void *stream, std::string *) override
	{
		usleep(r_.sync_ms * 1000);
		std::lock_guard<std::mutex> hold(r_.lock);
		r_.syncs++;
		r_.last_sync_end_ns = now_ns();
		r_.calls.push_back("sync " + std::to_string(reinterpret_cast<uintptr_t>(stream)));
		return 0;
	}
	void destroy_slot(StreamSet *set, unsigned int slot) override
	{
		std::lock_guard<std::mutex> hold(r_.lock);
		r_.live[set->streams[slot]] = false;
		set->streams[slot] = nullptr;
		set->slots &= ~(1ULL << slot);
	}

private:
	Recorder &r_;
};

int open_recording(Recorder &r, gpuslot_client **c, uint64_t slot_mask = 0)
{
	gpuslot_options o = none_options();
	o.slot_mask = slot_mask;
	BackendFactory f = [&r](const SlotLayout &, std::unique_ptr<Backend> *out,
				std::string *) {
		*out = std::make_unique<RecordingBackend>(r);
		return 0;
	};
	return open_client(&o, &f, c);
}

class Client : public DomainTest {
protected:
	void TearDown() override
	{
		DomainTest::TearDown();
		EXPECT_EQ(domain_file("hqd_used"), "0\n");
	}
	Dev admin;
};

TEST_F(Client, ReadsTheLayoutAndAcquiresInCAndCpp)
{
	Layout l = cu_layout(60, {0x111111111111111ULL, 0x222222222222222ULL,
				  0x444444444444444ULL, 0});
	ASSERT_EQ(admin.set_layout(l), 0);

	EXPECT_EQ(gpuslot_lib_version(), uint32_t(GPUSLOT_VERSION_NUMBER(GPUSLOT_VERSION_MAJOR,
								   GPUSLOT_VERSION_MINOR,
								   GPUSLOT_VERSION_PATCH)));
	gpuslot_options o = none_options();
	gpuslot_client *c = nullptr;
	ASSERT_EQ(gpuslot_open(&o, &c), 0) << last_error();
	gpuslot_layout_info info{};
	info.size = sizeof(info);
	ASSERT_EQ(gpuslot_client_layout(c, &info), 0);
	EXPECT_EQ(info.k, 4u);
	EXPECT_EQ(info.unit_kind, unsigned(GPUSLOT_UNIT_AMD_CU));
	EXPECT_EQ(info.nr_units, 60u);
	EXPECT_EQ(info.generation, l.generation);
	EXPECT_EQ(info.hqd_reserved, 0u);
	EXPECT_EQ(info.live_generations, 1u);
	EXPECT_STREQ(info.backend, "none");

	gpuslot_slot s = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s), 0) << last_error();
	EXPECT_EQ(s.index, 0u);
	EXPECT_EQ(s.units, 15u);
	EXPECT_EQ(s.stream, nullptr);
	EXPECT_EQ(s.generation, l.generation);
	EXPECT_EQ(split_lines(domain_file("debug/holders")).size(), 1u);
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	// The same slot twice is refused, and changes nothing.
	EXPECT_EQ(gpuslot_release_slot(c, &s, 0), -EINVAL);
	EXPECT_NE(last_error().find("not held by this client"), std::string::npos);
	// The whole-GPU slot reports every unit.
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 1u << 3, &s), 0) << last_error();
	EXPECT_EQ(s.index, 3u);
	EXPECT_EQ(s.units, 60u);
	ASSERT_EQ(gpuslot_release_slot(c, &s, GPUSLOT_RELEASE_NO_SYNC), 0);
	gpuslot_close(c);

	gpuslot::Options opts;
	opts.backend = GPUSLOT_BACKEND_NONE;
	gpuslot::Client client(opts);
	{
		auto slot = client.acquire(1u << 2);
		EXPECT_EQ(slot.index(), 2u);
		EXPECT_EQ(domain_file("debug/holders").substr(0, 2), "2 ");
	}
	EXPECT_EQ(domain_file("debug/holders"), "");
	auto moved = client.acquire();
	gpuslot::Slot other = std::move(moved);
	EXPECT_EQ(split_lines(domain_file("debug/holders")).size(), 1u);
	EXPECT_EQ(other.release(), 0);
	EXPECT_EQ(domain_file("debug/holders"), "");
}

TEST_F(Client, TryAndTimeout)
{
	Dev holder;
	ASSERT_EQ(holder.acquire().err, 0);
	gpuslot_options o = none_options();
	gpuslot_client *c;
	ASSERT_EQ(gpuslot_open(&o, &c), 0) << last_error();
	gpuslot_slot s = new_slot();
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

// The release rule: the next holder's work never starts before the work
// queued on the slot's stream has finished.
TEST_F(Client, ReleaseWaitsForTheSlotsQueuedWork)
{
	Recorder r;
	r.sync_ms = 150; // the "GPU work" still queued at release
	gpuslot_client *c;
	ASSERT_EQ(open_recording(r, &c), 0) << last_error();
	gpuslot_slot a = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &a), 0) << last_error();
	ASSERT_NE(a.stream, nullptr);

	std::atomic<uint64_t> granted_ns{0};
	std::thread next([&] {
		gpuslot_slot b = new_slot();
		EXPECT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &b), 0);
		granted_ns = now_ns();
		EXPECT_EQ(gpuslot_release_slot(c, &b, GPUSLOT_RELEASE_NO_SYNC), 0);
	});
	ASSERT_TRUE(wait_waiters(1));
	ASSERT_EQ(gpuslot_release_slot(c, &a, 0), 0);
	next.join();
	EXPECT_EQ(r.syncs, 1u) << "the released slot's stream was synchronised once";
	EXPECT_EQ(r.calls.back(), "sync " + std::to_string(reinterpret_cast<uintptr_t>(a.stream)));
	EXPECT_GE(granted_ns.load(), r.last_sync_end_ns)
		<< "the next holder got the slot before the stream's work ended";

	// NO_SYNC: the caller synchronised; nothing waits.
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &a), 0);
	ASSERT_EQ(gpuslot_release_slot(c, &a, GPUSLOT_RELEASE_NO_SYNC), 0);
	EXPECT_EQ(r.syncs, 1u);
	EXPECT_EQ(gpuslot_release_slot(c, &a, 4), -EINVAL);
	gpuslot_close(c);
}

// 16 threads at k = 4 on one client: one set of streams, one reservation
// (4 masked streams + 3 runtime queues), never one slot twice.
TEST_F(Client, SixteenThreadsShareOneClientAndOneReservation)
{
	Layout l = cu_layout(60, {0x111111111111111ULL, 0x222222222222222ULL,
				  0x444444444444444ULL, 0x888888888888888ULL});
	ASSERT_EQ(admin.set_layout(l), 0);
	Recorder r;
	gpuslot_client *c;
	ASSERT_EQ(open_recording(r, &c), 0) << last_error();
	EXPECT_EQ(domain_file("hqd_used"), "7\n");

	constexpr int kThreads = 16, kJobs = 200;
	std::atomic<int> owner[4] = {};
	std::atomic<int> overlaps{0}, failures{0}, max_holders{0}, holding{0};
	std::vector<std::thread> threads;
	for (int t = 0; t < kThreads; t++)
		threads.emplace_back([&, t] {
			for (int j = 0; j < kJobs; j++) {
				gpuslot_slot s = new_slot();
				if (gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s)) {
					failures++;
					continue;
				}
				int h = ++holding;
				int m = max_holders.load();
				while (h > m && !max_holders.compare_exchange_weak(m, h))
					;
				if (owner[s.index].exchange(t + 1))
					overlaps++;
				usleep(50);
				owner[s.index] = 0;
				holding--;
				if (gpuslot_release_slot(c, &s, 0))
					failures++;
			}
		});
	// While they run: the reservation stays what one client needs.
	for (int i = 0; i < 20; i++) {
		EXPECT_EQ(domain_file("hqd_used"), "7\n");
		usleep(5000);
	}
	for (auto &t : threads)
		t.join();
	EXPECT_EQ(failures.load(), 0) << last_error();
	EXPECT_EQ(overlaps.load(), 0);
	EXPECT_LE(max_holders.load(), 4);
	EXPECT_GE(max_holders.load(), 2); // they did hold slots side by side
	EXPECT_EQ(r.builds, 1u);
	EXPECT_EQ(r.syncs, unsigned(kThreads * kJobs));
	EXPECT_EQ(split_lines(domain_file("debug/queues")).size(), 1u) << domain_file("debug/queues");

	// A second client of the process for the same domain shares all of it.
	gpuslot_options o = none_options();
	gpuslot_client *c2, *c3;
	ASSERT_EQ(gpuslot_open(&o, &c2), 0);
	ASSERT_EQ(gpuslot_open(&o, &c3), 0);
	gpuslot_slot s2 = new_slot(), s3 = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(c2, 0, 0, &s2), 0);
	ASSERT_EQ(gpuslot_acquire_slot(c3, 0, 0, &s3), 0);
	EXPECT_NE(s2.index, s3.index);
	// Closing one client ends its holds only.
	gpuslot_close(c2);
	EXPECT_EQ(split_lines(domain_file("debug/holders")).size(), 1u);
	EXPECT_EQ(gpuslot_release_slot(c3, &s3, 0), 0);
	gpuslot_close(c3);
	gpuslot_close(c);
}

// Streams are built only for the slots a client asks for.
TEST_F(Client, ASlotMaskBuildsOnlyThoseStreams)
{
	Layout l = cu_layout(60, {0x111111111111111ULL, 0x222222222222222ULL,
				  0x444444444444444ULL, 0x888888888888888ULL});
	ASSERT_EQ(admin.set_layout(l), 0);
	Recorder r;
	gpuslot_client *c;
	ASSERT_EQ(open_recording(r, &c, 0x3), 0) << last_error();
	EXPECT_EQ(domain_file("hqd_used"), "5\n"); // 2 streams + 3 runtime
	gpuslot_slot s = new_slot();
	EXPECT_EQ(gpuslot_acquire_slot(c, 0, 1u << 2, &s), -EINVAL);
	EXPECT_NE(last_error().find("no slot this client has streams for"), std::string::npos);
	Dev h0;
	ASSERT_EQ(h0.acquire(0, 0, 1).err, 0);
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), 0);
	EXPECT_EQ(s.index, 1u); // slot 2 is free, but has no stream here
	EXPECT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	EXPECT_EQ(h0.release(), 0);
	gpuslot_close(c);
}

TEST_F(Client, ANewLayoutKeepsHandedOutStreamsUntilRetired)
{
	Layout four = cu_layout(60, {0x111111111111111ULL, 0x222222222222222ULL,
				     0x444444444444444ULL, 0x888888888888888ULL});
	ASSERT_EQ(admin.set_layout(four), 0);
	Recorder r;
	gpuslot_client *c;
	ASSERT_EQ(open_recording(r, &c), 0) << last_error();
	gpuslot_slot s = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 1u << 1, &s), 0);
	void *old_stream = s.stream;
	const uint64_t old_gen = s.generation;
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	EXPECT_EQ(domain_file("hqd_used"), "7\n");

	Layout two = cu_layout(60, {0x333333333333333ULL, 0xcccccccccccccccULL});
	ASSERT_EQ(admin.set_layout(two), 0);
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s), 0) << last_error();
	EXPECT_EQ(s.generation, two.generation);
	EXPECT_EQ(s.units, 30u);
	EXPECT_NE(s.stream, old_stream);
	// Built once, outside any hold, by a thread that was not boosted.
	ASSERT_EQ(r.builds, 2u);
	EXPECT_EQ(r.holders_at_build[1], 0u);
	EXPECT_EQ(r.policy_at_build[1], SCHED_OTHER);
	// The stream handed out lives on; the three never handed out went.
	EXPECT_TRUE(r.is_live(old_stream));
	unsigned int live = 0;
	for (auto &[stream, alive] : r.live)
		live += alive;
	EXPECT_EQ(live, 3u); // the old slot 1 and the two new ones
	EXPECT_EQ(domain_file("hqd_used"), "6\n"); // 1 old + 2 new + 3 runtime
	gpuslot_layout_info info{};
	info.size = sizeof(info);
	ASSERT_EQ(gpuslot_client_layout(c, &info), 0);
	EXPECT_EQ(info.live_generations, 2u);
	EXPECT_EQ(info.rebuilds, 1u);
	EXPECT_EQ(info.hqd_reserved, 6u);
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0);

	// The caller rebuilt its handles; now it retires the old streams.
	EXPECT_EQ(gpuslot_retire_generation(c, old_gen), 0);
	EXPECT_FALSE(r.is_live(old_stream));
	EXPECT_EQ(domain_file("hqd_used"), "5\n");
	ASSERT_EQ(gpuslot_client_layout(c, &info), 0);
	EXPECT_EQ(info.live_generations, 1u);
	// The current generation is never retired.
	EXPECT_EQ(gpuslot_retire_generation(c, two.generation), 0);
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), 0);
	EXPECT_TRUE(r.is_live(s.stream));

	// A held old-generation slot cannot be retired; refresh builds ahead.
	Layout again = cu_layout(60, {0x0f0f0f0f0f0f0f0ULL, 0xf0f0f0f0f0f0f0fULL});
	ASSERT_EQ(admin.set_layout(again), 0);
	EXPECT_EQ(gpuslot_refresh(c), 1);
	EXPECT_EQ(gpuslot_refresh(c), 0);
	EXPECT_EQ(gpuslot_retire_generation(c, two.generation), -EBUSY);
	EXPECT_TRUE(r.is_live(s.stream));
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	EXPECT_EQ(gpuslot_retire_generation(c, two.generation), 0);
	EXPECT_FALSE(r.is_live(s.stream));
	gpuslot_close(c);
}

// A new generation is not a new layout: a change undone (four slots, two,
// four again; or a restart of gpuslotd that plans the same partitions)
// comes back at a newer generation with the streams' layout. The streams
// take its number and the slot is served at once: nothing is built, the
// stream handed out is the same, no generation is left to retire. A layout
// that did change is built, once.
TEST_F(Client, AnUnchangedLayoutAtANewGenerationBuildsNoStreams)
{
	Layout four = cu_layout(60, {0x111111111111111ULL, 0x222222222222222ULL,
				     0x444444444444444ULL, 0x888888888888888ULL});
	ASSERT_EQ(admin.set_layout(four), 0);
	Recorder r;
	gpuslot_client *c;
	ASSERT_EQ(open_recording(r, &c), 0) << last_error();
	gpuslot_slot s = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 1u << 1, &s), 0) << last_error();
	void *stream = s.stream;
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0);

	Layout two = cu_layout(60, {0x333333333333333ULL, 0xcccccccccccccccULL});
	ASSERT_EQ(admin.set_layout(two), 0);
	Layout again = cu_layout(60, {0x111111111111111ULL, 0x222222222222222ULL,
				      0x444444444444444ULL, 0x888888888888888ULL});
	ASSERT_EQ(admin.set_layout(again), 0);
	ASSERT_GT(again.generation, four.generation);
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 1u << 1, &s), 0) << last_error();
	EXPECT_EQ(s.generation, again.generation);
	EXPECT_EQ(s.stream, stream);
	EXPECT_EQ(s.units, 15u);
	EXPECT_EQ(r.builds, 1u);
	gpuslot_layout_info info{};
	info.size = sizeof(info);
	ASSERT_EQ(gpuslot_client_layout(c, &info), 0);
	EXPECT_EQ(info.rebuilds, 0u);
	EXPECT_EQ(info.generation, again.generation);
	EXPECT_EQ(info.live_generations, 1u);
	EXPECT_EQ(domain_file("hqd_used"), "7\n"); // 4 streams + 3 runtime, as before
	EXPECT_TRUE(r.is_live(stream));
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	EXPECT_EQ(gpuslot_refresh(c), 0);

	// A changed layout is built (outside the hold), once.
	ASSERT_EQ(admin.set_layout(two), 0);
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s), 0) << last_error();
	EXPECT_EQ(s.generation, two.generation);
	EXPECT_NE(s.stream, stream);
	EXPECT_EQ(r.builds, 2u);
	ASSERT_EQ(gpuslot_client_layout(c, &info), 0);
	EXPECT_EQ(info.rebuilds, 1u);
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	gpuslot_close(c);
}

TEST_F(Client, AsynchronousAcquireInCAndCpp)
{
	gpuslot_options o = none_options();
	gpuslot_client *c;
	ASSERT_EQ(gpuslot_open(&o, &c), 0) << last_error();
	Dev holder;
	ASSERT_EQ(holder.acquire().err, 0);

	gpuslot_slot s = new_slot();
	ASSERT_EQ(gpuslot_acquire_start(c, 0, &s), 0) << last_error();
	const int fd = gpuslot_acquire_fd(&s);
	ASSERT_GE(fd, 0);
	EXPECT_EQ(fd, s.poll_fd);
	pollfd p = {fd, POLLIN, 0};
	EXPECT_EQ(poll(&p, 1, 20), 0);
	EXPECT_EQ(gpuslot_acquire_complete(c, &s), -EAGAIN);
	ASSERT_EQ(holder.release(), 0);
	ASSERT_EQ(poll(&p, 1, 5000), 1);
	ASSERT_EQ(gpuslot_acquire_complete(c, &s), 0) << last_error();
	EXPECT_EQ(s.index, 0u);
	EXPECT_EQ((sched_getscheduler(0) & ~SCHED_RESET_ON_FORK),
		  boost_available() ? SCHED_FIFO : SCHED_OTHER);
	EXPECT_EQ(gpuslot_acquire_cancel(c, &s), -EINVAL);
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	EXPECT_EQ((sched_getscheduler(0) & ~SCHED_RESET_ON_FORK), SCHED_OTHER);

	// Cancel leaves the queue; the fd is the library's and stays open.
	ASSERT_EQ(holder.acquire().err, 0);
	ASSERT_EQ(gpuslot_acquire_start(c, 0, &s), 0);
	ASSERT_TRUE(wait_waiters(1));
	ASSERT_EQ(gpuslot_acquire_cancel(c, &s), 0);
	EXPECT_EQ(domain_file("debug/waiters"), "");
	EXPECT_EQ(gpuslot_acquire_complete(c, &s), -EINVAL);

	gpuslot::Options opts;
	opts.backend = GPUSLOT_BACKEND_NONE;
	gpuslot::Client client(opts);
	{
		auto pending = client.start();
		EXPECT_FALSE(pending.complete());
		ASSERT_TRUE(wait_waiters(1));
	} // the destructor cancels
	EXPECT_EQ(domain_file("debug/waiters"), "");
	auto pending = client.start();
	ASSERT_EQ(holder.release(), 0);
	pollfd q = {pending.fd(), POLLIN, 0};
	ASSERT_EQ(poll(&q, 1, 5000), 1);
	auto slot = pending.complete();
	ASSERT_TRUE(slot);
	EXPECT_EQ(slot->index(), 0u);
	slot->release();
	gpuslot_close(c);
}

// A Slot keeps its Client alive: destroying the Client first is safe.
TEST_F(Client, ACppSlotOutlivesItsClient)
{
	gpuslot::Options opts;
	opts.backend = GPUSLOT_BACKEND_NONE;
	std::optional<gpuslot::Slot> slot;
	{
		gpuslot::Client client(opts);
		gpuslot::Client moved(std::move(client));
		gpuslot::Client assigned(opts);
		assigned = std::move(moved);
		slot = assigned.acquire();
	}
	EXPECT_EQ(split_lines(domain_file("debug/holders")).size(), 1u);
	EXPECT_EQ(slot->release(), 0);
	EXPECT_EQ(domain_file("debug/holders"), "");
}

// Structs of the first published size work; bigger ones from a newer
// header work when their unknown tail is zero.
TEST_F(Client, StructSizesFromOlderAndNewerHeaders)
{
	struct {
		gpuslot_options o;
		uint64_t newer;
	} big{};
	big.o = none_options();
	big.o.size = sizeof(big);
	gpuslot_client *c;
	ASSERT_EQ(gpuslot_open(&big.o, &c), 0) << last_error();
	gpuslot_close(c);
	big.newer = 1;
	EXPECT_EQ(gpuslot_open(&big.o, &c), -E2BIG);

	gpuslot_options o = none_options();
	o.size = GPUSLOT_OPTIONS_SIZE_VER0;
	ASSERT_EQ(gpuslot_open(&o, &c), 0);
	struct {
		gpuslot_slot s;
		uint64_t newer;
	} slot;
	memset(&slot, 0xa5, sizeof(slot));
	slot.s.size = sizeof(slot);
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &slot.s), 0) << last_error();
	EXPECT_EQ(slot.newer, 0u) << "the tail the library does not know is zeroed";
	EXPECT_EQ(slot.s.__reserved[0], 0u);
	EXPECT_EQ(gpuslot_release_slot(c, &slot.s, 0), 0);
	gpuslot_slot small = new_slot();
	small.size = GPUSLOT_SLOT_SIZE_VER0 - 8;
	EXPECT_EQ(gpuslot_acquire_slot(c, 0, 0, &small), -EINVAL);
	gpuslot_layout_info info{};
	info.size = GPUSLOT_LAYOUT_INFO_SIZE_VER0;
	EXPECT_EQ(gpuslot_client_layout(c, &info), 0);
	info.size = 8;
	EXPECT_EQ(gpuslot_client_layout(c, &info), -EINVAL);
	gpuslot_close(c);
}

TEST_F(Client, AForkedChildGetsEchildAndTheParentKeepsItsSlot)
{
	ASSERT_EQ(write_attr(0, "k", "2"), 0);
	gpuslot_options o = none_options();
	gpuslot_client *c;
	ASSERT_EQ(gpuslot_open(&o, &c), 0) << last_error();
	gpuslot_slot s = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s), 0);
	pid_t pid = spawn([&] {
		gpuslot_slot t = new_slot();
		CHILD_REQUIRE(gpuslot_acquire_slot(c, 0, 0, &t) == -ECHILD);
		CHILD_REQUIRE(std::string(gpuslot_last_error()).find(
				      "a forked child opens its own") != std::string::npos);
		CHILD_REQUIRE(gpuslot_release_slot(c, &s, 0) == -ECHILD);
		gpuslot_close(c);
		gpuslot_client *mine;
		gpuslot_options o2 = none_options();
		CHILD_REQUIRE(gpuslot_open(&o2, &mine) == 0);
		CHILD_REQUIRE(gpuslot_acquire_slot(mine, 0, 0, &t) == 0 && t.index == 1);
		gpuslot_close(mine);
		return 0;
	});
	EXPECT_EQ(wait_child(pid), 0) << "child line " << *child_failed_line();
	auto holders = split_lines(domain_file("debug/holders"));
	ASSERT_EQ(holders.size(), 1u);
	EXPECT_EQ(split_words(holders[0])[0], "0");
	EXPECT_EQ(gpuslot_release_slot(c, &s, 0), 0);
	gpuslot_close(c);
}

// gpuslot_close() while another thread waits in gpuslot_acquire_slot() on
// the same client would free the client under it (a use-after-free once
// the waiter is granted) and leave the waiter queued (issue 28): it stops
// the process with a message instead.
TEST_F(Client, CloseUnderAWaitingAcquireAbortsWithAMessage)
{
	gpuslot_options o = none_options();
	gpuslot_client *holder;
	ASSERT_EQ(gpuslot_open(&o, &holder), 0) << last_error();
	gpuslot_slot held = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(holder, 0, 0, &held), 0) << last_error();
	const int log = memfd_create("child-stderr", MFD_CLOEXEC);
	ASSERT_GE(log, 0);
	pid_t pid = spawn([&] {
		CHILD_REQUIRE(dup2(log, STDERR_FILENO) == STDERR_FILENO);
		gpuslot_options mine = none_options();
		gpuslot_client *c;
		CHILD_REQUIRE(gpuslot_open(&mine, &c) == 0);
		std::thread waiter([c] {
			gpuslot_slot s = new_slot();
			gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s);
		});
		CHILD_REQUIRE(wait_waiters(1));
		gpuslot_close(c);
		// Not reached with the check: the client is gone under the waiter.
		waiter.detach();
		return 0;
	});
	const int status = wait_child(pid);
	std::string message(4096, '\0');
	const ssize_t n = pread(log, message.data(), message.size(), 0);
	::close(log);
	message.resize(n > 0 ? size_t(n) : 0);
	EXPECT_EQ(status, 128 + SIGABRT) << "child line " << *child_failed_line() << "; stderr: "
					 << message;
	EXPECT_NE(message.find("gpuslot_close() while 1 call on the same client is running in "
			       "other threads"),
		  std::string::npos)
		<< message;
	// The waiter's file closed with the process: it left the queue.
	EXPECT_TRUE(wait_waiters(0));
	EXPECT_EQ(gpuslot_release_slot(holder, &held, 0), 0) << last_error();
	gpuslot_close(holder);
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
	if (on_socket())
		EXPECT_NE(last_error().find("(no GPU domain 5 on gpuslotd's socket transport)"),
			  std::string::npos) << last_error();
	else
		EXPECT_EQ(last_error(), "gpuslot: no GPU domain 5: Invalid argument");
	// Where the lock cannot be found, the message says what would serve it.
	o = none_options();
	const std::string dir = getenv("GPUSLOT_SOCKET_DIR") ? getenv("GPUSLOT_SOCKET_DIR") : "";
	if (on_socket())
		setenv("GPUSLOT_SOCKET_DIR", "/nonexistent", 1);
	else
		o.device = "/dev/nonexistent";
	EXPECT_EQ(gpuslot_open(&o, &c), -ENOENT);
	EXPECT_NE(last_error().find(on_socket() ? "gpuslotd does not serve the socket transport"
						: "load the gpuslot module"),
		  std::string::npos) << last_error();
	if (on_socket())
		setenv("GPUSLOT_SOCKET_DIR", dir.c_str(), 1);
	o = none_options();
	o.flags = GPUSLOT_OPEN_GPU_INDEX;
	o.gpu_index = -1;
	EXPECT_EQ(gpuslot_open(&o, &c), -EINVAL);
	// No CUDA and no HIP in the VM: the same errno for both.
	o = none_options();
	o.backend = GPUSLOT_BACKEND_CUDA;
	EXPECT_EQ(gpuslot_open(&o, &c), -ENODEV);
	EXPECT_NE(last_error().find("use GPUSLOT_BACKEND_NONE"), std::string::npos) << last_error();
	o.backend = GPUSLOT_BACKEND_HIP;
	EXPECT_EQ(gpuslot_open(&o, &c), -ENODEV);
	EXPECT_NE(last_error().find("use GPUSLOT_BACKEND_NONE"), std::string::npos) << last_error();

	// AUTO on an AMD layout needs HIP, and says so rather than running
	// jobs without partitions.
	Layout l = cu_layout(60, {0xf, 0xf0});
	ASSERT_EQ(admin.set_layout(l), 0);
	o = none_options();
	o.backend = GPUSLOT_BACKEND_AUTO;
	EXPECT_EQ(gpuslot_open(&o, &c), -ENODEV);

	o = none_options();
	ASSERT_EQ(gpuslot_open(&o, &c), 0);
	gpuslot_slot s = new_slot();
	EXPECT_EQ(gpuslot_release_slot(c, &s, 0), -EINVAL);
	EXPECT_EQ(gpuslot_acquire_slot(c, 0, 1u << 5, &s), -EINVAL);
	EXPECT_EQ(gpuslot_acquire_slot(c, 0, 0, nullptr), -EINVAL);
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), 0);
	gpuslot_close(c); // releases the slot

	try {
		gpuslot::Options opts;
		opts.domain = 9;
		gpuslot::Client bad(opts);
		ADD_FAILURE() << "no exception";
	} catch (const gpuslot::Error &e) {
		EXPECT_EQ(e.code(), -EINVAL);
		EXPECT_NE(std::string(e.what()).find(on_socket() ? "no GPU domain 9 on gpuslotd's"
								 : "gpuslot: no GPU domain 9: Invalid"),
			  std::string::npos) << e.what();
	}
}

TEST_F(Client, TheExamplesRun)
{
	ASSERT_EQ(write_attr(0, "k", "2"), 0);
	// In the VM in /bin; on the host where the build put them.
	const char *bin = getenv("GPUSLOT_TEST_BIN_DIR");
	for (const char *ex : {"gpuslot_example_c 20 none", "gpuslot_example_cpp 20 none",
			       "gpuslot_example_cpp 40 none 4"}) {
		FILE *p = popen((std::string(bin ? bin : "/bin") + "/" + ex + " 2>&1").c_str(), "r");
		ASSERT_NE(p, nullptr);
		char buf[256] = "";
		size_t n = fread(buf, 1, sizeof(buf) - 1, p);
		buf[n] = '\0';
		EXPECT_EQ(WEXITSTATUS(pclose(p)), 0) << ex << ": " << buf;
		// Every job is done or skipped (a frame whose slot did not come
		// within 33 ms: under TCG, with four threads on two slots, one
		// may not); most are done.
		const long total = strstr(ex, " 40 ") ? 40 : 20;
		long done = -1, skipped = -1;
		ASSERT_EQ(sscanf(buf, "%ld jobs done, %ld skipped\n", &done, &skipped), 2) << buf;
		EXPECT_EQ(done + skipped, total) << ex << ": " << buf;
		EXPECT_GE(done, total / 2) << ex << ": " << buf;
	}
}

} // namespace
} // namespace gpuslot::test
