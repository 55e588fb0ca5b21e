/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * gpuslot: GPU admission control for real-time hosts.
 *
 * /dev/gpuslot offers one slotted k-exclusion lock per GPU "domain". An
 * open file attaches to one domain and holds at most one slot at a time.
 *
 * Every ioctl takes a pointer to a struct whose first member is __u32 size,
 * which userspace sets to sizeof() the struct it was built against. The
 * kernel accepts shorter (older) structs and zero-fills the missing tail; a
 * longer (newer) struct is accepted only if the bytes the kernel does not
 * know are zero, otherwise the call fails with E2BIG. Output fields are
 * copied back only up to the size userspace passed. Reserved and padding
 * members must be zero (EINVAL otherwise), and so must unknown flag bits.
 * A size over 4096 (one page) fails with E2BIG, as sched_setattr(2) and
 * clone3(2) do.
 *
 * A call never fails after it took effect. Commands with output members
 * other than their result (ACQUIRE, RESERVE_QUEUES) undo their change when
 * the result cannot be copied out (EFAULT); the other commands that change
 * state write the struct back before they act (EFAULT, nothing changed, if
 * it is not writable), and ATTACH writes nothing back.
 *
 * The command numbers are _IOW/_IOWR with the size of each struct's first
 * published version (GPUSLOT_*_SIZE_VER0), and the struct carries its own
 * size as well. Both, because they say different things: the number says
 * what the command is and which way data flows (strace, seccomp filters and
 * LSMs decode it without knowing gpuslot), and stays the same for the life
 * of the command; the size field says which version of the struct this
 * caller has, so that structs grow by appending members without a new
 * command number (as in drm and iommufd). The kernel ignores the number's
 * size bits for that and trusts the size field, checked as above.
 *
 * Waits take absolute CLOCK_MONOTONIC deadlines (deadline_ns), not relative
 * timeouts: a call interrupted by a signal and restarted, by the kernel
 * (ERESTARTSYS under SA_RESTART) or by a library, waits until the same
 * instant instead of from the start again. A deadline already past tries
 * once. No relative form is kept: every caller can read CLOCK_MONOTONIC.
 *
 * The magic 0xC6 is unassigned in
 * Documentation/userspace-api/ioctl/ioctl-number.rst (Linux 6.1).
 *
 * API 2 (this header) changed every command number (API 1 used _IO(0xC6,
 * nr)), the timeouts to deadlines and added slot priorities. An API 1
 * library gets ENOTTY from an API 2 module, and the reverse: ask
 * GPUSLOT_IOC_VERSION_LEGACY, which every module answers, to tell the two.
 */
#ifndef _UAPI_LINUX_GPUSLOT_H
#define _UAPI_LINUX_GPUSLOT_H

#include <linux/const.h>
#include <linux/ioctl.h>
#include <linux/types.h>

#define GPUSLOT_API_VERSION	2
/* The largest struct size a caller may pass (E2BIG above). */
#define GPUSLOT_MAX_STRUCT_SIZE	4096

/* Upper bound on k: a slot set is one __u64. */
#define GPUSLOT_MAX_SLOTS	64
/* Upper bound on the "domains" module parameter. */
#define GPUSLOT_MAX_DOMAINS	16
/* Upper bound on a domain's hardware-queue budget (hqd_limit). */
#define GPUSLOT_MAX_HQD		1024
/* The SCHED_FIFO priority of holders until an admin sets boost_priority. */
#define GPUSLOT_DEFAULT_BOOST_PRIORITY	50
/*
 * The highest boost_priority: what ends a boost at max_hold_ms (the
 * module's expiry thread, gpuslotd's server thread) runs one above the
 * highest boost, so that the holder it demotes cannot keep it from running.
 */
#define GPUSLOT_MAX_BOOST_PRIORITY	98
/*
 * A holder keeps its SCHED_FIFO boost for at most max_hold_ms (0: no
 * bound); past it the boost ends and the hold counts as an overrun. The
 * slot itself stays held: the GPU work cannot be revoked.
 */
