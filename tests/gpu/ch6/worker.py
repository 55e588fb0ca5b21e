# SPDX-License-Identifier: GPL-2.0
"""One task: a process that runs jobs in a loop and records each job's
response time (runner.py starts one per task).

It warms up, says "ready", reads the common start time from stdin, then
runs jobs until start + duration: back to back, or one per period
(response time from the job's release, deadline = period). Each job that
locks acquires a slot, runs on the slot's stream and releases (per-job
locking). Backend "torch" runs the task's network; "none" sleeps the
size's stand-in time (no GPU: for the tests).

usage: python3 -m ch6.worker TASK_JSON BACKEND DURATION_S OUT_CSV [CPU]
"""

import csv
import json
import os
import sys
import time

import gpuslot

from .tasks import Task

# Stand-in job lengths of the none backend, ms.
NONE_JOB_MS = {"small": 2.0, "medium": 5.0, "large": 10.0, "camera": 8.0}


class TorchJob:
    def __init__(self, task):
        import torch
        import torchvision
        self.torch = torch
        if task.network == "mobilenet_v2":
            model = torchvision.models.mobilenet_v2(weights=None, width_mult=task.size.width)
        elif task.network == "fcn_resnet50":
            model = torchvision.models.segmentation.fcn_resnet50(
                weights=None, weights_backbone=None, num_classes=21)
        else:
            raise ValueError(f"unknown network {task.network}")
        self.model = model.cuda().eval()
        r = task.size.resolution
        self.x = torch.randn(task.size.batch, 3, r, r, device="cuda")
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
        self.ms = NONE_JOB_MS[task.size.name]

    def run(self, slot):
        time.sleep(self.ms / 1000)

    def gpu_ms(self):
        return self.ms


def one_job(task, job, client):
    """Run a job; the slot it held (-1 without the lock) and its GPU ms."""
    if client is None:
        job.run(None)
        return -1, job.gpu_ms()
    with client.acquire(slots=task.slots) as slot:
        job.run(slot)
        index = slot.index
    return index, job.gpu_ms()


def main(argv):
    task = Task.from_json(json.loads(argv[0]))
    backend, duration, out = argv[1], float(argv[2]), argv[3]
    if len(argv) > 4:
        os.sched_setaffinity(0, {int(argv[4])})
    job = TorchJob(task) if backend == "torch" else NoneJob(task)
    client = None
    if task.technique == "lock":
        client = gpuslot.Client(backend="none" if backend == "none" else "auto")
    for _ in range(5):
        one_job(task, job, client)
    print("ready", flush=True)
    start = float(sys.stdin.readline())
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
        slot, gpu = one_job(task, job, client)
        done = time.monotonic()
        rows.append((round(release - t0, 6), round((done - release) * 1e3, 4),
                     slot, round(gpu, 4)))
        if task.period_s:
            release += task.period_s
    if client:
        client.close()
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["release_s", "response_ms", "slot", "gpu_ms"])
        w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
