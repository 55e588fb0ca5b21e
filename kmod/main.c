// SPDX-License-Identifier: GPL-2.0
/*
 * gpuslot: GPU admission control for real-time hosts.
 *
 * The misc device /dev/gpuslot, its ioctl dispatcher and the module's
 * setup. The lock itself lives in core.c (state machine) and domain.c
 * (waiting, handoff, boost); the ioctl ABI in uapi/linux/gpuslot.h.
 */
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/nospec.h>
#include <linux/poll.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "async.h"
#include "boost_sched.h"
#include "debugfs.h"
#include "domain.h"
#include "hqd.h"
#include "layout.h"
#include "lock.h"
#include "sysfs.h"
#include "work.h"

static unsigned int domains = 1;
module_param(domains, uint, 0444);
MODULE_PARM_DESC(domains, "Number of lock domains, one per GPU (1-16, default 1)");

/*
 * Each command runs with @cookie, where a command that can be undone keeps
 * what its undo needs (the hold ACQUIRE granted).
 */
static int gpuslot_ioc_version(struct gpuslot_file *f, void *arg, u64 *cookie)
{
	struct gpuslot_version *v = arg;

	if (v->__reserved)
		return -EINVAL;
	v->api_version = GPUSLOT_API_VERSION;
	v->nr_domains = gpuslot_nr_domains();
	v->features = GPUSLOT_FEATURE_LOCK | GPUSLOT_FEATURE_HQD |
		      GPUSLOT_FEATURE_LAYOUT | GPUSLOT_FEATURE_ASYNC |
		      GPUSLOT_FEATURE_DEADLINE | GPUSLOT_FEATURE_SLOT_PRIORITY |
		      GPUSLOT_FEATURE_WORK;
	return 0;
}

static int gpuslot_ioc_attach(struct gpuslot_file *f, void *arg, u64 *cookie)
{
	struct gpuslot_attach *a = arg;

	return gpuslot_file_attach(f, a->domain);
}

static int gpuslot_ioc_acquire(struct gpuslot_file *f, void *arg, u64 *cookie)
{
	return gpuslot_file_acquire(f, arg, cookie);
}

/*
 * Undo a grant whose result could not be copied out to the caller: that
 * hold only. Another thread sharing the file may have released it and
 * taken a new one meanwhile, and that one is not ours to end.
 */
static void gpuslot_ioc_acquire_undo(struct gpuslot_file *f, void *arg,
				     u64 cookie)
{
	gpuslot_file_release_hold(f, cookie);
}

static int gpuslot_ioc_release(struct gpuslot_file *f, void *arg, u64 *cookie)
{
	return gpuslot_file_release(f, arg);
}

static int gpuslot_ioc_set_k(struct gpuslot_file *f, void *arg, u64 *cookie)
{
	struct gpuslot_set_k *s = arg;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	return gpuslot_domain_set_k(READ_ONCE(f->domain), s->k,
				    &s->generation);
}

static int gpuslot_ioc_domain_info(struct gpuslot_file *f, void *arg,
				   u64 *cookie)
{
	return gpuslot_file_domain_info(f, arg);
}

static int gpuslot_ioc_get_stats(struct gpuslot_file *f, void *arg,
				 u64 *cookie)
{
	return gpuslot_file_stats(f, arg);
}

static int gpuslot_ioc_reserve_queues(struct gpuslot_file *f, void *arg,
				      u64 *cookie)
{
	return gpuslot_file_reserve_queues(f, arg);
}

/*
 * Undo a reservation whose result could not be copied out: exactly the
 * count this call added. Going through UNRESERVE would return nothing at
 * all once another thread of the file had returned some of them (EINVAL
 * for more than the file holds), and leave the rest reserved by a call
 * that reported failure.
 */
static void gpuslot_ioc_reserve_queues_undo(struct gpuslot_file *f,
					    void *arg, u64 cookie)
{
	struct gpuslot_reserve_queues *r = arg;

	gpuslot_file_unreserve_undo(f, r->count);
}

static int gpuslot_ioc_unreserve_queues(struct gpuslot_file *f, void *arg,
					u64 *cookie)
{
	return gpuslot_file_unreserve_queues(f, arg);
}

