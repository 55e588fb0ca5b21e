/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libgpuslot: the client library of gpuslot.
 *
 * A client attaches a process to one GPU domain of /dev/gpuslot. It reads
 * the domain's layout (k and one compute-unit partition per slot), creates
 * one partition-restricted GPU stream per slot when it opens, and then any
 * number of the process's threads run jobs: acquire a slot, run the job on
 * that slot's stream, release.
 *
 *	struct gpuslot_options o = { .size = sizeof(o) };
 *	struct gpuslot_client *c;
 *	struct gpuslot_slot s = { .size = sizeof(s) };
 *
 *	if (gpuslot_open(&o, &c) < 0)
 *		die(gpuslot_last_error());
 *	while (next_frame()) {			// in any number of threads
 *		if (gpuslot_acquire_slot(c, 50000000, 0, &s) < 0)
 *			continue;		// -ETIMEDOUT: skip this frame
 *		run_job(s.stream);		// hipStream_t / CUstream
 *		gpuslot_release_slot(c, &s, 0);	// waits for the job's GPU work
 *	}
 *	gpuslot_close(c);
 *
 * Every call returns 0 or a negative errno, and then gpuslot_last_error()
 * says what happened and what to do, for this thread.
 *
 * Threads. A client is thread-safe. Each thread's hold is its own (the
 * library keeps one open file of the device per concurrent hold), while the
 * streams and the hardware-queue reservation belong to the client: made
 * once, however many threads use them. Clients opened in one process with
 * the same domain, device and options share one set of streams and one
 * reservation. A client belongs to the process that opened it: in a forked
 * child every call fails with -ECHILD; the child opens its own.
 *
 * The release rule. gpuslot_release_slot() first waits until the work
 * queued on the slot's stream has finished, then gives the slot to the next
 * waiter: two holders' GPU work never overlaps on one slot. A caller that
 * synchronised the stream itself passes GPUSLOT_RELEASE_NO_SYNC.
 *
 * Streams and layouts. A stream handed out in a slot stays valid, with its
 * partition, until the caller retires its generation
 * (gpuslot_retire_generation()) or closes the client, so that BLAS/DNN
 * handles, graphs and framework streams built on it never dangle. When
 * gpuslotd installs a new layout, slot.generation changes: the library
 * builds the new streams outside any hold (never while the calling thread
 * runs boosted), and the caller rebuilds what it made on the old streams,
 * then retires the old generation. gpuslot_refresh() does the rebuild
 * ahead of time, e.g. from a thread that watches sysfs.
 *
 * Structs carry their size: set .size = sizeof() before every call; the
 * library accepts any size from the first published one (the *_SIZE_VER0
 * literals) up, so programs built against an older or newer header work.
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

/* The version of this header; gpuslot_lib_version() gives the library's. */
#define GPUSLOT_VERSION_MAJOR 1
#define GPUSLOT_VERSION_MINOR 7
#define GPUSLOT_VERSION_PATCH 0
#define GPUSLOT_VERSION_NUMBER(maj, min, patch) ((maj) << 16 | (min) << 8 | (patch))

/* What backs a slot's stream. */
enum gpuslot_backend {
	/* hip for AMD CU layouts, cuda for NVIDIA SM layouts, else none */
	GPUSLOT_BACKEND_AUTO = 0,
	/* slots without GPU streams: CPU-side gating, tests */
	GPUSLOT_BACKEND_NONE = 1,
	/* one hipExtStreamCreateWithCUMask stream per slot (ROCm 5, 6, 7) */
	GPUSLOT_BACKEND_HIP = 2,
	/* one CUDA green context and stream per slot (libcuda.so.1) */
	GPUSLOT_BACKEND_CUDA = 3,
};

/* gpuslot_open(): fail at once when the queue budget is short (default). */
#define GPUSLOT_OPEN_WAIT_QUEUES (1u << 0) /* wait for the budget instead */
/* Use options.gpu_index as the runtime's device number (see below). */
#define GPUSLOT_OPEN_GPU_INDEX (1u << 1)

