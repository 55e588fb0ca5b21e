// SPDX-License-Identifier: GPL-2.0
// A stand-in for the scheduler under the boost ledger (kmod/lockcore/boost.c): each
// fake task keeps its attributes as sched_setattr() would, and counts its
// references, so that tests and the fuzzer can check what the ledger did.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include <linux/sched.h> // SCHED_DEADLINE
#include <sched.h>       // SCHED_OTHER

extern "C" {
#include "boost.h"
}

struct task_struct {
	gpuslot_sched_attr attr{SCHED_OTHER, 0, 0, false};
	bool exiting = false;
	int refs = 0;
	unsigned long sets = 0; // set_attr calls
	unsigned int owner = 0; // bumped by an exec or a change of credentials
	uint64_t cpu_ns = 0;	// CPU time used: moved by the tests
	uint32_t uid = 1000;	// the member it is charged as
};

namespace fake_sched {

inline bool is_rt(unsigned int policy)
{
	return policy == SCHED_FIFO || policy == SCHED_RR;
}

// What sched_setattr() does with the fields the ledger uses: an RT policy
// keeps the nice value, a fair one takes it and has RT priority 0.
inline void apply(task_struct *p, const gpuslot_sched_attr &a)
{
	unsigned int nice = p->attr.nice;
	p->attr = a;
	if (is_rt(a.policy))
		p->attr.nice = int(nice);
	else
		p->attr.rt_priority = 0;
}

inline void get_attr(task_struct *p, gpuslot_sched_attr *a)
{
	*a = p->attr;
}

inline int set_attr(task_struct *p, const gpuslot_sched_attr *a)
{
	if (is_rt(a->policy) && (a->rt_priority < 1 || a->rt_priority > 99))
		std::abort(); // the ledger never asks for a bad priority
	p->sets++;
	apply(p, *a);
	return 0;
}

inline bool exiting(task_struct *p)
{
	return p->exiting;
}

// A record, and who its thread was when it was made.
struct thread : gpuslot_boost_thread {
	unsigned int owner;
};

inline gpuslot_boost_thread *new_thread(gpuslot_boost_ledger *, task_struct *p)
{
	p->refs++;
	auto *t = new thread{};
	t->owner = p->owner;
	return t;
}

inline void free_thread(gpuslot_boost_thread *t)
{
	t->task->refs--;
	delete static_cast<thread *>(t);
}

inline bool same_owner(gpuslot_boost_thread *t)
{
	return static_cast<thread *>(t)->owner == t->task->owner;
}

// The ledger's clock, in ns: moved by the tests.
inline uint64_t clock_ns = 0;

inline uint64_t now()
{
	return clock_ns;
}

// cputime() calls: one per record a settling of the budget walks.
inline unsigned long cputime_calls = 0;

inline uint64_t cputime(task_struct *p)
{
	cputime_calls++;
	return p->cpu_ns;
}

inline uint32_t member_id(gpuslot_boost_ledger *, task_struct *p)
{
	return p->uid;
}

// Member accounts alive, to check that none leaks.
inline int members = 0;

inline gpuslot_boost_member *new_member(gpuslot_boost_ledger *)
{
	members++;
	return new gpuslot_boost_member{};
}

inline void free_member(gpuslot_boost_member *m)
{
	members--;
	delete m;
}

// Holds whose budget end the ledger brought forward, and to when.
inline std::vector<std::pair<gpuslot_boost_hold *, uint64_t>> rearmed;

inline void rearm(gpuslot_boost_hold *h, uint64_t budget_end_ns)
{
	rearmed.emplace_back(h, budget_end_ns);
}

// The CPUs the fake host has (0: as many as there are threads).
inline unsigned int cpus = 0;

inline unsigned int nr_cpus()
{
	return cpus;
}

inline const gpuslot_boost_ops ops = {
	.get_attr = get_attr,
	.set_attr = set_attr,
	.exiting = exiting,
	.new_thread = new_thread,
	.free_thread = free_thread,
	.same_owner = same_owner,
	.now = now,
	.cputime = cputime,
	.member_id = member_id,
	.new_member = new_member,
	.free_member = free_member,
	.rearm = rearm,
	.nr_cpus = nr_cpus,
};

} // namespace fake_sched
