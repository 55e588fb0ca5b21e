# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 32: a priority per slot, set by an admin's SET_LAYOUT (the socket's
wire message, or the ioctl on the module), read back through libgpuslot:
the layout, each slot held, and the slot files of status()."""

import ctypes
import errno
import fcntl
import os
import socket
import struct

import pytest

import gpuslot

WIRE = struct.Struct("<IIiIiI")  # struct gpuslot_wire
WIRE_MAGIC = 0x67736C32  # "gsl2"
LAYOUT = struct.Struct("<8IQQIIQ64s")  # struct gpuslot_layout, API 2: 128 bytes
SET_LAYOUT = 0x09
UNIT_AMD_CU = 1
PARTITION = 16 * 8  # struct gpuslot_partition


def ioc_rw(nr, size):
    return (3 << 30) | (size << 16) | (0xC6 << 8) | nr


def wire_request(cmd, body):
    """One request of @cmd with @body to gpuslotd's domain 0, on a
    connection of its own: the reply's error (0 or an errno)."""
    path = os.path.join(os.environ["GPUSLOT_SOCKET_DIR"], "gpu0.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        s.connect(path)
        s.send(WIRE.pack(WIRE_MAGIC, cmd, 0, len(body), os.getpid(), 1) + body)
        reply = s.recv(65536)
    return WIRE.unpack_from(reply)[2]


def set_layout(lock, k, priorities, nr_units=60):
    """SET_LAYOUT as an admin: k whole-GPU partitions of the Radeon VII's
    CUs at @priorities; 0 or the errno."""
    prio = bytes(priorities) + bytes(64 - len(priorities))
    parts = ctypes.create_string_buffer(PARTITION * k)
    if lock.transport == "socket":
        body = LAYOUT.pack(LAYOUT.size, 0, k, UNIT_AMD_CU, 1, nr_units, 0, k, 0, 0, 0, 0, 0,
                           prio) + parts.raw
        return wire_request(SET_LAYOUT, body)
    layout = ctypes.create_string_buffer(
        LAYOUT.pack(LAYOUT.size, 0, k, UNIT_AMD_CU, 1, nr_units, 0, k,
                    ctypes.addressof(parts), 0, 0, 0, 0, prio))
    with open("/dev/gpuslot", "rb", buffering=0) as dev:
        try:
            fcntl.ioctl(dev, ioc_rw(SET_LAYOUT, 48), layout)
        except OSError as e:
            return e.errno
    return 0


@pytest.fixture
def whole_gpu(lock):
    """k is 1 and priorities are 0 again afterwards (SET_K resets them)."""
    yield
    lock.gpuslotctl("set-k", "2")
    lock.set_k(1)


def test_slot_priorities_round_trip_through_a_layout(lock, whole_gpu):
    if os.geteuid() != 0:
        pytest.skip("setting a layout needs root")
    assert set_layout(lock, 3, [3, 0, 15]) == 0
    with gpuslot.Client(backend="none") as c:
        assert c.layout().k == 3
        assert c.layout().priorities == (3, 0, 15)
        with c.acquire(slots={2}) as slot:
            assert slot.index == 2 and slot.priority == 15
        status = c.status()
        assert [s.priority for s in status.slots] == [3, 0, 15]
        assert [s.units for s in status.slots] == ["all"] * 3
        assert c.attribute("slot0/priority") == "3\n"


def test_a_bad_priority_is_refused_and_changes_nothing(lock, whole_gpu):
    if os.geteuid() != 0:
        pytest.skip("setting a layout needs root")
    with gpuslot.Client(backend="none") as c:
        before = c.status()
        assert set_layout(lock, 2, [16, 0]) == errno.EINVAL  # over 15
        assert set_layout(lock, 2, [0, 0, 1]) == errno.EINVAL  # past k
        after = c.status()
        assert (after.k, after.generation) == (before.k, before.generation)
        assert [s.priority for s in after.slots] == [s.priority for s in before.slots]
