# SPDX-License-Identifier: LGPL-2.1-or-later
"""asyncio: wait for a slot without a thread per waiter.

    async with gpuslot.AsyncClient() as client:
        async with await client.acquire(timeout=0.05) as slot:
            ...

An acquire queues the domain's FIFO at once (libgpuslot's pollable
acquire) and the event loop watches its descriptor; the task that awaits
is woken when the slot is granted. Cancelling the task, or its timeout,
leaves the queue (or gives back a grant not yet taken). The event loop's
thread is the holder: it runs SCHED_FIFO while any of its tasks holds a
slot. Releasing with sync waits for the stream in the loop's executor,
not in the loop.
"""

import asyncio
import ctypes
import errno
import math

from . import _native, client as _client, errors


class AsyncSlot(_client.Slot):
    """A Slot whose release is awaited."""

    async def release(self, sync=True):
        self._end_hold()
        if sync and self.stream:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self._client._release, self._raw, True)
        else:
            self._client._release(self._raw, sync)

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb):
        if self._held:
            await self.release()
        return False

    def __enter__(self):
        raise TypeError("gpuslot: use 'async with' for a slot of an AsyncClient")


class AsyncClient:
    """A gpuslot.Client for asyncio programs: the same options, the same
    layout(), status() and streams; acquire() is awaited."""

    def __init__(self, domain=0, **options):
        self._sync = _client.Client(domain, **options)

    def __getattr__(self, name):
        # layout, status, attribute, refresh, retire_generation, close
        return getattr(self._sync, name)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self._sync.close()
        return False

    async def acquire(self, timeout=None, slots=None):
        """Queue for a slot and wait for it on the event loop: an AsyncSlot
        (``async with``). ``timeout`` in seconds (None waits; 0 tries once),
        ``slots`` a set of slot indices; raises as Client.acquire() does."""
        _client.timeout_ns(timeout)
        c = self._sync
        if timeout == 0:
            return AsyncSlot(c, c.acquire(0, slots)._raw)
        if timeout == math.inf:
            timeout = None
        raw = _native.SlotStruct(size=ctypes.sizeof(_native.SlotStruct))
        errors.check(c._lib.gpuslot_acquire_start(c._h(), _client.slot_mask(slots),
                                                  ctypes.byref(raw)), "gpuslot_acquire_start")
        done = False
        try:
            try:
                async with asyncio.timeout(timeout):
                    slot = await self._granted(raw)
            except TimeoutError:
                raise errors.SlotTimeout(
                    errno.ETIMEDOUT, f"gpuslot: no slot of domain {c.domain} within "
                                     f"{timeout} s") from None
            done = True
            return slot
        finally:
            if not done:
                c._lib.gpuslot_acquire_cancel(c._h(), ctypes.byref(raw))

    async def _granted(self, raw):
        c = self._sync
        loop = asyncio.get_running_loop()
        fd = raw.poll_fd
        while True:
            ready = loop.create_future()
            loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
            try:
                await ready
            finally:
                loop.remove_reader(fd)
            result = c._lib.gpuslot_acquire_complete(c._h(), ctypes.byref(raw))
            # EAGAIN: still queued (a new layout queued it again).
            if result != -errno.EAGAIN:
                errors.check(result, "gpuslot_acquire_complete")
                return AsyncSlot(c, raw)