static int gpuslot_ioc_set_layout(struct gpuslot_file *f, void *arg,
				  u64 *cookie)
{
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	return gpuslot_file_set_layout(f, arg);
}

static int gpuslot_ioc_get_layout(struct gpuslot_file *f, void *arg,
				  u64 *cookie)
{
	return gpuslot_file_get_layout(f, arg);
}

static int gpuslot_ioc_acquire_async(struct gpuslot_file *f, void *arg,
				     u64 *cookie)
{
	return gpuslot_file_acquire_async(f, arg);
}

static int gpuslot_ioc_acquire_complete(struct gpuslot_file *f, void *arg,
					u64 *cookie)
{
	return gpuslot_file_acquire_complete(f, arg, cookie);
}

static int gpuslot_ioc_acquire_cancel(struct gpuslot_file *f, void *arg,
				      u64 *cookie)
{
	return gpuslot_file_acquire_cancel(f, arg);
}

static int gpuslot_ioc_set_work(struct gpuslot_file *f, void *arg,
				u64 *cookie)
{
	return gpuslot_file_set_work(f, arg);
}

union gpuslot_ioctl_buf {
	struct gpuslot_version version;
	struct gpuslot_attach attach;
	struct gpuslot_acquire acquire;
	struct gpuslot_release release;
	struct gpuslot_set_k set_k;
	struct gpuslot_domain_info domain_info;
	struct gpuslot_stats stats;
	struct gpuslot_reserve_queues reserve_queues;
	struct gpuslot_unreserve_queues unreserve_queues;
	struct gpuslot_layout layout;
	struct gpuslot_set_work set_work;
};

/* How a command's struct goes back to the caller. */
enum gpuslot_copy_back {
	/* No output: nothing is written (ATTACH). */
	GPUSLOT_COPY_NONE,
	/* Changes nothing, or undoes its change if the copy fails. */
	GPUSLOT_COPY_AFTER,
	/*
	 * Changes state and cannot undo it: the struct is written back
	 * before the command acts, so that an unwritable one fails with
	 * EFAULT having changed nothing.
	 */
	GPUSLOT_COPY_PROBED,
};

struct gpuslot_ioctl_op {
	unsigned int cmd;	/* the whole number: direction, size, nr */
	unsigned int size;	/* the struct as this module knows it */
	unsigned int min_size;	/* the first version of the struct */
	enum gpuslot_copy_back copy;
	int (*execute)(struct gpuslot_file *f, void *arg, u64 *cookie);
	void (*undo)(struct gpuslot_file *f, void *arg, u64 cookie);
};

/*
 * An entry of the table below, at index _IOC_NR(_cmd) (written out there:
 * a macro that used _cmd twice would be one checkpatch flags). An entry
 * at the wrong index only makes its command ENOTTY, which the VM suite's
 * Ioctl.EveryApi2NumberWorks would see.
 */
#define GPUSLOT_OP(_cmd, _fn, _copy, _undo, _type, _size_ver0)		\
	{								\
		.cmd = _cmd,						\
		.size = sizeof(_type),					\
		.min_size = _size_ver0,					\
		.copy = _copy,						\
		.execute = _fn,						\
		.undo = _undo,						\
	}

