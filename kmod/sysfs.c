// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot sysfs: one value per file.
 *
 * /sys/class/misc/gpuslot/{api_version,boost_priority_limit}, and per domain a device of class
 * gpuslot, a child of the misc device: /sys/class/gpuslot/gpu<N>/ with
 *
 *   rw  k, boost_priority, max_hold_ms, max_boost_share, hqd_limit,
 *       preempt_share, preempt_window_ms, pci_bus_id
 *   ro  generation, unit_kind, unit_size, nr_units, hqd_used, hqd_waiters,
 *       nr_holders, nr_waiters, held_mask
 *   ro  stats/{acquisitions,contended,timeouts,interrupted,total_wait_ns,
 *       max_wait_ns,max_hold_ns,overruns,boosts_refused,preempt_expiries}
 *   rw  slot<i>/units, slot<i>/priority for i in 0..63 (staged writes)
 *   wo  commit
 *
 * docs/ABI.md describes each file. Tables (holders, waiters, queues, the
 * wait histogram) are debugfs's (debugfs.c), what one open file holds its
 * fdinfo's.
 *
 * All 64 slot<i>/ directories exist whatever k is, and their files fail
 * with ENXIO for a slot at or past k. Showing only the slots below k would
 * take sysfs_update_group() on every change of k, ioctls included, each
 * racing the next one's and removing files an admin may be writing; a
 * fixed set of files, like a CPU's online file, has neither problem, and
 * gpuslotd's socket serves the same names the same way.
 *
 * Who may write: the VFS checks each file's mode (0644 or 0200, owned by
 * root of the initial user namespace) when it is opened for writing, so no
 * member opens one, not even as root of a user namespace of its own. Each
 * store also checks capable(CAP_SYS_ADMIN) at the write: a file root opened
 * and handed on is no admin's in other hands. A bad value fails with
 * EINVAL before anything changes.
 *
 * Locking: show and store may sleep; d->lock is taken only around copies
 * of the domain's state, never across sysfs_notify(), an allocation or
 * anything else that sleeps.
 */
#include <linux/bitops.h>
#include <linux/capability.h>
#include <linux/ctype.h>
#include <linux/device.h>
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "boost_sched.h"
#include "compat.h"
#include "domain.h"
#include "hqd.h"
#include "layout.h"
#include "sysfs.h"
#include "work.h"

static ssize_t api_version_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", GPUSLOT_API_VERSION);
}
static DEVICE_ATTR_RO(api_version);

/* The highest boost_priority this kernel lets the module set: compat.h */
static ssize_t boost_priority_limit_show(struct device *dev,
					 struct device_attribute *attr,
					 char *buf)
{
	return sysfs_emit(buf, "%u\n", GPUSLOT_BOOST_PRIORITY_LIMIT);
}
static DEVICE_ATTR_RO(boost_priority_limit);

static struct attribute *gpuslot_misc_attrs[] = {
	&dev_attr_api_version.attr,
	&dev_attr_boost_priority_limit.attr,
	NULL,
};

static const struct attribute_group gpuslot_misc_group = {
	.attrs = gpuslot_misc_attrs,
};

const struct attribute_group *gpuslot_misc_groups[] = {
	&gpuslot_misc_group,
	NULL,
};

/* Parse an unsigned decimal from an admin and hand it to @set. */
static ssize_t gpuslot_store_uint(struct device *dev, const char *buf,
				  size_t count,
				  int (*set)(struct gpuslot_domain *d,
					     unsigned int val))
{
	unsigned int val;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (kstrtouint(buf, 10, &val))
		return -EINVAL;
	ret = set(gpuslot_dev_domain(dev), val);
	return ret ? ret : count;
}

/* A read-write file of one unsigned value, got and set by these two. */
#define GPUSLOT_ATTR_UINT_RW(_name, _get, _set)				\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%u\n", _get(gpuslot_dev_domain(dev)));	\
}									\
static ssize_t _name##_store(struct device *dev,			\
			     struct device_attribute *attr,		\
			     const char *buf, size_t count)		\
{									\
	return gpuslot_store_uint(dev, buf, count, _set);		\
}									\
static DEVICE_ATTR_RW(_name)

static int gpuslot_set_k(struct gpuslot_domain *d, unsigned int k)
{
	return gpuslot_domain_set_k(d, k, NULL);
}

GPUSLOT_ATTR_UINT_RW(k, gpuslot_domain_k, gpuslot_set_k);
GPUSLOT_ATTR_UINT_RW(boost_priority, gpuslot_domain_boost_priority,
		     gpuslot_domain_set_boost_priority);
GPUSLOT_ATTR_UINT_RW(max_hold_ms, gpuslot_domain_max_hold_ms,
		     gpuslot_domain_set_max_hold_ms);
