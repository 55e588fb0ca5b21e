/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What differs between the kernels gpuslot builds for, in one place: each
 * helper is keyed on LINUX_VERSION_CODE or on a config option the headers
 * define, so that the rest of the module has no #ifdef of its own.
 * The exceptions are keyed on the kernel's Module.symvers (kmod/Kbuild):
 * whether sched_setattr_nocheck(), has_capability_noaudit() and
 * has_capability() are exported, which no header says.
 *
 * Checked on Debian's 5.10 (Debian 11), 6.1, 6.1-rt, 6.12 and the 7.x of
 * Debian 13's backports, generic and -rt (docs/testing.md).
 */
#ifndef GPUSLOT_COMPAT_H
#define GPUSLOT_COMPAT_H

#include <linux/bitmap.h>
#include <linux/capability.h>
#include <linux/cgroup.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/nsproxy.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/time_namespace.h>
#include <linux/user_namespace.h>
#include <linux/version.h>
#include <uapi/linux/gpuslot.h>
#include <uapi/linux/sched/types.h>

/*
 * Setting a task's scheduling policy. sched_setattr_nocheck() is the only
 * export that sets any policy and priority, and SCHED_FLAG_RESET_ON_FORK.
 * Where it is missing (5.10: Debian 11, JetPack 5), the kernel exports
 * only sched_set_fifo() (SCHED_FIFO 50), sched_set_fifo_low() (SCHED_FIFO
 * 1) and sched_set_normal(p, nice) (SCHED_NORMAL at that nice), and each
 * clears the task's reset-on-fork. The boost there (docs/ABI.md):
 * - is SCHED_FIFO 1, the one boost priority the expiry worker can run
 *   above: it runs at SCHED_FIFO 50. boost_priority is 0 or 1 (1 by
 *   default), and waiters lend nothing above 1;
 * - goes only to a thread whose own policy sched_set_normal() restores
 *   exactly: SCHED_NORMAL without reset-on-fork (any nice). A real-time
 *   thread is at 1 or above already: it needs no boost;
 * - goes only to a thread that could make itself real-time anyway
 *   (CAP_SYS_NICE in the initial user namespace): without reset-on-fork, a
 *   child forked while the boost lasts keeps SCHED_FIFO 1, with neither
 *   budget nor restore.
 * The rest is refused, and counted in boosts_refused.
 */
#ifdef GPUSLOT_HAVE_SCHED_SETATTR_NOCHECK
#define GPUSLOT_BOOST_PRIORITY_LIMIT	GPUSLOT_MAX_BOOST_PRIORITY
#define GPUSLOT_BOOST_PRIORITY_DEFAULT	GPUSLOT_DEFAULT_BOOST_PRIORITY
#else
#define GPUSLOT_BOOST_PRIORITY_LIMIT	1
#define GPUSLOT_BOOST_PRIORITY_DEFAULT	1
#endif

static inline int gpuslot_sched_setattr(struct task_struct *p,
					const struct sched_attr *attr)
{
#ifdef GPUSLOT_HAVE_SCHED_SETATTR_NOCHECK
	return sched_setattr_nocheck(p, attr);
#else
	bool fifo = attr->sched_policy == SCHED_FIFO;

	/* A boost asks for reset-on-fork: gpuslot_sched_boost_refused(). */
	if (fifo && attr->sched_priority == 1)
		sched_set_fifo_low(p);
	else if (fifo && attr->sched_priority == MAX_RT_PRIO / 2)
		sched_set_fifo(p);
	else if (attr->sched_policy == SCHED_NORMAL &&
		 !(attr->sched_flags & SCHED_FLAG_RESET_ON_FORK))
		sched_set_normal(p, attr->sched_nice);
	else if (attr->sched_policy != SCHED_FIFO &&
		 attr->sched_policy != SCHED_RR &&
		 attr->sched_policy != SCHED_DEADLINE)
		/*
		 * SCHED_BATCH, SCHED_IDLE or reset-on-fork, which the boost
		 * refuses, saved all the same where another thread changed
		 * the policy between the save and the refusal's look: the
		 * nearest this kernel can set, never left real-time.
		 */
		sched_set_normal(p, attr->sched_nice);
	else
		return -EOPNOTSUPP;
	return 0;
#endif
}

