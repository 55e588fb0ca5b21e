// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot layouts: GPUSLOT_IOC_SET_LAYOUT/GET_LAYOUT and the sysfs files
 * slot<i>/units, slot<i>/priority and commit of a domain.
 *
 * gpuslotd plans the partitions and sets k, the partitions and the
 * hardware-queue limit in one ioctl; clients read them with GET_LAYOUT and
 * build one GPU stream per slot. An admin may rewrite single slots through
 * sysfs: each write to a slot's file is staged, and writing the generation
 * the staging started from to "commit" applies them all as one new
 * generation, checked by the same rules (partition.c) as the ioctl's.
 */
#include <linux/bitmap.h>
#include <linux/capability.h>
#include <linux/kernel.h>
#include <linux/nospec.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>

#include "boost_sched.h"
#include "compat.h"
#include "domain.h"
#include "layout.h"

int gpuslot_file_set_layout(struct gpuslot_file *f, struct gpuslot_layout *l)
{
	struct gpuslot_domain *d = READ_ONCE(f->domain);
	struct gpuslot_partitions *parts;
	size_t bytes;
	int ret;

	if ((l->flags & ~(GPUSLOT_LAYOUT_MAX_HOLD |
			  GPUSLOT_LAYOUT_EXPECT_GENERATION)) || l->__reserved ||
	    (!(l->flags & GPUSLOT_LAYOUT_EXPECT_GENERATION) &&
	     l->expected_generation) ||
	    l->k < 1 || l->k > GPUSLOT_MAX_SLOTS ||
	    l->hqd_limit > GPUSLOT_MAX_HQD ||
	    l->max_hold_ms > GPUSLOT_MAX_MAX_HOLD_MS ||
	    (!(l->flags & GPUSLOT_LAYOUT_MAX_HOLD) && l->max_hold_ms) ||
	    gpuslot_partitions_check_kind(l->unit_kind, l->unit_size,
					  l->nr_units))
		return -EINVAL;
	if (l->nr_partitions != l->k &&
	    !(l->nr_partitions == 0 && l->unit_kind == GPUSLOT_UNIT_NONE))
		return -EINVAL;

	parts = kzalloc(sizeof(*parts), GFP_KERNEL);
	if (!parts)
		return -ENOMEM;
	parts->unit_kind = l->unit_kind;
	parts->unit_size = l->unit_size;
	parts->nr_units = l->nr_units;
	/* Zero from a caller older than size 128: every slot at priority 0. */
	BUILD_BUG_ON(sizeof(parts->priority) != sizeof(l->priority));
	memcpy(parts->priority, l->priority, sizeof(parts->priority));
	BUILD_BUG_ON(sizeof(struct gpuslot_partition) != sizeof(parts->units[0]));
	/* The copy's length is the caller's: bound it under speculation too. */
	bytes = (size_t)array_index_nospec(l->nr_partitions,
					   GPUSLOT_MAX_SLOTS + 1) *
		sizeof(struct gpuslot_partition);
	if (copy_from_user(parts->units, u64_to_user_ptr(l->partitions),
			   bytes)) {
		ret = -EFAULT;
		goto out;
	}
	ret = gpuslot_partitions_check(parts, l->k);
	if (ret)
		goto out;
	ret = gpuslot_domain_set_layout(d, l->k, parts, l->hqd_limit,
					l->flags & GPUSLOT_LAYOUT_EXPECT_GENERATION ?
					&l->expected_generation : NULL,
					&l->generation);
	if (!ret && l->flags & GPUSLOT_LAYOUT_MAX_HOLD)
		gpuslot_domain_set_max_hold_ms(d, l->max_hold_ms);
out:
	kfree(parts);
	return ret;
}

int gpuslot_file_get_layout(struct gpuslot_file *f, struct gpuslot_layout *l)
{
	struct gpuslot_domain *d = READ_ONCE(f->domain);
	struct gpuslot_partitions *parts;
	unsigned int n;
	int ret = 0;

	/* GET ignores @expected_generation, as the header says. */
	if (l->flags || l->__reserved)
		return -EINVAL;
	/* Any member calls GET: its allocation is the caller's to pay. */
	parts = kmalloc(sizeof(*parts), GFP_KERNEL_ACCOUNT);
	if (!parts)
		return -ENOMEM;
	spin_lock(&d->lock);
	*parts = d->parts;
	l->k = d->core.k;
	l->hqd_limit = d->budget.limit;
	l->generation = d->core.generation;
	l->max_hold_ms = d->max_hold_ms;
	spin_unlock(&d->lock);

	l->unit_kind = parts->unit_kind;
	l->unit_size = parts->unit_size;
	l->nr_units = parts->nr_units;
	/* Zero from k on: kept so by every change of the layout. */
	memcpy(l->priority, parts->priority, sizeof(l->priority));
	n = min(l->nr_partitions, l->k);
	if (copy_to_user(u64_to_user_ptr(l->partitions), parts->units,
			 (size_t)n * sizeof(struct gpuslot_partition)))
		ret = -EFAULT;
	kfree(parts);
	return ret;
}

