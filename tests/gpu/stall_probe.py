# SPDX-License-Identifier: GPL-2.0
"""Where do the chapter-6 runs' periodic stalls come from? (issue 32)

Every chapter-6 run so far shows jobs of every process slowed by 15-60 ms at
the same instant every 1.3-2.2 s, with the extra time inside the job's CUDA
events (GPU side), in scenarios with and without gpuslot. This probe takes
the harness away: N processes, each on a CPU core of its own, loop one fixed
GPU job (a matrix product, or a small convolution network) on a stream of
their own and record, per job, its wall time, its GPU time between two CUDA
events and its CPU time. Configurations are run interleaved in a random
order, several repetitions each, and one line per run says how many GPU-side
stalls there were, how many hit two or more processes within 50 ms, and
their period. The job waits by blocking sync (cudaDeviceScheduleBlockingSync)
so that CPU time is CPU work.

usage: python3 stall_probe.py OUT [SECONDS [REPETITIONS]]
"""

import csv
import json
import os
import random
import statistics
import subprocess
import sys
import time

CONFIGS = [
    # name, processes, MPS, job, what else runs. Every run also has two
    # CPU loops (cores 12 and 13) that record each gap over 1 ms in their
    # reading of the clock: a stall of the CPUs themselves (the VM's vCPUs
    # not run) shows there without any GPU.
    ("gaps-only", 0, False, "mm", None),
    ("4p-mps-mm", 4, True, "mm", None),
    ("4p-mps-mnv2", 4, True, "mnv2", None),
    ("4p-nomps-mnv2", 4, False, "mnv2", None),
]


def worker(cpu, job, seconds, start, out):
    os.sched_setaffinity(0, {cpu})
    import torch
    torch.cuda.set_device(0)
    # Blocking sync: a waiting thread sleeps, so its CPU time is its work.
    stream = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(stream):
        if job == "mm":
            a = torch.randn(4096, 4096, device="cuda")
            b = torch.randn(4096, 4096, device="cuda")

            def run():
                torch.mm(a, b)
        elif job == "mnv2":
            # The chapter-6 "medium" task: launch-bound (hundreds of small
            # kernels), as the harness's jobs are.
            import torchvision
            net = torchvision.models.mobilenet_v2(weights=None, width_mult=0.5).cuda().eval()
            x = torch.randn(32, 3, 224, 224, device="cuda")

            def run():
                net(x)
        else:
            net = torch.nn.Sequential(*[torch.nn.Conv2d(64, 64, 3, padding=1) for _ in range(8)]).cuda()
            x = torch.randn(8, 64, 128, 128, device="cuda")

            def run():
                net(x)
        e0, e1 = torch.cuda.Event(enable_timing=True, blocking=True), torch.cuda.Event(
            enable_timing=True, blocking=True)
        for _ in range(20):
            run()
        stream.synchronize()
        while time.time() < start:
            time.sleep(0.001)
        rows = []
        t0 = time.monotonic()
        while True:
            w0, c0 = time.monotonic(), time.thread_time()
            if w0 - t0 > seconds:
                break
            e0.record(stream)
            run()
            e1.record(stream)
            e1.synchronize()
            w1, c1 = time.monotonic(), time.thread_time()
            rows.append((round(time.time() - start, 6), round((w1 - w0) * 1e3, 4),
                         round(e0.elapsed_time(e1), 4), round((c1 - c0) * 1e3, 4)))
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "wall_ms", "gpu_ms", "cpu_ms"])
        w.writerows(rows)


def gap_loop(cpu, seconds, start, out):
    """Read the clock in a busy loop on ``cpu``; every gap over 1 ms."""
    import gc
    gc.disable()
    os.sched_setaffinity(0, {cpu})
    while time.time() < start:
        time.sleep(0.001)
    gaps = []
    now = time.monotonic_ns
    t0 = last = now()
    end = t0 + int(seconds * 1e9)
    while last < end:
        t = now()
        if t - last > 1_000_000:
            gaps.append((round((last - t0) / 1e9, 6), round((t - last) / 1e6, 3)))
        last = t
    with open(out, "w") as f:
        json.dump(gaps, f)


def steal_jiffies():
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def mps(on):
    if on:
        subprocess.run(["nvidia-cuda-mps-control", "-d"], check=False)
        time.sleep(1)
    else:
        subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", check=False)
        time.sleep(2)