#define GPUSLOT_DEFAULT_MAX_HOLD_MS	500
#define GPUSLOT_MAX_MAX_HOLD_MS		3600000
/*
 * A thread's boost budget (max_boost_share, percent of real time; 100: no
 * budget): it fills at that share up to that share of one second, drains
 * by the CPU time the thread uses boosted, and a boost lasts only while it
 * lasts. Over any interval of length T a thread runs on a CPU boosted at
 * most max_boost_share% of (T + 1 s). The slot is not affected.
 */
#define GPUSLOT_DEFAULT_MAX_BOOST_SHARE	50
/*
 * The highest slot priority. A slot's priority is the GPU stream priority
 * its work runs at, in levels above the default: 0 (the default) ..
 * GPUSLOT_MAX_SLOT_PRIORITY, more is more urgent. It orders the GPU's work,
 * not the CPU's: the holder's CPU boost is boost_priority, whatever the
 * slot. libgpuslot creates each slot's stream at its priority and refuses a
 * priority the GPU does not offer (CUDA offers 5 levels above the default
 * on Hopper).
 */
#define GPUSLOT_MAX_SLOT_PRIORITY	15
/* Buckets of the log2 wait-time histogram in struct gpuslot_stats. */
#define GPUSLOT_HIST_BUCKETS	32

#define GPUSLOT_IOC_MAGIC	0xC6

/*
 * GPUSLOT_IOC_VERSION - what this kernel module speaks.
 * @api_version: out, GPUSLOT_API_VERSION of the module.
 * @nr_domains:  out, number of lock domains (module parameter "domains").
 * @features:    out, GPUSLOT_FEATURE_* bits the module implements.
 */
#define GPUSLOT_FEATURE_LOCK	_BITULL(0)	/* ACQUIRE/RELEASE/SET_K/STATS */
#define GPUSLOT_FEATURE_HQD	_BITULL(1)	/* RESERVE/UNRESERVE_QUEUES */
#define GPUSLOT_FEATURE_LAYOUT	_BITULL(2)	/* SET_LAYOUT/GET_LAYOUT */
#define GPUSLOT_FEATURE_ASYNC	_BITULL(3)	/* ACQUIRE_ASYNC/_COMPLETE/_CANCEL */
#define GPUSLOT_FEATURE_DEADLINE	_BITULL(4)	/* absolute deadlines (API 2) */
#define GPUSLOT_FEATURE_SLOT_PRIORITY	_BITULL(5)	/* gpuslot_layout.priority */
#define GPUSLOT_FEATURE_WORK	_BITULL(6)	/* SET_WORK, the work state page */

struct gpuslot_version {
	__u32 size;
	__u32 api_version;
	__u32 nr_domains;
	__u32 __reserved;
	__u64 features;
};

/*
 * GPUSLOT_IOC_ATTACH - bind this open file to a domain (default: 0).
 * @domain: in, 0 .. nr_domains - 1.
 * Fails with EBUSY while the file holds or waits for a slot.
 */
struct gpuslot_attach {
	__u32 size;
	__u32 domain;
};