/* Wait without a deadline in gpuslot_acquire_slot(). */
#define GPUSLOT_WAIT_FOREVER (-1)

/* gpuslot_release_slot(): the caller synchronised the stream itself. */
#define GPUSLOT_RELEASE_NO_SYNC (1u << 0)

struct gpuslot_options {
	uint32_t size;		/* sizeof(struct gpuslot_options) */
	uint32_t domain;	/* the GPU domain, 0 .. nr_domains - 1 */
	uint32_t backend;	/* enum gpuslot_backend */
	uint32_t flags;		/* GPUSLOT_OPEN_* */
	/*
	 * Which runtime device is the domain's GPU. Without
	 * GPUSLOT_OPEN_GPU_INDEX (the default, so 0 here is fine) the library
	 * finds it by the PCI address gpuslotd records for the domain, so
	 * device numbering and HIP/CUDA_VISIBLE_DEVICES cannot point it at
	 * another GPU. With the flag: the runtime's device @gpu_index.
	 */
	int32_t gpu_index;
	/*
	 * Hardware queues that the process's own runtime makes outside the
	 * library's streams, reserved with them, once for the clients of the
	 * process that share a domain (opened with the same options), and
	 * held until the last of them closes: a program run unchanged under
	 * gpuslot-run on AMD, whose HIP makes its own queues.
	 * GPUSLOT_BACKEND_NONE only (the hip backend counts HIP's own
	 * queues), 0 .. GPUSLOT_MAX_HQD. 0: none. (1.6)
	 */
	uint32_t runtime_queues;
	/* Slots to build streams for (bit i: slot i); 0: every slot. */
	uint64_t slot_mask;
	const char *device;	/* NULL: /dev/gpuslot */
	const char *sysfs_root; /* NULL: /sys/class/gpuslot */
	uint64_t __reserved[4];	/* must be 0 */
};
#define GPUSLOT_OPTIONS_SIZE_VER0 80

struct gpuslot_client;

/* A slot held, or being acquired asynchronously. */
struct gpuslot_slot {
	uint32_t size;		/* in: sizeof(struct gpuslot_slot) */
	uint32_t index;		/* 0 .. k - 1 */
	uint32_t units;		/* its partition's units (CUs, SM groups) */
	int32_t poll_fd;	/* gpuslot_acquire_start(): poll for POLLIN */
	uint64_t generation;	/* the layout generation of its stream */
	void *stream;		/* hipStream_t, CUstream; NULL (none) */
	uint64_t handle;	/* the library's: leave it alone */
	/*
	 * The slot's priority, which its stream was made at: 0 (the
	 * default) .. GPUSLOT_MAX_SLOT_PRIORITY levels above the default.
	 * (1.3)
	 */
	uint32_t priority;
	uint32_t __reserved0;
	uint64_t __reserved[3];
};
#define GPUSLOT_SLOT_SIZE_VER0 72

/* The layout the client's current streams were built for. */
struct gpuslot_layout_info {
	uint32_t size;		/* in: sizeof(struct gpuslot_layout_info) */
	uint32_t k;
	uint32_t unit_kind;	/* GPUSLOT_UNIT_* of <linux/gpuslot.h> */
	uint32_t nr_units;	/* the GPU's units: CUs, or NVIDIA SM groups */
	uint32_t hqd_reserved;	/* hardware queues the client reserved */
	uint32_t live_generations; /* stream sets kept: current + unretired */
	uint64_t generation;
	uint64_t rebuilds;	/* times new streams were built */
	const char *backend;	/* "none", "hip", "cuda" */
	/* "" or what the user should know, e.g. that MPS is not running */
	const char *notice;
	/*
	 * The runtime's device number of the domain's GPU, as the process
	 * sees it (HIP/CUDA_VISIBLE_DEVICES applied): what a framework's
	 * external-stream wrapper needs. -1 for the none backend. (1.2)
	 */
	int32_t device;
	/* SMs per unit for GPUSLOT_UNIT_NV_SM_GROUP; 1 otherwise. (1.2) */
	uint32_t unit_size;
	uint64_t __reserved[3];
};
#define GPUSLOT_LAYOUT_INFO_SIZE_VER0 88

