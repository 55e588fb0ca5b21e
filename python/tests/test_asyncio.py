# SPDX-License-Identifier: LGPL-2.1-or-later
"""AsyncClient: waiting for slots on the event loop, no thread per waiter."""

import asyncio
import errno
import os
import threading

import pytest

import gpuslot
from libcalls import CountingLib


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_tasks_are_served_in_the_order_they_queued(lock):
    async def main():
        order, holding = [], []
        async with gpuslot.AsyncClient(backend="none") as client:
            first = await client.acquire()

            async def task(i):
                async with await client.acquire(timeout=10) as slot:
                    holding.append(slot.index)
                    assert len(holding) == 1
                    order.append(i)
                    await asyncio.sleep(0.001)
                    holding.pop()

            tasks = []
            for i in range(20):
                tasks.append(asyncio.create_task(task(i)))
                await asyncio.sleep(0.002)  # queued one after another
            waiting = len(client.status().waiters)
            await first.release()
            await asyncio.gather(*tasks)
            return order, waiting, threading.active_count()

    order, waiting, threads = run(main())
    assert order == list(range(20))
    assert waiting == 20
    # The default executor aside, no thread per waiter.
    assert threads < 5


def test_a_timeout_or_a_cancel_leaves_the_queue(lock):
    async def main():
        async with gpuslot.AsyncClient(backend="none") as client:
            held = await client.acquire()
            with pytest.raises(gpuslot.SlotTimeout) as e:
                await client.acquire(timeout=0.1)
            assert e.value.errno == errno.ETIMEDOUT
            task = asyncio.create_task(client.acquire())
            await asyncio.sleep(0.05)
            assert len(client.status().waiters) == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert client.status().waiters == ()
            with pytest.raises(gpuslot.SlotTimeout) as e:
                await client.acquire(timeout=0)
            assert e.value.errno == errno.EAGAIN
            await held.release()
            # The slot was not handed to the cancelled waiter.
            async with await client.acquire(timeout=0) as slot:
                assert slot.held
            assert [h for h in client.status().holders if h.pid == os.getpid()] == []

    run(main())


def test_an_async_slot_is_not_a_plain_context_manager(lock):
    async def main():
        async with gpuslot.AsyncClient(backend="none") as client:
            slot = await client.acquire()
            with pytest.raises(TypeError, match="async with"):
                with slot:
                    pass
            await slot.release()

    run(main())


def test_the_first_try_counts_against_the_timeout(lock, monkeypatch):
    """Issue 32: AsyncClient.acquire() tries once before it queues, as
    Client.acquire() does, and the try's time counts against the timeout:
    a try that used all of it ends the call with ETIMEDOUT, never queued;
    one that used part of it leaves the wait the rest (the wait's deadline
    is the one taken before the try)."""
    deadlines = []
    timeout_at = asyncio.timeout_at

    def recorded(when):
        deadlines.append(when)
        return timeout_at(when)

    monkeypatch.setattr(asyncio, "timeout_at", recorded)

    async def main():
        async with gpuslot.AsyncClient(backend="none") as client:
            held = await client.acquire()
            sync = client._sync
            slow = CountingLib(sync._lib, delays={"gpuslot_acquire_slot": 0.3})
            sync._lib = slow
            try:
                with pytest.raises(gpuslot.SlotTimeout) as e:
                    await client.acquire(timeout=0.2)
                assert e.value.errno == errno.ETIMEDOUT
                assert "within 0.2 s" in str(e.value)
                assert slow.calls == ["gpuslot_acquire_slot"]
                assert deadlines == []
                assert client.status().waiters == ()
                slow.calls.clear()
                # 0.3 s of 1 s gone in the try: the wait ends 1 s from the
                # call, not 1 s from the try's end (1.3 s), queued through
                # the pollable acquire; it leaves the queue.
                loop = asyncio.get_running_loop()
                start = loop.time()
                with pytest.raises(gpuslot.SlotTimeout) as e:
                    await client.acquire(timeout=1.0)
                assert "within 1.0 s" in str(e.value)
                assert slow.calls[:2] == ["gpuslot_acquire_slot", "gpuslot_acquire_start"]
                assert "gpuslot_acquire_cancel" in slow.calls
                assert len(deadlines) == 1 and deadlines[0] - start < 1.0 + 0.15
                assert client.status().waiters == ()
            finally:
                sync._lib = slow._lib
            await held.release()
            assert client.status().waiters == ()

    run(main())
