// SPDX-License-Identifier: GPL-2.0
// gpuslot-run's launch queue (libclient/run/launch_queue.cc) over a lock
// double and streams whose work finishes when the test says: when
// --per-sync takes and gives back the slot, and that --hold never does.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <set>
#include <thread>

#include "launch_queue.hpp"

namespace {

using gpuslot::run::LaunchQueue;
using gpuslot::run::Policy;
using gpuslot::run::SlotLock;
using gpuslot::run::StreamKey;
using gpuslot::run::SyncKind;

struct CountingLock : SlotLock {
	int acquires = 0, releases = 0, refuse = 0;
	int acquire() override
	{
		if (refuse)
			return refuse;
		acquires++;
		return 0;
	}
	void release() override { releases++; }
	bool held() const { return acquires > releases; }
};

void *stream(int i)
{
	return reinterpret_cast<void *>(uintptr_t(0x1000 + i));
}

class Queue : public testing::Test {
protected:
	CountingLock lock;
	std::set<void *> busy; // streams whose work has not finished
	LaunchQueue make(Policy p)
	{
		return LaunchQueue(p, &lock, [this](void *s) { return !busy.count(s); });
	}
	static int send(LaunchQueue &q, void *s, int *sent)
	{
		return q.submit(StreamKey{s, 0}, [sent] { return ++*sent; }, -1);
	}
};

// One acquire for a job's commands; the release waits until every stream
// of the job has finished, then comes with the synchronization.
TEST_F(Queue, PerSyncReleasesWhenTheJobsStreamsFinished)
{
	auto q = make(Policy::per_sync);
	int sent = 0;
	EXPECT_EQ(send(q, stream(1), &sent), 1);
	EXPECT_EQ(send(q, stream(2), &sent), 2);
	EXPECT_EQ(lock.acquires, 1);
	busy.insert(stream(2));
	q.synchronized(SyncKind::stream); // stream 1 synchronized; 2 still runs
	EXPECT_TRUE(lock.held());
	busy.clear();
	q.synchronized(SyncKind::stream);
	EXPECT_FALSE(lock.held());
	EXPECT_EQ(send(q, stream(1), &sent), 3);
	EXPECT_EQ(lock.acquires, 2) << "the next job acquires again";
	busy.insert(stream(1));
	q.synchronized(SyncKind::context); // every stream finished
	EXPECT_FALSE(lock.held());
}

// A stream destroyed with work left: only a context synchronization can
// say that work finished.
TEST_F(Queue, StreamDestroyedBusyKeepsTheSlotUntilAContextSync)
{
	auto q = make(Policy::per_sync);
	int sent = 0;
	send(q, stream(1), &sent);
	busy.insert(stream(1));
	q.stream_destroyed(StreamKey{stream(1), 0});
	busy.clear();
	q.synchronized(SyncKind::stream);
	EXPECT_TRUE(lock.held());
	q.synchronized(SyncKind::context);
	EXPECT_FALSE(lock.held());
}

// Another thread's per-thread default stream cannot be asked from here.
TEST_F(Queue, AnotherThreadsPerThreadStreamKeepsTheSlot)
{
	auto q = make(Policy::per_sync);
	const pid_t other = pid_t(syscall(SYS_gettid)) + 1;
	int sent = 0;
	q.submit(StreamKey{stream(2), other}, [&sent] { return ++sent; }, -1);
	q.synchronized(SyncKind::stream);
	EXPECT_TRUE(lock.held());
	q.synchronized(SyncKind::context);
	EXPECT_FALSE(lock.held());
}

// A synchronization while another thread is submitting keeps the slot:
// that command belongs to the job.
TEST_F(Queue, NoReleaseWhileACommandIsBeingSubmitted)
{
	auto q = make(Policy::per_sync);
	q.submit(StreamKey{stream(1), 0},
		 [&] {
			 q.synchronized(SyncKind::context);
			 EXPECT_TRUE(lock.held());
			 return 0;
		 },
		 -1);
	q.synchronized(SyncKind::context);
	EXPECT_FALSE(lock.held());
}

// A slot that cannot be taken: the command is not sent.
TEST_F(Queue, RefusedAcquireSendsNothing)
{
	auto q = make(Policy::per_sync);
	lock.refuse = -EINTR;
	int sent = 0;
	EXPECT_EQ(send(q, stream(1), &sent), -1);
	EXPECT_EQ(sent, 0);
	lock.refuse = 0;
	EXPECT_EQ(send(q, stream(1), &sent), 1);
}

// --hold: the queue never takes or gives back the slot (the interposer
// took it at load); a forked child's queue passes everything through.
TEST_F(Queue, HoldAndDisabledQueuesLeaveTheLockAlone)
{
	auto hold = make(Policy::hold);
	int sent = 0;
	send(hold, stream(1), &sent);
	hold.synchronized(SyncKind::context);
	auto child = make(Policy::per_sync);
	child.disable();
	send(child, stream(1), &sent);
	child.synchronized(SyncKind::context);
	EXPECT_EQ(sent, 2);
	EXPECT_EQ(lock.acquires, 0);
	EXPECT_EQ(lock.releases, 0);
}

} // namespace

// A lock whose acquire waits until the test opens it.
struct GateLock : SlotLock {
	std::atomic<bool> open{false}, waiting{false};
	int acquire() override
	{
		waiting = true;
		while (!open)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		return 0;
	}
	void release() override {}
};

// A thread waiting for the slot in its first command does not hold up the
// program's other threads: their synchronizations and stream destructions
// return while it waits (they may be what the slot's holder in another
// process waits for). With the queue's mutex held across the acquire, they
// waited for it.
TEST(QueueAcquire, OtherThreadsSynchronizeWhileOneWaitsForTheSlot)
{
	GateLock gate;
	LaunchQueue q(Policy::per_sync, &gate, [](void *) { return true; });
	int sent = 0;
	std::thread first([&] { q.submit(StreamKey{stream(1), 0}, [&] { return ++sent; }, -1); });
	while (!gate.waiting)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	std::atomic<bool> returned{false};
	std::thread other([&] {
		q.synchronized(SyncKind::context);
		q.stream_destroyed(StreamKey{stream(2), 0});
		returned = true;
	});
	for (int i = 0; i < 2000 && !returned; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	const bool returned_while_waiting = returned;
	gate.open = true;
	first.join();
	other.join();
	EXPECT_TRUE(returned_while_waiting) << "a synchronization waited for another thread's acquire";
	EXPECT_EQ(sent, 1);
	EXPECT_TRUE(q.held());
}
