/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Userspace stand-in for the kernel's <linux/build_bug.h>, which
 * kmod/lockcore/partition.c includes for 5.10's <linux/nospec.h> (that
 * uses BUILD_BUG_ON() without including it). Nothing of it is used here.
 */
#ifndef GPUSLOT_SHIM_BUILD_BUG_H
#define GPUSLOT_SHIM_BUILD_BUG_H
#endif