/* The library's version, GPUSLOT_VERSION_NUMBER(major, minor, patch). */
GPUSLOT_API uint32_t gpuslot_lib_version(void);

/*
 * gpuslot_open - open a client of GPU domain @opts->domain.
 *
 * Reads the layout, reserves the hardware queues the backend will create
 * (its streams, and HIP's default queue pool and runtime queues once per
 * process), then creates one stream per slot of @opts->slot_mask. This is
 * the slow part (milliseconds per stream) and happens once: creating or
 * re-masking a queue later would preempt every queue on the GPU.
 *
 * HIP: the runtime already in the process is used (PyTorch-ROCm loaded
 * one), else libamdhip64.so.7, .so.6, .so.5 in that order. The library sets
 * GPU_MAX_HW_QUEUES=1 when it loads HIP itself and the variable is unset;
 * when HIP was loaded before, its pool (GPU_MAX_HW_QUEUES, default 4) is
 * reserved as it is, and the layout notice says how to shrink it.
 * CUDA: one green context per partitioned slot from the layout's SM
 * groups; without an MPS control daemon, green contexts of different
 * processes time-slice (the layout notice says so). No call leaves a
 * context current on the calling thread that was not current before.
 *
 * Errors: -ENOENT no /dev/gpuslot (module not loaded); -EACCES not in the
 * device's group; -EINVAL bad options or domain; -E2BIG options from a
 * newer library with fields this one does not know; -ENOSPC the queue
 * budget is short (the message names who holds it); -ENODEV the backend's
 * runtime (HIP or CUDA) cannot be loaded, or the domain's GPU is not
 * visible to it; -EOPNOTSUPP a layout the backend cannot serve; -EIO a
 * stream could not be created, or the layout was planned for another GPU.
 */
GPUSLOT_API int gpuslot_open(const struct gpuslot_options *opts,
			     struct gpuslot_client **out);

/*
 * gpuslot_close - end @c: slots still held are released (without waiting
 * for their work), and when the last client sharing them closes, the
 * streams are destroyed and the queue reservation returned. NULL is
 * allowed. In a forked child it only closes the child's descriptors: the
 * parent's slots stay held.
 *
 * It frees @c: no other thread may be in a call on @c, or make one later
 * (as with close(2) or free(3)). A thread waiting in gpuslot_acquire_slot()
 * wakes only for a grant, its timeout or a signal: to end waits when a
 * client closes, wait with a timeout, or use the asynchronous acquire and
 * poll its descriptor together with one of the caller's own that the
 * closing thread makes readable (then gpuslot_acquire_cancel()). Called
 * while calls of @c still run in other threads, it writes a message to
 * stderr and aborts rather than free the client under them.
 */
GPUSLOT_API void gpuslot_close(struct gpuslot_client *c);

/*
 * gpuslot_acquire_slot - take a slot, in strict FIFO order with every other
 * waiter of the domain, into @slot (set slot->size first).
 *
 * @timeout_ns: 0 tries once (-EAGAIN), GPUSLOT_WAIT_FOREVER waits, > 0
 * waits at most that long (-ETIMEDOUT). @allowed_mask: bit i allows slot
 * i; 0 allows any slot the client has streams for. While it holds the slot
 * the calling thread runs SCHED_FIFO (the domain's boost_priority) and gets
 * its old policy back on release.
 *
 * A grant under a layout newer than the client's streams is given back,
 * the new streams are built (outside the hold) and the call queues again:
 * once per layout change it loses its place in the queue.
 *
 * Errors: -EAGAIN, -ETIMEDOUT, -EINTR (a signal; nothing is held);
 * -EINVAL a mask that allows no slot below k, or none the client built
 * streams for; -ECHILD in a forked child; -EIO or -ENOSPC new streams
 * could not be built (nothing is held).
 */
GPUSLOT_API int gpuslot_acquire_slot(struct gpuslot_client *c, int64_t timeout_ns,
				     uint64_t allowed_mask,
				     struct gpuslot_slot *slot);

