# SPDX-License-Identifier: LGPL-2.1-or-later
"""gpuslot: GPU admission control for real-time Linux hosts, from Python.

A GPU slot in three lines::

    import gpuslot
    with gpuslot.Client() as client, client.acquire() as slot:
        run_model(stream=slot.torch_stream())

Client(domain) attaches the process to one GPU domain of gpuslot (the
kernel module's /dev/gpuslot, or gpuslotd's socket where the module is not
loaded) and builds one partition-restricted stream per slot, once.
acquire() takes a slot in strict FIFO order (at most k holders at once,
each on its own CUs/SMs), boosts the calling thread to SCHED_FIFO, and
returns a Slot; leaving its ``with`` waits for the work queued on its
stream and hands the slot on. AsyncClient does the same for asyncio.

Over libgpuslot.so.1 (ctypes; GPUSLOT_LIBRARY names another copy).
Reference: libgpuslot(3), docs/python.md.
"""

from ._native import lib as _lib
from .aio import AsyncClient, AsyncSlot
from .client import Client, Layout, Slot, WorkState
from .errors import ClientClosed, GpuslotError, NotPermitted, SlotInterrupted, SlotTimeout
from .graphs import SlotGraph
from .status import Holder, SlotInfo, Status, Waiter

__all__ = ["Client", "Slot", "Layout", "WorkState", "AsyncClient", "AsyncSlot", "Status", "Holder",
           "Waiter", "SlotInfo", "SlotGraph", "GpuslotError", "SlotTimeout", "SlotInterrupted",
           "ClientClosed", "NotPermitted",
           "library_version",
           "hqd_explain", "__version__"]

__version__ = "1.3.0"


def library_version():
    """The loaded libgpuslot's version as (major, minor, patch)."""
    v = _lib().gpuslot_lib_version()
    return (v >> 16, v >> 8 & 0xff, v & 0xff)


def hqd_explain(domain, needed):
    """Why a hardware-queue reservation of ``needed`` on ``domain`` fails,
    for a person (who holds the budget)."""
    import ctypes
    buf = ctypes.create_string_buffer(1024)
    n = _lib().gpuslot_hqd_explain(domain, needed, buf, len(buf))
    if n < 0:
        raise GpuslotError(-n, buf.value.decode(errors="replace"))
    return buf.value.decode(errors="replace")
