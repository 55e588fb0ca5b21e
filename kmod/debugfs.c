// SPDX-License-Identifier: GPL-2.0
/*
 * The tables of a domain, in debugfs: /sys/kernel/debug/gpuslot/gpu<N>/
 *
 *   holders    "slot pid tid comm held_ns boost", one line per held slot
 *   waiters    "pid tid comm waited_ns allowed_mask", in FIFO order
 *   queues     "pid comm reserved", one line per file with queues reserved
 *   wait_hist  "bucket_lo_ns count", 32 lines: bucket i counts the waits
 *              of [2^i, 2^(i+1)) ns, bucket 0 those under 2 ns as well,
 *              the last every wait longer
 *
 * Tables, not values: sysfs has one value per file. A table is as long as
 * the domain's state makes it (seq_file grows its buffer and calls show
 * again), never cut at a page. PIDs are those of the initial PID
 * namespace, as the files are root's (0400) and root reads them there.
 * Thread names are escaped (gpuslot_escape_name()), so that no name adds
 * a line or shifts a column.
 *
 * Each table is a snapshot copied under d->lock into memory allocated
 * before it, and formatted after it: d->lock is a spinlock (a sleeping one
 * only on PREEMPT_RT), and a table of a thousand waiters is not formatted
 * with it held.
 */
#include <linux/capability.h>
#include <linux/debugfs.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/mm.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "debugfs.h"
#include "domain.h"

static struct dentry *gpuslot_debugfs_root;

/*
 * A table's file operations: the file is root's (0400), and its open also
 * needs CAP_SYS_ADMIN in the initial user namespace, as the sysfs stores
 * and the admin ioctls do: uid 0 without the capability (a rootful
 * container's root) reads no table. gpuslotd's socket refuses it alike.
 */
#define DEFINE_ADMIN_SHOW_ATTRIBUTE(__name)				\
static int __name##_open(struct inode *inode, struct file *file)	\
{									\
	if (!capable(CAP_SYS_ADMIN))					\
		return -EPERM;						\
	return single_open(file, __name##_show, inode->i_private);	\
}									\
									\
static const struct file_operations __name##_fops = {			\
	.owner		= THIS_MODULE,					\
	.open		= __name##_open,				\
	.read		= seq_read,					\
	.llseek		= seq_lseek,					\
	.release	= single_release,				\
}

/*
 * A thread name as one word of a table: every byte outside '!'..'~', and
 * the backslash, as \xHH; an empty name as \x00.
 */
/*
 * A recorded pid's number while it still has its task, else 0: the number
 * is freed when the task exits and may belong to another process by now.
 * A thread's struct pid never moves to another thread group (de_thread()
 * swaps pids within one), so a live holder tid is a thread of the recorded
 * process.
 */
static pid_t gpuslot_pid_nr_live(struct pid *pid)
{
	if (!pid || !pid_has_task(pid, PIDTYPE_PID))
		return 0;
	return pid_nr(pid);
}

#define GPUSLOT_NAME_ESCAPED_LEN (4 * (TASK_COMM_LEN - 1) + 1)

static void gpuslot_escape_name(char out[GPUSLOT_NAME_ESCAPED_LEN],
				const char comm[TASK_COMM_LEN])
{
	static const char hex[] = "0123456789abcdef";
	unsigned int i, n = 0;

	for (i = 0; i < TASK_COMM_LEN - 1 && comm[i]; i++) {
		unsigned char c = comm[i];

		if (c > ' ' && c <= '~' && c != '\\') {
			out[n++] = c;
			continue;
		}
		out[n++] = '\\';
		out[n++] = 'x';
		out[n++] = hex[c >> 4];
		out[n++] = hex[c & 15];
	}
	if (!n) {
		memcpy(out, "\\x00", 4);
		n = 4;
	}
	out[n] = '\0';
}