/*
 * gpuslot_release_slot - wait until the work queued on @slot's stream has
 * finished (unless @flags has GPUSLOT_RELEASE_NO_SYNC), then give the slot
 * to the next waiter. Any thread of the process may release it.
 * Errors: -EINVAL @slot is not a slot this client holds; -ECHILD; -EIO
 * the stream reported an error while waiting (the slot is released all
 * the same: the error is the job's, the message has the runtime's words).
 */
GPUSLOT_API int gpuslot_release_slot(struct gpuslot_client *c,
				     struct gpuslot_slot *slot, uint32_t flags);

/*
 * Asynchronous acquire, for event loops (ROS 2 executors, asyncio, epoll):
 *
 * gpuslot_acquire_start - queue for a slot without blocking. On return
 * slot->poll_fd (also gpuslot_acquire_fd()) is a descriptor that becomes
 * readable (POLLIN) when the slot is granted; the queue place is kept until
 * then. @allowed_mask as for gpuslot_acquire_slot().
 *
 * gpuslot_acquire_complete - 0 and @slot filled in as by
 * gpuslot_acquire_slot() once granted; the calling thread is the holder and
 * runs boosted from here. -EAGAIN while still queued (poll again), also
 * when the grant came under a newer layout: the new streams were built and
 * the slot queued again. -EINVAL k shrank below every allowed slot (the
 * acquire is over).
 *
 * gpuslot_acquire_cancel - leave the queue, or give back a slot granted
 * and not completed. Closing the client cancels too.
 *
 * Do not close poll_fd: it is the library's, and stays open for the next
 * acquire.
 */
GPUSLOT_API int gpuslot_acquire_start(struct gpuslot_client *c, uint64_t allowed_mask,
				      struct gpuslot_slot *slot);
GPUSLOT_API int gpuslot_acquire_fd(const struct gpuslot_slot *slot);
GPUSLOT_API int gpuslot_acquire_complete(struct gpuslot_client *c,
					 struct gpuslot_slot *slot);
GPUSLOT_API int gpuslot_acquire_cancel(struct gpuslot_client *c,
				       struct gpuslot_slot *slot);

/*
 * gpuslot_refresh - build streams for the domain's current layout now, if
 * it is newer than the client's, outside any hold. Returns 1 if it built
 * new streams, 0 if they were current, or -errno (-ENOSPC, -EIO).
 */
GPUSLOT_API int gpuslot_refresh(struct gpuslot_client *c);

/*
 * gpuslot_retire_generation - the caller is done with the streams of
 * layout generations up to @generation: they are synchronised and
 * destroyed, and their hardware queues returned. The current generation is
 * never retired. Errors: -EBUSY a slot of such a generation is still held.
 */
GPUSLOT_API int gpuslot_retire_generation(struct gpuslot_client *c,
					  uint64_t generation);

/* gpuslot_client_layout - the layout the current streams are built for. */
GPUSLOT_API int gpuslot_client_layout(struct gpuslot_client *c,
				      struct gpuslot_layout_info *out);

/*
 * gpuslot_slot_priority - slot @index's priority in the layout the
 * client's current streams are built for: 0 (the default) ..
 * GPUSLOT_MAX_SLOT_PRIORITY levels above it, the priority its stream was
 * made at (CUDA: least - p of cuCtxGetStreamPriorityRange, read back from
 * the stream; the none backend records it; the hip backend serves only 0).
 * Errors: -EINVAL @index >= k; -ECHILD. (1.3)
 */
GPUSLOT_API int gpuslot_slot_priority(struct gpuslot_client *c, uint32_t index);