static const struct gpuslot_ioctl_op gpuslot_ioctl_ops[] = {
	[_IOC_NR(GPUSLOT_IOC_VERSION)] =
	GPUSLOT_OP(GPUSLOT_IOC_VERSION, gpuslot_ioc_version,
		   GPUSLOT_COPY_AFTER, NULL,
		   struct gpuslot_version, GPUSLOT_VERSION_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_ATTACH)] =
	GPUSLOT_OP(GPUSLOT_IOC_ATTACH, gpuslot_ioc_attach,
		   GPUSLOT_COPY_NONE, NULL,
		   struct gpuslot_attach, GPUSLOT_ATTACH_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_ACQUIRE)] =
	GPUSLOT_OP(GPUSLOT_IOC_ACQUIRE, gpuslot_ioc_acquire,
		   GPUSLOT_COPY_AFTER, gpuslot_ioc_acquire_undo,
		   struct gpuslot_acquire, GPUSLOT_ACQUIRE_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_RELEASE)] =
	GPUSLOT_OP(GPUSLOT_IOC_RELEASE, gpuslot_ioc_release,
		   GPUSLOT_COPY_PROBED, NULL,
		   struct gpuslot_release, GPUSLOT_RELEASE_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_SET_K)] =
	GPUSLOT_OP(GPUSLOT_IOC_SET_K, gpuslot_ioc_set_k,
		   GPUSLOT_COPY_PROBED, NULL,
		   struct gpuslot_set_k, GPUSLOT_SET_K_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_DOMAIN_INFO)] =
	GPUSLOT_OP(GPUSLOT_IOC_DOMAIN_INFO, gpuslot_ioc_domain_info,
		   GPUSLOT_COPY_AFTER, NULL,
		   struct gpuslot_domain_info, GPUSLOT_DOMAIN_INFO_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_GET_STATS)] =
	GPUSLOT_OP(GPUSLOT_IOC_GET_STATS, gpuslot_ioc_get_stats,
		   GPUSLOT_COPY_AFTER, NULL,
		   struct gpuslot_stats, GPUSLOT_STATS_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_RESERVE_QUEUES)] =
	GPUSLOT_OP(GPUSLOT_IOC_RESERVE_QUEUES, gpuslot_ioc_reserve_queues,
		   GPUSLOT_COPY_AFTER, gpuslot_ioc_reserve_queues_undo,
		   struct gpuslot_reserve_queues,
		   GPUSLOT_RESERVE_QUEUES_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_UNRESERVE_QUEUES)] =
	GPUSLOT_OP(GPUSLOT_IOC_UNRESERVE_QUEUES, gpuslot_ioc_unreserve_queues,
		   GPUSLOT_COPY_PROBED, NULL,
		   struct gpuslot_unreserve_queues,
		   GPUSLOT_UNRESERVE_QUEUES_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_SET_LAYOUT)] =
	GPUSLOT_OP(GPUSLOT_IOC_SET_LAYOUT, gpuslot_ioc_set_layout,
		   GPUSLOT_COPY_PROBED, NULL,
		   struct gpuslot_layout, GPUSLOT_LAYOUT_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_GET_LAYOUT)] =
	GPUSLOT_OP(GPUSLOT_IOC_GET_LAYOUT, gpuslot_ioc_get_layout,
		   GPUSLOT_COPY_AFTER, NULL,
		   struct gpuslot_layout, GPUSLOT_LAYOUT_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_ACQUIRE_ASYNC)] =
	GPUSLOT_OP(GPUSLOT_IOC_ACQUIRE_ASYNC, gpuslot_ioc_acquire_async,
		   GPUSLOT_COPY_NONE, NULL,
		   struct gpuslot_acquire, GPUSLOT_ACQUIRE_SIZE_VER0),
	/* An uncopyable grant goes back, as ACQUIRE's does. */
	[_IOC_NR(GPUSLOT_IOC_ACQUIRE_COMPLETE)] =
	GPUSLOT_OP(GPUSLOT_IOC_ACQUIRE_COMPLETE, gpuslot_ioc_acquire_complete,
		   GPUSLOT_COPY_AFTER, gpuslot_ioc_acquire_undo,
		   struct gpuslot_acquire, GPUSLOT_ACQUIRE_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_ACQUIRE_CANCEL)] =
	GPUSLOT_OP(GPUSLOT_IOC_ACQUIRE_CANCEL, gpuslot_ioc_acquire_cancel,
		   GPUSLOT_COPY_PROBED, NULL,
		   struct gpuslot_release, GPUSLOT_RELEASE_SIZE_VER0),
	[_IOC_NR(GPUSLOT_IOC_SET_WORK)] =
	GPUSLOT_OP(GPUSLOT_IOC_SET_WORK, gpuslot_ioc_set_work,
		   GPUSLOT_COPY_NONE, NULL,
		   struct gpuslot_set_work, GPUSLOT_SET_WORK_SIZE_VER0),
};