GPUSLOT_ATTR_UINT_RW(max_boost_share, gpuslot_domain_max_boost_share,
		     gpuslot_domain_set_max_boost_share);
GPUSLOT_ATTR_UINT_RW(hqd_limit, gpuslot_domain_hqd_limit,
		     gpuslot_domain_set_hqd_limit);
GPUSLOT_ATTR_UINT_RW(preempt_share, gpuslot_domain_preempt_share,
		     gpuslot_domain_set_preempt_share);
GPUSLOT_ATTR_UINT_RW(preempt_window_ms, gpuslot_domain_preempt_window_ms,
		     gpuslot_domain_set_preempt_window_ms);

/* The domain's state that the read-only files show, copied under d->lock. */
struct gpuslot_domain_view {
	u64 generation;
	u64 held;
	u32 unit_size;
	u32 nr_units;
	unsigned int nr_waiters;
	unsigned int hqd_used;
	unsigned int hqd_waiters;
};

static void gpuslot_domain_view(struct gpuslot_domain *d,
				struct gpuslot_domain_view *v)
{
	spin_lock(&d->lock);
	v->generation = d->core.generation;
	v->held = d->core.held;
	v->unit_size = d->parts.unit_size;
	v->nr_units = d->parts.nr_units;
	v->nr_waiters = d->core.nr_waiters;
	v->hqd_used = d->budget.used;
	v->hqd_waiters = d->budget.nr_waiters;
	spin_unlock(&d->lock);
}

/* A read-only file of one value of the domain's view. */
#define GPUSLOT_ATTR_VIEW_RO(_name, _fmt, _expr)			\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct gpuslot_domain_view v;					\
									\
	gpuslot_domain_view(gpuslot_dev_domain(dev), &v);		\
	return sysfs_emit(buf, _fmt "\n", _expr);			\
}									\
static DEVICE_ATTR_RO(_name)

GPUSLOT_ATTR_VIEW_RO(generation, "%llu", v.generation);
GPUSLOT_ATTR_VIEW_RO(unit_size, "%u", v.unit_size);
GPUSLOT_ATTR_VIEW_RO(nr_units, "%u", v.nr_units);
GPUSLOT_ATTR_VIEW_RO(hqd_used, "%u", v.hqd_used);
GPUSLOT_ATTR_VIEW_RO(hqd_waiters, "%u", v.hqd_waiters);
GPUSLOT_ATTR_VIEW_RO(nr_holders, "%u", (unsigned int)hweight64(v.held));
GPUSLOT_ATTR_VIEW_RO(nr_waiters, "%u", v.nr_waiters);
GPUSLOT_ATTR_VIEW_RO(held_mask, "0x%llx", v.held);

static ssize_t unit_kind_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	return gpuslot_domain_show_unit_kind(gpuslot_dev_domain(dev), buf);
}
static DEVICE_ATTR_RO(unit_kind);

static ssize_t commit_store(struct device *dev, struct device_attribute *attr,
			    const char *buf, size_t count)
{
	return gpuslot_domain_commit(gpuslot_dev_domain(dev), buf, count);
}
static DEVICE_ATTR_WO(commit);

/*
 * The PCI address of the domain's GPU, DDDD:BB:DD.F, written by gpuslotd
 * when it maps a GPU to the domain; empty while unknown. Clients match
 * their runtime's device by it, so that neither device numbering nor
 * *_VISIBLE_DEVICES can point a domain's slots at another GPU.
 */
/* Hex digits where "DDDD:BB:DD.F" has them, and its three separators. */
static bool gpuslot_pci_bus_id_shape(const char *s)
{
	static const char shape[] = "xxxx:xx:xx.x";
	unsigned int i;

	if (strlen(s) != sizeof(shape) - 1)
		return false;
	for (i = 0; i < sizeof(shape) - 1; i++)
		if (shape[i] == 'x' ? !isxdigit(s[i]) : s[i] != shape[i])
			return false;
	return true;
}

static ssize_t pci_bus_id_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	struct gpuslot_domain *d = gpuslot_dev_domain(dev);
	bool known;
	u32 id;

	spin_lock(&d->lock);
	id = d->pci_bus_id;
	known = d->pci_bus_id_known;
	spin_unlock(&d->lock);
	if (!known)
		return sysfs_emit(buf, "\n");
	return sysfs_emit(buf, "%04x:%02x:%02x.%x\n", id >> 16, (id >> 8) & 0xff,
			  (id >> 3) & 0x1f, id & 7);
}

