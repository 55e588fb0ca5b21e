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
    from gpuslot import aio
    deadlines = []
    timeout_at = aio._timeout_at

    def recorded(when):
        deadlines.append(when)
        return timeout_at(when)

    monkeypatch.setattr(aio, "_timeout_at", recorded)

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


def test_without_asyncio_timeout_at_the_fallback_behaves_alike(lock, monkeypatch):
    """Issue 37: Python 3.10 has no asyncio.timeout_at; AsyncClient.acquire()
    then times its wait with gpuslot.aio._TimeoutAt. Forced here (the
    attribute removed, as on 3.10): a timeout is SlotTimeout (ETIMEDOUT) and
    leaves the queue, a cancel is the task's CancelledError and leaves the
    queue, a grant before the deadline is a slot, and no cancel is left
    over after the block."""
    from gpuslot import aio
    monkeypatch.delattr(asyncio, "timeout_at", raising=False)
    made = []

    class Recorded(aio._TimeoutAt):
        def __init__(self, when):
            made.append(when)
            super().__init__(when)

    monkeypatch.setattr(aio, "_TimeoutAt", Recorded)

    async def main():
        async with gpuslot.AsyncClient(backend="none") as client:
            held = await client.acquire()
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(gpuslot.SlotTimeout) as e:
                await client.acquire(timeout=0.1)
            assert e.value.errno == errno.ETIMEDOUT
            assert loop.time() - start >= 0.09
            assert len(made) == 1 and made[0] - start <= 0.1 + 0.05
            assert client.status().waiters == ()
            task = asyncio.create_task(client.acquire(timeout=30))
            await asyncio.sleep(0.05)
            assert len(client.status().waiters) == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert client.status().waiters == ()
            # Granted within its time: a slot, and the task goes on
            # awaiting without a stray cancel.
            task = asyncio.create_task(client.acquire(timeout=30))
            await asyncio.sleep(0.05)
            await held.release()
            slot = await task
            assert slot.held
            await asyncio.sleep(0.01)
            await slot.release()
            # No deadline: waits.
            held = await client.acquire()
            task = asyncio.create_task(client.acquire())
            await asyncio.sleep(0.05)
            assert not task.done()
            await held.release()
            await (await task).release()
            assert made[-1] is None

    run(main())


def test_the_fallback_timeout_alone():
    """gpuslot.aio._TimeoutAt as asyncio.timeout_at: TimeoutError at the
    deadline (also one already past), the task's own cancel passed on as
    CancelledError, nothing left over once the block ended in time."""
    from gpuslot import aio

    async def main():
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(TimeoutError):
            async with aio._TimeoutAt(start + 0.05):
                await asyncio.sleep(10)
        assert 0.05 <= loop.time() - start < 5
        with pytest.raises(TimeoutError):
            async with aio._TimeoutAt(loop.time() - 1):
                await asyncio.sleep(10)
        async with aio._TimeoutAt(loop.time() + 0.05):
            await asyncio.sleep(0)
        await asyncio.sleep(0.1)  # no cancel left for later

        async def cancelled():
            async with aio._TimeoutAt(loop.time() + 10):
                await asyncio.sleep(10)

        task = asyncio.create_task(cancelled())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
