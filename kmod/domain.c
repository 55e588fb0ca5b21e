// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot domains, one per GPU: their lifetime (a struct device of class
 * gpuslot, a child of the misc device), the files attached to them, and
 * the settings of a domain that change its layout (k, the partitions) or
 * its lock (the boost priority). The lock itself is lock.c's.
 */
#include <linux/bitops.h>
#include <linux/device.h>
#include <linux/nospec.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "async.h"
#include "boost_sched.h"
#include "compat.h"
#include "debugfs.h"
#include "domain.h"
#include "hqd.h"
#include "lock.h"
#include "sysfs.h"

static struct gpuslot_domain *gpuslot_domains[GPUSLOT_MAX_DOMAINS];
static unsigned int gpuslot_domain_count;

unsigned int gpuslot_nr_domains(void)
{
	return gpuslot_domain_count;
}

/* @id comes from userspace (ATTACH): no speculative read past the table. */
struct gpuslot_domain *gpuslot_domain_get(unsigned int id)
{
	unsigned int nr = gpuslot_domain_count;

	if (id >= nr)
		return NULL;
	return gpuslot_domains[array_index_nospec(id, nr)];
}

/* The last reference to the domain's device is gone. */
static void gpuslot_domain_release(struct device *dev)
{
	struct gpuslot_domain *d = gpuslot_dev_domain(dev);

	gpuslot_work_destroy(d);
	kfree(d->staged);
	kfree(d);
}

int gpuslot_domains_create(unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		struct gpuslot_domain *d = kzalloc(sizeof(*d), GFP_KERNEL);

		if (!d) {
			gpuslot_domains_destroy();
			return -ENOMEM;
		}
		d->id = i;
		spin_lock_init(&d->lock);
		gpuslot_core_init(&d->core, 1);
		gpuslot_budget_init(&d->budget, GPUSLOT_DEFAULT_HQD_LIMIT);
		INIT_LIST_HEAD(&d->hqd_files);
		d->boost_priority = GPUSLOT_BOOST_PRIORITY_DEFAULT;
		d->max_hold_ms = GPUSLOT_DEFAULT_MAX_HOLD_MS;
		d->max_boost_share = GPUSLOT_DEFAULT_MAX_BOOST_SHARE;
		mutex_init(&d->stage_lock);
		if (gpuslot_work_init(d)) {
			kfree(d);
			gpuslot_domains_destroy();
			return -ENOMEM;
		}
		/* From here on the device's release frees @d. */
		device_initialize(&d->dev);
		d->dev.release = gpuslot_domain_release;
		gpuslot_domains[i] = d;
		gpuslot_domain_count = i + 1;
	}
	return 0;
}

static unsigned int gpuslot_domains_published;

int gpuslot_domains_publish(struct device *parent)
{
	int ret;

	while (gpuslot_domains_published < gpuslot_domain_count) {
		struct gpuslot_domain *d =
			gpuslot_domains[gpuslot_domains_published];

		gpuslot_sysfs_init_device(d, parent);
		ret = dev_set_name(&d->dev, "gpu%u", d->id);
		if (!ret)
			ret = device_add(&d->dev);
		if (ret) {
			gpuslot_domains_unpublish();
			return ret;
		}
		gpuslot_debugfs_add(d);
		gpuslot_domains_published++;
	}
	return 0;
}

void gpuslot_domains_unpublish(void)
{
	while (gpuslot_domains_published) {
		struct gpuslot_domain *d =
			gpuslot_domains[--gpuslot_domains_published];

		gpuslot_debugfs_remove(d);
		device_del(&d->dev);
	}
}

void gpuslot_domains_destroy(void)
{
	while (gpuslot_domain_count) {
		unsigned int i = --gpuslot_domain_count;

		put_device(&gpuslot_domains[i]->dev);
		gpuslot_domains[i] = NULL;
	}
}

struct gpuslot_domain *gpuslot_file_lock(struct gpuslot_file *f)
	__acquires(&d->lock)
{
	struct gpuslot_domain *d;

	for (;;) {
		d = READ_ONCE(f->domain);
		spin_lock(&d->lock);
		if (likely(d == READ_ONCE(f->domain)))
			return d;
		spin_unlock(&d->lock);
	}
}

void gpuslot_file_init(struct gpuslot_file *f)
{
	f->domain = gpuslot_domains[0];
	f->state = GPUSLOT_FILE_IDLE;
	INIT_LIST_HEAD(&f->hqd_node);
	gpuslot_file_boost_init(f);
	f->async.file = f;
	INIT_LIST_HEAD(&f->async.core.node);
	init_waitqueue_head(&f->async_wq);
}