static void gpuslot_seq_name(struct seq_file *m, const char comm[TASK_COMM_LEN])
{
	char name[GPUSLOT_NAME_ESCAPED_LEN];

	gpuslot_escape_name(name, comm);
	seq_puts(m, name);
}

static const char *const gpuslot_hold_boost_names[] = {
	[GPUSLOT_HOLD_UNBOOSTED] = "unboosted",
	[GPUSLOT_HOLD_BOOSTED] = "boosted",
	[GPUSLOT_HOLD_OVERRUN] = "overrun",
	[GPUSLOT_HOLD_PENDING] = "pending",
};

/* One line of a table, as copied under d->lock. */
struct gpuslot_table_row {
	pid_t tgid;
	pid_t tid;
	char comm[TASK_COMM_LEN];
	u64 ns;			/* held or waited */
	u64 mask;		/* waiters: allowed */
	unsigned int slot;	/* holders */
	unsigned int count;	/* queues: reserved */
	enum gpuslot_hold_boost boost;
};

/*
 * Room for every row a table can have: a domain queues at most
 * GPUSLOT_MAX_WAITERS waiters (gpuslot_lock_queue_full()), and each file
 * with queues reserved holds at least one of at most GPUSLOT_MAX_HQD.
 * Allocated before d->lock, which the copy then needs only briefly.
 */
#define GPUSLOT_TABLE_ROWS_MAX	max(GPUSLOT_MAX_WAITERS, GPUSLOT_MAX_HQD)

static struct gpuslot_table_row *gpuslot_table_alloc(void)
{
	return kvmalloc_array(GPUSLOT_TABLE_ROWS_MAX,
			      sizeof(struct gpuslot_table_row), GFP_KERNEL);
}

static int gpuslot_holders_show(struct seq_file *m, void *unused)
{
	struct gpuslot_domain *d = m->private;
	struct gpuslot_table_row *rows;
	unsigned int slot, i, n = 0;
	u64 now;

	rows = kmalloc_array(GPUSLOT_MAX_SLOTS, sizeof(*rows), GFP_KERNEL);
	if (!rows)
		return -ENOMEM;
	spin_lock(&d->lock);
	/* Read under the lock: a clock read before it can predate a grant. */
	now = gpuslot_clock_ns();
	for (slot = 0; slot < GPUSLOT_MAX_SLOTS; slot++) {
		struct gpuslot_file *f = d->holder[slot];
		struct gpuslot_table_row *r = &rows[n];

		if (!f)
			continue;
		r->slot = slot;
		r->tgid = gpuslot_pid_nr_live(f->holder_tgid);
		r->tid = gpuslot_pid_nr_live(f->holder_tid);
		memcpy(r->comm, f->holder_comm, sizeof(r->comm));
		r->ns = gpuslot_since(now, f->hold_start_ns);
		r->boost = f->hold_boost;
		n++;
	}
	spin_unlock(&d->lock);

	for (i = 0; i < n; i++) {
		seq_printf(m, "%u %d %d ", rows[i].slot, rows[i].tgid,
			   rows[i].tid);
		gpuslot_seq_name(m, rows[i].comm);
		seq_printf(m, " %llu %s\n", rows[i].ns,
			   gpuslot_hold_boost_names[rows[i].boost]);
	}
	kfree(rows);
	return 0;
}
DEFINE_ADMIN_SHOW_ATTRIBUTE(gpuslot_holders);