/* The VER0 sizes are ABI: a struct may grow, never shrink below them. */
static_assert(sizeof(struct gpuslot_version) >= GPUSLOT_VERSION_SIZE_VER0);
static_assert(sizeof(struct gpuslot_attach) >= GPUSLOT_ATTACH_SIZE_VER0);
static_assert(sizeof(struct gpuslot_acquire) >= GPUSLOT_ACQUIRE_SIZE_VER0);
static_assert(sizeof(struct gpuslot_release) >= GPUSLOT_RELEASE_SIZE_VER0);
static_assert(sizeof(struct gpuslot_set_k) >= GPUSLOT_SET_K_SIZE_VER0);
static_assert(sizeof(struct gpuslot_domain_info) >=
	      GPUSLOT_DOMAIN_INFO_SIZE_VER0);
static_assert(sizeof(struct gpuslot_stats) >= GPUSLOT_STATS_SIZE_VER0);
static_assert(sizeof(struct gpuslot_reserve_queues) >=
	      GPUSLOT_RESERVE_QUEUES_SIZE_VER0);
static_assert(sizeof(struct gpuslot_unreserve_queues) >=
	      GPUSLOT_UNRESERVE_QUEUES_SIZE_VER0);
static_assert(sizeof(struct gpuslot_layout) >= GPUSLOT_LAYOUT_SIZE_VER0);
static_assert(sizeof(struct gpuslot_set_work) >= GPUSLOT_SET_WORK_SIZE_VER0);
static_assert(sizeof(union gpuslot_ioctl_buf) <= GPUSLOT_MAX_STRUCT_SIZE);

/*
 * Every command is GPUSLOT_IOC(dir, nr, VER0 size) and its struct starts
 * with __u32 size; copy_struct_from_user() gives old and new userspace the
 * semantics described in the uapi header. The number must match exactly:
 * API 1's _IO numbers get ENOTTY, but for VERSION, which every module
 * answers so that a library can say what to upgrade.
 */
static long gpuslot_ioctl(struct file *file, unsigned int cmd,
			  unsigned long arg)
{
	struct gpuslot_file *f = file->private_data;
	void __user *uarg = (void __user *)arg;
	const struct gpuslot_ioctl_op *op;
	union gpuslot_ioctl_buf buf;
	unsigned int nr = _IOC_NR(cmd);
	u64 cookie = 0;
	u32 usize, out;
	int ret;

	if (cmd == GPUSLOT_IOC_VERSION_LEGACY) {
		cmd = GPUSLOT_IOC_VERSION;
		nr = _IOC_NR(cmd);
	}
	if (_IOC_TYPE(cmd) != GPUSLOT_IOC_MAGIC ||
	    nr >= ARRAY_SIZE(gpuslot_ioctl_ops))
		return -ENOTTY;
	/* @nr is the caller's: no speculative read past the table. */
	op = &gpuslot_ioctl_ops[array_index_nospec(nr,
						   ARRAY_SIZE(gpuslot_ioctl_ops))];
	if (!op->execute || cmd != op->cmd)
		return -ENOTTY;

	if (get_user(usize, (u32 __user *)uarg))
		return -EFAULT;
	if (usize < op->min_size)
		return -EINVAL;
	/* Not a size to scan user memory for zeros over. */
	if (usize > GPUSLOT_MAX_STRUCT_SIZE)
		return -E2BIG;
	ret = copy_struct_from_user(&buf, op->size, uarg, usize);
	if (ret)
		return ret;
	out = min_t(u32, usize, op->size);

	if (op->copy == GPUSLOT_COPY_PROBED && copy_to_user(uarg, &buf, out))
		return -EFAULT;
	ret = op->execute(f, &buf, &cookie);
	if (ret || op->copy == GPUSLOT_COPY_NONE)
		return ret;
	if (copy_to_user(uarg, &buf, out)) {
		/*
		 * A probed struct that faults now was unmapped by the caller
		 * meanwhile: the command took effect, and says so.
		 */
		if (op->copy == GPUSLOT_COPY_PROBED)
			return 0;
		if (op->undo)
			op->undo(f, &buf, cookie);
		return -EFAULT;
	}
	return 0;
}

