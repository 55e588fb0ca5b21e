/* SPDX-License-Identifier: GPL-2.0 */
/* Userspace stand-in for the kernel's <linux/types.h>, for kmod/lockcore/core.c. */
#ifndef GPUSLOT_SHIM_TYPES_H
#define GPUSLOT_SHIM_TYPES_H

#include_next <linux/types.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif
#include <stdint.h>

typedef uint8_t u8;
typedef uint32_t u32;
typedef uint64_t u64;

#ifndef U64_MAX
#define U64_MAX UINT64_MAX
#endif

#endif
