// SPDX-License-Identifier: GPL-2.0
/*
 * Preemptive slots (issue 40): a holder says when its slot has GPU work
 * pending and when it drained (GPUSLOT_IOC_SET_WORK); the module publishes
 * per domain which slots have work and which of them, within their
 * preemption budget (lockcore/preempt.c), the lower slots yield to, in a
 * page every member maps read-only (struct gpuslot_work_state) and reads
 * without a system call per launch. Only the module writes the page: the
 * lock knows who holds which slot, so no member can report work for a
 * slot it does not hold.
 *
 * The page is written under d->lock on every change: a report, the end of
 * a hold for any reason (release, close, the holder's death, which closes
 * its files, an asynchronous grant cancelled), a grant (held_mask), a new
 * k, priorities or generation, and a budget that ran out. The end of a
 * hold clears the slot's work before the core hands the slot on, so that
 * the next holder never inherits its predecessor's claim.
 */
#include <linux/bitops.h>
#include <linux/gfp.h>
#include <linux/math64.h>
#include <linux/mm.h>
#include <linux/timekeeping.h>

#include "boost_sched.h"
#include "compat.h"
#include "domain.h"
#include "work.h"

static u64 gpuslot_work_now(void)
{
	/* The clock the expiry's hrtimer runs on. */
	return ktime_get_ns();
}

/* Arm the timer for the budget's next expiry, or stop it. */
static void gpuslot_work_arm_locked(struct gpuslot_domain *d)
{
	struct gpuslot_work *w = &d->work;
	u64 next = gpuslot_preempt_next_expiry(&w->preempt);

	lockdep_assert_held(&d->lock);
	if (next == w->armed_ns)
		return;
	w->armed_ns = next;
	if (next == U64_MAX) {
		/* Not waiting for it: a late expiry finds nothing to do. */
		hrtimer_try_to_cancel(&w->timer);
		return;
	}
	hrtimer_start(&w->timer, ns_to_ktime(min_t(u64, next, KTIME_MAX)),
		      HRTIMER_MODE_ABS_HARD);
}

void gpuslot_work_publish_locked(struct gpuslot_domain *d)
{
	struct gpuslot_work *w = &d->work;

	lockdep_assert_held(&d->lock);
	/*
	 * Not preempted between the odd and the even seq (d->lock is
	 * preemptible on PREEMPT_RT): a member reading at a higher priority
	 * on this CPU would spin on the odd seq. Nothing here sleeps.
	 */
	preempt_disable();
	gpuslot_preempt_publish(&w->preempt, w->state, d->core.generation,
				d->core.held);
	preempt_enable();
	gpuslot_work_arm_locked(d);
}

void gpuslot_work_hold_ended_locked(struct gpuslot_domain *d,
				    unsigned int slot)
{
	struct gpuslot_preempt *p = &d->work.preempt;

	lockdep_assert_held(&d->lock);
	/* A hold that never reported work costs no clock read. */
	if (slot < GPUSLOT_MAX_SLOTS && p->slot[slot].work)
		gpuslot_preempt_hold_ended(p, slot, gpuslot_work_now());
}

void gpuslot_work_layout_locked(struct gpuslot_domain *d)
{
	lockdep_assert_held(&d->lock);
	gpuslot_preempt_set_layout(&d->work.preempt, d->core.k,
				   d->parts.priority, gpuslot_work_now());
	gpuslot_work_publish_locked(d);
}

bool gpuslot_work_file_pending_locked(struct gpuslot_domain *d,
				      struct gpuslot_file *f)
{
	lockdep_assert_held(&d->lock);
	return f->state == GPUSLOT_FILE_HOLDING &&
	       f->slot < GPUSLOT_MAX_SLOTS && d->work.preempt.slot[f->slot].work;
}

/* A bucket may have run out: settle, and publish what stopped. */
static void gpuslot_work_expire(struct kthread_work *work)
{
	struct gpuslot_domain *d =
		container_of(work, struct gpuslot_domain, work.expire);
	struct gpuslot_preempt *p = &d->work.preempt;
	u64 before, stopped;

	spin_lock(&d->lock);
	before = gpuslot_preempt_preempt_mask(p);
	/* The timer fired: whatever it was armed for is past. */
	d->work.armed_ns = U64_MAX;
	gpuslot_preempt_tick(p, gpuslot_work_now());
	stopped = before & ~gpuslot_preempt_preempt_mask(p);
	if (stopped) {
		d->counters.preempt_expiries += hweight64(stopped);
		gpuslot_work_publish_locked(d);
	} else {
		gpuslot_work_arm_locked(d);
	}
	spin_unlock(&d->lock);
}

static enum hrtimer_restart gpuslot_work_timer(struct hrtimer *timer)
{
	struct gpuslot_domain *d =
		container_of(timer, struct gpuslot_domain, work.timer);

	gpuslot_expiry_queue(&d->work.expire);
	return HRTIMER_NORESTART;
}

