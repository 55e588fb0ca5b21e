# SPDX-License-Identifier: GPL-2.0
"""Task sizes by GPU-busy share.

In the dissertation the small, medium and large tasks kept the GPU busy
16, 54 and 76 % of a job's time, each running alone; on an H100 its batch
sizes and width multipliers give other shares. This measures the share of
candidate sizes (each size's width multiplier with batches of 1 to 256,
the dissertation's own among them) and picks per size the batch whose share
is nearest the dissertation's ("small-cal", ...). It also measures the
camera network at the sizes the run uses, to say how GPU-bound it is.

A job's share is its GPU busy time over its wall time, for the task alone
on its own stream: the wall time the median of JOBS jobs measured without
the profiler (its CPU-side recording would lengthen the job; the median,
as a few jobs stall on the CPU side for tens of ms), the busy time the
mean of JOBS jobs with torch.profiler recording GPU activity only (CUPTI;
busy.py), which varies little from job to job.

usage: python3 -m ch6.calibrate OUT_CSV [CPU] [--camera BATCHxPIXELS,...] [--camera-only]
"""

import argparse
import csv
import os
import statistics
import tempfile
import time

from .busy import busy_us, read_trace
from .tasks import SIZES, Size, Task, camera_sizes

TARGETS = {"small": 0.16, "medium": 0.54, "large": 0.76}
BATCHES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
JOBS = 50
FIELDS = ["network", "width", "batch", "resolution", "job_ms", "busy_ms", "share"]


def candidates(sizes=SIZES, batches=BATCHES):
    """The MobileNet V2 sizes to measure: every batch at each width."""
    widths = sorted({s.width for s in sizes.values()})
    return [Size(f"w{w}b{b}", b, w) for w in widths for b in batches]


def pick(rows, targets=TARGETS, sizes=SIZES):
    """Per size, the measured MobileNet V2 batch of its width whose share is
    nearest the target (the smaller batch on a tie), as "<size>-cal"."""
    out = {}
    for name, target in targets.items():
        width = sizes[name].width
        mine = [r for r in rows if r["network"] == "mobilenet_v2" and r["width"] == width]
        if not mine:
            raise ValueError(f"calibration: no MobileNet V2 of width {width} measured")
        best = min(mine, key=lambda r: (abs(r["share"] - target), r["batch"]))
        out[f"{name}-cal"] = Size(f"{name}-cal", best["batch"], width)
    return out


def read(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["width"] = float(r["width"])
        for k in ("batch", "resolution"):
            r[k] = int(r[k])
        for k in ("job_ms", "busy_ms", "share"):
            r[k] = float(r[k])
    return rows


def measure(task, networks, jobs=JOBS):
    """(median wall ms, mean GPU-busy ms) of ``task``'s jobs alone."""
    from torch.profiler import ProfilerActivity, profile

    from .worker import WARMUP_JOBS, TorchJob
    job = TorchJob(task, networks, spin=False)
    for _ in range(WARMUP_JOBS):
        job.run(None)
    walls = []
    for _ in range(jobs):
        t0 = time.perf_counter()
        job.run(None)
        walls.append((time.perf_counter() - t0) * 1e3)
    wall_ms = statistics.median(walls)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(jobs):
            job.run(None)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        intervals = read_trace(path)
    if not intervals:
        raise RuntimeError("calibration: the profiler recorded no GPU activity")
    return wall_ms, busy_us(intervals) / 1e3 / jobs


def main(argv):
    p = argparse.ArgumentParser(prog="ch6.calibrate")
    p.add_argument("out")
    p.add_argument("cpu", nargs="?", type=int)
    p.add_argument("--camera", default="", help="fcn_resnet50 sizes, BATCHxPIXELS,...")
    p.add_argument("--camera-only", action="store_true",
                   help="only the camera network (the camera loads' periods need it)")
    a = p.parse_args(argv)
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    from .worker import Networks
    tasks = [] if a.camera_only else [Task("calibrate", s) for s in candidates()]
    tasks += [Task("calibrate", s, network="fcn_resnet50") for s in camera_sizes(a.camera)]
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for task in tasks:
            networks = Networks(blocking=True)
            job_ms, busy_ms = measure(task, networks)
            s = task.size
            w.writerow(dict(network=task.network, width=s.width, batch=s.batch,
                            resolution=s.resolution, job_ms=round(job_ms, 3),
                            busy_ms=round(busy_ms, 3), share=round(busy_ms / job_ms, 3)))
            f.flush()
            print(f"calibrate: {task.network} width {s.width} batch {s.batch} "
                  f"{s.resolution} px: {job_ms:.2f} ms, GPU busy {busy_ms / job_ms:.0%}",
                  flush=True)
            del networks


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