/*
 * GPUSLOT_IOC_ACQUIRE - take a slot of the attached domain.
 *
 * Waiters are served in strict FIFO order with direct handoff: a freed slot
 * goes to the first queued waiter whose @allowed_mask contains it, and a new
 * caller never takes a slot that a queued waiter could take.
 *
 * @flags:        in, at most one of
 *                GPUSLOT_ACQUIRE_TRY      fail with EAGAIN instead of waiting;
 *                GPUSLOT_ACQUIRE_DEADLINE wait until CLOCK_MONOTONIC reaches
 *                                         @deadline_ns at most, then fail
 *                                         with ETIMEDOUT (a deadline already
 *                                         past: one try, ETIMEDOUT).
 *                Neither: wait until granted or interrupted.
 *                GPUSLOT_ACQUIRE_RECLAIM, with ACQUIRE_TRY, on gpuslotd's
 *                socket transport only: take back the hold gpuslotd kept
 *                across its restart for this client and process, and
 *                nothing else (EAGAIN where none is kept: its grace period
 *                ended); never a free slot. The module refuses it (EINVAL).
 * @deadline_ns:  in, absolute CLOCK_MONOTONIC time in ns; must be 0 unless
 *                ACQUIRE_DEADLINE.
 * @allowed_mask: in, bit i set = slot i acceptable; 0 = any slot. It must
 *                allow at least one slot below the current k (EINVAL).
 * @slot:         out, the slot granted, 0 .. k - 1.
 * @generation:   out, the domain's layout generation at the grant; it
 *                increases on every change of k or of the partitions.
 *
 * Errors: EDEADLK this file already holds a slot; EBUSY another thread is
 * already acquiring on this file; EAGAIN (TRY) no slot free now;
 * ETIMEDOUT; EINTR a signal arrived before a slot was granted (the waiter
 * left the queue; if the grant and the signal race, the grant wins and the
 * call succeeds; under SA_RESTART the kernel restarts the call, which
 * queues again at the end, with the same deadline); EINVAL also when k
 * shrinks, while the call waits, below every slot of @allowed_mask: the
 * waiter leaves the queue at once, as a new call with that mask would be
 * refused; ENOSPC the call would wait and
 * the domain's lock queue holds 1024 waiters (sleeping and asynchronous)
 * already, or 256 of the caller's real uid: the kernel bounds what one
 * user can queue, and leaves room for the others'.
 *
 * @deadline_ns is CLOCK_MONOTONIC as the caller reads it: inside a time
 * namespace, on that namespace's clock.
 *
 * @slot and @generation describe the grant this call received. Threads
 * sharing the open file (threads, fork, SCM_RIGHTS) share its slot: another
 * of them may release it, and take a new one, before this call returns.
 *
 * The boost: unless boost_priority is 0, the thread that called ACQUIRE runs
 * SCHED_FIFO at boost_priority while the file holds the slot. A thread that
 * has to wait is boosted as it goes to sleep, so that it runs boosted as
 * soon as it is woken, and gets its attributes back if the wait fails. A
 * thread already at that RT priority or above, or SCHED_DEADLINE, is left
 * as it is. A thread holding slots through several files (GPUs) has one
 * boost, at the highest priority of its holds, and gets its own attributes
 * back when its last hold ends. At the end of a hold the thread gets its
 * attributes back unless it moved itself above the boost priority or to
 * SCHED_DEADLINE meanwhile. max_hold_ms bounds the boost of one hold.
 * The boost is refused (the hold is granted unboosted, counted in sysfs
 * stats/boosts_refused and named in the file's fdinfo) where the scheduler
 * would refuse the thread RT itself (an RT cgroup without runtime), and to
 * a thread whose effective uid is not the file opener's, unless it has
 * CAP_SYS_NICE: a passed file gives its slots, not its boost.
 */
#define GPUSLOT_ACQUIRE_TRY	_BITUL(0)
#define GPUSLOT_ACQUIRE_DEADLINE	_BITUL(1)
#define GPUSLOT_ACQUIRE_RECLAIM	_BITUL(2)

struct gpuslot_acquire {
	__u32 size;
	__u32 flags;
	__u64 deadline_ns;
	__u64 allowed_mask;
	__u32 slot;
	__u32 __reserved;
	__u64 generation;
};