static const char *const gpuslot_unit_names[] = {
	[GPUSLOT_UNIT_NONE] = "none",
	[GPUSLOT_UNIT_AMD_CU] = "amd-cu",
	[GPUSLOT_UNIT_NV_SM_GROUP] = "nv-sm-group",
};

ssize_t gpuslot_domain_show_unit_kind(struct gpuslot_domain *d, char *buf)
{
	u32 kind;

	spin_lock(&d->lock);
	kind = d->parts.unit_kind;
	spin_unlock(&d->lock);
	return sysfs_emit(buf, "%s\n", gpuslot_unit_names[kind]);
}

ssize_t gpuslot_domain_show_slot_units(struct gpuslot_domain *d,
				       unsigned int slot, char *buf)
{
	DECLARE_BITMAP(bits, GPUSLOT_MAX_UNITS);
	u64 units[GPUSLOT_UNIT_WORDS];
	u32 nr_units;

	spin_lock(&d->lock);
	if (slot >= d->core.k) {
		spin_unlock(&d->lock);
		return -ENXIO;
	}
	memcpy(units, d->parts.units[slot], sizeof(units));
	nr_units = d->parts.nr_units;
	spin_unlock(&d->lock);

	if (gpuslot_partition_is_whole(units))
		return sysfs_emit(buf, "all\n");
	gpuslot_bitmap_from_arr64(bits, units, GPUSLOT_MAX_UNITS);
	return sysfs_emit(buf, "%*pb\n", nr_units, bits);
}

ssize_t gpuslot_domain_show_slot_priority(struct gpuslot_domain *d,
					  unsigned int slot, char *buf)
{
	unsigned int prio;

	spin_lock(&d->lock);
	if (slot >= d->core.k) {
		spin_unlock(&d->lock);
		return -ENXIO;
	}
	prio = d->parts.priority[slot];
	spin_unlock(&d->lock);
	return sysfs_emit(buf, "%u\n", prio);
}

/*
 * Parse "all" (the whole GPU, all zero) or a bitmap as cpumask files take
 * it (hex, comma-separated 32-bit groups, bitmap_parse()) of at most
 * @nr_units units into @units. An empty mask is not "all": it would run
 * nowhere.
 */
static int gpuslot_parse_units(const char *buf, size_t count, u32 nr_units,
			       u64 units[GPUSLOT_UNIT_WORDS])
{
	DECLARE_BITMAP(bits, GPUSLOT_MAX_UNITS);
	char *text, *s;
	int ret;

	text = kstrndup(buf, count, GFP_KERNEL);
	if (!text)
		return -ENOMEM;
	s = strim(text);
	memset(units, 0, sizeof(u64) * GPUSLOT_UNIT_WORDS);
	ret = 0;
	if (strcmp(s, "all")) {
		bitmap_zero(bits, GPUSLOT_MAX_UNITS);
		if (!nr_units || !*s ||
		    bitmap_parse(s, strlen(s), bits, nr_units) ||
		    bitmap_empty(bits, GPUSLOT_MAX_UNITS))
			ret = -EINVAL;
		else
			gpuslot_bitmap_to_arr64(units, bits, GPUSLOT_MAX_UNITS);
	}
	kfree(text);
	return ret;
}

/*
 * Stage @units (unless NULL) or @prio (unless negative) for @slot: start
 * the staging from the live layout if there is none, or if the live one
 * moved on since it started (that staging was for a layout that is gone).
 */
