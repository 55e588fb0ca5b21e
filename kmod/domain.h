/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A gpuslot domain (one per GPU) and the per-open-file client state.
 */
#ifndef GPUSLOT_DOMAIN_H
#define GPUSLOT_DOMAIN_H

#include <linux/hrtimer.h>
#include <linux/device.h>
#include <linux/kthread.h>
#include <linux/mutex.h>
#include <linux/rtmutex.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/spinlock.h>
#include <linux/uidgid.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <uapi/linux/gpuslot.h>

#include "lockcore/boost.h"
#include "lockcore/budget.h"
#include "lockcore/core.h"
#include "lockcore/partition.h"
#include "work.h"

struct gpuslot_file;
struct seq_file;

/* Counters reported by sysfs stats/, debugfs wait_hist and GET_STATS. */
struct gpuslot_counters {
	u64 acquisitions;
	u64 contended;
	u64 timeouts;
	u64 interrupted;
	u64 total_wait_ns;
	u64 max_wait_ns;
	u64 max_hold_ns;
	u64 overruns;
	u64 boosts_refused;	/* holds the host's policy or the fd rule kept unboosted */
	u64 preempt_expiries;	/* preempting slots whose budget ran out (work.c) */
	u64 wait_hist[GPUSLOT_HIST_BUCKETS];
};

struct gpuslot_domain {
	/*
	 * /sys/class/gpuslot/gpu<id>, a child of the misc device: its
	 * release frees the domain (domain.c), so a sysfs file held open
	 * keeps the memory it reads alive.
	 */
	struct device dev;
	unsigned int id;
	struct dentry *debugfs;		/* gpuslot/gpu<id>, debugfs.c */

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
	unsigned int nr_hqd_files;
	unsigned int boost_priority;	/* 0: no boost */
	unsigned int max_hold_ms;	/* 0: a boost lasts the whole hold; read at grant */
	unsigned int max_boost_share;	/* a thread's boost budget, %; 100: none */
	/*
	 * Priority inheritance (lock.c): queued waiters that lend a
	 * real-time priority; holders' inherit_prio differ from what the
	 * ledger was told (set under d->lock by the change, cleared by
	 * gpuslot_domain_inherit()); some holder may inherit.
	 */
	unsigned int nr_lending;
	bool inherit_dirty;
	bool inheriting;
	struct gpuslot_counters counters;
	struct gpuslot_partitions parts;	/* see layout.c */
	struct gpuslot_work work;		/* see work.c */
	/*
	 * The GPU's PCI address, domain << 16 | bus << 8 | devfn, if
	 * @pci_bus_id_known; sysfs.c. Every u32 is an address, ffff:ff:1f.7
	 * too: "unknown" needs a flag of its own.
	 */
	u32 pci_bus_id;
	bool pci_bus_id_known;

	/*
	 * The layout an admin stages through sysfs slot<i>/ files, applied
	 * by writing "commit" (layout.c). A mutex, not d->lock: staging
	 * allocates and is never on a lock path.
	 */
	struct mutex stage_lock;
	struct gpuslot_partitions *staged;	/* NULL: nothing staged */
	u64 staged_generation;			/* the live one it copied */
	unsigned int staged_k;
};

static inline struct gpuslot_domain *gpuslot_dev_domain(struct device *dev)
{
	return container_of(dev, struct gpuslot_domain, dev);
}

/*
 * Waiters one domain queues, of each kind: in the lock's queue, threads
 * asleep in ACQUIRE and files queued by ACQUIRE_ASYNC; in the queue
 * budget's, threads asleep in RESERVE_QUEUES. A call that would queue one
 * more fails with ENOSPC. Dispatch and a shrinking k walk a queue under
 * d->lock, with preemption off outside PREEMPT_RT, and a queued file pins
 * its memory: a member must not be able to make either grow without end.
 * A host runs a few dozen GPU jobs; 1024 waiters on one GPU is a leak or
 * an attack. And one user (the caller's real uid, as the kernel's own
 * per-user limits count) queues at most GPUSLOT_MAX_WAITERS_PER_USER of
 * them, so that one member's flood leaves room for every other member's
 * waiters: four users fill a domain.
 */
#define GPUSLOT_MAX_WAITERS	1024
#define GPUSLOT_MAX_WAITERS_PER_USER	256