/*
 * Asynchronous acquire, for event loops that cannot block a thread per
 * waiting job. The open file itself is the pollable descriptor.
 *
 * GPUSLOT_IOC_ACQUIRE_ASYNC (struct gpuslot_acquire) - queue this file for a
 * slot and return at once. @allowed_mask as for ACQUIRE; @flags and
 * @deadline_ns must be 0 (the caller's loop keeps the time); nothing is
 * written back. The file takes the same FIFO place a sleeping ACQUIRE
 * would, and keeps it until granted, cancelled or closed. poll() then
 * reports EPOLLIN when the slot is granted (or the wait failed). From the
 * grant the slot is the file's: held, shown as "pending" in the holders
 * table (debugfs) and the file's fdinfo, not yet boosted. Errors: EDEADLK
 * the file holds a slot; EBUSY it is acquiring already (either way); EINVAL
 * as for ACQUIRE; ENOSPC no slot is free and the lock queue is full, as for
 * ACQUIRE (nothing queued).
 *
 * GPUSLOT_IOC_ACQUIRE_COMPLETE (struct gpuslot_acquire) - take the grant.
 * @flags, @deadline_ns and @allowed_mask must be 0. @slot, @generation: out,
 * as for ACQUIRE. The calling thread becomes the holder and gets the boost
 * now; the holders table names it and its own process (a forked child that
 * completes is the holder, not the process that queued). Errors: EAGAIN
 * still queued (poll again); EINVAL the wait failed because k shrank below
 * every allowed slot (reported once; the file is idle again); EPERM no
 * asynchronous acquire was started.
 *
 * GPUSLOT_IOC_ACQUIRE_CANCEL (struct gpuslot_release) - leave the queue, or
 * give back a slot granted but not completed (it goes to the next waiter).
 * @slot: out, the slot given back, or GPUSLOT_NO_SLOT if none was granted.
 * Errors: EPERM nothing to cancel (a completed hold is ended by RELEASE).
 * Closing the file cancels too.
 */
#define GPUSLOT_NO_SLOT		0xffffffffu

/*
 * GPUSLOT_IOC_RELEASE - give back the slot this open file holds; it goes
 * straight to the next eligible waiter. Fails with EPERM if the file holds
 * no slot. The holding thread's scheduling attributes are restored.
 * @flags: in, must be 0.
 * @slot:  out, the slot released.
 */
struct gpuslot_release {
	__u32 size;
	__u32 flags;
	__u32 slot;
	__u32 __reserved;
};

/*
 * GPUSLOT_IOC_SET_K - set the number of slots of the attached domain.
 * Needs CAP_SYS_ADMIN (EPERM). @k: in, 1 .. GPUSLOT_MAX_SLOTS (EINVAL).
 * Growing admits waiters at once; shrinking retires slots >= k as their
 * holders release them. Setting k also resets every partition to the whole
 * GPU (the unit kind stays) until gpuslotd plans new ones, and increments
 * the generation if k or a partition changed.
 * @generation: out, the generation after the change.
 */
struct gpuslot_set_k {
	__u32 size;
	__u32 k;
	__u64 generation;
};

/*
 * GPUSLOT_IOC_DOMAIN_INFO - state of the attached domain (all out).
 * @held_mask: slots currently held (slots >= k are retiring).
 * @hqd_limit, @hqd_used: the hardware-queue budget (since API 1, size 48).
 */
struct gpuslot_domain_info {
	__u32 size;
	__u32 domain;
	__u32 k;
	__u32 boost_priority;
	__u32 nr_holders;
	__u32 nr_waiters;
	__u64 held_mask;
	__u64 generation;
	__u32 hqd_limit;
	__u32 hqd_used;
};

/*
 * GPUSLOT_IOC_GET_STATS - counters of the attached domain (all out), the
 * same numbers as /sys/class/gpuslot/gpu<N>/stats/ (one file each) and
 * debugfs's gpuslot/gpu<N>/wait_hist.
 * @wait_hist[i] counts granted waits of [2^i, 2^(i+1)) ns, with 0 ns in
 * bucket 0 and everything of 2^31 ns or more in the last bucket.
 * @overruns: holds that outlived max_hold_ms and lost their boost (since
 * size 328).
 */
struct gpuslot_stats {
	__u32 size;
	__u32 __reserved;
	__u64 acquisitions;
	__u64 contended;
	__u64 timeouts;
	__u64 interrupted;
	__u64 total_wait_ns;
	__u64 max_wait_ns;
	__u64 max_hold_ns;
	__u64 wait_hist[GPUSLOT_HIST_BUCKETS];
	__u64 overruns;
};