def analyse(files, gap_files, threshold_ms=8.0):
    """Stalls: jobs whose GPU time exceeds the process's median by more
    than threshold_ms. Shared: stalls of two or more processes within 50 ms."""
    stalls, medians = [], []
    for p, path in enumerate(files):
        with open(path) as f:
            rows = [tuple(map(float, r.values())) for r in csv.DictReader(f)]
        gpu = [r[2] for r in rows]
        med = statistics.median(gpu)
        medians.append(med)
        wall = statistics.median([r[1] for r in rows])
        # A job slowed on the GPU side, or on the CPU side only.
        stalls += [(r[0], p, max(r[2] - med, r[1] - wall)) for r in rows
                   if r[2] > med + threshold_ms or r[1] > wall + threshold_ms]
    cpu_gaps = []
    for g in gap_files:
        with open(g) as f:
            cpu_gaps += [tuple(x) for x in json.load(f)]
    cpu_gaps.sort()
    big = [g for g in cpu_gaps if g[1] >= threshold_ms]
    stalls.sort()
    # Stalls that a CPU gap of the same moment explains.
    near = sum(1 for s in stalls if any(abs(s[0] - g[0]) < 0.1 for g in big))
    groups = []
    for s in stalls:
        if groups and s[0] - groups[-1][-1][0] < 0.05:
            groups[-1].append(s)
        else:
            groups.append([s])
    shared = [g for g in groups if len({x[1] for x in g}) >= 2]
    starts = [g[0][0] for g in groups]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    big_starts = [g[0] for g in big]
    big_gaps = [b - a for a, b in zip(big_starts, big_starts[1:])]
    return dict(jobs_median_gpu_ms=round(statistics.median(medians), 3) if medians else None,
                cpu_gaps_over_1ms=len(cpu_gaps), cpu_gaps_over_threshold=len(big),
                cpu_gap_max_ms=max([g[1] for g in cpu_gaps], default=0),
                cpu_gap_median_ms=round(statistics.median([g[1] for g in big]), 1) if big else 0,
                cpu_gap_period_s=round(statistics.median(big_gaps), 2) if big_gaps else None,
                stalls_near_cpu_gap=near, stalls=len(stalls),
                stall_groups=len(groups), shared_groups=len(shared),
                median_excess_ms=round(statistics.median([s[2] for s in stalls]), 1) if stalls else 0,
                median_period_s=round(statistics.median(gaps), 2) if gaps else None)


def main(argv):
    if argv and argv[0] == "--gaps":
        gap_loop(int(argv[1]), float(argv[2]), float(argv[3]), argv[4])
        return
    if argv and argv[0] == "--worker":
        worker(int(argv[1]), argv[2], float(argv[3]), float(argv[4]), argv[5])
        return
    out = argv[0]
    seconds = float(argv[1]) if len(argv) > 1 else 15
    reps = int(argv[2]) if len(argv) > 2 else 2
    os.makedirs(out, exist_ok=True)
    order = [c for _ in range(reps) for c in CONFIGS]
    random.seed(32)
    random.shuffle(order)
    mps_on = None
    results = []
    for n, (name, procs, use_mps, job, extra) in enumerate(order):
        if use_mps != mps_on:
            mps(use_mps)
            mps_on = use_mps
        start = time.time() + 8
        files = [os.path.join(out, f"{n}-{name}-p{p}.csv") for p in range(procs)]
        ps = [subprocess.Popen([sys.executable, __file__, "--worker", str(2 + p), job, str(seconds),
                                str(start), files[p]]) for p in range(procs)]
        side = None
        if extra == "smi":
            side = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
                                     "--format=csv", "-lms", "200"],
                                    stdout=open(os.path.join(out, f"{n}-smi.csv"), "w"))
        gap_files = [os.path.join(out, f"{n}-gaps{c}.json") for c in (12, 13)]
        ps += [subprocess.Popen([sys.executable, __file__, "--gaps", str(c), str(seconds), str(start),
                                 g]) for c, g in zip((12, 13), gap_files)]
        steal0 = steal_jiffies()
        for p in ps:
            p.wait()
        steal = steal_jiffies() - steal0
        if side:
            side.terminate()
            side.wait()
        if any(p.returncode for p in ps):
            print(f"{n} {name}: a worker failed", flush=True)
            continue
        r = dict(run=n, config=name, steal_jiffies=steal, **analyse(files, gap_files))
        results.append(r)
        print(json.dumps(r), flush=True)
        for f in files + gap_files:
            os.remove(f)
    if mps_on:
        mps(False)
    with open(os.path.join(out, "stalls.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
