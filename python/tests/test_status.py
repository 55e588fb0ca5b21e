# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parsing the attribute tables (no lock needed)."""

import pytest

from gpuslot import client, status


def test_an_escaped_name_is_one_word_and_comes_back_whole():
    holders = status.parse_holders("3 10 11 a\\x201\\x0a3\\x201 5 boosted\n")
    assert len(holders) == 1
    assert holders[0].slot == 3 and holders[0].comm == "a 1\n3 1"
    assert holders[0].boost == "boosted"


def test_waiters_keep_their_order_and_masks():
    waiters = status.parse_waiters(
        "313 313 infer 5120400 0x5\n314 316 plan 10 0xffffffffffffffff\n")
    assert [w.pid for w in waiters] == [313, 314]
    assert waiters[0].allowed == frozenset({0, 2})
    assert waiters[1].allowed == frozenset(range(64))


def test_a_member_sees_the_counts_not_the_debug_tables():
    files = {"k": "2\n", "generation": "7\n", "boost_priority": "50\n", "max_hold_ms": "500\n",
             "nr_holders": "1\n", "nr_waiters": "3\n", "held_mask": "0x2\n", "hqd_used": "0\n",
             "hqd_limit": "24\n", "slot0/units": "all\n", "slot0/priority": "2\n",
             "slot1/units": "0000000,0000000f\n", "slot1/priority": "0\n"}
    files.update({f"stats/{n}": "4\n" for n in status.STATS})

    def read(name):
        if name.startswith("debug/"):
            raise PermissionError(13, "root only")
        return files[name]

    s = status.parse_status(read)
    assert s.holders is None and s.waiters is None and s.wait_hist is None
    assert (s.nr_holders, s.nr_waiters, s.held) == (1, 3, frozenset({1}))
    assert s.stats["overruns"] == 4
    assert s.slots == (status.SlotInfo("all", 2), status.SlotInfo("0000000,0000000f", 0))


@pytest.mark.parametrize("bad", ["0 1 2 x 5\n", "0 1 2 x 5 boosted extra\n", "a b c d e f\n"])
def test_a_malformed_holders_line_is_an_error(bad):
    with pytest.raises(ValueError):
        status.parse_holders(bad)


def test_the_wait_histogram():
    hist = status.parse_wait_hist("".join(f"{1 << i} {i}\n" for i in range(32)))
    assert hist[0] == (1, 0) and hist[31] == (1 << 31, 31)
    with pytest.raises(ValueError):
        status.parse_wait_hist("1 2 3\n")


def test_slot_sets_and_timeouts_become_the_librarys_numbers():
    assert client.slot_mask(None) == 0
    assert client.slot_mask({0, 3}) == 0b1001
    assert client.timeout_ns(None) == -1
    assert client.timeout_ns(0) == 0
    assert client.timeout_ns(1e-12) == 1
    assert client.timeout_ns(0.05) == 50_000_000
    assert client.timeout_ns(float("inf")) == -1