/*
 * GPUSLOT_IOC_RESERVE_QUEUES - reserve hardware queues of the attached
 * domain for this open file.
 *
 * An AMD GPU has 32 hardware queue descriptors (HQDs); amdgpu keeps 8, so
 * 24 are left for user compute queues on gfx9/MI-series (8 on RX 6000/7000:
 * KFD topology num_cp_queues). Past that the firmware time-slices queues
 * and every task slows down. Every HIP stream with a CU mask is a queue of
 * its own; a client reserves what it will create before creating it.
 *
 * @flags:      in, at most one of
 *              GPUSLOT_RESERVE_WAIT     wait until the budget holds @count;
 *              GPUSLOT_RESERVE_DEADLINE wait until CLOCK_MONOTONIC reaches
 *                                       @deadline_ns at most, then fail
 *                                       with ETIMEDOUT.
 *              Neither: fail with ENOSPC at once. Waiters are served in
 *              strict FIFO order, and a request that does not wait never
 *              overtakes a waiting one.
 * @deadline_ns: in, absolute CLOCK_MONOTONIC ns; must be 0 unless
 *              RESERVE_DEADLINE.
 * @count:      in, queues to add, 1 .. the domain's limit (EINVAL
 *              otherwise: such a request could never be served).
 * @reserved:   out, this file's reservation after the call.
 * @hqd_used:   out, the domain's reserved total after the call.
 * @hqd_limit:  out, the domain's limit.
 *
 * Errors: ENOSPC the budget cannot hold @count now (the library turns it
 * into a message naming who holds the budget), or a waiting request no
 * longer fits under a lowered limit, or (WAIT, DEADLINE) 1024 requests
 * wait in the domain already, or 256 of the caller's real uid; ETIMEDOUT
 * (a deadline already past: one try); EINTR a signal, as for ACQUIRE
 * (SA_RESTART restarts the wait, at the back of the queue, with the same
 * deadline). When @reserved cannot be
 * written back (EFAULT), exactly the @count this call added is returned
 * (at most what the file still holds, should another thread of it have
 * returned some meanwhile).
 * Everything a file reserved returns when its last descriptor closes.
 */
#define GPUSLOT_RESERVE_WAIT	_BITUL(0)
#define GPUSLOT_RESERVE_DEADLINE	_BITUL(1)

struct gpuslot_reserve_queues {
	__u32 size;
	__u32 flags;
	__u64 deadline_ns;
	__u32 count;
	__u32 reserved;
	__u32 hqd_used;
	__u32 hqd_limit;
};

/*
 * GPUSLOT_IOC_UNRESERVE_QUEUES - return @count of this file's queues.
 * @count:    in, 1 .. this file's reservation (EINVAL otherwise).
 * @reserved: out, this file's reservation after the call.
 */
struct gpuslot_unreserve_queues {
	__u32 size;
	__u32 count;
	__u32 reserved;
	__u32 __reserved;
};

/*
 * Partitions: what part of the GPU each slot's work may use.
 *
 * A partition is a bitmap of units; the layout says what a unit is:
 *   GPUSLOT_UNIT_NONE         no partitions; every slot uses the whole GPU.
 *   GPUSLOT_UNIT_AMD_CU       bit i is bit i of a HIP CU mask, in amdkfd's
 *                             flat order (not a physical CU number);
 *                             unit_size is 1.
 *   GPUSLOT_UNIT_NV_SM_GROUP  bit i is group i of a deterministic split of
 *                             the SMs into groups of unit_size SMs.
 * A partition whose bitmap is all zero stands for the whole GPU.
 *
 * Each slot also has a priority (see GPUSLOT_MAX_SLOT_PRIORITY). Two
 * partitions may share units only when their priorities differ: the GPU
 * then orders their work by priority where they meet, which is what an
 * overlapping layout is for (a high-priority slot on most of the GPU
 * beside confined low-priority slots that leave it SMs always free).
 * Partitions that overlap at the same priority isolate nothing and are
 * refused. A slot on the whole GPU is the "no partition" case, as it always
 * was: it may sit beside any other slot, at any priority.
 */
