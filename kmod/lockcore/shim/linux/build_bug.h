/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Userspace stand-in for the kernel's <linux/build_bug.h>, which
 * kmod/lockcore/partition.c includes because the kernel's <linux/nospec.h>
 * uses BUILD_BUG_ON() without including it (x86's <asm/barrier.h> of 6.1
 * happens to; 5.10's and arm64's do not). Nothing here uses it yet.
 */
#ifndef GPUSLOT_SHIM_BUILD_BUG_H
#define GPUSLOT_SHIM_BUILD_BUG_H

#define BUILD_BUG_ON(condition) _Static_assert(!(condition), #condition)

#endif