static ssize_t pci_bus_id_store(struct device *dev,
				struct device_attribute *attr, const char *buf,
				size_t count)
{
	struct gpuslot_domain *d = gpuslot_dev_domain(dev);
	unsigned int dom, bus, slot, fn;
	char str[16];
	u32 id = 0;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	/* "DDDD:BB:DD.F" exactly, or nothing to forget the GPU. */
	if (count > sizeof(str) - 1)
		return -EINVAL;
	memcpy(str, buf, count);
	str[count] = '\0';
	strim(str);
	if (str[0]) {
		if (!gpuslot_pci_bus_id_shape(str) ||
		    sscanf(str, "%4x:%2x:%2x.%1x", &dom, &bus, &slot, &fn) != 4 ||
		    slot > 0x1f || fn > 7)
			return -EINVAL;
		id = dom << 16 | bus << 8 | slot << 3 | fn;
	}
	spin_lock(&d->lock);
	d->pci_bus_id = id;
	d->pci_bus_id_known = str[0] != '\0';
	spin_unlock(&d->lock);
	return count;
}
static DEVICE_ATTR_RW(pci_bus_id);

static struct attribute *gpuslot_domain_attrs[] = {
	&dev_attr_k.attr,
	&dev_attr_boost_priority.attr,
	&dev_attr_max_hold_ms.attr,
	&dev_attr_max_boost_share.attr,
	&dev_attr_hqd_limit.attr,
	&dev_attr_preempt_share.attr,
	&dev_attr_preempt_window_ms.attr,
	&dev_attr_pci_bus_id.attr,
	&dev_attr_generation.attr,
	&dev_attr_unit_kind.attr,
	&dev_attr_unit_size.attr,
	&dev_attr_nr_units.attr,
	&dev_attr_hqd_used.attr,
	&dev_attr_hqd_waiters.attr,
	&dev_attr_nr_holders.attr,
	&dev_attr_nr_waiters.attr,
	&dev_attr_held_mask.attr,
	&dev_attr_commit.attr,
	NULL,
};

static const struct attribute_group gpuslot_domain_group = {
	.attrs = gpuslot_domain_attrs,
};

/* stats/: one counter per file, the field of the counters at @offset. */
struct gpuslot_stat_attr {
	struct device_attribute dev_attr;
	size_t offset;
};

static ssize_t gpuslot_stat_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	struct gpuslot_stat_attr *s =
		container_of(attr, struct gpuslot_stat_attr, dev_attr);
	struct gpuslot_counters c;
	u64 val;

	gpuslot_domain_counters(gpuslot_dev_domain(dev), &c);
	memcpy(&val, (char *)&c + s->offset, sizeof(val));
	return sysfs_emit(buf, "%llu\n", val);
}

static struct gpuslot_stat_attr gpuslot_stat_acquisitions = {
	.dev_attr = __ATTR(acquisitions, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, acquisitions),
};

static struct gpuslot_stat_attr gpuslot_stat_contended = {
	.dev_attr = __ATTR(contended, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, contended),
};

static struct gpuslot_stat_attr gpuslot_stat_timeouts = {
	.dev_attr = __ATTR(timeouts, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, timeouts),
};

static struct gpuslot_stat_attr gpuslot_stat_interrupted = {
	.dev_attr = __ATTR(interrupted, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, interrupted),
};

static struct gpuslot_stat_attr gpuslot_stat_total_wait_ns = {
	.dev_attr = __ATTR(total_wait_ns, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, total_wait_ns),
};

static struct gpuslot_stat_attr gpuslot_stat_max_wait_ns = {
	.dev_attr = __ATTR(max_wait_ns, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, max_wait_ns),
};

static struct gpuslot_stat_attr gpuslot_stat_max_hold_ns = {
	.dev_attr = __ATTR(max_hold_ns, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, max_hold_ns),
};

static struct gpuslot_stat_attr gpuslot_stat_overruns = {
	.dev_attr = __ATTR(overruns, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, overruns),
};

static struct gpuslot_stat_attr gpuslot_stat_boosts_refused = {
	.dev_attr = __ATTR(boosts_refused, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, boosts_refused),
};

static struct gpuslot_stat_attr gpuslot_stat_preempt_expiries = {
	.dev_attr = __ATTR(preempt_expiries, 0444, gpuslot_stat_show, NULL),
	.offset = offsetof(struct gpuslot_counters, preempt_expiries),
};

static struct attribute *gpuslot_stats_attrs[] = {
	&gpuslot_stat_acquisitions.dev_attr.attr,
	&gpuslot_stat_contended.dev_attr.attr,
	&gpuslot_stat_timeouts.dev_attr.attr,
	&gpuslot_stat_interrupted.dev_attr.attr,
	&gpuslot_stat_total_wait_ns.dev_attr.attr,
	&gpuslot_stat_max_wait_ns.dev_attr.attr,
	&gpuslot_stat_max_hold_ns.dev_attr.attr,
	&gpuslot_stat_overruns.dev_attr.attr,
	&gpuslot_stat_boosts_refused.dev_attr.attr,
	&gpuslot_stat_preempt_expiries.dev_attr.attr,
	NULL,
};

