# SPDX-License-Identifier: GPL-2.0
"""Response-time statistics of one task in one scenario."""

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class Summary:
    jobs: int
    min: float
    mean: float
    median: float
    p99: float
    max: float
    std: float
    misses: int  # jobs past their deadline (periodic tasks); 0 otherwise


def percentile(sorted_values, q):
    """The q-th percentile (0..100), linear between closest ranks, as
    numpy's default does."""
    if not sorted_values:
        raise ValueError("no values")
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(times_ms, deadline_ms=0.0):
    """Min, mean, median, p99, max and population standard deviation of
    response times in ms; misses counts those above ``deadline_ms`` (> 0)."""
    v = sorted(times_ms)
    if not v:
        raise ValueError("a task with no jobs: nothing to summarise")
    mean = sum(v) / len(v)
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / len(v))
    misses = sum(1 for x in v if x > deadline_ms) if deadline_ms > 0 else 0
    return Summary(len(v), v[0], mean, percentile(v, 50), percentile(v, 99), v[-1], std, misses)
