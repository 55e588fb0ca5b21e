// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot layouts: GPUSLOT_IOC_SET_LAYOUT/GET_LAYOUT and the sysfs files
 * "partitions" and "units" of a domain.
 *
 * gpuslotd plans the partitions and sets k, the partitions and the
 * hardware-queue limit in one ioctl; clients read them with GET_LAYOUT and
 * build one GPU stream per slot. An admin may rewrite single partitions
 * through sysfs; the rules (partition.c) are the same on both paths.
 */
#include <linux/capability.h>
#include <linux/kernel.h>
#include <linux/nospec.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>

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

ssize_t gpuslot_domain_show_units(struct gpuslot_domain *d, char *buf)
{
	u32 kind, size, nr;

	spin_lock(&d->lock);
	kind = d->parts.unit_kind;
	size = d->parts.unit_size;
	nr = d->parts.nr_units;
	spin_unlock(&d->lock);
	return sysfs_emit(buf, "%s %u %u\n", gpuslot_unit_names[kind], nr, size);
}

/*
 * Append the line of @slot at @len: "0x" and the bitmap in hex without
 * leading zeros, or "all". Returns the new length.
 */
static int gpuslot_emit_partition(char *buf, int len, unsigned int slot,
				  const u64 units[GPUSLOT_UNIT_WORDS])
{
	int w = GPUSLOT_UNIT_WORDS - 1;

	if (gpuslot_partition_is_whole(units))
		return len + sysfs_emit_at(buf, len, "%u all\n", slot);
	while (!units[w])
		w--;
	len += sysfs_emit_at(buf, len, "%u 0x%llx", slot, units[w]);
	while (w--)
		len += sysfs_emit_at(buf, len, "%016llx", units[w]);
	return len + sysfs_emit_at(buf, len, "\n");
}

ssize_t gpuslot_domain_show_partitions(struct gpuslot_domain *d, char *buf)
{
	unsigned int slot, k, skipped = 0;
	/* "63 0x" and one hex digit per 4 units, "\n". */
	int line_max, len = 0;

	spin_lock(&d->lock);
	k = d->core.k;
	line_max = 6 + DIV_ROUND_UP(d->parts.nr_units, 4) + 1;
	for (slot = 0; slot < k; slot++) {
		if (gpuslot_table_full(len, line_max)) {
			skipped++;
			continue;
		}
		len = gpuslot_emit_partition(buf, len, slot,
					     d->parts.units[slot]);
	}
	spin_unlock(&d->lock);
	return gpuslot_table_end(buf, len, skipped);
}

/* Parse "all" or a hex bitmap of at most @nr_units bits into @units. */
static int gpuslot_parse_partition(const char *s, u32 nr_units,
				   u64 units[GPUSLOT_UNIT_WORDS])
{
	size_t n, i;

	memset(units, 0, sizeof(u64) * GPUSLOT_UNIT_WORDS);
	if (!strcmp(s, "all"))
		return 0;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	n = strlen(s);
	if (!n || n > GPUSLOT_MAX_UNITS / 4)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		int v = hex_to_bin(s[n - 1 - i]);

		if (v < 0)
			return -EINVAL;
		units[i / 16] |= (u64)v << (4 * (i % 16));
	}
	/* An explicit mask of zero is not "all": it would run nowhere. */
	if (gpuslot_partition_is_whole(units) ||
	    !gpuslot_partition_fits(units, nr_units))
		return -EINVAL;
	return 0;
}

/*
 * Apply "<slot> <all|hex mask>" lines to @parts. On error, says why in
 * the kernel log: sysfs has no other channel for a message.
 */
static int gpuslot_parse_partitions(struct gpuslot_domain *d, char *text,
				    unsigned int k,
				    struct gpuslot_partitions *parts)
{
	unsigned int lineno = 0, slot;
	char *line;

	while ((line = strsep(&text, "\n"))) {
		char *mask;

		lineno++;
		line = strim(line);
		if (!*line)
			continue;
		mask = strpbrk(line, " \t");
		if (!mask)
			goto bad;
		*mask++ = '\0';
		mask = skip_spaces(mask);
		if (kstrtouint(line, 10, &slot) || slot >= k) {
			pr_warn_ratelimited("gpuslot: gpu%u/partitions line %u: slot must be 0 to %u\n",
					    d->id, lineno, k - 1);
			return -EINVAL;
		}
		slot = array_index_nospec(slot, k);
		if (gpuslot_parse_partition(mask, parts->nr_units,
					    parts->units[slot])) {
			pr_warn_ratelimited("gpuslot: gpu%u/partitions line %u: mask must be \"all\" or a non-zero hex bitmap of at most %u units\n",
					    d->id, lineno, parts->nr_units);
			return -EINVAL;
		}
	}
	return 0;
bad:
	pr_warn_ratelimited("gpuslot: gpu%u/partitions line %u: expected \"<slot> <all|hex mask>\"\n",
			    d->id, lineno);
	return -EINVAL;
}

ssize_t gpuslot_domain_store_partitions(struct gpuslot_domain *d,
					const char *buf, size_t count)
{
	struct gpuslot_partitions *parts;
	unsigned int k;
	u64 generation;
	char *text;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	parts = kmalloc(sizeof(*parts), GFP_KERNEL);
	text = kstrndup(buf, count, GFP_KERNEL);
	if (!parts || !text) {
		ret = -ENOMEM;
		goto out;
	}

	spin_lock(&d->lock);
	*parts = d->parts;
	k = d->core.k;
	generation = d->core.generation;
	spin_unlock(&d->lock);

	if (parts->unit_kind == GPUSLOT_UNIT_NONE) {
		pr_warn_ratelimited("gpuslot: gpu%u/partitions: no unit kind yet; gpuslotd sets it with the first layout\n",
				    d->id);
		ret = -EINVAL;
		goto out;
	}
	ret = gpuslot_parse_partitions(d, text, k, parts);
	if (ret)
		goto out;
	if (gpuslot_partitions_check(parts, k)) {
		pr_warn_ratelimited("gpuslot: gpu%u/partitions: two partitions share a unit; partitions must be disjoint or \"all\"\n",
				    d->id);
		ret = -EINVAL;
		goto out;
	}

	spin_lock(&d->lock);
	/* A layout that changed meanwhile was not what the admin edited. */
	if (d->core.generation != generation) {
		spin_unlock(&d->lock);
		ret = -EAGAIN;
		goto out;
	}
	d->parts = *parts;
	gpuslot_core_new_generation(&d->core);
	spin_unlock(&d->lock);
	gpuslot_domain_notify_layout(d);
	ret = count;
out:
	kfree(text);
	kfree(parts);
	return ret;
}
