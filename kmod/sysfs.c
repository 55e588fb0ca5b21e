// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot sysfs: /sys/kernel/gpuslot/version and, per domain, gpu<N>/ with
 * k, boost_priority, max_hold_ms, max_boost_share, generation, holders, waiters, stats, the
 * layout's units and partitions, and the hardware-queue budget: hqd_limit,
 * hqd_used, hqd_waiters and queues; pci_bus_id names the domain's GPU.
 *
 * Who may write: the VFS checks each file's 0644 mode, owned by root of
 * the initial user namespace, when it is opened for writing, so no member
 * opens one, not even as root of a user namespace of its own (its files
 * are not that root's). Each store also checks capable(CAP_SYS_ADMIN) at
 * the write: a file root opened and handed on is no admin's in other
 * hands. A bad value fails with EINVAL before anything changes.
 */
#include <linux/capability.h>
#include <linux/ctype.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "domain.h"
#include "layout.h"
#include "sysfs.h"

static struct gpuslot_domain *to_domain(struct kobject *kobj)
{
	return container_of(kobj, struct gpuslot_domain, kobj);
}

/* Parse an unsigned decimal from root and hand it to @set. */
static ssize_t gpuslot_store_uint(struct kobject *kobj, const char *buf,
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
	ret = set(to_domain(kobj), val);
	return ret ? ret : count;
}

static int gpuslot_set_k(struct gpuslot_domain *d, unsigned int k)
{
	return gpuslot_domain_set_k(d, k, NULL);
}

static ssize_t k_show(struct kobject *kobj, struct kobj_attribute *attr,
		      char *buf)
{
	return sysfs_emit(buf, "%u\n", gpuslot_domain_k(to_domain(kobj)));
}

static ssize_t k_store(struct kobject *kobj, struct kobj_attribute *attr,
		       const char *buf, size_t count)
{
	return gpuslot_store_uint(kobj, buf, count, gpuslot_set_k);
}

static ssize_t boost_priority_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  gpuslot_domain_boost_priority(to_domain(kobj)));
}

static ssize_t boost_priority_store(struct kobject *kobj,
				    struct kobj_attribute *attr,
				    const char *buf, size_t count)
{
	return gpuslot_store_uint(kobj, buf, count,
				  gpuslot_domain_set_boost_priority);
}

static ssize_t max_hold_ms_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  gpuslot_domain_max_hold_ms(to_domain(kobj)));
}

static ssize_t max_hold_ms_store(struct kobject *kobj,
				 struct kobj_attribute *attr,
				 const char *buf, size_t count)
{
	return gpuslot_store_uint(kobj, buf, count,
				  gpuslot_domain_set_max_hold_ms);
}

static ssize_t max_boost_share_show(struct kobject *kobj,
				    struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  gpuslot_domain_max_boost_share(to_domain(kobj)));
}

static ssize_t max_boost_share_store(struct kobject *kobj,
				     struct kobj_attribute *attr,
				     const char *buf, size_t count)
{
	return gpuslot_store_uint(kobj, buf, count,
				  gpuslot_domain_set_max_boost_share);
}

static ssize_t hqd_limit_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", gpuslot_domain_hqd_limit(to_domain(kobj)));
}

static ssize_t hqd_limit_store(struct kobject *kobj,
			       struct kobj_attribute *attr,
			       const char *buf, size_t count)
{
	return gpuslot_store_uint(kobj, buf, count,
				  gpuslot_domain_set_hqd_limit);
}

static ssize_t hqd_used_show(struct kobject *kobj,
			     struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", gpuslot_domain_hqd_used(to_domain(kobj)));
}

static ssize_t hqd_waiters_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  gpuslot_domain_hqd_waiters(to_domain(kobj)));
}

static ssize_t queues_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	return gpuslot_domain_show_queues(to_domain(kobj), buf);
}

static ssize_t generation_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n",
			  gpuslot_domain_generation(to_domain(kobj)));
}

static ssize_t holders_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return gpuslot_domain_show_holders(to_domain(kobj), buf);
}

