# SPDX-License-Identifier: GPL-2.0
"""A worker: a process on a CPU core of its own that runs one task per
command, for as many scenarios as the runner gives it (runner.py keeps one
per core, so that Python, PyTorch and CUDA start once per run, not once per
scenario; a task limited by MPS gets a fresh one, as MPS reads its limit
when the process's CUDA context is made).

Protocol, a line each way: the worker says "up" once started; the runner
sends a command, a JSON object {"task", "duration", "out", "env"}; the worker sets up the task (its network, kept for later
commands; a gpuslot client if it locks; 5 warm-up jobs), says "ready",
reads the common start time, runs jobs until start + duration (back to
back, or one per period: response time from the job's release, deadline =
period), gives the GPU memory the task's streams cached back, writes every
job to ``out`` and says "done N". {"quit": true} or
the end of input ends it. Each job that locks acquires a slot, runs on the
slot's stream and releases (per-job locking).

Backend "torch" runs the task's network; "none" sleeps the size's
stand-in time (no GPU: for the tests).

What the CPU side of each job did is recorded with it, to tell where a
slow job lost its time: gc_ms, the time Python's garbage collector ran
during it; cpu_ms, the CPU time of the worker's thread; preempted, how
often the kernel took the CPU from the thread (involuntary context
switches).

usage: python3 -m ch6.worker BACKEND [CPU]
"""

import csv
import gc
import json
import os
import resource
import sys
import time

import gpuslot

from .tasks import Task

# Stand-in job lengths of the none backend, ms.
NONE_JOB_MS = {"small": 2.0, "medium": 5.0, "large": 10.0, "camera": 8.0}
WARMUP_JOBS = 5


class Networks:
    """The networks and inputs a worker has built, by what they are."""

    def __init__(self):
        import torch
        import torchvision
        self.torch, self.torchvision = torch, torchvision
        self.built = {}

    def get(self, task):
        s = task.size
        key = (task.network, s.width, s.batch, s.resolution)
        if key not in self.built:
            tv = self.torchvision
            if task.network == "mobilenet_v2":
                model = tv.models.mobilenet_v2(weights=None, width_mult=s.width)
            elif task.network == "fcn_resnet50":
                model = tv.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None,
                                                            num_classes=21)
            else:
                raise ValueError(f"unknown network {task.network}")
            x = self.torch.randn(s.batch, 3, s.resolution, s.resolution, device="cuda")
            self.built[key] = (model.cuda().eval(), x)
        return self.built[key]

    def release_cache(self):
        """Give the allocator's cached blocks back to the GPU. PyTorch keeps
        a block for reuse on the stream it was used on, and every task has
        streams of its own (its slots', or one it makes), so without this a
        worker kept from scenario to scenario holds the activations of every
        task it ran: a 1280 px camera scenario late in a run once found
        39 MiB of the H100's 80 GiB free."""
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()


class TorchJob:
    def __init__(self, task, networks):
        torch = networks.torch
        self.torch = torch
        self.model, self.x = networks.get(task)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.own = None
        if task.technique in ("unmanaged", "mps"):
            self.own = torch.cuda.Stream()
        elif task.technique == "priority":
            self.own = torch.cuda.Stream(priority=task.stream_priority)

    def run(self, slot):
        """Queue the job; return after its GPU work finished (own stream) or
        with it queued on the slot's stream (the release waits)."""
        stream = slot.torch_stream() if slot else self.own
        with self.torch.no_grad(), self.torch.cuda.stream(stream):
            self.start.record(stream)
            self.model(self.x)
            self.end.record(stream)
        if not slot:
            stream.synchronize()

    def gpu_ms(self):
        self.end.synchronize()
        return self.start.elapsed_time(self.end)


class NoneJob:
    def __init__(self, task):
        self.ms = NONE_JOB_MS[task.size.name.split("-")[0]]

    def run(self, slot):
        time.sleep(self.ms / 1000)

    def gpu_ms(self):
        return self.ms


class GcClock:
    """Time spent in Python's garbage collector, in seconds, so far."""

    def __init__(self):
        self.total = 0.0
        self._since = None
        gc.callbacks.append(self._tick)

    def _tick(self, phase, _info):
        if phase == "start":
            self._since = time.perf_counter()
        elif self._since is not None:
            self.total += time.perf_counter() - self._since
            self._since = None


def one_job(task, job, client):
    """Run a job; the slot it held (-1 without the lock) and its GPU ms."""
    if client is None:
        job.run(None)
        return -1, job.gpu_ms()
    with client.acquire(slots=task.slots) as slot:
        job.run(slot)
        index = slot.index
    return index, job.gpu_ms()


def run_task(cmd, backend, networks, clock, say, read_line):
    task = Task.from_json(cmd["task"])
    duration = float(cmd["duration"])
    os.environ.update(cmd.get("env", {}))
    job = TorchJob(task, networks) if backend == "torch" else NoneJob(task)
    client = None
    if task.technique == "lock":
        client = gpuslot.Client(backend="none" if backend == "none" else "auto")
    try:
        for _ in range(WARMUP_JOBS):
            one_job(task, job, client)
        gc.collect()
        say("ready")
        start = float(read_line())
        while time.time() < start:
            time.sleep(min(0.01, max(0.0, start - time.time())))
        rows = []
        t0 = release = time.monotonic()
        end = t0 + duration
        while release < end:
            if task.period_s:
                while time.monotonic() < release:
                    time.sleep(min(0.005, max(0.0, release - time.monotonic())))
            else:
                release = time.monotonic()
            in_gc, cpu = clock.total, time.thread_time()
            switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
            slot, gpu = one_job(task, job, client)
            done = time.monotonic()
            rows.append((round(release - t0, 6), round((done - release) * 1e3, 4), slot,
                         round(gpu, 4), round((clock.total - in_gc) * 1e3, 3),
                         round((time.thread_time() - cpu) * 1e3, 3),
                         resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw - switches))
            if task.period_s:
                release += task.period_s
    finally:
        if client:
            client.close()
        del job
        if networks is not None:
            networks.release_cache()
    with open(cmd["out"], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["release_s", "response_ms", "slot", "gpu_ms", "gc_ms", "cpu_ms",
                    "preempted"])
        w.writerows(rows)
    say(f"done {len(rows)}")


def main(argv):
    backend = argv[0]
    if backend not in ("torch", "none"):
        raise SystemExit(f"ch6.worker: backend {backend!r}: torch or none")
    if len(argv) > 1:
        os.sched_setaffinity(0, {int(argv[1])})
    networks = Networks() if backend == "torch" else None
    clock = GcClock()

    def say(line):
        print(line, flush=True)

    say("up")
    while line := sys.stdin.readline():
        cmd = json.loads(line)
        if cmd.get("quit"):
            break
        run_task(cmd, backend, networks, clock, say, sys.stdin.readline)


if __name__ == "__main__":
    main(sys.argv[1:])
