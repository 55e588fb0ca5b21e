/* SPDX-License-Identifier: GPL-2.0 */
/* Userspace stand-in for the kernel's <uapi/linux/sched.h>: the policies. */
#ifndef GPUSLOT_SHIM_UAPI_SCHED_H
#define GPUSLOT_SHIM_UAPI_SCHED_H

#include <linux/sched.h>

#endif