/*
 * Every open costs the kernel a struct gpuslot_file, whose memory stays
 * until the last close: charged to the opener's memory cgroup, as the
 * struct file is, so that a member's opens count against its own limits.
 */
static int gpuslot_open(struct inode *inode, struct file *file)
{
	struct gpuslot_file *f = kzalloc(sizeof(*f), GFP_KERNEL_ACCOUNT);

	if (!f)
		return -ENOMEM;
	gpuslot_file_init(f);
	f->opener_euid = file->f_cred->euid;
	file->private_data = f;
	return nonseekable_open(inode, file);
}

/*
 * The last close of the open file description: a holder that died, or
 * closed without releasing, gives its slot to the next waiter here.
 */
static int gpuslot_release(struct inode *inode, struct file *file)
{
	struct gpuslot_file *f = file->private_data;

	gpuslot_file_cleanup(f);
	kfree(f);
	return 0;
}

/* Readable once an asynchronous acquire is granted, or failed. */
static __poll_t gpuslot_poll(struct file *file, poll_table *wait)
{
	struct gpuslot_file *f = file->private_data;

	poll_wait(file, &f->async_wq, wait);
	return gpuslot_file_poll(f);
}

/* /proc/<pid>/fdinfo/<fd>: what this open file holds, waits for, reserved. */
static void gpuslot_show_fdinfo(struct seq_file *m, struct file *file)
{
	gpuslot_file_show_fdinfo(m, file->private_data);
}

/* The attached domain's work state page, read-only (work.c). */
static int gpuslot_mmap(struct file *file, struct vm_area_struct *vma)
{
	return gpuslot_file_mmap(file->private_data, vma);
}

static const struct file_operations gpuslot_fops = {
	.owner = THIS_MODULE,
	.open = gpuslot_open,
	.release = gpuslot_release,
	.unlocked_ioctl = gpuslot_ioctl,
	.poll = gpuslot_poll,
	.mmap = gpuslot_mmap,
	.show_fdinfo = gpuslot_show_fdinfo,
	.compat_ioctl = compat_ptr_ioctl,
	/* No .llseek: with nonseekable_open(), lseek() fails with ESPIPE. */
};

static struct miscdevice gpuslot_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "gpuslot",
	.fops = &gpuslot_fops,
	.groups = gpuslot_misc_groups,
};

static int __init gpuslot_init(void)
{
	int ret;

	if (domains < 1 || domains > GPUSLOT_MAX_DOMAINS) {
		pr_err("gpuslot: domains=%u is out of range: use 1 to %u, one per GPU\n",
		       domains, GPUSLOT_MAX_DOMAINS);
		return -EINVAL;
	}

	ret = gpuslot_boost_setup();
	if (ret)
		return ret;
	/* Usable before /dev/gpuslot opens: a file attaches to domain 0. */
	ret = gpuslot_domains_create(domains);
	if (ret)
		goto err_boost;
	ret = gpuslot_sysfs_init();
	if (ret)
		goto err_domains;
	gpuslot_debugfs_init();
	ret = misc_register(&gpuslot_misc);
	if (ret)
		goto err_debugfs;
	/* The domains' devices are children of the misc device. */
	ret = gpuslot_domains_publish(gpuslot_misc.this_device);
	if (ret)
		goto err_misc;
	return 0;

err_misc:
	misc_deregister(&gpuslot_misc);
err_debugfs:
	gpuslot_debugfs_exit();
	gpuslot_sysfs_exit();
err_domains:
	gpuslot_domains_destroy();
err_boost:
	gpuslot_boost_teardown();
	return ret;
}

static void __exit gpuslot_exit(void)
{
	gpuslot_domains_unpublish();
	misc_deregister(&gpuslot_misc);
	gpuslot_debugfs_exit();
	gpuslot_domains_destroy();
	gpuslot_sysfs_exit();
	gpuslot_boost_teardown();
}

module_init(gpuslot_init);
module_exit(gpuslot_exit);

MODULE_DESCRIPTION("gpuslot: slotted k-exclusion GPU admission control");
MODULE_AUTHOR("gpuslot developers");
/* GPL: sched_setattr_nocheck() is an EXPORT_SYMBOL_GPL. */
MODULE_LICENSE("GPL");