/*
 * gpuslot_slots_context - a CUDA green context (a CUgreenCtx) that serves
 * every slot of @slots (a mask within the client's slot_mask) in the
 * client's current streams, in *@context, and its layout generation in
 * *@generation: to make streams with cuGreenCtxStreamCreate() that run on
 * those slots' partitions, whichever of them is held (gpuslot-run makes a
 * program's streams there). One slot, or slots of one partition: that
 * partition's context. Slots of different partitions: a context of the
 * union of their partitions, built on the first call (milliseconds), so a
 * job on such a stream may use the units of every listed slot, never a
 * unit outside them. NULL where a slot of @slots is the whole GPU. Work on
 * such streams is gated only where the caller holds a slot. The context
 * lives until its generation is retired (gpuslot_retire_generation()) or
 * the last client of the domain in the process is closed, across layout
 * changes. Errors: -EOPNOTSUPP not a client of the cuda backend; -EINVAL
 * @slots empty, or a slot not in the client's slot_mask or past k; -EIO
 * the driver could not build the union; -ECHILD. (1.5)
 */
GPUSLOT_API int gpuslot_slots_context(struct gpuslot_client *c, uint64_t slots, void **context,
				      uint64_t *generation);

/*
 * Preemptive slots (1.4; docs/preemption.md). While a slot of higher
 * priority has GPU work pending, within its preemption budget, the lower
 * slots of the domain hold their launches back: gpuslot-run's launch queue
 * for a program's own streams, gpuslot_launch_begin() below for commands
 * on a slot's stream.
 *
 * gpuslot_set_work - the hold @slot of @c has GPU work pending (@pending
 * nonzero: call it as the job's first command is submitted) or has drained
 * (0: call it once a synchronization returned). The end of the hold clears
 * it. Errors: -EINVAL @slot is not held by @c; -EOPNOTSUPP the module or
 * gpuslotd predates it; -ECONNRESET gpuslotd went away and its successor
 * does not serve the hold yet (call again); -ECHILD. (1.4)
 */
GPUSLOT_API int gpuslot_set_work(struct gpuslot_client *c, const struct gpuslot_slot *slot,
				 int pending);

/* The domain's published work state (struct gpuslot_work_state). */
struct gpuslot_work_info {
	uint32_t size;		/* in: sizeof(struct gpuslot_work_info) */
	uint32_t k;
	uint64_t generation;
	uint64_t held_mask;
	uint64_t work_mask;	/* slots whose holder reported work */
	uint64_t preempt_mask;	/* ... within their preemption budget */
	uint64_t updates;	/* changes so far */
	uint32_t preempt_level;	/* 0, or 1 + highest priority preempting */
	uint32_t __reserved0;
	uint64_t __reserved[2];
};
#define GPUSLOT_WORK_INFO_SIZE_VER0 72

/*
 * gpuslot_work_snapshot - a consistent copy of the domain's work state. The
 * first call maps it (the module's page, or gpuslotd's sealed memfd); after
 * that a call is a few loads, safe from any thread, with no system call on
 * the device; on the socket a poll() for the server's hang-up at most every
 * 2 ms. A server that is gone publishes nothing: the state reads empty
 * until the restarted server's is mapped (at the same address); no call
 * waits for that server (a call sends the request, at most every 50 ms,
 * and a later one takes the answer, never blocking). Only the first call
 * waits for gpuslotd's answer, at most 5 s.
 * Errors: -EINVAL @out->size below GPUSLOT_WORK_INFO_SIZE_VER0; -EOPNOTSUPP
 * the module or gpuslotd predates it; -ECHILD. (1.4)
 */
GPUSLOT_API int gpuslot_work_snapshot(struct gpuslot_client *c, struct gpuslot_work_info *out);

/*
 * gpuslot_work_preempts - 1 while a slot of priority above @priority
 * preempts (its work pending, within its budget), 0 otherwise, -errno as
 * for gpuslot_work_snapshot(). Cheap enough to ask before every launch.
 */
GPUSLOT_API int gpuslot_work_preempts(struct gpuslot_client *c, uint32_t priority);

/* gpuslot_launch_begin(): XSched's threshold on Hopper, gpuslot-run's default. */
#define GPUSLOT_LAUNCH_INFLIGHT_DEFAULT 4

