// SPDX-License-Identifier: GPL-2.0
// libgpuslot across a restart of gpuslotd (the socket transport): a client
// that holds a slot keeps it (it takes back the hold gpuslotd kept for its
// token; no one else is granted the slot, its job runs on), and its streams
// are rebuilt only where the restart's layout differs from theirs. gpuslotd's
// LockServer runs in a thread of this process, as gpuslotd runs it.
#include <gtest/gtest.h>

#include <linux/gpuslot.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "gpuslot.h"
#include "lock_file.hpp"
#include "lock_server.hpp"
#include "emulation.hpp"

namespace {

namespace fs = std::filesystem;

class SocketRestart : public testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/gpuslot-restart-XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr);
		dir_ = tmpl;
		start_server({});
		setenv("GPUSLOT_TRANSPORT", "socket", 1);
		setenv("GPUSLOT_SOCKET_DIR", dir_.c_str(), 1);
	}
	void TearDown() override
	{
		unsetenv("GPUSLOT_TRANSPORT");
		unsetenv("GPUSLOT_SOCKET_DIR");
		stop_server();
		fs::remove_all(dir_);
	}

	// One domain on dir_; @k slots of no unit kind when @k > 1 (the layout
	// gpuslotd would set before it serves).
	void start_server(gpuslot::LockServerOptions o, unsigned int k = 1)
	{
		o.socket_dir = dir_;
		o.nr_domains = 1;
		server_ = std::make_unique<gpuslot::LockServer>(o);
		std::string error;
		ASSERT_EQ(server_->start(&error), 0) << error;
		if (k > 1) {
			gpuslot_layout l{};
			l.size = sizeof(l);
			l.k = k;
			l.unit_kind = GPUSLOT_UNIT_NONE;
			ASSERT_EQ(server_->set_layout(0, &l, nullptr), 0);
		}
		thread_ = std::thread([this] {
			std::string e;
			server_->run(&e);
		});
	}
	void stop_server()
	{
		if (!server_)
			return;
		server_->stop();
		if (thread_.joinable())
			thread_.join();
		server_.reset();
	}
	// gpuslotd restarts: a new server on the same sockets and state file,
	// which keeps the holds the last one left for @grace_ms.
	void restart(unsigned int grace_ms, unsigned int k = 1)
	{
		stop_server();
		gpuslot::LockServerOptions o;
		o.grace_ms = grace_ms;
		start_server(o, k);
	}

	// A connection of its own (no token: it reclaims nothing).
	std::unique_ptr<gpuslot::LockFile> file()
	{
		std::unique_ptr<gpuslot::LockFile> f;
		std::string error;
		EXPECT_EQ(gpuslot::open_lock_file(gpuslot::Transport::socket, dir_, 0, &f, &error), 0)
			<< error;
		return f;
	}
	static gpuslot_domain_info info(gpuslot::LockFile &f)
	{
		gpuslot_domain_info i{};
		i.size = sizeof(i);
		EXPECT_EQ(f.call(GPUSLOT_IOC_DOMAIN_INFO, &i), 0);
		return i;
	}
	// ACQUIRE on @f waiting at most @ms: 0 or the errno.
	static int acquire_within(gpuslot::LockFile &f, int ms)
	{
		timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		gpuslot_acquire a{};
		a.size = sizeof(a);
		a.flags = GPUSLOT_ACQUIRE_DEADLINE;
		a.deadline_ns = uint64_t(now.tv_sec) * 1000000000 + uint64_t(now.tv_nsec) +
				uint64_t(ms) * 1000000;
		return f.call(GPUSLOT_IOC_ACQUIRE, &a);
	}
	static gpuslot_client *open_client()
	{
		gpuslot_options o{};
		o.size = sizeof(o);
		o.backend = GPUSLOT_BACKEND_NONE;
		gpuslot_client *c = nullptr;
		EXPECT_EQ(gpuslot_open(&o, &c), 0) << gpuslot_last_error();
		return c;
	}
	static gpuslot_layout_info layout_of(gpuslot_client *c)
	{
		gpuslot_layout_info i{};
		i.size = sizeof(i);
		EXPECT_EQ(gpuslot_client_layout(c, &i), 0) << gpuslot_last_error();
		return i;
	}

	fs::path dir_;
	std::unique_ptr<gpuslot::LockServer> server_;
	std::thread thread_;
};

