# SPDX-License-Identifier: LGPL-2.1-or-later
"""SlotGraph's rule: a graph runs on the partition it was captured on, so it
is replayed only in a hold of that slot (client, index, generation). The
capture and replay themselves need a GPU: tests/gpu/graph_probe.py runs them
on the H100."""

import errno

import pytest

import gpuslot
from gpuslot.graphs import SlotGraph


def captured_on(slot):
    """A SlotGraph as a capture on ``slot`` leaves it, without the GPU part
    (replay() checks the slot before it touches the graph)."""
    g = object.__new__(SlotGraph)
    g._client, g.index, g.generation = slot._client, slot.index, slot.generation
    g._graph = g._torch = None
    return g


def test_a_graph_is_captured_only_on_a_held_slot(client):
    slot = client.acquire()
    slot.release()
    with pytest.raises(gpuslot.GpuslotError) as e:
        SlotGraph(slot, lambda: None)
    assert e.value.errno == errno.EINVAL and "not held" in e.value.strerror


def test_a_capture_on_a_slot_without_a_gpu_stream_says_so(client):
    with client.acquire() as slot:
        try:
            SlotGraph(slot, lambda: None)
        except ImportError:
            pass  # no PyTorch here
        except gpuslot.GpuslotError as e:
            assert e.errno == errno.EOPNOTSUPP and "'none'" in e.strerror
        else:
            pytest.fail("a graph was captured without a GPU stream")


def test_a_graph_is_replayed_only_in_a_hold_of_its_own_slot(client, k):
    k(2)
    client.refresh()
    with client.acquire(slots={0}) as zero:
        graph = captured_on(zero)
    with client.acquire(slots={1}) as one:
        with pytest.raises(gpuslot.GpuslotError) as e:
            graph.replay(one)
        assert e.value.errno == errno.EINVAL
        assert "captured on slot 0" in e.value.strerror and "slot 1" in e.value.strerror
    with pytest.raises(gpuslot.GpuslotError) as e:
        graph.replay(zero)  # released
    assert e.value.errno == errno.EINVAL and "not held" in e.value.strerror
    with gpuslot.Client(backend="none") as other, other.acquire(slots={0}) as theirs:
        with pytest.raises(gpuslot.GpuslotError) as e:
            graph.replay(theirs)
        assert "another client" in e.value.strerror


def test_a_new_layout_generation_needs_a_new_capture(client, k):
    k(2)
    client.refresh()
    with client.acquire(slots={0}) as zero:
        graph = captured_on(zero)
    k(3)
    client.refresh()
    with client.acquire(slots={0}) as zero:
        assert zero.generation != graph.generation
        with pytest.raises(gpuslot.GpuslotError) as e:
            graph.replay(zero)
        assert e.value.errno == errno.EINVAL and "generation" in e.value.strerror
