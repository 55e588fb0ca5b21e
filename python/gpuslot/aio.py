# SPDX-License-Identifier: LGPL-2.1-or-later
"""asyncio: wait for a slot without a thread per waiter.

    async with gpuslot.AsyncClient() as client:
        async with await client.acquire(timeout=0.05) as slot:
            ...

An acquire takes a free slot at once (one try), or else queues in the
domain's FIFO (libgpuslot's pollable acquire) and the event loop watches
its descriptor; the task that awaits
is woken when the slot is granted. Cancelling the task, or its timeout,
leaves the queue (or gives back a grant not yet taken). The event loop's
thread is the holder: it runs SCHED_FIFO while any of its tasks holds a
slot. Releasing with sync waits for the stream in the loop's executor,
not in the loop. close() wakes the tasks still waiting with ClientClosed
(ECANCELED), as Client.close() does its threads.
"""

import asyncio
import ctypes
import errno
import math
import os

from . import _native, client as _client, errors


class AsyncSlot(_client.Slot):
    """A Slot whose release is awaited."""

    async def release(self, sync=True):
        self._end_hold()
        if sync and self.stream:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self._client._release, self, True)
        else:
            self._client._release(self, sync)

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
        ``slots`` a set of slot indices; raises as Client.acquire() does,
        ClientClosed (ECANCELED) if the client is closed meanwhile."""
        ns = _client.timeout_ns(timeout)
        mask = _client.slot_mask(slots)
        c = self._sync
        if ns == 0:
            return c._acquire(0, mask, AsyncSlot)
        if timeout == math.inf:
            timeout = None
        loop = asyncio.get_running_loop()
        # A free slot in one round trip, as Client.acquire does. The try
        # (which may build a new layout's streams) counts against the
        # timeout: the wait below ends at the same deadline, and a try
        # that used all of it does not queue.
        deadline = None if timeout is None else loop.time() + timeout
        try:
            return c._acquire(0, mask, AsyncSlot)
        except errors.SlotTimeout:
            pass
        if deadline is not None and loop.time() >= deadline:
            raise c._timed_out(ns)
        raw = _native.SlotStruct(size=ctypes.sizeof(_native.SlotStruct))
        wait = _Wait(loop)
        handle = c._begin_call()
        try:
            errors.check(c._lib.gpuslot_acquire_start(handle, mask, ctypes.byref(raw)),
                         "gpuslot_acquire_start")
            # The loop watches a descriptor of its own: the library's
            # closes with the client, whatever the loop still has.
            fd = os.dup(raw.poll_fd)
            with c._lock:
                c._on_close.add(wait.close)
        finally:
            c._end_call()
        done = False
        loop.add_reader(fd, wait.wake)
        try:
            try:
                async with _timeout_at(deadline):
                    slot = await self._granted(raw, wait)
            except TimeoutError:
                raise c._timed_out(ns) from None
            done = True
            return slot
        finally:
            loop.remove_reader(fd)
            os.close(fd)
            with c._lock:
                c._on_close.discard(wait.close)
            if not done:
                # Leave the queue, or give back a grant not taken; a
                # closed client's close did that already.
                try:
                    c._call(c._lib.gpuslot_acquire_cancel, ctypes.byref(raw))
                except errors.ClientClosed:
                    pass

    async def _granted(self, raw, wait):
        c = self._sync
        while True:
            await wait.next()
            if wait.closed or c._closing:
                raise _closed_while_waiting(c)
            try:
                handle = c._begin_call()
            except errors.ClientClosed:
                raise _closed_while_waiting(c) from None
            try:
                result = c._lib.gpuslot_acquire_complete(handle, ctypes.byref(raw))
                # EAGAIN: still queued (a new layout queued it again).
                if result != -errno.EAGAIN:
                    errors.check(result, "gpuslot_acquire_complete")
                    return c._hand_out(AsyncSlot(c, raw))
            finally:
                c._end_call()


def _timeout_at(when):
    """asyncio.timeout_at(when) (Python 3.11), or on 3.10 _TimeoutAt,
    which ends the block the same way: TimeoutError at loop time ``when``
    (None: never), the task's own cancellation passed on as it is."""
    timeout_at = getattr(asyncio, "timeout_at", None)
    return timeout_at(when) if timeout_at is not None else _TimeoutAt(when)


class _TimeoutAt:
    """asyncio.timeout_at for Python 3.10: at ``when`` the block's task is
    cancelled, and the CancelledError that ends the block becomes
    TimeoutError. 3.10 has no Task.uncancel(), so a cancel from elsewhere
    that comes with the deadline's in one step of the loop is taken for
    the deadline's (3.11 tells them apart): the task still ends, with
    TimeoutError."""

    def __init__(self, when):
        self._when = when
        self._handle = None
        self._expired = False
        self._task = None

    async def __aenter__(self):
        self._task = asyncio.current_task()
        if self._task is None:
            raise RuntimeError("gpuslot: a timeout outside a task")
        if self._when is not None:
            loop = asyncio.get_running_loop()
            if self._when <= loop.time():
                self._handle = loop.call_soon(self._expire)
            else:
                self._handle = loop.call_at(self._when, self._expire)
        return self

    async def __aexit__(self, exc_type, exc, tb):
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._expired and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc
        return False

    def _expire(self):
        self._expired = True
        self._task.cancel()
        self._handle = None


def _closed_while_waiting(c):
    return errors.ClientClosed(
        errno.ECANCELED, f"gpuslot: the client of domain {c.domain} was closed while this "
                         "task waited for a slot; it left the queue and holds nothing")


class _Wait:
    """What one waiting acquire is woken by: its descriptor's readiness
    (on the loop), or close() (from any thread)."""

    def __init__(self, loop):
        self._loop = loop
        self._ready = loop.create_future()
        self.closed = False

    def wake(self):
        if not self._ready.done():
            self._ready.set_result(None)

    async def next(self):
        await self._ready
        self._ready = self._loop.create_future()

    def close(self):
        def wake_closed():
            self.closed = True
            self.wake()
        try:
            self._loop.call_soon_threadsafe(wake_closed)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more