gpuslot_slot new_slot()
{
	gpuslot_slot s{};
	s.size = sizeof(s);
	return s;
}

// Defect: libgpuslot never took back a hold that gpuslotd kept for it
// across a restart while its holder still held (and gave a reclaimed one
// back to the queue): once the grace period ended, the slot went to the
// next waiter while the job still ran on it, two jobs at k = 1. The
// holder's next call takes its hold back: a waiter that waits well past the
// grace period is not granted, the holder's release is a release (0), and
// the slot goes to that waiter at once.
TEST_F(SocketRestart, AHolderKeepsItsSlotAcrossARestart)
{
	GPUSLOT_SKIP_IF_START_TIME_PER_THREAD();
	gpuslot_client *a = open_client();
	ASSERT_NE(a, nullptr);
	gpuslot_slot s = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(a, GPUSLOT_WAIT_FOREVER, 0, &s), 0) << gpuslot_last_error();
	const uint64_t before = s.generation;
	// gpuslotd restarts while a holds (k = 1); it keeps the hold 1 s.
	restart(1000);
	// The holder's next call (any: refresh here) takes its hold back.
	EXPECT_GE(gpuslot_refresh(a), 0) << gpuslot_last_error();
	// Another client waits four times the grace period: not granted.
	auto other = file();
	EXPECT_EQ(acquire_within(*other, 4000), ETIMEDOUT) << "a second grant at k = 1";
	EXPECT_EQ(info(*other).nr_holders, 1u);
	// a's job ran on undisturbed on its slot; its release hands the slot
	// to the next waiter now.
	std::atomic<int> got{-1};
	std::thread waiter([&] { got = acquire_within(*other, 30000); });
	auto watcher = file();
	for (int i = 0; i < 5000 && info(*watcher).nr_waiters != 1; i++)
		usleep(1000);
	EXPECT_EQ(gpuslot_release_slot(a, &s, 0), 0) << gpuslot_last_error();
	waiter.join();
	EXPECT_EQ(got.load(), 0);
	// The same layout at the restart's generation: nothing was rebuilt.
	const gpuslot_layout_info l = layout_of(a);
	EXPECT_GT(l.generation, before);
	EXPECT_EQ(l.rebuilds, 0u);
	gpuslot_close(a);
}

// Two clients of one process (one set of streams, a lane each): the
// second's acquire after the restart first takes back the hold of the
// first, then waits: not granted while the first holds, even past the
// grace period; granted once the first releases.
TEST_F(SocketRestart, ASecondClientOfTheProcessWaitsForTheHolderAcrossARestart)
{
	GPUSLOT_SKIP_IF_START_TIME_PER_THREAD();
	gpuslot_client *a = open_client(), *b = open_client();
	ASSERT_NE(a, nullptr);
	ASSERT_NE(b, nullptr);
	gpuslot_slot sa = new_slot(), sb = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(a, GPUSLOT_WAIT_FOREVER, 0, &sa), 0) << gpuslot_last_error();
	restart(1000);
	EXPECT_EQ(gpuslot_acquire_slot(b, 4000 * 1000000LL, 0, &sb), -ETIMEDOUT)
		<< "a second grant at k = 1";
	if (sb.handle)
		gpuslot_release_slot(b, &sb, 0);
	EXPECT_EQ(info(*file()).nr_holders, 1u);
	EXPECT_EQ(gpuslot_release_slot(a, &sa, 0), 0) << gpuslot_last_error();
	EXPECT_EQ(gpuslot_acquire_slot(b, 0, 0, &sb), 0) << gpuslot_last_error();
	EXPECT_EQ(gpuslot_release_slot(b, &sb, 0), 0) << gpuslot_last_error();
	gpuslot_close(b);
	gpuslot_close(a);
}