/*
 * The SCHED_FIFO priority the expiry worker runs at to preempt every hold
 * boosted to @boost or less: one above; where only 1 and 50 can be set, 50.
 */
static inline unsigned int gpuslot_sched_prio_above(unsigned int boost)
{
#ifdef GPUSLOT_HAVE_SCHED_SETATTR_NOCHECK
	return boost + 1;
#else
	return MAX_RT_PRIO / 2;
#endif
}

/*
 * Whether @p has @cap in the initial user namespace, not audited (a
 * refused boost is no denial to log), as the LSMs see it. Not every kernel
 * exports a check of another task's capability: 5.10 has only
 * has_capability() (audited: an LSM may log the check), 7.x none
 * (has_capability_noaudit() is declared, not exported). The current task
 * is asked through ns_capable_noaudit(), exported everywhere; another
 * task, where nothing can ask, is taken to lack @cap: its boost is
 * refused, never given on a guess.
 */
static inline bool gpuslot_has_capability_noaudit(struct task_struct *p,
						  int cap)
{
#if defined(GPUSLOT_HAVE_HAS_CAPABILITY_NOAUDIT)
	return has_capability_noaudit(p, cap);
#else
	if (p == current)
		return ns_capable_noaudit(&init_user_ns, cap);
#if defined(GPUSLOT_HAVE_HAS_CAPABILITY)
	return has_capability(p, cap);
#else
	return false;
#endif
#endif
}

/* Whether the boost must pass @p by on this kernel (see above). */
static inline bool gpuslot_sched_boost_refused(struct task_struct *p)
{
#ifdef GPUSLOT_HAVE_SCHED_SETATTR_NOCHECK
	return false;
#else
	return READ_ONCE(p->policy) != SCHED_NORMAL || p->sched_reset_on_fork ||
	       !gpuslot_has_capability_noaudit(p, CAP_SYS_NICE);
#endif
}

/*
 * bitmap_from_arr64() and bitmap_to_arr64() came in 5.19; before, bit by
 * bit (a layout's bitmaps are GPUSLOT_MAX_UNITS bits, set by an admin).
 */
static inline void gpuslot_bitmap_from_arr64(unsigned long *bitmap,
					     const u64 *buf, unsigned int nbits)
{
#if KERNEL_VERSION(5, 19, 0) <= LINUX_VERSION_CODE
	bitmap_from_arr64(bitmap, buf, nbits);
#else
	unsigned int i;

	bitmap_zero(bitmap, nbits);
	for (i = 0; i < nbits; i++)
		if (buf[i / 64] & BIT_ULL(i % 64))
			__set_bit(i, bitmap);
#endif
}

static inline void gpuslot_bitmap_to_arr64(u64 *buf,
					   const unsigned long *bitmap,
					   unsigned int nbits)
{
#if KERNEL_VERSION(5, 19, 0) <= LINUX_VERSION_CODE
	bitmap_to_arr64(buf, bitmap, nbits);
#else
	unsigned int i;

	memset(buf, 0, DIV_ROUND_UP(nbits, 64) * sizeof(u64));
	for_each_set_bit(i, bitmap, nbits)
		buf[i / 64] |= BIT_ULL(i % 64);
#endif
}

/*
 * vm_flags became read-only, changed through vm_flags_mod() and its kin,
 * in 6.3.
 */
