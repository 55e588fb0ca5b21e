/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A gpuslot domain (one per GPU) and the per-open-file client state.
 */
#ifndef GPUSLOT_DOMAIN_H
#define GPUSLOT_DOMAIN_H

#include <linux/hrtimer.h>
#include <linux/kobject.h>
#include <linux/kthread.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <uapi/linux/gpuslot.h>

#include "boost.h"
#include "budget.h"
#include "core.h"
#include "partition.h"

struct gpuslot_file;
struct pid_namespace;

/* Counters reported by sysfs "stats" and GPUSLOT_IOC_GET_STATS. */
struct gpuslot_counters {
	u64 acquisitions;
	u64 contended;
	u64 timeouts;
	u64 interrupted;
	u64 total_wait_ns;
	u64 max_wait_ns;
	u64 max_hold_ns;
	u64 overruns;
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
	unsigned int nr_hqd_files;
	unsigned int boost_priority;	/* 0: no boost */
	unsigned int max_hold_ms;	/* 0: a boost lasts the whole hold; read at grant */
	unsigned int max_boost_share;	/* a thread's boost budget, %; 100: none */
	struct gpuslot_counters counters;
	struct gpuslot_partitions parts;	/* see layout.c */
	/*
	 * The GPU's PCI address, domain << 16 | bus << 8 | devfn, if
	 * @pci_bus_id_known; sysfs.c. Every u32 is an address, ffff:ff:1f.7
	 * too: "unknown" needs a flag of its own.
	 */
	u32 pci_bus_id;
	bool pci_bus_id_known;
};

/*
 * Waiters one domain queues, of each kind: in the lock's queue, threads
 * asleep in ACQUIRE and files queued by ACQUIRE_ASYNC; in the queue
 * budget's, threads asleep in RESERVE_QUEUES. A call that would queue one
 * more fails with ENOSPC. Dispatch and a shrinking k walk a queue under
 * d->lock, with preemption off outside PREEMPT_RT, and a queued file pins
 * its memory: a member must not be able to make either grow without end.
 * A host runs a few dozen GPU jobs; 1024 waiters on one GPU is a leak or
 * an attack.
 */
#define GPUSLOT_MAX_WAITERS	1024

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
	u64 start_ns;
	char comm[TASK_COMM_LEN];
	/* The grant, recorded under d->lock: what this call returns. */
	unsigned int slot;
	u64 generation;
	u64 seq;
	/*
	 * Set by the waker once the wait is over: a new holder after its
	 * boost (its own, or the granter's), a failed waiter at once.
	 */
	bool ready;
	/*
	 * The thread boosted itself before it slept, for hold @boost_seq
	 * (gpuslot_waiter_boost()); its granter then only marks the hold.
	 */
	bool boosted;
	u64 boost_seq;
	u64 budget_end_ns;	/* its thread's budget ends, ktime_get_ns() */
};

/* One per open file of /dev/gpuslot: the slot is owned by the file. */
struct gpuslot_file {
	/* Changes only while IDLE, under the old domain's lock. */
	struct gpuslot_domain *domain;

	/* Under domain->lock. */
	enum gpuslot_file_state state;
	unsigned int slot;
	u64 hold_seq;		/* bumped on every grant */
	u64 hold_start_ns;
	/* The acquiring thread, printed in each reader's PID namespace. */
	struct pid *holder_tgid;
	struct pid *holder_tid;
	char holder_comm[TASK_COMM_LEN];
	enum gpuslot_hold_boost hold_boost;
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
	struct list_head hqd_node;	/* in domain->hqd_files while reserved */
	struct pid *hqd_tgid;
	char hqd_comm[TASK_COMM_LEN];

