/* SPDX-License-Identifier: GPL-2.0 */
/* Userspace stand-in for the kernel's <linux/bitops.h>, for kmod/lockcore/core.c. */
#ifndef GPUSLOT_SHIM_BITOPS_H
#define GPUSLOT_SHIM_BITOPS_H

#include <linux/types.h>

/* Index of the lowest set bit; undefined for 0, as in the kernel. */
static inline unsigned int __ffs64(u64 word)
{
	return (unsigned int)__builtin_ctzll(word);
}

#endif