int gpuslot_file_attach(struct gpuslot_file *f, unsigned int id)
{
	struct gpuslot_domain *to = gpuslot_domain_get(id);
	struct gpuslot_domain *d;
	int ret = 0;

	if (!to)
		return -EINVAL;
	d = gpuslot_file_lock(f);
	/* Lock state and queue reservations belong to the old domain. */
	if (f->state != GPUSLOT_FILE_IDLE || f->async_error ||
	    f->hqd_reserved || f->hqd_waiting)
		ret = -EBUSY;
	else
		WRITE_ONCE(f->domain, to);
	spin_unlock(&d->lock);
	return ret;
}

void gpuslot_file_cleanup(struct gpuslot_file *f)
{
	struct gpuslot_domain *d = gpuslot_file_lock(f);
	LIST_HEAD(done);

	/* No ioctl runs on a file being released: it cannot be ACQUIRING. */
	if (f->state == GPUSLOT_FILE_HOLDING ||
	    f->state == GPUSLOT_FILE_GRANTED)
		gpuslot_release_locked(d, f, &done);
	gpuslot_async_cleanup_locked(d, f);
	gpuslot_hqd_cleanup_locked(d, f);
	spin_unlock(&d->lock);
	gpuslot_finish_handoffs(d, &done);

	/* Idle now: the work cannot arm the clock again. */
	gpuslot_overrun_sync(f);
	gpuslot_file_unpinned(f);
	gpuslot_file_unboost(f, U64_MAX);
}

static const char *const gpuslot_file_state_names[] = {
	[GPUSLOT_FILE_IDLE] = "idle",
	[GPUSLOT_FILE_ACQUIRING] = "waiting",
	[GPUSLOT_FILE_HOLDING] = "held",
	[GPUSLOT_FILE_QUEUED] = "async-waiting",
	[GPUSLOT_FILE_GRANTED] = "pending",
};

void gpuslot_file_show_fdinfo(struct seq_file *m, struct gpuslot_file *f)
{
	struct gpuslot_domain *d = gpuslot_file_lock(f);
	enum gpuslot_file_state state = f->state;
	unsigned int id = d->id, slot = f->slot;
	unsigned int reserved = f->hqd_reserved, asked = f->hqd_asked;
	u64 generation = f->hold_generation;
	enum gpuslot_boost_refusal refusal =
		f->state == GPUSLOT_FILE_HOLDING &&
		f->boost_refused_seq == f->hold_seq ? f->boost_refusal :
						      GPUSLOT_BOOST_ALLOWED;
	u64 allowed = state == GPUSLOT_FILE_QUEUED ? f->async.core.allowed :
						     f->wait_allowed;
	bool work = gpuslot_work_file_pending_locked(d, f);

	spin_unlock(&d->lock);
	seq_printf(m, "gpuslot-domain:\t%u\n", id);
	seq_printf(m, "gpuslot-state:\t%s\n", gpuslot_file_state_names[state]);
	if (state == GPUSLOT_FILE_HOLDING || state == GPUSLOT_FILE_GRANTED) {
		seq_printf(m, "gpuslot-slot:\t%u\n", slot);
		seq_printf(m, "gpuslot-generation:\t%llu\n", generation);
	} else {
		seq_puts(m, "gpuslot-slot:\t-\ngpuslot-generation:\t-\n");
	}
	if (state == GPUSLOT_FILE_ACQUIRING || state == GPUSLOT_FILE_QUEUED)
		seq_printf(m, "gpuslot-allowed-mask:\t0x%llx\n", allowed);
	else
		seq_puts(m, "gpuslot-allowed-mask:\t-\n");
	seq_printf(m, "gpuslot-hqd-reserved:\t%u\n", reserved);
	seq_printf(m, "gpuslot-hqd-waiting:\t%u\n", asked);
	/* Why the current hold runs unboosted, where a policy said no. */
	seq_printf(m, "gpuslot-boost-refused:\t%s\n",
		   gpuslot_boost_refusal_name(refusal));
	/* What this file's hold said of its GPU work (SET_WORK). */
	seq_printf(m, "gpuslot-work:\t%s\n", work ? "pending" : "none");
}

int gpuslot_file_domain_info(struct gpuslot_file *f,
			     struct gpuslot_domain_info *info)
{
	struct gpuslot_domain *d = gpuslot_file_lock(f);

	info->domain = d->id;
	info->k = d->core.k;
	info->boost_priority = d->boost_priority;
	info->nr_holders = hweight64(d->core.held);
	info->nr_waiters = d->core.nr_waiters;
	info->held_mask = d->core.held;
	info->generation = d->core.generation;
	info->hqd_limit = d->budget.limit;
	info->hqd_used = d->budget.used;
	spin_unlock(&d->lock);
	return 0;
}

void gpuslot_domain_counters(struct gpuslot_domain *d,
			     struct gpuslot_counters *out)
{
	spin_lock(&d->lock);
	*out = d->counters;
	spin_unlock(&d->lock);
}

