# SPDX-License-Identifier: GPL-2.0
# The lock core for userspace: the module's own core.c, budget.c,
# partition.c, boost.c and preempt.c, compiled for gpuslotd's lock server, the unit
# tests and the fuzzers; shim/ stands in for the few kernel headers they
# include. kmod/Kbuild compiles the same files into gpuslot.ko.
set(GPUSLOT_LOCKCORE_DIR ${CMAKE_CURRENT_LIST_DIR})
set(GPUSLOT_LOCKCORE_SOURCES ${GPUSLOT_LOCKCORE_DIR}/core.c
    ${GPUSLOT_LOCKCORE_DIR}/budget.c ${GPUSLOT_LOCKCORE_DIR}/partition.c
    ${GPUSLOT_LOCKCORE_DIR}/boost.c ${GPUSLOT_LOCKCORE_DIR}/preempt.c)
# <uapi/linux/gpuslot.h> from the repository root, as Kbuild's -I$(src)/..
cmake_path(GET GPUSLOT_LOCKCORE_DIR PARENT_PATH _gpuslot_kmod)
cmake_path(GET _gpuslot_kmod PARENT_PATH _gpuslot_root)
set(GPUSLOT_LOCKCORE_INCLUDES ${GPUSLOT_LOCKCORE_DIR} ${GPUSLOT_LOCKCORE_DIR}/shim
    ${_gpuslot_root})