#define GPUSLOT_MAX_UNITS	1024
#define GPUSLOT_UNIT_WORDS	(GPUSLOT_MAX_UNITS / 64)

#define GPUSLOT_UNIT_NONE		0
#define GPUSLOT_UNIT_AMD_CU		1
#define GPUSLOT_UNIT_NV_SM_GROUP	2

struct gpuslot_partition {
	__u64 units[GPUSLOT_UNIT_WORDS];
};

/*
 * GPUSLOT_IOC_SET_LAYOUT - set k, the partitions and the queue budget of
 * the attached domain in one step. Needs CAP_SYS_ADMIN (EPERM). Waiters and
 * holders see one change: the generation increments once if k or a
 * partition changed (not for the same layout again, so clients do not
 * rebuild their GPU queues for nothing), and slots >= k retire as with
 * SET_K.
 * GPUSLOT_IOC_GET_LAYOUT - read them back (any user).
 *
 * @flags:         in, SET: GPUSLOT_LAYOUT_MAX_HOLD sets @max_hold_ms too;
 *                 GPUSLOT_LAYOUT_EXPECT_GENERATION applies the layout only
 *                 if the generation is still @expected_generation (EAGAIN,
 *                 nothing changed, otherwise: someone else changed the
 *                 layout since the caller read it). GET: 0.
 * @k:             SET in, 1 .. GPUSLOT_MAX_SLOTS; GET out.
 * @unit_kind:     SET in, a GPUSLOT_UNIT_* value; GET out.
 * @unit_size:     SET in, 1 for AMD_CU, the SMs of a group for
 *                 NV_SM_GROUP, 0 for NONE; GET out.
 * @nr_units:      SET in, the units the GPU has, 1 .. GPUSLOT_MAX_UNITS
 *                 (0 for NONE); no partition may use a unit at or past it.
 *                 GET out.
 * @hqd_limit:     SET in, 0 keeps the current limit, else 1 ..
 *                 GPUSLOT_MAX_HQD; GET out.
 * @nr_partitions: SET in, k (or 0 with unit kind NONE). GET in, how many
 *                 struct gpuslot_partition @partitions has room for; the
 *                 kernel writes min(k, @nr_partitions) of them.
 * @partitions:    in, a user pointer to an array of struct
 *                 gpuslot_partition, one per slot from slot 0.
 * @generation:    out, the generation after SET, or the current one.
 * @max_hold_ms:   SET in with GPUSLOT_LAYOUT_MAX_HOLD, 0 ..
 *                 GPUSLOT_MAX_MAX_HOLD_MS; GET out (since size 56).
 * @expected_generation: SET in with GPUSLOT_LAYOUT_EXPECT_GENERATION, else
 *                 0; GET ignores it, whatever it holds (since size 64).
 * @priority:      SET in, slot i's priority, 0 .. GPUSLOT_MAX_SLOT_PRIORITY,
 *                 for i < k; entries from k on must be 0. GET out, zero
 *                 from k on (since size 128, API 2; a shorter SET sets
 *                 every slot to 0). A change of priority alone is a new
 *                 generation: clients make their streams again.
 *
 * SET fails with EINVAL, changing nothing, when a field is out of range
 * (a priority too), a partition uses a unit at or past @nr_units, a
 * partition is given with unit kind NONE, or two partitions that are both
 * not the whole GPU share a unit at the same priority: they would not be
 * isolated from each other.
 */
#define GPUSLOT_LAYOUT_MAX_HOLD		_BITUL(0)
#define GPUSLOT_LAYOUT_EXPECT_GENERATION	_BITUL(1)

struct gpuslot_layout {
	__u32 size;
	__u32 flags;
	__u32 k;
	__u32 unit_kind;
	__u32 unit_size;
	__u32 nr_units;
	__u32 hqd_limit;
	__u32 nr_partitions;
	__u64 partitions;
	__u64 generation;
	__u32 max_hold_ms;
	__u32 __reserved;
	__u64 expected_generation;
	__u8 priority[GPUSLOT_MAX_SLOTS];
};

