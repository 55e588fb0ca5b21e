# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 40 from Python: a holder reports its slot's GPU work
(Slot.set_work), every client reads the domain's published work state
(Client.work_state, Client.preempted), and the end of the hold clears the
report, on either transport."""

import errno
import os

import pytest

import gpuslot

from test_priority import set_layout, whole_gpu, wire_request  # noqa: F401 (a fixture)

ATTR_WRITE = 0xF1  # GPUSLOT_WIRE_ATTR_WRITE


def write_attr(lock, name, text):
    """An admin's write of the domain's attribute @name: 0 or the errno."""
    if lock.transport == "socket":
        return wire_request(ATTR_WRITE, name.encode() + b"\0" + text.encode())
    try:
        with open(f"/sys/class/gpuslot/gpu0/{name}", "w") as f:
            f.write(text)
    except OSError as e:
        return e.errno
    return 0


@pytest.fixture
def unbounded_preemption(lock):
    """preempt_share 100 (no bound) for the test, then the default 25: with
    the default a report preempts for 250 ms only, less than a slow guest
    (TCG) may take between the report and a read."""
    if os.geteuid() != 0:
        pytest.skip("writing preempt_share needs an admin")
    assert write_attr(lock, "preempt_share", "100") == 0
    yield
    assert write_attr(lock, "preempt_share", "25") == 0


def test_a_holders_work_is_published_to_every_client_until_its_hold_ends(
        lock, whole_gpu, unbounded_preemption):
    if os.geteuid() != 0:
        pytest.skip("setting a layout needs root")
    assert set_layout(lock, 2, [5, 0]) == 0
    with gpuslot.Client(backend="none") as front, gpuslot.Client(backend="none") as other:
        assert front.work_state().work == frozenset()
        assert not other.preempted(0)
        slot = front.acquire(slots={0})
        try:
            slot.set_work(True)
            seen = other.work_state()
            assert seen.k == 2
            assert 0 in seen.held and seen.work == {0} and seen.preempting == {0}
            assert seen.preempt_level == 5 + 1
            assert other.preempted(0), "slot 1's priority 0 is below slot 0's 5"
            assert not other.preempted(5), "nothing above 5 preempts"
            slot.set_work(False)
            assert other.work_state().work == frozenset()
            assert not other.preempted(0)
            slot.set_work(True)
            assert other.preempted(0)
        finally:
            slot.release()
        after = other.work_state()
        assert after.work == frozenset() and after.preempting == frozenset(), \
            "the hold's end clears its report"
        assert not other.preempted(0)


def test_only_a_held_slot_reports_work(lock, whole_gpu):
    if os.geteuid() != 0:
        pytest.skip("setting a layout needs root")
    assert set_layout(lock, 2, [5, 0]) == 0
    with gpuslot.Client(backend="none") as c:
        with c.acquire(slots={1}) as slot:
            pass
        with pytest.raises(gpuslot.GpuslotError) as e:
            slot.set_work(True)
        assert e.value.errno == errno.EINVAL
        assert c.work_state().work == frozenset()
        with pytest.raises(ValueError):
            c.preempted(-1)
        with pytest.raises(ValueError):
            c.preempted(True)


def test_a_launch_passes_the_gate_or_sends_nothing(client):
    """Slot.launch sends through libgpuslot's launch gate; a slot without a
    stream (the none backend) has nothing to gate, so the command is not
    sent and no work is reported; a bad bound or a released slot likewise.
    The gate at work (a GPU stream) is tested in C (socket_work_state_test,
    LaunchGate) and on the GPU (tests/gpu/launch_gate_probe.py)."""
    sent = []
    with client.acquire() as slot:
        with pytest.raises(gpuslot.GpuslotError) as e:
            slot.launch(sent.append, "kernel")
        assert e.value.errno == errno.EOPNOTSUPP and "no stream" in e.value.strerror
        with pytest.raises(ValueError):
            slot.launch(sent.append, "kernel", inflight=-1)
        with pytest.raises(ValueError):
            slot.launch(sent.append, "kernel", inflight=True)
        assert client.work_state().work == frozenset(), "a refused launch reported work"
    with pytest.raises(gpuslot.GpuslotError) as e:
        slot.launch(sent.append, "kernel")
    assert e.value.errno == errno.EINVAL
    assert sent == [], "a refused launch sent its command"
