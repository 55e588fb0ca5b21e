// SPDX-License-Identifier: GPL-2.0
// gpuslot-run's launch queue (libclient/run/launch_queue.cc) over a lock
// double and streams whose work finishes when the test says: when
// --per-sync takes and gives back the slot, and that --hold never does.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "launch_queue.hpp"

namespace {

using gpuslot::run::LaunchQueue;
using gpuslot::run::Markers;
using gpuslot::run::Policy;
using gpuslot::run::PreemptView;
using gpuslot::run::Throttle;
using gpuslot::run::SlotLock;
using gpuslot::run::StreamKey;
using gpuslot::run::SyncKind;

struct CountingLock : SlotLock {
	int acquires = 0, releases = 0, refuse = 0;
	std::vector<bool> work;	 // the work edges told, in order
	std::vector<bool> work_held; // whether the slot was held at each
	int acquire() override
	{
		if (refuse)
			return refuse;
		acquires++;
		return 0;
	}
	void release() override { releases++; }
	void set_work(bool pending) override
	{
		work.push_back(pending);
		work_held.push_back(held());
	}
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
// took it at load); a forked child's queue passes everything through and
// tells no work edge.
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
	EXPECT_EQ(lock.work, (std::vector<bool>{true, false})) << "the hold's job only";
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
	void set_work(bool) override {}
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

namespace {

// The GPU of the throttle's tests: per stream, the commands sent in order
// and how many of them have finished (the test finishes them). A marker is
// reached once its stream has finished the commands sent before it.
class FakeGpu : public Markers, public PreemptView {
public:
	// The command: sent to the GPU, in the submitting thread.
	int send(void *stream, int id)
	{
		std::lock_guard guard(mutex_);
		Queue &q = streams_[stream];
		q.sent.push_back(id);
		most_unfinished_ = std::max(most_unfinished_, unfinished_locked());
		return id;
	}
	// The oldest unfinished command of @stream finishes; false if none.
	bool finish_one(void *stream)
	{
		std::lock_guard guard(mutex_);
		Queue &q = streams_[stream];
		if (q.finished == q.sent.size())
			return false;
		q.finished++;
		return true;
	}
	size_t sent(void *stream)
	{
		std::lock_guard guard(mutex_);
		return streams_[stream].sent.size();
	}
	std::vector<int> sent_ids(void *stream)
	{
		std::lock_guard guard(mutex_);
		return streams_[stream].sent;
	}
	size_t unfinished()
	{
		std::lock_guard guard(mutex_);
		return unfinished_locked();
	}
	size_t most_unfinished()
	{
		std::lock_guard guard(mutex_);
		return most_unfinished_;
	}

	std::atomic<bool> preempting{true};
	std::atomic<int> records{0}, recycled{0};
	std::set<void *> captured;

