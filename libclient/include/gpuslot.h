/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libgpuslot: the client library of gpuslot.
 *
 * This header grows into the whole C API (open a domain, acquire a slot,
 * get its stream). For now it holds the hardware-queue diagnostics.
 */
#ifndef GPUSLOT_H
#define GPUSLOT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

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
int gpuslot_hqd_explain(unsigned int domain, unsigned int needed, char *buf,
			size_t len);

#ifdef __cplusplus
}
#endif

#endif /* GPUSLOT_H */