	/* Under the boost ledger's lock (boost_sched.c). */
	struct gpuslot_boost_hold boost;
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
/* ACQUIRE; *@seq: the hold granted, for gpuslot_file_release_hold(). */
int gpuslot_file_acquire(struct gpuslot_file *f, struct gpuslot_acquire *a,
			 u64 *seq);
int gpuslot_file_release(struct gpuslot_file *f, struct gpuslot_release *r);
/*
 * Whether @f may start an acquire of @allowed now, under d->lock: 0, or
 * the errno ACQUIRE and ACQUIRE_ASYNC give (-EDEADLK, -EBUSY, -EINVAL).
 */
int gpuslot_file_may_acquire(struct gpuslot_domain *d, struct gpuslot_file *f,
			     u64 allowed)
	__must_hold(&d->lock);
/* Release hold @seq of @f, and no later one; -EPERM if it is over. */
int gpuslot_file_release_hold(struct gpuslot_file *f, u64 seq);
/*
 * Give back the slot @f holds (HOLDING or GRANTED), under d->lock; the
 * waiters it grants stay on @done for gpuslot_finish_handoffs(), which
 * must follow once d->lock is dropped.
 */
void gpuslot_release_locked(struct gpuslot_domain *d, struct gpuslot_file *f,
			    struct list_head *done);
void gpuslot_finish_handoffs(struct gpuslot_domain *d, struct list_head *done);
/* Everything but @w->comm, which the caller reads before taking d->lock. */
void gpuslot_waiter_init(struct gpuslot_waiter *w, struct gpuslot_file *f);
/*
 * Whether d->lock's lock queue holds GPUSLOT_MAX_WAITERS already; says so
 * in the kernel log (rate-limited) when it does.
 */
bool gpuslot_lock_queue_full(struct gpuslot_domain *d)
	__must_hold(&d->lock);
/* Make @w's file the holder of @slot, under d->lock. */
void gpuslot_grant(struct gpuslot_domain *d, struct gpuslot_waiter *w,
		   unsigned int slot, u64 now);

/* Asynchronous acquire, async.c: ACQUIRE_ASYNC, _COMPLETE, _CANCEL, poll. */
int gpuslot_file_acquire_async(struct gpuslot_file *f,
			       struct gpuslot_acquire *a);
int gpuslot_file_acquire_complete(struct gpuslot_file *f,
				  struct gpuslot_acquire *a, u64 *seq);
int gpuslot_file_acquire_cancel(struct gpuslot_file *f,
				struct gpuslot_release *r);
__poll_t gpuslot_file_poll(struct gpuslot_file *f);
/* The queued async waiter of @f was granted or failed, under d->lock. */
void gpuslot_async_done_locked(struct gpuslot_domain *d,
			       struct gpuslot_waiter *w, u64 now);
/* Drop the async state of a file that is closing, under d->lock. */
void gpuslot_async_cleanup_locked(struct gpuslot_domain *d,
				  struct gpuslot_file *f);

int gpuslot_file_domain_info(struct gpuslot_file *f,
			     struct gpuslot_domain_info *info);
int gpuslot_file_stats(struct gpuslot_file *f, struct gpuslot_stats *s);

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

/*
 * An absolute CLOCK_MONOTONIC deadline from userspace, as a ktime. It is
 * absolute so that a call restarted after a signal (-ERESTARTSYS) ends
 * when the first one would have: the restart reads the same struct.
 */
ktime_t gpuslot_deadline(u64 deadline_ns);
/* CLOCK_MONOTONIC has reached @expires: a wait for it would not sleep. */
bool gpuslot_deadline_passed(ktime_t expires);
/*
 * Sleep with d->lock held (dropped while asleep) until a waker sets *done
 * under d->lock, a signal arrives (-ERESTARTSYS: the caller leaves the
 * queue and returns it, so that SA_RESTART restarts the call and userspace
 * sees EINTR otherwise) or *expires passes (-ETIMEDOUT; NULL waits without
 * a deadline). *done wins every race.
 */
int gpuslot_domain_wait(struct gpuslot_domain *d, const bool *done,
			ktime_t *expires)
	__must_hold(&d->lock);

/* The boost of a file's holds, boost_sched.c. */
int gpuslot_boost_setup(void);
void gpuslot_boost_teardown(void);
void gpuslot_file_overrun_init(struct gpuslot_file *f);
/* Stop the clock of @f's hold, under d->lock: the hold ends. */
void gpuslot_overrun_cancel_locked(struct gpuslot_file *f);
/* Wait until @f's clock and its work are done; @f is idle. May sleep. */
void gpuslot_overrun_sync(struct gpuslot_file *f);
/*
 * Boost @p for hold @seq of @f in @d if that hold is still the file's
 * current one. May sleep: call without d->lock.
 */
void gpuslot_file_boost(struct gpuslot_file *f, struct gpuslot_domain *d,
			u64 seq, struct task_struct *p);
/*
 * Boost the thread of @w, which is about to wait in @d and is current,
 * for the hold that its grant will make: the granter then only wakes it,
 * and the release path makes no sched_setattr() for it. Called under
 * d->lock; returns true if it dropped it meanwhile (then the file is
 * ACQUIRING on return). Sets w->boosted and w->boost_seq if it boosted. A
 * wait that fails after a boost ends it: see gpuslot_file_acquire().
 */
bool gpuslot_waiter_boost(struct gpuslot_domain *d, struct gpuslot_waiter *w)
	__must_hold(&d->lock);
/*
 * The hold of @f was boosted: say so and start its clock, to max_hold_ms or
 * to @budget_end_ns (ktime_get_ns(); U64_MAX: none), the end of its
 * thread's boost budget, whichever comes first.
 */
void gpuslot_hold_boosted_locked(struct gpuslot_domain *d,
				 struct gpuslot_file *f, u64 budget_end_ns);
/* End the boost of hold @seq of @f (or an older one). May sleep. */
void gpuslot_file_unboost(struct gpuslot_file *f, u64 seq);
int gpuslot_domain_set_max_hold_ms(struct gpuslot_domain *d,
				   unsigned int ms);
unsigned int gpuslot_domain_max_hold_ms(struct gpuslot_domain *d);
int gpuslot_domain_set_max_boost_share(struct gpuslot_domain *d,
				       unsigned int share);
unsigned int gpuslot_domain_max_boost_share(struct gpuslot_domain *d);

/* Hardware-queue budget, hqd.c. */
int gpuslot_file_reserve_queues(struct gpuslot_file *f,
				struct gpuslot_reserve_queues *r);
int gpuslot_file_unreserve_queues(struct gpuslot_file *f,
				  struct gpuslot_unreserve_queues *u);
/*
 * Take back the @count queues a RESERVE_QUEUES of @f added, whose result
 * could not be copied out; at most what the file holds.
 */
void gpuslot_file_unreserve_undo(struct gpuslot_file *f, unsigned int count);
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
 * hardware-queue limit, as one change of generation; only if the
 * generation is still *@expected, when that is given (-EAGAIN otherwise,
 * nothing changed).
 */
int gpuslot_domain_set_layout(struct gpuslot_domain *d, unsigned int k,
			      const struct gpuslot_partitions *parts,
			      unsigned int hqd_limit, const u64 *expected,
			      u64 *generation);
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
 * A thread name as one word of a sysfs table: every byte outside '!'..'~',
 * and the backslash, as \xHH; an empty name as \x00. A name can then
 * neither add a line nor shift a column.
 */
#define GPUSLOT_NAME_ESCAPED_LEN (4 * (TASK_COMM_LEN - 1) + 1)
void gpuslot_escape_name(char out[GPUSLOT_NAME_ESCAPED_LEN],
			 const char comm[TASK_COMM_LEN]);
/*
 * @pid's number in @ns: 0 outside it, or once @pid has no task left (its
 * number may belong to another process by then). Every table of recorded
 * pids (holders, waiters, queues) prints them through it.
 */
pid_t gpuslot_pid_nr_live(struct pid *pid, struct pid_namespace *ns);
/* gpuslot_pid_nr_live() in the reading task's PID namespace. */
pid_t gpuslot_pid_for_reader(struct pid *pid);

/*
 * The sysfs tables are formatted under a spinlock, one line per entry. A
 * table stops while its longest line (@line_max) and the "... N more"
 * summary that gpuslot_table_end() adds still fit in the page.
 */
#define GPUSLOT_TABLE_LINE_MAX 128	/* holders, waiters, queues */
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
