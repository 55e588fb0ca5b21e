/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libgpuslot: the client library of gpuslot.
 *
 * A client is one open file of /dev/gpuslot, attached to one GPU domain. It
 * reads the domain's layout (k and one compute-unit partition per slot),
 * creates one partition-restricted GPU stream per slot when it opens, and
 * per job: acquire a slot, run the job on that slot's stream, release.
 *
 *	struct gpuslot_options o = { .size = sizeof(o) };
 *	struct gpuslot_client *c;
 *	struct gpuslot_slot s;
 *
 *	if (gpuslot_open(&o, &c) < 0)
 *		die(gpuslot_last_error());
 *	while (next_frame()) {
 *		if (gpuslot_acquire_slot(c, 50000000, 0, &s) < 0)
 *			continue;		// -ETIMEDOUT: skip this frame
 *		run_job(s.stream);		// hipStream_t with the hip backend
 *		gpuslot_release_slot(c);
 *	}
 *	gpuslot_close(c);
 *
 * Every call returns 0 or a negative errno, and then
 * gpuslot_last_error() says what happened and what to do, for this thread.
 * A client serves one thread at a time and holds at most one slot; open one
 * client per thread that runs GPU jobs. A client belongs to the process
 * that opened it: a forked child gets -ECHILD and opens its own.
 */
#ifndef GPUSLOT_H
#define GPUSLOT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GPUSLOT_API __attribute__((visibility("default")))
#else
#define GPUSLOT_API
#endif

/* What backs a slot's stream. */
enum gpuslot_backend {
	/* hip when the layout has AMD CU partitions and HIP loads; else none */
	GPUSLOT_BACKEND_AUTO = 0,
	/* slots without GPU streams: CPU-side gating, tests */
	GPUSLOT_BACKEND_NONE = 1,
	/* one hipExtStreamCreateWithCUMask stream per slot (libamdhip64.so.5) */
	GPUSLOT_BACKEND_HIP = 2,
	/* one CUDA green context and stream per slot (libcuda.so.1) */
	GPUSLOT_BACKEND_CUDA = 3,
};

/* gpuslot_open(): fail at once when the queue budget is short (default). */
#define GPUSLOT_OPEN_WAIT_QUEUES (1u << 0) /* wait for the budget instead */

/* Wait without a deadline in gpuslot_acquire_slot(). */
#define GPUSLOT_WAIT_FOREVER (-1)

struct gpuslot_options {
	uint32_t size;		/* sizeof(struct gpuslot_options) */
	uint32_t domain;	/* the GPU domain, 0 .. nr_domains - 1 */
	uint32_t backend;	/* enum gpuslot_backend */
	uint32_t flags;		/* GPUSLOT_OPEN_* */
	int32_t gpu_index;	/* HIP/CUDA device ordinal; -1: same as domain */
	uint32_t __reserved;	/* must be 0 */
	const char *device;	/* NULL: /dev/gpuslot */
	const char *sysfs_root; /* NULL: /sys/kernel/gpuslot */
};

struct gpuslot_client;

/* A slot the client holds. */
struct gpuslot_slot {
	uint32_t index;		/* 0 .. k - 1 */
	uint32_t units;		/* the units (CUs) of its partition */
	uint64_t generation;	/* the layout generation it was granted in */
	void *stream;		/* hipStream_t (hip); NULL (none) */
};

/* The layout the client's streams were built for. */
struct gpuslot_layout_info {
	uint32_t k;
	uint32_t unit_kind;	/* GPUSLOT_UNIT_* of <linux/gpuslot.h> */
	uint32_t nr_units;	/* the GPU's units (CUs) */
	uint32_t hqd_reserved;	/* hardware queues this client reserved */
	uint64_t generation;
	uint64_t rebuilds;	/* times the streams were rebuilt */
	const char *backend;	/* "none", "hip", "cuda" */
	/* "" or what the user should know, e.g. that MPS is not running */
	const char *notice;
};