	bool preempted() override { return preempting; }
	bool capturing(void *stream) override { return captured.count(stream); }
	void *record(void *stream) override
	{
		std::lock_guard guard(mutex_);
		records++;
		markers_.push_back({stream, streams_[stream].sent.size()});
		return &markers_.back();
	}
	bool reached(void *marker) override
	{
		std::lock_guard guard(mutex_);
		auto *m = static_cast<MarkerAt *>(marker);
		return streams_[m->stream].finished >= m->after;
	}
	void recycle(void *) override { recycled++; }

private:
	struct Queue {
		std::vector<int> sent;
		size_t finished = 0;
	};
	struct MarkerAt {
		void *stream;
		size_t after; // reached when this many of its commands finished
	};
	size_t unfinished_locked()
	{
		size_t n = 0;
		for (auto &[s, q] : streams_)
			n += q.sent.size() - q.finished;
		return n;
	}
	std::mutex mutex_;
	std::map<void *, Queue> streams_;
	std::deque<MarkerAt> markers_; // stable addresses
	size_t most_unfinished_ = 0;
};

using Clock = std::chrono::steady_clock;

// Polls @done for up to 10 s (no test hangs); its last answer.
template <class Done>
bool eventually(Done done)
{
	const auto until = Clock::now() + std::chrono::seconds(10);
	while (!done() && Clock::now() < until)
		std::this_thread::sleep_for(std::chrono::microseconds(200));
	return done();
}

class Throttled : public testing::Test {
protected:
	CountingLock lock;
	FakeGpu gpu;
	// @inflight: the bound of a program whose slot is outranked (0:
	// none); @suspend false: --no-preempt.
	LaunchQueue make(Policy p, unsigned int inflight, bool suspend = true,
			 unsigned int max_wait_ms = 10000)
	{
		return LaunchQueue(p, &lock, [](void *) { return true; },
				   Throttle{suspend, inflight, &gpu, &gpu, max_wait_ms});
	}
	int send(LaunchQueue &q, void *s, int id, pid_t thread = 0)
	{
		return q.submit(StreamKey{s, thread}, [&] { return gpu.send(s, id); }, -1);
	}
	// Finishes the GPU's commands one at a time, each once the
	// submitters have had time to fill the free place, until @total
	// were sent and all finished.
	void drain(const std::vector<void *> &streams, size_t total)
	{
		const auto until = Clock::now() + std::chrono::seconds(20);
		size_t turn = 0;
		while (Clock::now() < until) {
			size_t sent = 0;
			for (void *s : streams)
				sent += gpu.sent(s);
			if (sent == total && !gpu.unfinished())
				return;
			std::this_thread::sleep_for(std::chrono::microseconds(300));
			for (size_t i = 0; i < streams.size(); i++)
				if (gpu.finish_one(streams[turn++ % streams.size()]))
					break;
		}
		ADD_FAILURE() << "not drained within 20 s";
	}
};

// Outranked, nothing preempting: one thread's 20 commands on a stream,
// never more than N = 2 unfinished on the GPU, sent in order, each once,
// every one marked, and submit() returns only after its command was sent.
// Without the bound all 20 would be unfinished at once.
TEST_F(Throttled, AtMostNInFlightInOrderNoneLostOrDuplicated)
{
	gpu.preempting = false;
	auto q = make(Policy::hold, 2);
	std::vector<int> returned;
	std::thread program([&] {
		for (int i = 0; i < 20; i++) {
			EXPECT_EQ(send(q, stream(1), i), i);
			returned.push_back(int(gpu.sent(stream(1))));
		}
	});
	drain({stream(1)}, 20);
	program.join();
	EXPECT_EQ(gpu.most_unfinished(), 2u) << "the bound, not more, not fewer";
	std::vector<int> want(20);
	for (int i = 0; i < 20; i++)
		want[i] = i;
	EXPECT_EQ(gpu.sent_ids(stream(1)), want);
	std::vector<int> counts(20);
	for (int i = 0; i < 20; i++)
		counts[i] = i + 1;
	EXPECT_EQ(returned, counts) << "submit() returned before its command was sent";
	// (How many waited depends on how the two threads interleave: on a
	// loaded machine the drain may outpace the program.)
	EXPECT_GT(q.throttled(), 0u);
	EXPECT_EQ(gpu.records, 20);
}

// Three threads, each on a stream of its own, and a fourth stream that two
// of them share: never more than N = 3 unfinished in all, each thread's
// commands in its order on each stream, none lost or sent twice.
TEST_F(Throttled, ThreadsAndStreamsShareTheThreshold)
{
	gpu.preempting = false;
	auto q = make(Policy::per_sync, 3);
	std::vector<std::thread> threads;
	for (int t = 0; t < 3; t++)
		threads.emplace_back([&, t] {
			for (int i = 0; i < 12; i++) {
				send(q, stream(10 + t), t * 100 + i);
				if (t < 2)
					send(q, stream(20), t * 100 + i);
			}
		});
	drain({stream(10), stream(11), stream(12), stream(20)}, 3 * 12 + 2 * 12);
	for (auto &t : threads)
		t.join();
	EXPECT_LE(gpu.most_unfinished(), 3u);
	for (int t = 0; t < 3; t++) {
		std::vector<int> want;
		for (int i = 0; i < 12; i++)
			want.push_back(t * 100 + i);
		EXPECT_EQ(gpu.sent_ids(stream(10 + t)), want) << "thread " << t;
	}
	std::vector<int> shared = gpu.sent_ids(stream(20));
	ASSERT_EQ(shared.size(), 24u);
	for (int t = 0; t < 2; t++) {
		std::vector<int> mine;
		std::copy_if(shared.begin(), shared.end(), std::back_inserter(mine),
			     [t](int id) { return id / 100 == t; });
		std::vector<int> want;
		for (int i = 0; i < 12; i++)
			want.push_back(t * 100 + i);
		EXPECT_EQ(mine, want) << "thread " << t << " on the shared stream";
	}
	EXPECT_EQ(lock.acquires, 1);
}

// While a higher slot preempts, nothing is sent, however little is
// unfinished (XSched's suspension: N in flight would keep the GPU as busy
// as before); when the preemption ends the waiting command goes at once,
// and so does every command after it (no bound: nobody outranks it).
TEST_F(Throttled, NothingIsSentWhilePreempted)
{
	auto q = make(Policy::hold, 0);
	std::atomic<int> sent{0};
	std::thread program([&] {
		for (int i = 0; i < 3; i++, sent++)
			send(q, stream(1), i);
	});
	// (EXPECT, not ASSERT: where it fails, the thread is still joined)
	EXPECT_TRUE(eventually([&] { return q.throttled() == 1; }));
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	EXPECT_EQ(sent, 0) << "sent while preempted, with nothing unfinished";
	EXPECT_EQ(gpu.sent(stream(1)), 0u);
	gpu.preempting = false;
	EXPECT_TRUE(eventually([&] { return sent == 3; }));
	program.join();
	for (int i = 3; i < 10; i++)
		send(q, stream(1), i);
	EXPECT_EQ(gpu.sent(stream(1)), 10u);
	EXPECT_EQ(gpu.unfinished(), 10u) << "none waited for the GPU";
	EXPECT_EQ(q.throttled(), 1u);
	EXPECT_EQ(gpu.records, 0) << "no bound: no marker";
}

// With a bound (outranked): a preemption that begins with 2 of N = 3
// unfinished sends nothing, even when all finish; when it ends, the
// waiting commands go as the bound has room, not at once past it.
TEST_F(Throttled, APreemptionEndsIntoTheBound)
{
	gpu.preempting = false;
	auto q = make(Policy::hold, 3);
	send(q, stream(1), 0);
	send(q, stream(1), 1);
	gpu.preempting = true;
	std::atomic<int> sent{0};
	std::thread program([&] {
		for (int i = 2; i < 8; i++, sent++)
			send(q, stream(1), i);
	});
	EXPECT_TRUE(eventually([&] { return q.throttled() == 1; }));
	while (gpu.finish_one(stream(1)))
		;
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	EXPECT_EQ(sent, 0) << "sent while preempted";
	gpu.preempting = false;
	EXPECT_TRUE(eventually([&] { return sent == 3; }));
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	EXPECT_EQ(sent, 3) << "past the bound once the preemption ended";
	drain({stream(1)}, 8);
	program.join();
	EXPECT_EQ(gpu.most_unfinished(), 3u);
	std::vector<int> want(8);
	for (int i = 0; i < 8; i++)
		want[i] = i;
	EXPECT_EQ(gpu.sent_ids(stream(1)), want);
}

// A command never waits past Throttle::max_wait_ms: with the preemption
// going on (GPU work that waits for the host's next step), it goes once the
// limit has passed, and is counted; with no bound, unmarked; with a bound,
// marked, so that the next command counts it (and waits in its turn).
TEST_F(Throttled, NoCommandWaitsPastTheBound)
{
	auto q = make(Policy::hold, 0, true, 50);
	std::atomic<bool> sent{false};
	std::thread program([&] {
		send(q, stream(1), 0);
		sent = true;
	});
	EXPECT_TRUE(eventually([&] { return q.throttled() == 1; }));
	EXPECT_TRUE(eventually([&] { return bool(sent); })) << "stuck past the limit";
	program.join();
	EXPECT_EQ(gpu.sent(stream(1)), 1u);
	EXPECT_EQ(q.overdue(), 1u);
	EXPECT_EQ(gpu.records, 0) << "no bound: unmarked";
	EXPECT_TRUE(gpu.preempting);

	// Outranked, bound 1, nothing finishing: each command goes on the
	// limit, each marked.
	gpu.preempting = false;
	auto bounded = make(Policy::hold, 1, true, 50);
	for (int i = 0; i < 3; i++)
		send(bounded, stream(2), i);
	EXPECT_EQ(gpu.sent(stream(2)), 3u);
	EXPECT_EQ(bounded.overdue(), 2u) << "the first had room";
	EXPECT_EQ(gpu.records, 3) << "past the limit, still counted";
}

// Nothing preempting and nobody outranking, or --no-preempt (preempted,
// with a bound given): no command waits and no marker is recorded,
// however much is unfinished.
TEST_F(Throttled, NothingPreemptingNothingWaits)
{
	gpu.preempting = false;
	auto q = make(Policy::hold, 0);
	for (int i = 0; i < 50; i++)
		send(q, stream(1), i);
	EXPECT_EQ(gpu.unfinished(), 50u);
	gpu.preempting = true;
	auto off = make(Policy::hold, 3, false);
	for (int i = 0; i < 50; i++)
		send(off, stream(2), i);
	EXPECT_EQ(gpu.unfinished(), 100u);
	EXPECT_EQ(q.throttled() + off.throttled(), 0u);
	EXPECT_EQ(gpu.records, 0);
}

// A stream being captured into a graph runs nothing now: not held back.
TEST_F(Throttled, CapturedCommandsAreNotHeldBack)
{
	gpu.captured.insert(stream(1));
	auto q = make(Policy::hold, 1);
	std::atomic<int> sent{0};
	std::thread program([&] {
		for (int i = 0; i < 5; i++, sent++)
			send(q, stream(1), i);
	});
	EXPECT_TRUE(eventually([&] { return sent == 5; }));
	gpu.preempting = false; // (where it failed: lets the program end)
	program.join();
	EXPECT_EQ(gpu.sent(stream(1)), 5u);
	EXPECT_EQ(q.throttled(), 0u);
	EXPECT_EQ(gpu.records, 0);
}

// A synchronization on another thread while a command waits for the
// throttle: that command belongs to the job, so the job neither drains nor
// (--per-sync) gives the slot back until it was sent and synchronized.
TEST_F(Throttled, ASynchronizationWhileACommandWaitsKeepsTheJob)
{
	auto q = make(Policy::per_sync, 0);
	std::thread program([&] { send(q, stream(1), 1); });
	// (EXPECT, not ASSERT: where it fails, the thread is still joined)
	EXPECT_TRUE(eventually([&] { return q.throttled() == 1; }));
	q.synchronized(SyncKind::context);
	EXPECT_TRUE(lock.held());
	EXPECT_EQ(lock.work, std::vector<bool>{true});
	gpu.preempting = false;
	program.join();
	EXPECT_EQ(gpu.sent(stream(1)), 1u);
	q.synchronized(SyncKind::context);
	EXPECT_FALSE(lock.held());
	EXPECT_EQ(lock.work, (std::vector<bool>{true, false}));
}

// The work edges: exactly two per job (pending at its first command,
// drained at the synchronization after which its streams finished), under
// both policies, however many commands, streams and synchronizations it
// has; none between jobs; under --per-sync, only with the slot held.
TEST_F(Queue, WorkEdgesTwoPerJobUnderBothPolicies)
{
	for (Policy p : {Policy::per_sync, Policy::hold}) {
		SCOPED_TRACE(p == Policy::hold ? "hold" : "per-sync");
		lock = CountingLock{};
		busy.clear();
		auto q = make(p);
		int sent = 0;
		for (int job = 0; job < 3; job++) {
			for (int i = 0; i < 4; i++) {
				send(q, stream(1), &sent);
				send(q, stream(2), &sent);
			}
			busy.insert(stream(2));
			q.synchronized(SyncKind::stream); // stream 2 still runs
			busy.clear();
			q.synchronized(SyncKind::stream);
			q.synchronized(SyncKind::stream); // no job open
		}
		q.synchronized(SyncKind::context);
		EXPECT_EQ(lock.work, (std::vector<bool>{true, false, true, false, true, false}));
		EXPECT_EQ(lock.acquires, p == Policy::hold ? 0 : 3);
		if (p == Policy::per_sync) {
			for (bool held : lock.work_held)
				EXPECT_TRUE(held);
		}
	}
}

} // namespace
