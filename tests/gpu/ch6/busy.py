# SPDX-License-Identifier: GPL-2.0
"""How long the GPU was busy, from a profiler trace.

The trace is the Chrome-trace JSON that torch.profiler exports (CUPTI
activity records through Kineto). The GPU is busy while a kernel, a copy
or a memset runs; overlapping ones count once, gaps between them (the GPU
waiting for the CPU to launch more) count as idle.
"""

import json

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def read_trace(path):
    """The GPU activity intervals of a trace file, (start_us, end_us)."""
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
            if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES and "dur" in e]


def union(intervals):
    """Sorted, disjoint intervals covering the same time as ``intervals``."""
    out = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def busy_us(intervals):
    """How long, in us, at least one of ``intervals`` ran."""
    return sum(end - start for start, end in union(intervals))
