/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A gpuslot domain (one per GPU) and the per-open-file client state.
 */
#ifndef GPUSLOT_DOMAIN_H
#define GPUSLOT_DOMAIN_H

#include <linux/kobject.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <uapi/linux/gpuslot.h>

#include "boost.h"
#include "budget.h"
#include "core.h"
#include "partition.h"

#define GPUSLOT_DEFAULT_BOOST_PRIORITY	50

struct gpuslot_file;

/* Counters reported by sysfs "stats" and GPUSLOT_IOC_GET_STATS. */
struct gpuslot_counters {
	u64 acquisitions;
	u64 contended;
	u64 timeouts;
	u64 interrupted;
	u64 total_wait_ns;
	u64 max_wait_ns;
	u64 max_hold_ns;
	u64 wait_hist[GPUSLOT_HIST_BUCKETS];
};

struct gpuslot_domain {
	struct kobject kobj;		/* /sys/kernel/gpuslot/gpu<id> */
	unsigned int id;

	/*
	 * Protects everything below and the lock state of every file attached
	 * here. Held only for short, non-sleeping sections; boosting and
	 * copying to userspace happen after it is dropped.
	 *
	 * A spinlock_t, not a raw_spinlock_t: every user runs in process
	 * context (ioctl, sysfs, release), never in hard interrupt context,
	 * so on PREEMPT_RT it may become a sleeping, priority-inheriting
	 * lock, and should, so that the wait queue scans it protects do not
	 * add to the latency of higher-priority tasks.
	 */
	spinlock_t lock;
	struct gpuslot_core core;
	struct gpuslot_file *holder[GPUSLOT_MAX_SLOTS];
	struct gpuslot_budget budget;	/* hardware queues, see hqd.c */
	struct list_head hqd_files;	/* files with queues reserved */
	unsigned int boost_priority;	/* 0: no boost */
	struct gpuslot_counters counters;
	struct gpuslot_partitions parts;	/* see layout.c */
};

enum gpuslot_file_state {
	GPUSLOT_FILE_IDLE,
	GPUSLOT_FILE_ACQUIRING,
	GPUSLOT_FILE_HOLDING,
};

/* One per open file of /dev/gpuslot: the slot is owned by the file. */
struct gpuslot_file {
	/* Changes only while IDLE, under the old domain's lock. */
	struct gpuslot_domain *domain;

	/* Under domain->lock. */
	enum gpuslot_file_state state;
	unsigned int slot;
	u64 hold_seq;		/* bumped on every grant */
	u64 grant_generation;
	u64 hold_start_ns;
	pid_t holder_pid;
	pid_t holder_tid;
	char holder_comm[TASK_COMM_LEN];

	/* Hardware queues reserved here, under domain->lock; see hqd.c. */
	unsigned int hqd_reserved;
	unsigned int hqd_waiting;	/* threads waiting in RESERVE */
	struct list_head hqd_node;	/* in domain->hqd_files while reserved */
	pid_t hqd_pid;
	char hqd_comm[TASK_COMM_LEN];

	/* Serialises boost and restore, which sleep, against each other. */
	struct mutex boost_lock;
	struct gpuslot_boost boost;
	u64 boost_seq;		/* the hold @boost belongs to */
};

int gpuslot_domains_create(unsigned int nr, struct kobject *parent);
void gpuslot_domains_destroy(void);
unsigned int gpuslot_nr_domains(void);
struct gpuslot_domain *gpuslot_domain_get(unsigned int id);

void gpuslot_file_init(struct gpuslot_file *f);
/* Lock the domain @f is attached to; the attachment may change meanwhile. */
struct gpuslot_domain *gpuslot_file_lock(struct gpuslot_file *f)
	__acquires(&d->lock);
/* Drop whatever the file holds: the last close of the file. */
void gpuslot_file_cleanup(struct gpuslot_file *f);

int gpuslot_file_attach(struct gpuslot_file *f, unsigned int id);
int gpuslot_file_acquire(struct gpuslot_file *f, struct gpuslot_acquire *a);
int gpuslot_file_release(struct gpuslot_file *f, struct gpuslot_release *r);
int gpuslot_file_domain_info(struct gpuslot_file *f,
			     struct gpuslot_domain_info *info);