static ssize_t waiters_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return gpuslot_domain_show_waiters(to_domain(kobj), buf);
}

static ssize_t stats_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return gpuslot_domain_show_stats(to_domain(kobj), buf);
}

static ssize_t units_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return gpuslot_domain_show_units(to_domain(kobj), buf);
}

static ssize_t partitions_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	return gpuslot_domain_show_partitions(to_domain(kobj), buf);
}

static ssize_t partitions_store(struct kobject *kobj,
				struct kobj_attribute *attr, const char *buf,
				size_t count)
{
	return gpuslot_domain_store_partitions(to_domain(kobj), buf, count);
}

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

static ssize_t pci_bus_id_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	struct gpuslot_domain *d = to_domain(kobj);
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

static ssize_t pci_bus_id_store(struct kobject *kobj,
				struct kobj_attribute *attr, const char *buf,
				size_t count)
{
	struct gpuslot_domain *d = to_domain(kobj);
	unsigned int dom, bus, dev, fn;
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
		    sscanf(str, "%4x:%2x:%2x.%1x", &dom, &bus, &dev, &fn) != 4 ||
		    dev > 0x1f || fn > 7)
			return -EINVAL;
		id = dom << 16 | bus << 8 | dev << 3 | fn;
	}
	spin_lock(&d->lock);
	d->pci_bus_id = id;
	d->pci_bus_id_known = str[0] != '\0';
	spin_unlock(&d->lock);
	return count;
}

static struct kobj_attribute k_attr = __ATTR_RW(k);
static struct kobj_attribute pci_bus_id_attr = __ATTR_RW(pci_bus_id);
static struct kobj_attribute units_attr = __ATTR_RO(units);
static struct kobj_attribute partitions_attr = __ATTR_RW(partitions);
static struct kobj_attribute boost_priority_attr = __ATTR_RW(boost_priority);
static struct kobj_attribute max_hold_ms_attr = __ATTR_RW(max_hold_ms);
static struct kobj_attribute max_boost_share_attr = __ATTR_RW(max_boost_share);
static struct kobj_attribute generation_attr = __ATTR_RO(generation);
static struct kobj_attribute holders_attr = __ATTR_RO(holders);
static struct kobj_attribute waiters_attr = __ATTR_RO(waiters);
static struct kobj_attribute stats_attr = __ATTR_RO(stats);
static struct kobj_attribute hqd_limit_attr = __ATTR_RW(hqd_limit);
static struct kobj_attribute hqd_used_attr = __ATTR_RO(hqd_used);
static struct kobj_attribute hqd_waiters_attr = __ATTR_RO(hqd_waiters);
static struct kobj_attribute queues_attr = __ATTR_RO(queues);

static struct attribute *gpuslot_domain_attrs[] = {
	&k_attr.attr,
	&boost_priority_attr.attr,
	&max_hold_ms_attr.attr,
	&max_boost_share_attr.attr,
	&generation_attr.attr,
	&holders_attr.attr,
	&waiters_attr.attr,
	&stats_attr.attr,
	&hqd_limit_attr.attr,
	&hqd_used_attr.attr,
	&hqd_waiters_attr.attr,
	&queues_attr.attr,
	&units_attr.attr,
	&partitions_attr.attr,
	&pci_bus_id_attr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(gpuslot_domain);

const struct kobj_type gpuslot_domain_ktype = {
	.release = gpuslot_domain_free,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = gpuslot_domain_groups,
};

static ssize_t version_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%u\n", GPUSLOT_API_VERSION);
}

static struct kobj_attribute version_attr = __ATTR_RO(version);

struct kobject *gpuslot_sysfs_create(void)
{
	struct kobject *root = kobject_create_and_add("gpuslot", kernel_kobj);

	if (!root)
		return NULL;
	if (sysfs_create_file(root, &version_attr.attr)) {
		kobject_put(root);
		return NULL;
	}
	return root;
}

void gpuslot_sysfs_destroy(struct kobject *root)
{
	sysfs_remove_file(root, &version_attr.attr);
	kobject_put(root);
}
