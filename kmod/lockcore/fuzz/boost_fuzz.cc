// SPDX-License-Identifier: GPL-2.0
// libFuzzer target for the boost ledger (kmod/lockcore/boost.c) over a fake
// scheduler (tests/unit/fake_sched.hpp).
//
// Four threads, four open files on two GPUs with different boost
// priorities. Files are shared: any thread may release any file's hold,
// as threads, fork and SCM_RIGHTS allow. A grant to a thread leaves a
// boost "in flight", as the module's granter does between dropping the
// domain lock and boosting; the input decides when it lands, so late
// boosts and late releases come in every order. Threads also change their
// own scheduling, and exit. A reference model, written from the rules in
// boost.c's header alone, says what every thread must run at after each
// step, and the ledger's records must belong to live holds only.
#define FUZZ_TARGET "boost_fuzz"
#include "fuzz_check.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "fake_sched.hpp"

namespace {

using fuzz_check::total_ops;

constexpr int kThreads = 4, kFiles = 4;
constexpr unsigned int kPrio[2] = {30, 60}; // per GPU; files 0-1, 2-3

bool same(const gpuslot_sched_attr &a, const gpuslot_sched_attr &b)
{
	return a.policy == b.policy && a.rt_priority == b.rt_priority &&
	       a.nice == b.nice && a.reset_on_fork == b.reset_on_fork;
}

// The rules, plainly: per thread, the holds it is boosted for and what it
// ran at before; per file, its current hold.
struct Model {
	struct Thread {
		bool recorded = false;
		gpuslot_sched_attr saved{};
		unsigned int applied = 0;
		std::multiset<unsigned int> prios; // of its boosted holds
	};
	struct File {
		uint64_t seq = 0; // the current or last hold
		bool live = false;
		int booster = -1; // the thread boosted for the hold, if any
	};
	Thread t[kThreads];
	File f[kFiles];
};

class Harness {
public:
	Harness() { gpuslot_boost_ledger_init(&l_, &fake_sched::ops); }

	~Harness()
	{
		// Every hold ends: no record and no reference may be left.
		for (int i = 0; i < kFiles; i++)
			release(i);
		for (int i = 0; i < kFiles; i++)
			gpuslot_boost_finish(&l_, &hold_[i], UINT64_MAX);
		CHECK(l_.nr_threads == 0);
		// At share 100 an account owes nothing: none is kept.
		CHECK(l_.nr_members == 0 && fake_sched::members == 0);
		for (auto &t : task_)
			CHECK(t.refs == 0);
	}

	// The file's slot is granted to @thread: its boost is now in flight.
	void grant(int file, int thread)
	{
		Model::File &mf = m_.f[file];
		if (mf.live || task_[thread].exiting)
			return;
		mf.seq++;
		mf.live = true;
		mf.booster = -1;
		flight_.push_back({file, thread, mf.seq});
	}

	// An in-flight boost lands.
	void land(size_t which)
	{
		if (flight_.empty())
			return;
		Flight fl = flight_[which % flight_.size()];
		flight_.erase(flight_.begin() + long(which % flight_.size()));
		Model::File &mf = m_.f[fl.file];
		bool live = mf.live && mf.seq == fl.seq;
		unsigned int prio = kPrio[fl.file / 2];
		// A boost of an older hold than the file's last one, or of one
		// already handled, changes nothing; the file's recorded boost of
		// an older hold ends first (its release is still on its way).
		bool newer = fl.seq > seen_[fl.file];
		if (newer) {
			seen_[fl.file] = fl.seq;
			end_model_boost(fl.file);
		}
		bool expect = false;
		if (newer && live) {
			Model::Thread &mt = m_.t[fl.thread];
			const gpuslot_sched_attr &cur = task_[fl.thread].attr;
			bool above = cur.policy == SCHED_DEADLINE ||
				     (fake_sched::is_rt(cur.policy) &&
				      cur.rt_priority >= prio);
			// A thread gpuslot boosts already takes the hold on;
			// another is boosted unless it is above, or exiting
			// (then its first boost cannot be set).
			if (mt.recorded ||
			    (!above && !task_[fl.thread].exiting)) {
				if (!mt.recorded) {
					mt = {};
					mt.recorded = true;
					mt.saved = cur;
				}
				mt.prios.insert(prio);
				mf.booster = fl.thread;
				expect = true;
				retarget(fl.thread);
			}
		}
		bool got = gpuslot_boost_begin(&l_, &hold_[fl.file], fl.seq, live,
					       &task_[fl.thread], prio, 100, nullptr);
		CHECK(got == expect);
	}

	// Any thread sharing the file releases its hold.
	void release(int file)
	{
		Model::File &mf = m_.f[file];
		if (!mf.live)
			return;
		mf.live = false;
		end_model_boost(file);
		gpuslot_boost_finish(&l_, &hold_[file], mf.seq);
	}