// What gpuslotd keeps, it keeps for the grace period only: a holder that
// makes no call of libgpuslot in it loses the hold (another client is
// granted the slot), and its release says so.
TEST_F(SocketRestart, AHoldNotTakenBackWithinTheGracePeriodIsLost)
{
	gpuslot_client *a = open_client();
	ASSERT_NE(a, nullptr);
	gpuslot_slot s = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(a, GPUSLOT_WAIT_FOREVER, 0, &s), 0) << gpuslot_last_error();
	restart(100);
	auto other = file();
	ASSERT_EQ(acquire_within(*other, 30000), 0) << "granted once the grace period ended";
	EXPECT_EQ(gpuslot_release_slot(a, &s, 0), -ECONNRESET);
	const std::string why = gpuslot_last_error();
	EXPECT_NE(why.find("gpuslotd went away"), std::string::npos) << why;
	EXPECT_NE(why.find("did not keep the hold"), std::string::npos) << why;
	// The client goes on: it queues behind the other holder.
	gpuslot_release r{};
	r.size = sizeof(r);
	ASSERT_EQ(other->call(GPUSLOT_IOC_RELEASE, &r), 0);
	EXPECT_EQ(gpuslot_acquire_slot(a, 0, 0, &s), 0) << gpuslot_last_error();
	EXPECT_EQ(gpuslot_release_slot(a, &s, 0), 0) << gpuslot_last_error();
	gpuslot_close(a);
}

// The same, where the other holder has come and gone before the first
// one's release: the slot is free again, but it is no hold kept, and the
// release must not pass it off as one (taking a free slot back would hide
// that two held it).
TEST_F(SocketRestart, AFreeSlotAfterTheGracePeriodIsNoHoldTakenBack)
{
	gpuslot_client *a = open_client();
	ASSERT_NE(a, nullptr);
	gpuslot_slot s = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(a, GPUSLOT_WAIT_FOREVER, 0, &s), 0) << gpuslot_last_error();
	restart(100);
	auto other = file();
	ASSERT_EQ(acquire_within(*other, 30000), 0) << "granted once the grace period ended";
	gpuslot_release r{};
	r.size = sizeof(r);
	ASSERT_EQ(other->call(GPUSLOT_IOC_RELEASE, &r), 0);
	EXPECT_EQ(gpuslot_release_slot(a, &s, 0), -ECONNRESET);
	const std::string why = gpuslot_last_error();
	EXPECT_NE(why.find("did not keep the hold"), std::string::npos) << why;
	EXPECT_EQ(info(*other).nr_holders, 0u) << "the release took the free slot";
	gpuslot_close(a);
}

// A restart brings a new generation. Where its layout is the one the
// streams were built for, the streams take the new number and nothing is
// built (the rebuild counter stays); where the layout changed (k = 2), the
// streams are built again, once.
TEST_F(SocketRestart, StreamsAreRebuiltOnlyWhenTheLayoutChanged)
{
	gpuslot_client *c = open_client();
	ASSERT_NE(c, nullptr);
	gpuslot_slot s = new_slot();
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), 0) << gpuslot_last_error();
	const uint64_t first = s.generation;
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0) << gpuslot_last_error();

	restart(200); // the same layout (k = 1, no partitions)
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), 0) << gpuslot_last_error();
	EXPECT_GT(s.generation, first);
	const uint64_t same = s.generation;
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0) << gpuslot_last_error();
	gpuslot_layout_info l = layout_of(c);
	EXPECT_EQ(l.generation, same);
	EXPECT_EQ(l.rebuilds, 0u);
	EXPECT_EQ(l.live_generations, 1u);
	EXPECT_EQ(gpuslot_refresh(c), 0) << "nothing to build";

	restart(200, 2); // k = 2: a changed layout
	EXPECT_EQ(gpuslot_refresh(c), 1) << gpuslot_last_error();
	l = layout_of(c);
	EXPECT_EQ(l.rebuilds, 1u);
	EXPECT_EQ(l.k, 2u);
	EXPECT_GT(l.generation, same);
	ASSERT_EQ(gpuslot_acquire_slot(c, 0, 0, &s), 0) << gpuslot_last_error();
	EXPECT_EQ(s.generation, l.generation);
	ASSERT_EQ(gpuslot_release_slot(c, &s, 0), 0) << gpuslot_last_error();
	EXPECT_EQ(layout_of(c).rebuilds, 1u);
	gpuslot_close(c);
}

} // namespace