/*
 * Preemptive slots (API 2, GPUSLOT_FEATURE_WORK): while a slot of higher
 * priority has GPU work pending, the lower slots of its domain hold their
 * launches back (at most a few commands in flight: gpuslot-run's launch
 * queue does it). The lock says which slots have work; it cannot see the
 * GPU, so the holder tells it.
 *
 * GPUSLOT_IOC_SET_WORK - the holder of this file's slot says whether the
 * slot has GPU work pending: @flags GPUSLOT_WORK_PENDING when it submits
 * the first command of a job, 0 when that work has drained (a
 * synchronization returned). Two calls per job, never per kernel. The end
 * of the hold (release, close, the holder's death, a slot retired by k)
 * clears it. Errors: EPERM the file holds no completed slot; EINVAL
 * unknown flag bits.
 *
 * The preemption budget bounds what a slot's work may hold back: a token
 * bucket per slot of preempt_window_ms x preempt_share % of the domain's
 * sysfs, refilled at preempt_share % of real time, drained while the slot
 * preempts. A slot whose bucket is empty still has work (work_mask) but
 * no longer preempts (preempt_mask) until its holder reports the work
 * drained and its bucket holds again; a periodic task within the share
 * preempts every job, one that never stops preempts for the share only.
 */
#define GPUSLOT_WORK_PENDING	_BITUL(0)

struct gpuslot_set_work {
	__u32 size;
	__u32 flags;
};

/*
 * The work state page: mmap(NULL, GPUSLOT_WORK_STATE_SIZE, PROT_READ,
 * MAP_SHARED, fd, 0) on a /dev/gpuslot file maps its attached domain's
 * state, read-only, for any member (EPERM for a writable mapping, EINVAL
 * for another offset or a length past one page). The mapping keeps the
 * domain it was made on. Only the module writes it; gpuslotd serves the
 * same struct in a sealed read-only memfd (F_SEAL_FUTURE_WRITE).
 *
 * @seq: even when stable, odd while written. Read: s = @seq (acquire);
 *       copy the fields; a read barrier; retry if s was odd or @seq != s.
 * @version: GPUSLOT_WORK_STATE_VERSION.
 * @generation, @k, @held_mask: as DOMAIN_INFO says them.
 * @work_mask: slots whose holder reported work pending.
 * @preempt_mask: the slots of @work_mask within their preemption budget:
 *       the ones lower slots yield to.
 * @preempt_level: 0 when @preempt_mask is empty, else 1 + the highest
 *       priority among its slots: a slot of priority p yields while
 *       @preempt_level > p + 1.
 * @updates: incremented by every change.
 * @priority: the slots' priorities, as GET_LAYOUT says them.
 */
#define GPUSLOT_WORK_STATE_VERSION	1
#define GPUSLOT_WORK_STATE_SIZE		4096

struct gpuslot_work_state {
	__u32 seq;
	__u32 version;
	__u64 generation;
	__u32 k;
	__u32 preempt_level;
	__u64 held_mask;
	__u64 work_mask;
	__u64 preempt_mask;
	__u64 updates;
	__u8 priority[GPUSLOT_MAX_SLOTS];
};

/*
 * Size of the first published version of each struct: the smallest size a
 * caller may pass. Later versions only append members.
 */
#define GPUSLOT_VERSION_SIZE_VER0	24
#define GPUSLOT_ATTACH_SIZE_VER0	8
#define GPUSLOT_ACQUIRE_SIZE_VER0	40
#define GPUSLOT_RELEASE_SIZE_VER0	16
#define GPUSLOT_SET_K_SIZE_VER0		16
#define GPUSLOT_DOMAIN_INFO_SIZE_VER0	40
#define GPUSLOT_STATS_SIZE_VER0		320
#define GPUSLOT_RESERVE_QUEUES_SIZE_VER0	32
#define GPUSLOT_UNRESERVE_QUEUES_SIZE_VER0	16
#define GPUSLOT_LAYOUT_SIZE_VER0	48
#define GPUSLOT_SET_WORK_SIZE_VER0	8