static const struct attribute_group gpuslot_stats_group = {
	.name = "stats",
	.attrs = gpuslot_stats_attrs,
};

/*
 * slot<i>/: the same two files for every slot, built once at load; the
 * slot is the index of the files' entry in gpuslot_slot_files.
 */
struct gpuslot_slot_files {
	struct device_attribute units;
	struct device_attribute priority;
	struct attribute *attrs[3];
	struct attribute_group group;
	char name[8];			/* "slot63" */
};

static struct gpuslot_slot_files *gpuslot_slot_files;

static unsigned int gpuslot_slot_of(const struct gpuslot_slot_files *s)
{
	return s - gpuslot_slot_files;
}

static ssize_t gpuslot_slot_units_show(struct device *dev,
				       struct device_attribute *attr,
				       char *buf)
{
	struct gpuslot_slot_files *s =
		container_of(attr, struct gpuslot_slot_files, units);

	return gpuslot_domain_show_slot_units(gpuslot_dev_domain(dev),
					      gpuslot_slot_of(s), buf);
}

static ssize_t gpuslot_slot_units_store(struct device *dev,
					struct device_attribute *attr,
					const char *buf, size_t count)
{
	struct gpuslot_slot_files *s =
		container_of(attr, struct gpuslot_slot_files, units);

	return gpuslot_domain_stage_units(gpuslot_dev_domain(dev),
					  gpuslot_slot_of(s), buf, count);
}

static ssize_t gpuslot_slot_priority_show(struct device *dev,
					  struct device_attribute *attr,
					  char *buf)
{
	struct gpuslot_slot_files *s =
		container_of(attr, struct gpuslot_slot_files, priority);

	return gpuslot_domain_show_slot_priority(gpuslot_dev_domain(dev),
						 gpuslot_slot_of(s), buf);
}

static ssize_t gpuslot_slot_priority_store(struct device *dev,
					   struct device_attribute *attr,
					   const char *buf, size_t count)
{
	struct gpuslot_slot_files *s =
		container_of(attr, struct gpuslot_slot_files, priority);

	return gpuslot_domain_stage_priority(gpuslot_dev_domain(dev),
					     gpuslot_slot_of(s), buf, count);
}

/* The domain's files, stats/, slot0/ .. slot63/, NULL. */
static const struct attribute_group *
gpuslot_domain_groups[2 + GPUSLOT_MAX_SLOTS + 1];

static struct class gpuslot_class = {
	.name = "gpuslot",
};

static void gpuslot_slot_files_init(struct gpuslot_slot_files *s,
				    unsigned int slot)
{
	snprintf(s->name, sizeof(s->name), "slot%u", slot);
	sysfs_attr_init(&s->units.attr);
	s->units.attr.name = "units";
	s->units.attr.mode = 0644;
	s->units.show = gpuslot_slot_units_show;
	s->units.store = gpuslot_slot_units_store;
	sysfs_attr_init(&s->priority.attr);
	s->priority.attr.name = "priority";
	s->priority.attr.mode = 0644;
	s->priority.show = gpuslot_slot_priority_show;
	s->priority.store = gpuslot_slot_priority_store;
	s->attrs[0] = &s->units.attr;
	s->attrs[1] = &s->priority.attr;
	s->attrs[2] = NULL;
	s->group.name = s->name;
	s->group.attrs = s->attrs;
}

int gpuslot_sysfs_init(void)
{
	unsigned int slot;
	int ret;

	gpuslot_slot_files = kcalloc(GPUSLOT_MAX_SLOTS,
				     sizeof(*gpuslot_slot_files), GFP_KERNEL);
	if (!gpuslot_slot_files)
		return -ENOMEM;
	gpuslot_domain_groups[0] = &gpuslot_domain_group;
	gpuslot_domain_groups[1] = &gpuslot_stats_group;
	for (slot = 0; slot < GPUSLOT_MAX_SLOTS; slot++) {
		gpuslot_slot_files_init(&gpuslot_slot_files[slot], slot);
		gpuslot_domain_groups[2 + slot] =
			&gpuslot_slot_files[slot].group;
	}
	/*
	 * A static class and class_register(): the same call on 6.1, where
	 * it takes a struct class *, and 6.4+, where it takes a const one
	 * and class_create() lost its owner argument.
	 */
	ret = class_register(&gpuslot_class);
	if (ret) {
		kfree(gpuslot_slot_files);
		gpuslot_slot_files = NULL;
	}
	return ret;
}

void gpuslot_sysfs_exit(void)
{
	class_unregister(&gpuslot_class);
	kfree(gpuslot_slot_files);
	gpuslot_slot_files = NULL;
}

void gpuslot_sysfs_init_device(struct gpuslot_domain *d, struct device *parent)
{
	d->dev.class = &gpuslot_class;
	d->dev.parent = parent;
	d->dev.groups = gpuslot_domain_groups;
}
