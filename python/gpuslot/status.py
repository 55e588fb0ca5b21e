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
    and who waits (FIFO order), the queue budget and the counters."""
    k: int
    generation: int
    boost_priority: int
    max_hold_ms: int
    holders: tuple
    waiters: tuple
    more_waiters: int  # past a page, the table sums the rest up
    hqd_used: int
    hqd_limit: int
    stats: dict


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
    """The lines of a table and the count of its "... N more" line."""
    rows, more = [], 0
    for line in text.splitlines():
        m = re.fullmatch(r"\.\.\. (\d+) more", line)
        if m:
            more = int(m.group(1))
        else:
            rows.append(_fields(line, count, what))
    return rows, more


def parse_holders(text):
    rows, _ = _table(text, "holders", 6)
    return tuple(Holder(int(slot), int(pid), int(tid), unescape_name(comm), int(held), boost)
                 for slot, pid, tid, comm, held, boost in rows)


def parse_waiters(text):
    rows, more = _table(text, "waiters", 5)
    return tuple(Waiter(int(pid), int(tid), unescape_name(comm), int(waited),
                        slots_of(int(mask, 16)))
                 for pid, tid, comm, waited, mask in rows), more


def parse_stats(text):
    """Counters by name; wait_hist_log2_ns is the list of its 32 buckets."""
    stats = {}
    for line in text.splitlines():
        name, *values = line.split()
        if not values:
            raise ValueError(f"gpuslot: a stats line has no value: {line!r}")
        stats[name] = [int(v) for v in values] if name == "wait_hist_log2_ns" else int(values[0])
    return stats


def parse_status(read):
    """``read(name)`` gives an attribute's text."""
    waiters, more = parse_waiters(read("waiters"))
    return Status(
        k=int(read("k")),
        generation=int(read("generation")),
        boost_priority=int(read("boost_priority")),
        max_hold_ms=int(read("max_hold_ms")),
        holders=parse_holders(read("holders")),
        waiters=waiters,
        more_waiters=more,
        hqd_used=int(read("hqd_used")),
        hqd_limit=int(read("hqd_limit")),
        stats=parse_stats(read("stats")),
    )
