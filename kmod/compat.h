/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What differs between the kernels gpuslot builds for, in one place: each
 * helper is keyed on LINUX_VERSION_CODE or on a config option the headers
 * define, so that the rest of the module has no #ifdef of its own.
 *
 * Known and not handled here (yet):
 * - 5.10 (Debian 11, JetPack 5) does not export sched_setattr_nocheck(),
 *   the only call that restores a task's exact policy; it exports
 *   sched_set_fifo() (priority 50) and sched_set_normal() only. The module
 *   does not build there: what the boost should do on 5.10 is open
 *   (issue 37).
 */
#ifndef GPUSLOT_COMPAT_H
#define GPUSLOT_COMPAT_H

#include <linux/cgroup.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/nsproxy.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/time_namespace.h>
#include <linux/version.h>

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