/*
 * gpuslot_open - open a client of GPU domain @opts->domain.
 *
 * Reads the layout, reserves the hardware queues the backend will create
 * (its streams, HIP's default queue pool and runtime queues), then creates
 * one stream per slot. This is the slow part (milliseconds per stream) and
 * happens once: creating or re-masking a queue later would preempt every
 * queue on the GPU. The hip backend sets GPU_MAX_HW_QUEUES=1 unless it is
 * set, which only works before the program's first HIP call. The cuda
 * backend makes one green context per partitioned slot from the layout's
 * SM groups; without an MPS control daemon, green contexts of different
 * processes time-slice (gpuslot_client_layout()'s notice says so).
 *
 * Errors: -ENOENT no /dev/gpuslot (module not loaded); -EACCES not in the
 * device's group; -EINVAL bad options or domain; -ENOSPC the queue budget
 * is short (the message names who holds it); -EOPNOTSUPP a backend this
 * build or layout cannot serve; -ENODEV HIP, CUDA or the GPU is missing;
 * -EIO a stream could not be created, or the layout was planned for
 * another GPU.
 */
GPUSLOT_API int gpuslot_open(const struct gpuslot_options *opts,
			     struct gpuslot_client **out);

/*
 * gpuslot_close - destroy the streams, release a held slot and the queue
 * reservation, and free @c. NULL is allowed. In a forked child it only
 * closes the child's descriptor: the parent's slot stays held.
 */
GPUSLOT_API void gpuslot_close(struct gpuslot_client *c);

/*
 * gpuslot_acquire_slot - take a slot, in strict FIFO order with other waiters.
 *
 * @timeout_ns: 0 tries once (-EAGAIN), GPUSLOT_WAIT_FOREVER waits, > 0
 * waits at most that long (-ETIMEDOUT). @allowed_mask: bit i allows slot
 * i; 0 allows any. While it holds the slot the calling thread runs
 * SCHED_FIFO (the domain's boost_priority) and gets its old policy back on
 * release.
 *
 * When the slot was granted under a newer layout than the streams were
 * built for (gpuslotd re-planned), the streams are rebuilt before this
 * returns: every stream is synchronised and destroyed, then created anew.
 * That costs milliseconds once per layout change, counted in the hold.
 *
 * Errors: -EAGAIN, -ETIMEDOUT, -EINTR (a signal; nothing is held);
 * -EDEADLK the client already holds a slot; -EINVAL a mask that allows no
 * slot below k; -ECHILD called in a forked child; -EIO or -ENOSPC the
 * streams could not be rebuilt (the slot is released).
 */
GPUSLOT_API int gpuslot_acquire_slot(struct gpuslot_client *c, int64_t timeout_ns,
				uint64_t allowed_mask,
				struct gpuslot_slot *slot);

/*
 * gpuslot_release_slot - give the held slot to the next waiter. The job's GPU
 * work may still run: synchronise the stream first if the next holder must
 * not overlap with it. Errors: -EPERM nothing held; -ECHILD.
 */
GPUSLOT_API int gpuslot_release_slot(struct gpuslot_client *c);

/* gpuslot_client_layout - the layout the streams are built for. */
GPUSLOT_API int gpuslot_client_layout(struct gpuslot_client *c,
			       struct gpuslot_layout_info *out);

/*
 * gpuslot_last_error - what the calling thread's last failed gpuslot call
 * did wrong and what to do about it; "" before any failure.
 */
GPUSLOT_API const char *gpuslot_last_error(void);

/*
 * gpuslot_hqd_explain - say why GPUSLOT_IOC_RESERVE_QUEUES failed with
 * ENOSPC on @domain, for a person.
 *
 * Reads /sys/kernel/gpuslot/gpu<domain>/{hqd_used,hqd_limit,queues} and
 * writes into @buf a line such as
 *
 *   GPU 0: hardware queue budget exhausted: 20 of 24 reserved (pid 311
 *   ds_infer: 5, pid 312 planner: 5, ...); this process needs 5. Use fewer
 *   slots per process, or raise hqd_limit only if amdgpu runs with
 *   sched_policy=1.
 *
 * @needed is the number of queues the caller asked for. Returns the length
 * of the full message (as snprintf does; @buf holds at most @len - 1 of it
 * and a NUL), or -errno when the state cannot be read, with @buf naming the
 * file that failed.
 */
GPUSLOT_API int gpuslot_hqd_explain(unsigned int domain, unsigned int needed,
				    char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* GPUSLOT_H */
