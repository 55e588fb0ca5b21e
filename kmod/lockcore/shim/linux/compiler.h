/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Userspace stand-in for the kernel's WRITE_ONCE() (<linux/compiler.h>),
 * for kmod/lockcore/preempt.c: a relaxed atomic store, so that a reader
 * in another process or thread never sees a torn field.
 */
#ifndef GPUSLOT_SHIM_COMPILER_H
#define GPUSLOT_SHIM_COMPILER_H

#define WRITE_ONCE(x, val) __atomic_store_n(&(x), (val), __ATOMIC_RELAXED)

#endif
