/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Userspace stand-in for the kernel's <linux/nospec.h>, for kmod/lockcore/partition.c.
 * In gpuslotd the index is bounded by the check before it; what the kernel
 * guards against, a speculative read by the caller of a system call, has no
 * counterpart in a process's own memory.
 */
#ifndef GPUSLOT_SHIM_NOSPEC_H
#define GPUSLOT_SHIM_NOSPEC_H

#define array_index_nospec(index, size) (index)

#endif