int gpuslot_file_stats(struct gpuslot_file *f, struct gpuslot_stats *s);

/* The absolute end of a relative timeout that starts at @start_ns. */
ktime_t gpuslot_deadline(u64 start_ns, u64 timeout_ns);
/*
 * Sleep with d->lock held (dropped while asleep) until a waker sets
 * *granted under d->lock, a signal arrives (-EINTR) or *expires passes
 * (-ETIMEDOUT; NULL waits without a deadline). A grant wins every race.
 */
int gpuslot_domain_wait(struct gpuslot_domain *d, const bool *granted,
			ktime_t *expires)
	__must_hold(&d->lock);

/* Hardware-queue budget, hqd.c. */
int gpuslot_file_reserve_queues(struct gpuslot_file *f,
				struct gpuslot_reserve_queues *r);
int gpuslot_file_unreserve_queues(struct gpuslot_file *f,
				  struct gpuslot_unreserve_queues *u);
void gpuslot_hqd_cleanup_locked(struct gpuslot_domain *d,
				struct gpuslot_file *f);
int gpuslot_domain_set_hqd_limit(struct gpuslot_domain *d,
				 unsigned int limit);
bool gpuslot_hqd_set_limit_locked(struct gpuslot_domain *d,
				  unsigned int limit);
unsigned int gpuslot_domain_hqd_limit(struct gpuslot_domain *d);
unsigned int gpuslot_domain_hqd_used(struct gpuslot_domain *d);
unsigned int gpuslot_domain_hqd_waiters(struct gpuslot_domain *d);
ssize_t gpuslot_domain_show_queues(struct gpuslot_domain *d, char *buf);

/* Set k and make every partition the whole GPU; see GPUSLOT_IOC_SET_K. */
int gpuslot_domain_set_k(struct gpuslot_domain *d, unsigned int k,
			 u64 *generation);
/*
 * Set k, the partitions (already checked against k) and, unless 0, the
 * hardware-queue limit, as one change of generation.
 */
void gpuslot_domain_set_layout(struct gpuslot_domain *d, unsigned int k,
			       const struct gpuslot_partitions *parts,
			       unsigned int hqd_limit, u64 *generation);
/* Tell pollers of sysfs that the layout changed. */
void gpuslot_domain_notify_layout(struct gpuslot_domain *d);
int gpuslot_domain_set_boost_priority(struct gpuslot_domain *d,
				      unsigned int prio);
unsigned int gpuslot_domain_k(struct gpuslot_domain *d);
u64 gpuslot_domain_generation(struct gpuslot_domain *d);
unsigned int gpuslot_domain_boost_priority(struct gpuslot_domain *d);

/* The kobject release of a domain. */
void gpuslot_domain_free(struct kobject *kobj);

/*
 * The current task's name, for sysfs only, copied without task_lock():
 * set_task_comm() keeps the last byte NUL, so a racing rename can at worst
 * mix two names.
 */
void gpuslot_current_comm(char comm[TASK_COMM_LEN]);

/*
 * The sysfs tables are formatted under a spinlock, one line per entry. A
 * table stops while its longest line (@line_max) and the "... N more"
 * summary that gpuslot_table_end() adds still fit in the page.
 */
#define GPUSLOT_TABLE_LINE_MAX 96	/* holders, waiters, queues */
#define GPUSLOT_TABLE_MORE_MAX 32	/* "... 4294967295 more\n" */
static inline bool gpuslot_table_full(int len, int line_max)
{
	return len + line_max + GPUSLOT_TABLE_MORE_MAX > PAGE_SIZE;
}

int gpuslot_table_end(char *buf, int len, unsigned int skipped);

/* Text of the sysfs tables; documented in README.md. */
ssize_t gpuslot_domain_show_holders(struct gpuslot_domain *d, char *buf);
ssize_t gpuslot_domain_show_waiters(struct gpuslot_domain *d, char *buf);
ssize_t gpuslot_domain_show_stats(struct gpuslot_domain *d, char *buf);

#endif /* GPUSLOT_DOMAIN_H */