enum gpuslot_file_state {
	GPUSLOT_FILE_IDLE,
	GPUSLOT_FILE_ACQUIRING,	/* a thread sleeps in ACQUIRE */
	GPUSLOT_FILE_HOLDING,
	GPUSLOT_FILE_QUEUED,	/* ACQUIRE_ASYNC waits in the queue */
	GPUSLOT_FILE_GRANTED,	/* ... and got its slot: poll says so */
};

/* What the boost of a file's hold is, for the holders table. */
enum gpuslot_hold_boost {
	GPUSLOT_HOLD_UNBOOSTED,	/* boost_priority 0, thread already above */
	GPUSLOT_HOLD_BOOSTED,
	GPUSLOT_HOLD_OVERRUN,	/* outlived max_hold_ms or its thread's boost budget */
	GPUSLOT_HOLD_PENDING,	/* granted asynchronously, not completed */
};

/*
 * Why a hold that would have been boosted was not (boost_sched.c): the
 * boost never goes where the scheduler would refuse it, nor to another
 * user through a passed file.
 */
enum gpuslot_boost_refusal {
	GPUSLOT_BOOST_ALLOWED,
	GPUSLOT_BOOST_REFUSED_RT_GROUP,		/* its RT cgroup has no runtime */
	GPUSLOT_BOOST_REFUSED_OTHER_USER,	/* not the opener's uid, no CAP_SYS_NICE */
	GPUSLOT_BOOST_REFUSED_KERNEL,		/* no exact restore here: compat.h */
};

/*
 * A queued waiter. One that sleeps in ACQUIRE lives on its thread's stack
 * (@task set); the asynchronous one of ACQUIRE_ASYNC is the file's own
 * (@task NULL) and holds references to its pids, as nobody waits for it.
 */
struct gpuslot_waiter {
	struct gpuslot_core_waiter core;
	struct gpuslot_file *file;
	struct task_struct *task;
	/* Valid without a reference while a thread waits here. */
	struct pid *tgid;
	struct pid *tid;
	kuid_t uid;		/* the real uid that queued it */
	u64 start_ns;
	char comm[TASK_COMM_LEN];
	/* The grant, recorded under d->lock: what this call returns. */
	unsigned int slot;
	u64 generation;
	u64 seq;
	/*
	 * The thread boosted itself before it slept, for hold @boost_seq
	 * (gpuslot_waiter_boost()); its granter then only marks the hold.
	 */
	bool boosted;
	u64 boost_seq;
	u64 budget_end_ns;	/* its thread's budget ends, ktime_get_ns() */
	/* The real-time priority it lends the holders it waits for; 0: none. */
	unsigned int lend_prio;
};

/* One per open file of /dev/gpuslot: the slot is owned by the file. */
struct gpuslot_file {
	/* Changes only while IDLE, under the old domain's lock. */
	struct gpuslot_domain *domain;
	/* The euid that opened the file: only its threads are boosted. */
	kuid_t opener_euid;

	/* Under domain->lock. */
	enum gpuslot_file_state state;
	unsigned int slot;
	u64 hold_seq;		/* bumped on every grant */
	u64 hold_generation;	/* the layout generation of the grant */
	u64 wait_allowed;	/* ACQUIRING: the slots its thread waits for */
	u64 hold_start_ns;
	/* The acquiring thread, printed in each reader's PID namespace. */
	struct pid *holder_tgid;
	struct pid *holder_tid;
	char holder_comm[TASK_COMM_LEN];
	enum gpuslot_hold_boost hold_boost;
	/* The hold @boost_refused_seq was refused its boost, for this reason. */
	enum gpuslot_boost_refusal boost_refusal;
	u64 boost_refused_seq;
	/*
	 * Priority inheritance, under d->lock: the highest lend_prio of the
	 * queued waiters that accept this hold's slot, and the value the
	 * ledger last applied (boost_sched.c, with @boost_lock too).
	 */
	unsigned int inherit_prio;
	unsigned int inherit_applied;
	u64 hold_max_ns;	/* the domain's max_hold_ms at the grant; 0: none */
	/*
	 * End the boost of a hold that outlives hold_max_ns: a hard-irq
	 * clock and the work it queues on the expiry thread; boost_sched.c.
	 */
	struct hrtimer overrun_timer;
	struct kthread_work overrun_work;