int gpuslot_work_init(struct gpuslot_domain *d)
{
	struct gpuslot_work *w = &d->work;
	u64 now = gpuslot_work_now();

	BUILD_BUG_ON(sizeof(struct gpuslot_work_state) > GPUSLOT_WORK_STATE_SIZE);
	BUILD_BUG_ON(GPUSLOT_WORK_STATE_SIZE > PAGE_SIZE);
	w->state = (struct gpuslot_work_state *)get_zeroed_page(GFP_KERNEL);
	if (!w->state)
		return -ENOMEM;
	gpuslot_hrtimer_setup(&w->timer, gpuslot_work_timer, CLOCK_MONOTONIC,
			      HRTIMER_MODE_ABS_HARD);
	kthread_init_work(&w->expire, gpuslot_work_expire);
	w->armed_ns = U64_MAX;
	gpuslot_preempt_init(&w->preempt, GPUSLOT_DEFAULT_PREEMPT_SHARE,
			     GPUSLOT_DEFAULT_PREEMPT_WINDOW_MS, now);
	spin_lock(&d->lock);
	gpuslot_work_layout_locked(d);
	spin_unlock(&d->lock);
	return 0;
}

void gpuslot_work_destroy(struct gpuslot_domain *d)
{
	struct gpuslot_work *w = &d->work;

	if (!w->state)
		return;
	/* The work re-arms the timer only while a held slot preempts: none is. */
	hrtimer_cancel(&w->timer);
	gpuslot_expiry_cancel(&w->expire);
	hrtimer_cancel(&w->timer);
	/* A mapping still open holds a reference of its own to the page. */
	free_page((unsigned long)w->state);
	w->state = NULL;
}

int gpuslot_file_set_work(struct gpuslot_file *f, struct gpuslot_set_work *sw)
{
	struct gpuslot_preempt *p;
	struct gpuslot_domain *d;
	u64 work, preempting;
	int ret = 0;

	if (sw->flags & ~GPUSLOT_WORK_PENDING)
		return -EINVAL;
	d = gpuslot_file_lock(f);
	p = &d->work.preempt;
	/* A grant not completed has no thread known to run its job yet. */
	if (f->state != GPUSLOT_FILE_HOLDING) {
		ret = -EPERM;
		goto unlock;
	}
	work = gpuslot_preempt_work_mask(p);
	preempting = gpuslot_preempt_preempt_mask(p);
	gpuslot_preempt_set_work(p, f->slot, sw->flags & GPUSLOT_WORK_PENDING,
				 gpuslot_work_now());
	/* The same report again is no change: @updates counts changes. */
	if (work != gpuslot_preempt_work_mask(p) ||
	    preempting != gpuslot_preempt_preempt_mask(p))
		gpuslot_work_publish_locked(d);
unlock:
	spin_unlock(&d->lock);
	return ret;
}

int gpuslot_file_mmap(struct gpuslot_file *f, struct vm_area_struct *vma)
{
	/* Domains live as long as the module, which an open file pins. */
	struct gpuslot_domain *d = READ_ONCE(f->domain);

	if (vma->vm_pgoff || vma->vm_end - vma->vm_start > PAGE_SIZE)
		return -EINVAL;
	if (vma->vm_flags & (VM_WRITE | VM_EXEC))
		return -EPERM;
	/*
	 * Never writable nor executable: mprotect() cannot add PROT_WRITE
	 * or PROT_EXEC, nor a forced write (ptrace, /proc/pid/mem) go
	 * through; nor may mremap() grow it past the page.
	 */
	gpuslot_vm_flags_mod(vma, VM_DONTEXPAND, VM_MAYWRITE | VM_MAYEXEC);
	/*
	 * The page of the domain attached now, for the mapping's life:
	 * ATTACH later changes what the file locks, not what it maps.
	 */
	return vm_insert_page(vma, vma->vm_start, virt_to_page(d->work.state));
}

unsigned int gpuslot_domain_preempt_share(struct gpuslot_domain *d)
{
	return READ_ONCE(d->work.preempt.share);
}

unsigned int gpuslot_domain_preempt_window_ms(struct gpuslot_domain *d)
{
	unsigned int ms;

	spin_lock(&d->lock);
	ms = div_u64(d->work.preempt.window_ns, NSEC_PER_MSEC);
	spin_unlock(&d->lock);
	return ms;
}

static int gpuslot_work_set_budget(struct gpuslot_domain *d, unsigned int share,
				   unsigned int window_ms, bool keep_share)
{
	struct gpuslot_preempt *p = &d->work.preempt;
	int ret;

	spin_lock(&d->lock);
	if (keep_share)
		share = p->share;
	else
		window_ms = div_u64(p->window_ns, NSEC_PER_MSEC);
	ret = gpuslot_preempt_set_budget(p, share, window_ms,
					 gpuslot_work_now());
	/*
	 * Settling may have stopped a slot whose bucket ran out: publish
	 * (and arm: a smaller bucket runs out sooner), as gpuslotd does.
	 */
	if (!ret)
		gpuslot_work_publish_locked(d);
	spin_unlock(&d->lock);
	return ret;
}

int gpuslot_domain_set_preempt_share(struct gpuslot_domain *d,
				     unsigned int share)
{
	return gpuslot_work_set_budget(d, share, 0, false);
}

int gpuslot_domain_set_preempt_window_ms(struct gpuslot_domain *d,
					 unsigned int ms)
{
	return gpuslot_work_set_budget(d, 0, ms, true);
}
