# SPDX-License-Identifier: LGPL-2.1-or-later
"""A domain's state as plain objects, parsed from the attributes the
module's sysfs and gpuslotd's socket both serve (the same text)."""

import dataclasses
import re


def unescape_name(word):
    """A thread name as the tables print it: bytes outside '!'..'~' and '\\'
    are written as \\xHH, so a name is one word and cannot forge a line."""
    return re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), word)


@dataclasses.dataclass(frozen=True)
class Holder:
    slot: int
    pid: int
    tid: int
    comm: str
    held_ns: int
    boost: str  # boosted, unboosted, overrun, pending


@dataclasses.dataclass(frozen=True)
class Waiter:
    pid: int
    tid: int
    comm: str
    waited_ns: int
    allowed: frozenset  # the slots it accepts


@dataclasses.dataclass(frozen=True)
class Status:
    """One domain now: k and its layout's generation, the boost, who holds
    and who waits, the queue budget and the counters.

    ``holders`` and ``waiters`` (FIFO order) and ``wait_hist`` come from the
    debug tables (debugfs's gpuslot/gpu<N>/, root's only, or the socket's
    debug/ names, admins only): for a member of the gpuslot group they are
    None, and the counts ``nr_holders``, ``nr_waiters`` and ``held_mask``
    say what is held and how many wait."""
    k: int
    generation: int
    boost_priority: int
    max_hold_ms: int
    nr_holders: int
    nr_waiters: int
    held: frozenset     # the slots held now (held_mask)
    holders: tuple      # None for members
    waiters: tuple      # None for members
    hqd_used: int
    hqd_limit: int
    stats: dict         # the counters of stats/, one per name
    wait_hist: tuple    # 32 (bucket_lo_ns, count) pairs; None for members
    slots: tuple        # per slot < k: SlotInfo


@dataclasses.dataclass(frozen=True)
class SlotInfo:
    """One slot of the live layout: its units ("all", or the kernel's
    bitmap text) and its stream priority."""
    units: str
    priority: int


# The counters of stats/, one file each.
STATS = ("acquisitions", "contended", "timeouts", "interrupted", "total_wait_ns",
         "max_wait_ns", "max_hold_ns", "overruns")

def slots_of(mask):
    """The slot indices of a bit mask."""
    return frozenset(i for i in range(mask.bit_length()) if mask >> i & 1)


def _fields(line, count, what):
    words = line.split()
    if len(words) != count:
        raise ValueError(f"gpuslot: a {what} line has {len(words)} fields, not {count}: "
                         f"{line!r}")
    return words


def _table(text, what, count):
    """The lines of a table: as long as it is (no page cut since API 2)."""
    return [_fields(line, count, what) for line in text.splitlines()]


def parse_holders(text):
    rows = _table(text, "holders", 6)
    return tuple(Holder(int(slot), int(pid), int(tid), unescape_name(comm), int(held), boost)
                 for slot, pid, tid, comm, held, boost in rows)


def parse_waiters(text):
    rows = _table(text, "waiters", 5)
    return tuple(Waiter(int(pid), int(tid), unescape_name(comm), int(waited),
                        slots_of(int(mask, 16)))
                 for pid, tid, comm, waited, mask in rows)


def parse_wait_hist(text):
    """debug/wait_hist: 32 lines "bucket_lo_ns count"."""
    return tuple((int(lo), int(count)) for lo, count in _table(text, "wait_hist", 2))


def _admin_only(read, name, parse):
    """A debug table, or None where the reader may not see it (EACCES)."""
    try:
        return parse(read(name))
    except PermissionError:
        return None


def parse_status(read):
    """``read(name)`` gives an attribute's text; it raises PermissionError
    (an OSError of EACCES) for a table the reader may not see."""
    k = int(read("k"))
    return Status(
        k=k,
        generation=int(read("generation")),
        boost_priority=int(read("boost_priority")),
        max_hold_ms=int(read("max_hold_ms")),
        nr_holders=int(read("nr_holders")),
        nr_waiters=int(read("nr_waiters")),
        held=slots_of(int(read("held_mask"), 16)),
        holders=_admin_only(read, "debug/holders", parse_holders),
        waiters=_admin_only(read, "debug/waiters", parse_waiters),
        hqd_used=int(read("hqd_used")),
        hqd_limit=int(read("hqd_limit")),
        stats={name: int(read(f"stats/{name}")) for name in STATS},
        wait_hist=_admin_only(read, "debug/wait_hist", parse_wait_hist),
        slots=tuple(SlotInfo(read(f"slot{i}/units").strip(), int(read(f"slot{i}/priority")))
                    for i in range(k)),
    )