	/*
	 * The file's asynchronous acquire (async.c), under domain->lock: its
	 * waiter while QUEUED, and the error that ended it (k shrank) until
	 * COMPLETE reports it. @async_wq wakes pollers at either end.
	 */
	struct gpuslot_waiter async;
	int async_error;
	wait_queue_head_t async_wq;

	/* Hardware queues reserved here, under domain->lock; see hqd.c. */
	unsigned int hqd_reserved;
	unsigned int hqd_waiting;	/* threads waiting in RESERVE */
	unsigned int hqd_asked;		/* ... and the queues they ask for */
	struct list_head hqd_node;	/* in domain->hqd_files while reserved */
	struct pid *hqd_tgid;
	char hqd_comm[TASK_COMM_LEN];

	/*
	 * The boost of its hold: changed only by calls on this file, under
	 * @boost_lock, and, while recorded, under its member's ledger lock
	 * too (boost_sched.c). @boost_pins: gpuslot_domain_inherit() is
	 * between finding this file a holder and taking @boost_lock.
	 */
	struct rt_mutex boost_lock;
	atomic_t boost_pins;
	struct gpuslot_boost_hold boost;
};

/*
 * The domains: allocated and usable before the misc device exists
 * (gpuslot_domains_create()), shown in sysfs and debugfs once it does
 * (gpuslot_domains_publish(), under @parent), hidden again before it goes
 * (gpuslot_domains_unpublish()) and freed by their last reference
 * (gpuslot_domains_destroy()).
 */
int gpuslot_domains_create(unsigned int nr);
int gpuslot_domains_publish(struct device *parent);
void gpuslot_domains_unpublish(void);
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
/* The file's fdinfo lines: domain, state, slot, hardware queues. */
void gpuslot_file_show_fdinfo(struct seq_file *m, struct gpuslot_file *f);

int gpuslot_file_domain_info(struct gpuslot_file *f,
			     struct gpuslot_domain_info *info);
int gpuslot_file_stats(struct gpuslot_file *f, struct gpuslot_stats *s);
/* A consistent copy of the domain's counters. */
void gpuslot_domain_counters(struct gpuslot_domain *d,
			     struct gpuslot_counters *out);

/*
 * The clock of waits and holds (statistics, the tables, max_hold_ms): the
 * scheduler's local_clock(), not ktime_get_ns(). That one reads the
 * clocksource, which on a host whose TSC the kernel does not trust (many
 * virtual machines) is the HPET: a device read, measured at about 350 ns
 * under QEMU TCG, three of them per acquire/release pair. local_clock() is
 * cheap and stays within about a jiffy between CPUs, which
 * gpuslot_since() tolerates. Timeouts keep CLOCK_MONOTONIC (ktime_get()),
 * which their hrtimers run on.
 */
static inline u64 gpuslot_clock_ns(void)
{
	return local_clock();
}

/*
 * Time since @start, never negative: a waiter's start is read before it
 * takes d->lock, and on another CPU, so a clock read under the lock by
 * another thread may be older.
 */
static inline u64 gpuslot_since(u64 now, u64 start)
{
	return now > start ? now - start : 0;
}

/* Set k and make every partition the whole GPU; see GPUSLOT_IOC_SET_K. */
int gpuslot_domain_set_k(struct gpuslot_domain *d, unsigned int k,
			 u64 *generation);
/*
 * Set k, the partitions (already checked against k) and, unless 0, the
 * hardware-queue limit, as one change of generation; only if the
 * generation is still *@expected, when that is given (-EAGAIN otherwise,
 * nothing changed).
 */
int gpuslot_domain_set_layout(struct gpuslot_domain *d, unsigned int k,
			      const struct gpuslot_partitions *parts,
			      unsigned int hqd_limit, const u64 *expected,
			      u64 *generation);
/* Tell pollers of sysfs k and generation that the layout changed. */
void gpuslot_domain_notify_layout(struct gpuslot_domain *d);
int gpuslot_domain_set_boost_priority(struct gpuslot_domain *d,
				      unsigned int prio);
unsigned int gpuslot_domain_k(struct gpuslot_domain *d);
u64 gpuslot_domain_generation(struct gpuslot_domain *d);
unsigned int gpuslot_domain_boost_priority(struct gpuslot_domain *d);

#endif /* GPUSLOT_DOMAIN_H */