/*
 * The direction says what the kernel reads and writes of the struct: _IOWR
 * for commands with out members, _IOW for those that only read it.
 */
#define GPUSLOT_IOC(dir, nr, ver0)	_IOC(dir, GPUSLOT_IOC_MAGIC, nr, ver0)
#define GPUSLOT_RW	(_IOC_READ | _IOC_WRITE)

#define GPUSLOT_IOC_VERSION	GPUSLOT_IOC(GPUSLOT_RW, 0x00, GPUSLOT_VERSION_SIZE_VER0)
#define GPUSLOT_IOC_ATTACH	GPUSLOT_IOC(_IOC_WRITE, 0x01, GPUSLOT_ATTACH_SIZE_VER0)
#define GPUSLOT_IOC_ACQUIRE	GPUSLOT_IOC(GPUSLOT_RW, 0x02, GPUSLOT_ACQUIRE_SIZE_VER0)
#define GPUSLOT_IOC_RELEASE	GPUSLOT_IOC(GPUSLOT_RW, 0x03, GPUSLOT_RELEASE_SIZE_VER0)
#define GPUSLOT_IOC_SET_K	GPUSLOT_IOC(GPUSLOT_RW, 0x04, GPUSLOT_SET_K_SIZE_VER0)
#define GPUSLOT_IOC_DOMAIN_INFO	GPUSLOT_IOC(GPUSLOT_RW, 0x05, GPUSLOT_DOMAIN_INFO_SIZE_VER0)
#define GPUSLOT_IOC_GET_STATS	GPUSLOT_IOC(GPUSLOT_RW, 0x06, GPUSLOT_STATS_SIZE_VER0)
#define GPUSLOT_IOC_RESERVE_QUEUES \
	GPUSLOT_IOC(GPUSLOT_RW, 0x07, GPUSLOT_RESERVE_QUEUES_SIZE_VER0)
#define GPUSLOT_IOC_UNRESERVE_QUEUES \
	GPUSLOT_IOC(GPUSLOT_RW, 0x08, GPUSLOT_UNRESERVE_QUEUES_SIZE_VER0)
#define GPUSLOT_IOC_SET_LAYOUT	GPUSLOT_IOC(GPUSLOT_RW, 0x09, GPUSLOT_LAYOUT_SIZE_VER0)
#define GPUSLOT_IOC_GET_LAYOUT	GPUSLOT_IOC(GPUSLOT_RW, 0x0A, GPUSLOT_LAYOUT_SIZE_VER0)
#define GPUSLOT_IOC_ACQUIRE_ASYNC \
	GPUSLOT_IOC(_IOC_WRITE, 0x0B, GPUSLOT_ACQUIRE_SIZE_VER0)
#define GPUSLOT_IOC_ACQUIRE_COMPLETE \
	GPUSLOT_IOC(GPUSLOT_RW, 0x0C, GPUSLOT_ACQUIRE_SIZE_VER0)
#define GPUSLOT_IOC_ACQUIRE_CANCEL \
	GPUSLOT_IOC(GPUSLOT_RW, 0x0D, GPUSLOT_RELEASE_SIZE_VER0)
#define GPUSLOT_IOC_SET_WORK \
	GPUSLOT_IOC(_IOC_WRITE, 0x0E, GPUSLOT_SET_WORK_SIZE_VER0)

/*
 * VERSION as API 1 numbered it. Every module answers it, so that a library
 * can tell an older module (ENOTTY to GPUSLOT_IOC_VERSION, api_version 1
 * here) from no module, and say what to upgrade.
 */
#define GPUSLOT_IOC_VERSION_LEGACY	_IO(GPUSLOT_IOC_MAGIC, 0x00)

#endif /* _UAPI_LINUX_GPUSLOT_H */
