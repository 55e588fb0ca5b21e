/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Userspace stand-in for the kernel's <linux/build_bug.h>, for
 * kmod/lockcore/partition.c: the kernel's <linux/nospec.h> uses BUILD_BUG_ON
 * without including it (x86's <asm/barrier.h> happens to; arm64's does not).
 */
#ifndef GPUSLOT_SHIM_BUILD_BUG_H
#define GPUSLOT_SHIM_BUILD_BUG_H

#define BUILD_BUG_ON(condition) _Static_assert(!(condition), #condition)

#endif
