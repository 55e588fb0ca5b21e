# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parsing the attribute tables (no lock needed)."""

import pytest

from gpuslot import client, status


def test_an_escaped_name_is_one_word_and_comes_back_whole():
    holders = status.parse_holders("3 10 11 a\\x201\\x0a3\\x201 5 boosted\n")
    assert len(holders) == 1
    assert holders[0].slot == 3 and holders[0].comm == "a 1\n3 1"
    assert holders[0].boost == "boosted"


def test_waiters_keep_their_order_masks_and_the_rest_counted():
    waiters, more = status.parse_waiters(
        "313 313 infer 5120400 0x5\n314 316 plan 10 0xffffffffffffffff\n... 7 more\n")
    assert [w.pid for w in waiters] == [313, 314]
    assert waiters[0].allowed == frozenset({0, 2})
    assert waiters[1].allowed == frozenset(range(64))
    assert more == 7


@pytest.mark.parametrize("bad", ["0 1 2 x 5\n", "0 1 2 x 5 boosted extra\n", "a b c d e f\n"])
def test_a_malformed_holders_line_is_an_error(bad):
    with pytest.raises(ValueError):
        status.parse_holders(bad)


def test_stats_with_the_histogram():
    stats = status.parse_stats("acquisitions 4\novverruns 0\nwait_hist_log2_ns" +
                               " 1" * 32 + "\n")
    assert stats["acquisitions"] == 4
    assert stats["wait_hist_log2_ns"] == [1] * 32


def test_slot_sets_and_timeouts_become_the_librarys_numbers():
    assert client.slot_mask(None) == 0
    assert client.slot_mask({0, 3}) == 0b1001
    assert client.timeout_ns(None) == -1
    assert client.timeout_ns(0) == 0
    assert client.timeout_ns(1e-12) == 1
    assert client.timeout_ns(0.05) == 50_000_000
    assert client.timeout_ns(float("inf")) == -1