int gpuslot_file_stats(struct gpuslot_file *f, struct gpuslot_stats *s)
{
	struct gpuslot_counters c;

	if (s->__reserved)
		return -EINVAL;
	gpuslot_domain_counters(READ_ONCE(f->domain), &c);
	s->acquisitions = c.acquisitions;
	s->contended = c.contended;
	s->timeouts = c.timeouts;
	s->interrupted = c.interrupted;
	s->total_wait_ns = c.total_wait_ns;
	s->max_wait_ns = c.max_wait_ns;
	s->max_hold_ns = c.max_hold_ns;
	s->overruns = c.overruns;
	BUILD_BUG_ON(sizeof(s->wait_hist) != sizeof(c.wait_hist));
	memcpy(s->wait_hist, c.wait_hist, sizeof(s->wait_hist));
	return 0;
}

void gpuslot_domain_notify_layout(struct gpuslot_domain *d)
{
	/* Lets gpuslotd and clients poll() instead of re-reading. */
	sysfs_notify(&d->dev.kobj, NULL, "k");
	sysfs_notify(&d->dev.kobj, NULL, "generation");
}

int gpuslot_domain_set_k(struct gpuslot_domain *d, unsigned int k,
			 u64 *generation)
{
	LIST_HEAD(done);
	bool changed;

	if (k < 1 || k > GPUSLOT_MAX_SLOTS)
		return -EINVAL;
	spin_lock(&d->lock);
	changed = gpuslot_core_set_k(&d->core, k, &done);
	/* Partitions planned for the old k are the daemon's to redo. */
	if (gpuslot_partitions_reset(&d->parts) && !changed) {
		gpuslot_core_new_generation(&d->core);
		changed = true;
	}
	/* Retired slots lose their work before their waiters hear of it. */
	if (changed)
		gpuslot_work_layout_locked(d);
	gpuslot_wake_done(d, &done, gpuslot_clock_ns());
	if (generation)
		*generation = d->core.generation;
	spin_unlock(&d->lock);
	gpuslot_finish_handoffs(d, &done);

	if (changed)
		gpuslot_domain_notify_layout(d);
	return 0;
}

int gpuslot_domain_set_layout(struct gpuslot_domain *d, unsigned int k,
			      const struct gpuslot_partitions *parts,
			      unsigned int hqd_limit, const u64 *expected,
			      u64 *generation)
{
	LIST_HEAD(done);
	bool hqd_changed = false;
	bool changed;

	spin_lock(&d->lock);
	/* Someone changed the layout since the caller read it. */
	if (expected && *expected != d->core.generation) {
		*generation = d->core.generation;
		spin_unlock(&d->lock);
		return -EAGAIN;
	}
	/*
	 * The same layout again is no new generation: clients rebuild their
	 * GPU streams on a new one, which preempts every queue on the GPU.
	 */
	changed = memcmp(&d->parts, parts, sizeof(*parts));
	if (changed)
		d->parts = *parts;
	if (gpuslot_core_set_k(&d->core, k, &done))
		changed = true;
	else if (changed)
		gpuslot_core_new_generation(&d->core);
	if (changed)
		gpuslot_work_layout_locked(d);
	gpuslot_wake_done(d, &done, gpuslot_clock_ns());
	if (hqd_limit)
		hqd_changed = gpuslot_hqd_set_limit_locked(d, hqd_limit);
	*generation = d->core.generation;
	spin_unlock(&d->lock);
	gpuslot_finish_handoffs(d, &done);

	if (changed)
		gpuslot_domain_notify_layout(d);
	if (hqd_changed)
		sysfs_notify(&d->dev.kobj, NULL, "hqd_limit");
	return 0;
}

int gpuslot_domain_set_boost_priority(struct gpuslot_domain *d,
				      unsigned int prio)
{
	int ret;

	/*
	 * The expiry of max_hold_ms runs above every boost (boost_sched.c);
	 * some kernels can set one boost priority only (compat.h).
	 */
	if (prio > GPUSLOT_BOOST_PRIORITY_LIMIT)
		return -EINVAL;
	ret = gpuslot_boost_ceiling(prio);
	if (ret)
		return ret;
	spin_lock(&d->lock);
	d->boost_priority = prio;
	spin_unlock(&d->lock);
	return 0;
}

unsigned int gpuslot_domain_k(struct gpuslot_domain *d)
{
	unsigned int k;

	spin_lock(&d->lock);
	k = d->core.k;
	spin_unlock(&d->lock);
	return k;
}

u64 gpuslot_domain_generation(struct gpuslot_domain *d)
{
	u64 gen;

	spin_lock(&d->lock);
	gen = d->core.generation;
	spin_unlock(&d->lock);
	return gen;
}

unsigned int gpuslot_domain_boost_priority(struct gpuslot_domain *d)
{
	return READ_ONCE(d->boost_priority);
}