static int gpuslot_stage(struct gpuslot_domain *d, unsigned int slot,
			 const u64 *units, int prio)
{
	struct gpuslot_partitions *fresh = NULL;
	int ret = 0;

	mutex_lock(&d->stage_lock);
	if (!d->staged) {
		fresh = kmalloc(sizeof(*fresh), GFP_KERNEL);
		if (!fresh) {
			ret = -ENOMEM;
			goto out;
		}
	}
	spin_lock(&d->lock);
	if (slot >= d->core.k) {
		ret = -ENXIO;
		goto unlock;
	}
	/* The unit kind or its count may have changed since the parse. */
	if (units && (d->parts.unit_kind == GPUSLOT_UNIT_NONE ||
		      !gpuslot_partition_fits(units, d->parts.nr_units))) {
		ret = -EINVAL;
		goto unlock;
	}
	if (fresh) {
		d->staged = fresh;
		fresh = NULL;
	} else if (d->staged_generation == d->core.generation) {
		goto stage;
	}
	*d->staged = d->parts;
	d->staged_generation = d->core.generation;
	d->staged_k = d->core.k;
stage:
	if (units)
		memcpy(d->staged->units[slot], units,
		       sizeof(d->staged->units[slot]));
	else
		d->staged->priority[slot] = prio;
unlock:
	spin_unlock(&d->lock);
out:
	mutex_unlock(&d->stage_lock);
	kfree(fresh);
	return ret;
}

ssize_t gpuslot_domain_stage_units(struct gpuslot_domain *d, unsigned int slot,
				   const char *buf, size_t count)
{
	u64 units[GPUSLOT_UNIT_WORDS];
	u32 kind, nr_units;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	spin_lock(&d->lock);
	kind = d->parts.unit_kind;
	nr_units = d->parts.nr_units;
	spin_unlock(&d->lock);
	if (kind == GPUSLOT_UNIT_NONE) {
		pr_warn_ratelimited("gpuslot: gpu%u/slot%u/units: no unit kind yet; gpuslotd sets it with the first layout\n",
				    d->id, slot);
		return -EINVAL;
	}
	ret = gpuslot_parse_units(buf, count, nr_units, units);
	if (ret == -EINVAL)
		pr_warn_ratelimited("gpuslot: gpu%u/slot%u/units: expected \"all\" or a non-empty bitmap of units 0 to %u (hex, comma-separated 32-bit groups)\n",
				    d->id, slot, nr_units - 1);
	if (!ret)
		ret = gpuslot_stage(d, slot, units, -1);
	return ret ? ret : count;
}

ssize_t gpuslot_domain_stage_priority(struct gpuslot_domain *d,
				      unsigned int slot, const char *buf,
				      size_t count)
{
	unsigned int prio;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (kstrtouint(buf, 10, &prio) || prio > GPUSLOT_MAX_SLOT_PRIORITY)
		return -EINVAL;
	ret = gpuslot_stage(d, slot, NULL, prio);
	return ret ? ret : count;
}

/* Say in the kernel log which rule a staged layout breaks. */
static void gpuslot_stage_explain(struct gpuslot_domain *d,
				  const struct gpuslot_partitions *p,
				  unsigned int k)
{
	unsigned int i, j, w;

	for (i = 0; i < k; i++) {
		if (gpuslot_partition_is_whole(p->units[i]))
			continue;
		for (j = i + 1; j < k; j++) {
			if (gpuslot_partition_is_whole(p->units[j]) ||
			    p->priority[i] != p->priority[j])
				continue;
			for (w = 0; w < GPUSLOT_UNIT_WORDS; w++) {
				u64 both = p->units[i][w] & p->units[j][w];

				if (!both)
					continue;
				pr_warn_ratelimited("gpuslot: gpu%u/commit: slot%u and slot%u share unit %u at priority %u; partitions at one priority must be disjoint, or \"all\"\n",
						    d->id, i, j,
						    w * 64 + (unsigned int)__ffs64(both),
						    p->priority[i]);
				return;
			}
		}
	}
	pr_warn_ratelimited("gpuslot: gpu%u/commit: the staged layout breaks the partition rules: partitions that are not \"all\" must not share a unit\n",
			    d->id);
}

ssize_t gpuslot_domain_commit(struct gpuslot_domain *d, const char *buf,
			      size_t count)
{
	u64 from, live, generation;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (kstrtou64(buf, 10, &from))
		return -EINVAL;
	mutex_lock(&d->stage_lock);
	if (!d->staged) {
		ret = -ENODATA;
		goto out;
	}
	live = gpuslot_domain_generation(d);
	/* Staged for a layout that is gone, or not the one the admin read. */
	if (from != d->staged_generation || live != d->staged_generation) {
		ret = -EAGAIN;
		goto drop;
	}
	ret = gpuslot_partitions_check(d->staged, d->staged_k);
	if (ret) {
		/* Kept: the admin fixes a slot and commits again. */
		gpuslot_stage_explain(d, d->staged, d->staged_k);
		goto out;
	}
	ret = gpuslot_domain_set_layout(d, d->staged_k, d->staged, 0,
					&d->staged_generation, &generation);
drop:
	kfree(d->staged);
	d->staged = NULL;
out:
	mutex_unlock(&d->stage_lock);
	return ret ? ret : count;
}