	// max_hold_ms passes: the hold stays, its boost ends.
	void overrun(int file)
	{
		Model::File &mf = m_.f[file];
		if (!mf.live)
			return;
		end_model_boost(file);
		gpuslot_boost_finish(&l_, &hold_[file], mf.seq);
	}

	// A thread changes its own scheduling, as sched_setattr(2) lets it.
	void self_change(int thread, uint8_t how)
	{
		task_struct &p = task_[thread];
		if (p.exiting)
			return;
		gpuslot_sched_attr a{};
		switch (how % 5) {
		case 0: a = {SCHED_OTHER, 0, int(how % 7) - 3, false}; break;
		case 1: a = {SCHED_BATCH, 0, 2, (how & 8) != 0}; break;
		case 2: a = {SCHED_FIFO, 1u + how % 99, 0, false}; break;
		case 3: a = {SCHED_RR, 1u + (how * 7u) % 99, 0, false}; break;
		default: a = {SCHED_DEADLINE, 0, 0, false}; break;
		}
		fake_sched::apply(&p, a);
		expect_[thread] = p.attr;
	}

	void exit_thread(int thread) { task_[thread].exiting = true; }

	void check() const
	{
		unsigned int records = 0;
		for (int i = 0; i < kThreads; i++) {
			const Model::Thread &mt = m_.t[i];
			const task_struct &p = task_[i];
			auto *rec = gpuslot_boost_find(&l_, &p);
			CHECK((rec != nullptr) == mt.recorded);
			CHECK(p.refs == (mt.recorded ? 1 : 0));
			records += mt.recorded;
			if (!p.exiting)
				CHECK(same(p.attr, expect_[i]));
		}
		CHECK(records == l_.nr_threads);
		// A recorded boost belongs to the file's live, current hold.
		for (int i = 0; i < kFiles; i++) {
			const Model::File &mf = m_.f[i];
			if (!hold_[i].thread) {
				CHECK(mf.booster < 0);
				continue;
			}
			CHECK(mf.live && hold_[i].seq == mf.seq);
			CHECK(mf.booster >= 0 &&
			      hold_[i].thread->task == &task_[mf.booster]);
		}
	}

private:
	struct Flight {
		int file, thread;
		uint64_t seq;
	};

	// What the thread must run at once its holds changed. A thread that
	// moved above what gpuslot gave it, or to SCHED_DEADLINE, is left as
	// it is, and so is an exiting one.
	void retarget(int thread)
	{
		Model::Thread &mt = m_.t[thread];
		task_struct &p = task_[thread];
		const gpuslot_sched_attr &cur = p.attr;
		if (p.exiting || cur.policy == SCHED_DEADLINE ||
		    (mt.applied && fake_sched::is_rt(cur.policy) &&
		     cur.rt_priority > mt.applied))
			return;
		if (mt.prios.empty()) {
			// sched_setattr keeps the nice value under an RT policy.
			expect_[thread] = mt.saved;
			if (fake_sched::is_rt(mt.saved.policy))
				expect_[thread].nice = cur.nice;
			return;
		}
		unsigned int top = *mt.prios.rbegin();
		mt.applied = top;
		expect_[thread] = {SCHED_FIFO, top, p.attr.nice, true};
	}

	void end_model_boost(int file)
	{
		Model::File &mf = m_.f[file];
		if (mf.booster < 0)
			return;
		Model::Thread &mt = m_.t[mf.booster];
		mt.prios.erase(mt.prios.find(kPrio[file / 2]));
		retarget(mf.booster);
		if (mt.prios.empty())
			mt = {};
		mf.booster = -1;
	}

	gpuslot_boost_ledger l_{};
	task_struct task_[kThreads];
	gpuslot_sched_attr expect_[kThreads] = {};
	gpuslot_boost_hold hold_[kFiles] = {};
	uint64_t seen_[kFiles] = {};
	Model m_;
	std::vector<Flight> flight_;
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	std::atexit(fuzz_check::report_total);
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Harness h;
	for (size_t i = 0; i + 2 <= size; i += 2) {
		uint8_t op = data[i], arg = data[i + 1];
		int file = arg & 3, thread = (arg >> 2) & 3;
		switch (op % 8) {
		case 0:
		case 1:
			h.grant(file, thread);
			break;
		case 2:
		case 3:
			h.land(arg);
			break;
		case 4:
			h.release(file);
			break;
		case 5:
			h.overrun(file);
			break;
		case 6:
			h.self_change(thread, arg);
			break;
		default:
			if (op & 0x80)
				h.exit_thread(thread);
			break;
		}
		h.check();
		total_ops++;
	}
	return 0;
}
