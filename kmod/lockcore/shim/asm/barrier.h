/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Userspace stand-in for the kernel's <asm/barrier.h>, for
 * kmod/lockcore/preempt.c: the write side of the work state's seqcount,
 * whose readers are other processes mapping gpuslotd's memfd.
 */
#ifndef GPUSLOT_SHIM_ASM_BARRIER_H
#define GPUSLOT_SHIM_ASM_BARRIER_H

#define smp_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)

#endif
