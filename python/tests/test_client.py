# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Client and Slot against a real lock (module or gpuslotd's socket)."""

import errno
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import gpuslot
from libcalls import CountingLib


def my_holds(status):
    return [h for h in status.holders if h.pid == os.getpid()]


def test_a_slot_is_held_inside_its_with_and_released_after(client):
    with client.acquire() as slot:
        assert 0 <= slot.index < client.layout().k
        assert slot.held
        holders = my_holds(client.status())
        assert [(h.slot, h.tid) for h in holders] == [(slot.index, threading.get_native_id())]
    assert not slot.held
    assert my_holds(client.status()) == []


def test_release_twice_is_an_error_not_a_second_release(client):
    slot = client.acquire()
    slot.release()
    with pytest.raises(gpuslot.GpuslotError) as e:
        slot.release()
    assert e.value.errno == errno.EINVAL


def test_a_try_and_a_timeout_raise_slot_timeout_with_their_errno(client):
    with client.acquire():
        other = {}

        def contend():
            with gpuslot.Client(backend="none") as c:
                for name, timeout in (("try", 0), ("timed", 0.2)):
                    start = time.monotonic()
                    try:
                        c.acquire(timeout=timeout)
                        other[name] = "granted"
                    except gpuslot.SlotTimeout as e:
                        other[name] = (e.errno, time.monotonic() - start, str(e))

        t = threading.Thread(target=contend)
        t.start()
        t.join()
    assert other["try"][0] == errno.EAGAIN
    assert other["timed"][0] == errno.ETIMEDOUT
    assert other["timed"][1] >= 0.2
    assert isinstance(gpuslot.SlotTimeout(errno.ETIMEDOUT, "x"), TimeoutError)


def test_allowed_slots_are_a_set(client, k):
    k(2)
    client.refresh()
    with client.acquire(slots={1}) as one:
        assert one.index == 1
        with client.acquire(timeout=0, slots={0, 1}) as zero:
            assert zero.index == 0
    with pytest.raises(gpuslot.GpuslotError) as e:
        client.acquire(slots={5})
    assert e.value.errno == errno.EINVAL
    assert "slot" in e.value.strerror
    for bad in (set(), {64}, {-1}, {"0"}, {True}):
        with pytest.raises(ValueError):
            client.acquire(slots=bad)


@pytest.mark.parametrize("bad", [-1, "1", float("nan"), True])
def test_a_bad_timeout_is_refused_before_anything_happens(client, bad):
    with pytest.raises(ValueError, match="timeout"):
        client.acquire(timeout=bad)
    assert my_holds(client.status()) == []


def test_failures_carry_errno_and_the_librarys_explanation(lock):
    with pytest.raises(gpuslot.GpuslotError) as e:
        gpuslot.Client(domain=40, backend="none")
    assert e.value.errno in (errno.EINVAL, errno.ENOENT, errno.ENODEV)
    assert e.value.strerror.startswith("gpuslot: ")
    assert "40" in e.value.strerror
    with pytest.raises(ValueError):
        gpuslot.Client(backend="vulkan")
    with pytest.raises(ValueError):
        gpuslot.Client(domain=-1)


def test_layout_and_status_are_plain_objects(client):
    layout = client.layout()
    status = client.status()
    assert layout.k == status.k >= 1
    assert layout.generation == status.generation
    assert layout.backend == "none" and layout.device == -1
    assert layout.unit_kind in ("none", "cu", "sm_group")
    assert layout.unit_size >= 1
    assert status.stats["acquisitions"] >= 0
    assert len(status.wait_hist) == 32
    assert [lo for lo, _ in status.wait_hist] == [1 << i for i in range(32)]
    assert status.nr_holders == len(status.holders) and status.nr_waiters == 0
    assert status.hqd_used <= status.hqd_limit
    with pytest.raises(gpuslot.GpuslotError) as e:
        client.attribute("no_such_attribute")
    assert e.value.errno == errno.ENOENT
    with pytest.raises(gpuslot.GpuslotError) as e:
        client.attribute("../k")
    assert e.value.errno == errno.EINVAL


def test_the_holder_runs_sched_fifo_and_gets_its_policy_back(client):
    prio = client.status().boost_priority
    if prio == 0:
        pytest.skip("this lock grants no boost (gpuslotd without CAP_SYS_NICE)")
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    with client.acquire() as slot:
        # The boost resets on fork: a child does not inherit it.
        assert os.sched_getscheduler(0) == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
        assert os.sched_getparam(0).sched_priority == prio
        assert [h.boost for h in my_holds(client.status())] == ["boosted"]
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    assert not slot.held


