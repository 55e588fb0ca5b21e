# SPDX-License-Identifier: LGPL-2.1-or-later
"""ctypes declarations of libgpuslot's C API (gpuslot.h), and the library.

Kept in step with libclient/include/gpuslot.h: every struct carries its
size, so this module may be older or newer than the library it loads.
"""

import ctypes
import os

WAIT_FOREVER = -1
OPEN_WAIT_QUEUES = 1 << 0
OPEN_GPU_INDEX = 1 << 1
RELEASE_NO_SYNC = 1 << 0

BACKENDS = {"auto": 0, "none": 1, "hip": 2, "cuda": 3}


class Options(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("domain", ctypes.c_uint32),
        ("backend", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("gpu_index", ctypes.c_int32),
        ("runtime_queues", ctypes.c_uint32),
        ("slot_mask", ctypes.c_uint64),
        ("device", ctypes.c_char_p),
        ("sysfs_root", ctypes.c_char_p),
        ("_reserved", ctypes.c_uint64 * 4),
    ]


class SlotStruct(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("index", ctypes.c_uint32),
        ("units", ctypes.c_uint32),
        ("poll_fd", ctypes.c_int32),
        ("generation", ctypes.c_uint64),
        ("stream", ctypes.c_void_p),
        ("handle", ctypes.c_uint64),
        ("priority", ctypes.c_uint32),
        ("_reserved0", ctypes.c_uint32),
        ("_reserved", ctypes.c_uint64 * 3),
    ]


class LayoutInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("k", ctypes.c_uint32),
        ("unit_kind", ctypes.c_uint32),
        ("nr_units", ctypes.c_uint32),
        ("hqd_reserved", ctypes.c_uint32),
        ("live_generations", ctypes.c_uint32),
        ("generation", ctypes.c_uint64),
        ("rebuilds", ctypes.c_uint64),
        ("backend", ctypes.c_char_p),
        ("notice", ctypes.c_char_p),
        ("device", ctypes.c_int32),
        ("unit_size", ctypes.c_uint32),
        ("_reserved", ctypes.c_uint64 * 3),
    ]


class WorkInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("k", ctypes.c_uint32),
        ("generation", ctypes.c_uint64),
        ("held_mask", ctypes.c_uint64),
        ("work_mask", ctypes.c_uint64),
        ("preempt_mask", ctypes.c_uint64),
        ("updates", ctypes.c_uint64),
        ("preempt_level", ctypes.c_uint32),
        ("_reserved0", ctypes.c_uint32),
        ("_reserved", ctypes.c_uint64 * 2),
    ]


# The *_SIZE_VER0 literals of gpuslot.h: the structs may grow, never shrink.
assert ctypes.sizeof(WorkInfo) == 72
assert ctypes.sizeof(Options) == 80
assert ctypes.sizeof(SlotStruct) == 72
assert ctypes.sizeof(LayoutInfo) == 88

_client_p = ctypes.c_void_p


def _declare(lib):
    def fn(name, restype, *argtypes):
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = list(argtypes)

    fn("gpuslot_lib_version", ctypes.c_uint32)
    fn("gpuslot_open", ctypes.c_int, ctypes.POINTER(Options), ctypes.POINTER(_client_p))
    fn("gpuslot_close", None, _client_p)
    fn("gpuslot_acquire_slot", ctypes.c_int, _client_p, ctypes.c_int64, ctypes.c_uint64,
       ctypes.POINTER(SlotStruct))
    fn("gpuslot_release_slot", ctypes.c_int, _client_p, ctypes.POINTER(SlotStruct),
       ctypes.c_uint32)
    fn("gpuslot_acquire_start", ctypes.c_int, _client_p, ctypes.c_uint64,
       ctypes.POINTER(SlotStruct))
    fn("gpuslot_acquire_complete", ctypes.c_int, _client_p, ctypes.POINTER(SlotStruct))
    fn("gpuslot_acquire_cancel", ctypes.c_int, _client_p, ctypes.POINTER(SlotStruct))
    fn("gpuslot_refresh", ctypes.c_int, _client_p)
    fn("gpuslot_retire_generation", ctypes.c_int, _client_p, ctypes.c_uint64)
    fn("gpuslot_client_layout", ctypes.c_int, _client_p, ctypes.POINTER(LayoutInfo))
    fn("gpuslot_domain_attr", ctypes.c_int, _client_p, ctypes.c_char_p, ctypes.c_char_p,
       ctypes.c_size_t)
    fn("gpuslot_slot_priority", ctypes.c_int, _client_p, ctypes.c_uint32)
    fn("gpuslot_last_error", ctypes.c_char_p)
    fn("gpuslot_hqd_explain", ctypes.c_int, ctypes.c_uint, ctypes.c_uint, ctypes.c_char_p,
       ctypes.c_size_t)
    # Preemptive slots (libgpuslot 1.4): absent from an older library,
    # whose callers get EOPNOTSUPP from the package instead.
    if hasattr(lib, "gpuslot_set_work"):
        fn("gpuslot_set_work", ctypes.c_int, _client_p, ctypes.POINTER(SlotStruct), ctypes.c_int)
        fn("gpuslot_work_snapshot", ctypes.c_int, _client_p, ctypes.POINTER(WorkInfo))
        fn("gpuslot_work_preempts", ctypes.c_int, _client_p, ctypes.c_uint32)
    # The launch gate (libgpuslot 1.7), likewise.
    if hasattr(lib, "gpuslot_launch_begin"):
        fn("gpuslot_launch_begin", ctypes.c_int, _client_p, ctypes.POINTER(SlotStruct),
           ctypes.c_uint32)
        fn("gpuslot_launch_end", ctypes.c_int, _client_p, ctypes.POINTER(SlotStruct))
    return lib


_lib = None


def lib():
    """libgpuslot.so.1, loaded on first use.

    GPUSLOT_LIBRARY names another file (a build tree's); otherwise the
    dynamic loader finds the installed one. ctypes drops the GIL around
    every call, so threads blocked in an acquire do not stop the others.
    """
    global _lib
    if _lib is None:
        name = os.environ.get("GPUSLOT_LIBRARY") or "libgpuslot.so.1"
        try:
            loaded = ctypes.CDLL(name, use_errno=True)
        except OSError as e:
            raise ImportError(
                f"gpuslot: cannot load {name} ({e}); install libgpuslot1, or set "
                "GPUSLOT_LIBRARY to the library's path") from e
        if not hasattr(loaded, "gpuslot_slot_priority"):
            raise ImportError(f"gpuslot: {name} is older than 1.3; this package needs "
                              "libgpuslot 1.3 or newer (API 2: slot priorities)")
        _lib = _declare(loaded)
    return _lib


def last_error():
    """The calling thread's libgpuslot explanation of its last failure."""
    text = lib().gpuslot_last_error()
    return text.decode(errors="replace") if text else ""