/*
 * gpuslot_launch_begin - call before each command (a kernel, a graph
 * launch, an async copy or memset, an event wait) sent on the stream of
 * @slot, a hold of @c; send it once this returns 0, then call
 * gpuslot_launch_end(). gpuslot-run's launch queue for programs that launch
 * on their slot's stream themselves (1.7):
 *  - the hold's first command reports its work pending, as
 *    gpuslot_set_work(c, slot, 1) would (again after a report of drained),
 *    so that lower slots yield to it; the end of the hold clears it;
 *  - while a slot of higher priority than @slot preempts, it waits (in the
 *    calling thread, polling every 50 us) until the preemption ends;
 *  - where a slot of the layout outranks @slot, at most @inflight of the
 *    hold's commands are unfinished on the GPU at any time (marked by an
 *    event after each); 0: no bound. One bound per hold.
 * No command is held back longer than 1000 ms (the default preemption
 * window): one whose GPU work waits for host progress stalls, never
 * deadlocks (the first command's report is a request to the lock, as
 * gpuslot_set_work() is, and the hold's first also maps the published
 * state, waiting up to 5 s for gpuslotd). Threads may share a hold: an end
 * counts the newest begin of its own thread. Commands captured into a graph
 * report nothing and are neither held back nor marked. Errors (nothing is
 * held back or reported, no bound fixed): -EINVAL @slot not held by @c, or
 * another @inflight than this hold's first; -EOPNOTSUPP a client without
 * streams (the none backend: gpuslot-run gates a program's own), a runtime
 * without events, or a lock before preemptive slots; -ECONNRESET as for
 * gpuslot_set_work(); -ECHILD.
 */
GPUSLOT_API int gpuslot_launch_begin(struct gpuslot_client *c, const struct gpuslot_slot *slot,
				     uint32_t inflight);

/*
 * gpuslot_launch_end - the command that the calling thread's last
 * gpuslot_launch_begin() on @slot admitted was sent on @slot's stream (or
 * failed to be): where there is a bound it is counted as unfinished until
 * the GPU reaches it. -EINVAL without such a begin in this hold; -ECHILD.
 * (1.7)
 */
GPUSLOT_API int gpuslot_launch_end(struct gpuslot_client *c, const struct gpuslot_slot *slot);

/*
 * gpuslot_domain_attr - the client's domain's attribute @name with the text
 * its file has, read through the transport the client uses (the module's
 * files, or gpuslotd's socket, which answers the same names):
 *   k, boost_priority, max_hold_ms, max_boost_share, hqd_limit, pci_bus_id,
 *   generation, unit_kind, unit_size, nr_units, hqd_used, hqd_waiters,
 *   nr_holders, nr_waiters, held_mask, stats/<counter>, slot<i>/units,
 *   slot<i>/priority: /sys/class/gpuslot/gpu<N>/<name> (one value each);
 *   debug/holders, debug/waiters, debug/queues, debug/wait_hist: the
 *   tables of /sys/kernel/debug/gpuslot/gpu<N>/, root's only (-EACCES for
 *   members), as long as they are;
 *   fdinfo: the gpuslot- lines of the client's control file's fdinfo (on
 *   the socket: its connection's).
 * Writes up to @len - 1 bytes and a NUL into @buf; returns the text's full
 * length (as snprintf does), or -errno: -ENOENT no such attribute,
 * -EACCES, -ENXIO a slot at or past k, -EINVAL a name that is no attribute
 * path (empty, "..", more than one '/'), -ECHILD. (1.2; these names since
 * 1.3 and API 2)
 */
GPUSLOT_API int gpuslot_domain_attr(struct gpuslot_client *c, const char *name, char *buf,
				    size_t len);

/*
 * gpuslot_last_error - what the calling thread's last failed gpuslot call
 * did wrong and what to do about it; "" before any failure.
 */
GPUSLOT_API const char *gpuslot_last_error(void);

/*
 * gpuslot_hqd_explain - say why GPUSLOT_IOC_RESERVE_QUEUES failed with
 * ENOSPC on @domain, for a person.
 *
 * Reads the domain's hqd_used and hqd_limit and, where the caller may (root:
 * debugfs's gpuslot/gpu<domain>/queues), who holds the budget, and writes
 * into @buf a line such as
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