static inline void gpuslot_vm_flags_mod(struct vm_area_struct *vma,
					vm_flags_t set, vm_flags_t clear)
{
#if KERNEL_VERSION(6, 3, 0) <= LINUX_VERSION_CODE
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

/*
 * hrtimer_init() and setting ->function afterwards were replaced by
 * hrtimer_setup() in 6.13; 6.15 removed hrtimer_init().
 */
static inline void
gpuslot_hrtimer_setup(struct hrtimer *timer,
		      enum hrtimer_restart (*fn)(struct hrtimer *),
		      clockid_t clock_id, enum hrtimer_mode mode)
{
#if KERNEL_VERSION(6, 13, 0) <= LINUX_VERSION_CODE
	hrtimer_setup(timer, fn, clock_id, mode);
#else
	hrtimer_init(timer, clock_id, mode);
	timer->function = fn;
#endif
}

/*
 * An absolute CLOCK_MONOTONIC time read by the calling task, in its time
 * namespace, as the host's CLOCK_MONOTONIC that hrtimers run on: what
 * timens_ktime_to_host() does, whose out-of-line half
 * (do_timens_ktime_to_host()) is not exported. A time before the
 * namespace's offset is before the host's boot: 0, already past, as there.
 */
static inline ktime_t gpuslot_timens_monotonic_to_host(ktime_t t)
{
#ifdef CONFIG_TIME_NS
	struct nsproxy *nsproxy = current->nsproxy;
	ktime_t offset;

	/* NULL only for an exiting task, which calls no ioctl. */
	if (!nsproxy)
		return t;
	offset = timespec64_to_ktime(nsproxy->time_ns->offsets.monotonic);
	if (!offset)
		return t;
	if (offset < 0)	/* no overflow past the far future (KTIME_MAX) */
		return t > KTIME_MAX + offset ? KTIME_MAX : ktime_sub(t, offset);
	return t < offset ? 0 : ktime_sub(t, offset);
#else
	return t;
#endif
}

/*
 * Whether the scheduler would refuse to make @p real-time because its task
 * group has no RT runtime: the check __sched_setscheduler() makes for a
 * user (and sched_setattr_nocheck() skips) under CONFIG_RT_GROUP_SCHED. A
 * task made SCHED_FIFO in such a group is never picked again: it cannot
 * even act on SIGKILL.
 *
 * The group's runtime is read through the cpu controller's own
 * "rt_runtime_us" file (its cftype's read_s64(), as a read of
 * cpu.rt_runtime_us does), on the task's cpu css: task_group() and struct
 * task_group are private to the scheduler. Where it differs from the
 * scheduler it refuses more, never less:
 * - the scheduler lets anything into a zero-runtime group while RT
 *   throttling is off globally (sched_rt_runtime_us = -1); this refuses;
 * - a task in an autogroup (root cgroup, CONFIG_SCHED_AUTOGROUP) is
 *   judged by the root group's runtime, which the scheduler ignores there:
 *   refused only where the root group has none (sched_rt_runtime_us = 0);
 * - should the file not be found (a kernel that renamed or moved it), the
 *   boost is refused and a warning says so once.
 * Checked on 6.1 and 6.12, whose cpu_legacy_files[] have the file.
 */
static inline bool gpuslot_rt_group_refuses(struct task_struct *p)
{
#ifdef CONFIG_RT_GROUP_SCHED
	struct cgroup_subsys_state *css;
	struct cftype *cft;
	bool refuses = true;

	rcu_read_lock();
	css = task_css(p, cpu_cgrp_id);
	for (cft = css->ss->legacy_cftypes; cft && cft->name[0]; cft++) {
		if (strcmp(cft->name, "rt_runtime_us") || !cft->read_s64)
			continue;
		/* -1: unlimited. */
		refuses = cft->read_s64(css, cft) == 0;
		break;
	}
	if (!cft || !cft->name[0])
		pr_warn_once("gpuslot: no cpu.rt_runtime_us to check RT group runtime against: no boost\n");
	rcu_read_unlock();
	return refuses;
#else
	return false;
#endif
}

#endif /* GPUSLOT_COMPAT_H */