static int gpuslot_waiters_show(struct seq_file *m, void *unused)
{
	struct gpuslot_domain *d = m->private;
	struct gpuslot_core_waiter *cw;
	struct gpuslot_table_row *rows;
	unsigned int i, n = 0;
	u64 now;

	rows = gpuslot_table_alloc();
	if (!rows)
		return -ENOMEM;
	spin_lock(&d->lock);
	now = gpuslot_clock_ns();
	list_for_each_entry(cw, &d->core.waiters, node) {
		struct gpuslot_waiter *w =
			container_of(cw, struct gpuslot_waiter, core);
		struct gpuslot_table_row *r;

		if (WARN_ON_ONCE(n == GPUSLOT_TABLE_ROWS_MAX))
			break;
		r = &rows[n++];
		/* w->tgid and w->tid are valid while it waits here. */
		r->tgid = gpuslot_pid_nr_live(w->tgid);
		r->tid = gpuslot_pid_nr_live(w->tid);
		memcpy(r->comm, w->comm, sizeof(r->comm));
		r->ns = gpuslot_since(now, w->start_ns);
		r->mask = cw->allowed;
	}
	spin_unlock(&d->lock);

	for (i = 0; i < n; i++) {
		seq_printf(m, "%d %d ", rows[i].tgid, rows[i].tid);
		gpuslot_seq_name(m, rows[i].comm);
		seq_printf(m, " %llu 0x%llx\n", rows[i].ns, rows[i].mask);
	}
	kvfree(rows);
	return 0;
}
DEFINE_ADMIN_SHOW_ATTRIBUTE(gpuslot_waiters);

static int gpuslot_queues_show(struct seq_file *m, void *unused)
{
	struct gpuslot_domain *d = m->private;
	struct gpuslot_table_row *rows;
	struct gpuslot_file *f;
	unsigned int i, n = 0;

	rows = gpuslot_table_alloc();
	if (!rows)
		return -ENOMEM;
	spin_lock(&d->lock);
	list_for_each_entry(f, &d->hqd_files, hqd_node) {
		struct gpuslot_table_row *r;

		if (WARN_ON_ONCE(n == GPUSLOT_TABLE_ROWS_MAX))
			break;
		r = &rows[n++];
		r->tgid = gpuslot_pid_nr_live(f->hqd_tgid);
		memcpy(r->comm, f->hqd_comm, sizeof(r->comm));
		r->count = f->hqd_reserved;
	}
	spin_unlock(&d->lock);

	for (i = 0; i < n; i++) {
		seq_printf(m, "%d ", rows[i].tgid);
		gpuslot_seq_name(m, rows[i].comm);
		seq_printf(m, " %u\n", rows[i].count);
	}
	kvfree(rows);
	return 0;
}
DEFINE_ADMIN_SHOW_ATTRIBUTE(gpuslot_queues);

static int gpuslot_wait_hist_show(struct seq_file *m, void *unused)
{
	struct gpuslot_domain *d = m->private;
	struct gpuslot_counters c;
	unsigned int i;

	gpuslot_domain_counters(d, &c);
	for (i = 0; i < GPUSLOT_HIST_BUCKETS; i++)
		seq_printf(m, "%llu %llu\n", 1ULL << i, c.wait_hist[i]);
	return 0;
}
DEFINE_ADMIN_SHOW_ATTRIBUTE(gpuslot_wait_hist);

void gpuslot_debugfs_init(void)
{
	/* An error pointer where debugfs is absent: every call takes it. */
	gpuslot_debugfs_root = debugfs_create_dir("gpuslot", NULL);
}

void gpuslot_debugfs_exit(void)
{
	debugfs_remove_recursive(gpuslot_debugfs_root);
}

void gpuslot_debugfs_add(struct gpuslot_domain *d)
{
	d->debugfs = debugfs_create_dir(dev_name(&d->dev),
					gpuslot_debugfs_root);
	debugfs_create_file("holders", 0400, d->debugfs, d,
			    &gpuslot_holders_fops);
	debugfs_create_file("waiters", 0400, d->debugfs, d,
			    &gpuslot_waiters_fops);
	debugfs_create_file("queues", 0400, d->debugfs, d,
			    &gpuslot_queues_fops);
	debugfs_create_file("wait_hist", 0400, d->debugfs, d,
			    &gpuslot_wait_hist_fops);
}

void gpuslot_debugfs_remove(struct gpuslot_domain *d)
{
	debugfs_remove_recursive(d->debugfs);
	d->debugfs = NULL;
}