def test_many_threads_share_one_client_and_never_share_a_slot(client, k):
    k(2)
    client.refresh()
    holding, most, errors_seen = set(), [0], []
    guard = threading.Lock()

    def worker():
        try:
            for _ in range(40):
                with client.acquire(timeout=10) as slot:
                    with guard:
                        assert slot.index not in holding, "a slot held twice"
                        holding.add(slot.index)
                        most[0] = max(most[0], len(holding))
                    time.sleep(0.0005)
                    with guard:
                        holding.discard(slot.index)
        except Exception as e:  # noqa: BLE001 - reported below
            errors_seen.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors_seen == []
    assert most[0] == 2
    assert client.layout().k == 2


def test_a_killed_holders_slot_goes_to_the_next_waiter(client):
    child = subprocess.Popen(
        [sys.executable, "-c", "import gpuslot, sys, time\n"
         "c = gpuslot.Client(backend='none')\n"
         "s = c.acquire()\n"
         "print('held', flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(gpuslot.SlotTimeout):
            client.acquire(timeout=0)
        assert [h.pid for h in client.status().holders] == [child.pid]
        child.send_signal(signal.SIGKILL)
        with client.acquire(timeout=10) as slot:
            assert slot.held
    finally:
        child.kill()
        child.wait()


def test_a_new_layout_gives_new_streams_outside_a_hold(client, k):
    before = client.layout().generation
    with client.acquire() as slot:
        assert slot.generation == before
    k(2)
    with client.acquire() as slot:
        assert slot.generation > before
        assert client.layout().k == 2
    assert client.layout().rebuilds >= 1
    client.retire_generation(before)
    assert client.layout().live_generations == 1


def test_a_slot_without_a_gpu_stream_says_so_for_torch_and_cupy(client):
    with client.acquire() as slot:
        assert slot.stream is None
        for make in (slot.torch_stream, slot.cupy_stream):
            try:
                make()
            except ImportError as e:
                assert "needs" in str(e)
            except gpuslot.GpuslotError as e:
                assert e.errno == errno.EOPNOTSUPP and "'none'" in e.strerror
            else:
                pytest.fail("a stream was made for a slot without one")


def test_a_closed_client_refuses_calls(lock):
    c = gpuslot.Client(backend="none")
    c.close()
    c.close()
    with pytest.raises(gpuslot.GpuslotError, match="closed"):
        c.acquire()


def test_the_library_is_the_one_this_package_was_written_for(lock):
    assert gpuslot.library_version() >= (1, 2, 0)
    assert gpuslot.library_version()[0] == 1


def test_a_free_slot_takes_one_call_and_a_busy_one_queues_after_it(client):
    """Issue 32: an acquire tries once first, so a free slot costs one round
    trip to gpuslotd (acquire_start, the grant's message and
    acquire_complete cost two and a message); only when the try fails does
    it queue, in FIFO order."""
    counting = CountingLib(client._lib)
    client._lib = counting
    try:
        with client.acquire(timeout=5) as s:
            assert s.held
        assert counting.calls == ["gpuslot_acquire_slot", "gpuslot_release_slot"]
        counting.calls.clear()
        holder = client.acquire()
        got = []
        t = threading.Thread(target=lambda: got.append(client.acquire(timeout=5)))
        t.start()
        deadline = time.monotonic() + 5
        while "gpuslot_acquire_start" not in counting.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        holder.release()
        t.join(timeout=10)
        assert got and got[0].held
        got[0].release()
        acquires = [c for c in counting.calls if c.startswith("gpuslot_acquire")]
        assert acquires[:3] == ["gpuslot_acquire_slot", "gpuslot_acquire_slot",
                                "gpuslot_acquire_start"]
        assert "gpuslot_acquire_complete" in acquires
    finally:
        client._lib = counting._lib


def test_a_try_that_used_the_whole_timeout_does_not_queue(client):
    """Issue 32: the try that Client.acquire() makes first counts against
    the timeout; one that used all of it ends the call with ETIMEDOUT, as
    AsyncClient.acquire() does, without queuing."""
    holder = client.acquire()
    slow = CountingLib(client._lib, delays={"gpuslot_acquire_slot": 0.3})
    client._lib = slow
    raised = []

    def late():
        try:
            client.acquire(timeout=0.2)
        except gpuslot.SlotTimeout as e:
            raised.append(e)

    try:
        t = threading.Thread(target=late)
        t.start()
        t.join(timeout=10)
    finally:
        client._lib = slow._lib
    assert raised and raised[0].errno == errno.ETIMEDOUT
    assert "within 0.2 s" in str(raised[0])
    assert slow.calls == ["gpuslot_acquire_slot"]
    assert client.status().waiters == ()
    holder.release()
