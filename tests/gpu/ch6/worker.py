# SPDX-License-Identifier: GPL-2.0
"""A worker: a process on a CPU core of its own that runs one task per
command, for as many scenarios as the runner gives it (runner.py keeps one
per core, so that Python, PyTorch and CUDA start once per run, not once per
scenario; a task limited by MPS gets a fresh one, as MPS reads its limit
when the process's CUDA context is made).

Protocol, a line each way: the worker says "up" once started; the runner
sends a command, a JSON object {"task", "duration", "out", "env",
"options"}; the worker sets up the task (its network, kept for later
commands; a gpuslot client if it locks; 5 warm-up jobs, which also capture
the CUDA graph of a graph task), says "ready {what it set up, JSON}", reads
the common start time, runs jobs until start + duration (back to back, or
one per period from start + the task's phase: response time from the
job's release, deadline = period), gives the GPU memory the task's streams
cached back, writes every job to ``out`` (and every garbage collection to
``out``.gc.csv) and says "done N". {"quit": true} or the end of input ends
it. Each job that locks acquires a slot, runs on the slot's stream, waits
for its GPU work and releases (per-job locking); a task that holds its
slot (Task.hold) acquires it before the warm-up and releases it at the end.

Where a job's time went (issue 32), per job: acquire_ms (waiting for the
lock), launch_ms and launch_cpu_ms (wall and CPU time of queueing the job's
kernels: the launch returns), wait_ms and wait_cpu_ms (waiting for the GPU
to finish them), release_ms, gpu_ms (between CUDA events around the job),
gc_ms (Python's garbage collector), cpu_ms (the thread's CPU time),
preempted (involuntary context switches) and sched_fifo (1 if the thread
ran SCHED_FIFO as it launched: gpuslot's boost took). The wait is a blocking sync (the
CUDA events are made with cudaEventBlockingSync and the primary context
with CU_CTX_SCHED_BLOCKING_SYNC, before PyTorch makes it): the thread
sleeps until the GPU is done, so CPU time is CPU work and wait_cpu_ms stays
near 0; spinning (the default CUDA wait of earlier runs) would count the
whole wait as CPU time and keep every core of the host busy.

Options (the runner's --suspects, issue 32's periodic stalls): "gc" leaves
Python's garbage collector on during the measured jobs (otherwise it is
frozen and disabled between the warm-up and the end: no collection can
land inside a job); "poll" waits for a release by sleeping in 5 ms steps as
earlier runs did (otherwise one sleep to the release time); "spin" waits
for the GPU by spinning (otherwise blocking sync).

Backend "torch" runs the task's network; "none" stands in for it on the
CPU (no GPU: for the tests and the dry run): a 0.2 ms busy loop as the
launch (leaving a small reference cycle for the collector), then a sleep of
the size's stand-in time as the GPU (a busy loop with "spin"). With GPUSLOT_CH6_FAKE_LOCK=DIR in the command's env, a task
that locks takes its slot as an flock on DIR/slot<i> instead of from
gpuslotd (the dry run; it has no FIFO order and no partitions).

usage: python3 -m ch6.worker BACKEND [CPU]
"""

import csv
import ctypes
import fcntl
import gc
import json
import os
import resource
import sys
import time

from .tasks import Task

# Stand-in job lengths of the none backend, ms.
NONE_JOB_MS = {"small": 2.0, "medium": 5.0, "large": 10.0, "camera": 8.0}
NONE_LAUNCH_MS = 0.2
WARMUP_JOBS = 5
JOB_FIELDS = ["release_s", "response_ms", "slot", "acquire_ms", "launch_ms", "launch_cpu_ms",
              "wait_ms", "wait_cpu_ms", "release_ms", "gpu_ms", "gc_ms", "cpu_ms", "preempted",
              "sched_fifo"]
GC_FIELDS = ["t_s", "generation", "ms", "collected"]
CU_CTX_SCHED_BLOCKING_SYNC = 0x04


def blocking_sync_context():
    """Make device 0's primary context wait by blocking sync, before anything
    makes it: "blocking sync", or what the driver said."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"no libcuda: {e}"
    dev = ctypes.c_int()
    for call, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(dev), 0))):
        rc = getattr(cuda, call)(*args)
        if rc:
            return f"{call}: CUresult {rc}"
    # _v2 may change the flags of an active context too; the old symbol not.
    name = "cuDevicePrimaryCtxSetFlags_v2"
    if not hasattr(cuda, name):
        name = "cuDevicePrimaryCtxSetFlags"
    rc = getattr(cuda, name)(dev, CU_CTX_SCHED_BLOCKING_SYNC)
    return f"{name}: CUresult {rc}" if rc else "blocking sync"


class Networks:
    """The networks and inputs a worker has built, by what they are."""

    def __init__(self, blocking):
        # Before torch makes the context.
        self.context_flags = blocking_sync_context() if blocking else "spin (default)"
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
        39 MiB of the H100's 80 GiB free. Between scenarios only: never in
        a measured window."""
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()


class TorchJob:
    """One job of ``task``'s network: launch() queues it on the slot's
    stream (or the task's own), wait() waits for it."""

    def __init__(self, task, networks, spin):
        torch = self.torch = networks.torch
        self.task, self.spin = task, spin
        self.model, self.x = networks.get(task)
        # Blocking: the waiting thread sleeps (cudaEventBlockingSync).
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True, blocking=not spin)
        self.own = None
        if task.technique in ("unmanaged", "mps", "xsched", "run"):
            # Under gpuslot-run the interposer makes it at the slot's
            # priority; under XSched it becomes an XQueue.
            self.own = torch.cuda.Stream()
        elif task.technique == "priority":
            self.own = torch.cuda.Stream(priority=task.stream_priority)
        self.graphs = {}   # (slot index, generation) or None: the captured graph
        self.stream = None

    def info(self):
        own = self.own
        return dict(stream_priority=own.priority if own is not None else None,
                    graph=self.task.graph)

    def _forward(self):
        with self.torch.no_grad():
            return self.model(self.x)

    def _graph(self, slot, stream):
        key = (slot.index, slot.generation) if slot else None
        if key not in self.graphs:
            if slot:
                import gpuslot
                self.graphs[key] = gpuslot.SlotGraph(slot, self._forward)
            else:
                torch = self.torch
                with torch.cuda.stream(stream):
                    for _ in range(3):
                        self._forward()
                stream.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=stream):
                    self._forward()
                self.graphs[key] = g
        return self.graphs[key]

    def launch(self, slot):
        stream = self.stream = slot.torch_stream() if slot else self.own
        graph = self._graph(slot, stream) if self.task.graph else None
        with self.torch.cuda.stream(stream):
            self.start.record(stream)
            if graph is None and slot and self.task.gate:
                with slot.torch_gate(inflight=self.task.inflight):
                    self._forward()
            elif graph is None:
                self._forward()
            elif slot:
                graph.replay(slot, gated=self.task.gate, inflight=self.task.inflight)
            else:
                graph.replay()
            self.end.record(stream)

    def wait(self):
        if self.spin:
            self.stream.synchronize()
        else:
            self.end.synchronize()

    def run(self, slot=None):
        self.launch(slot)
        self.wait()

    def gpu_ms(self):
        return self.start.elapsed_time(self.end)


class NoneJob:
    """The none backend's stand-in: a busy loop for the launch, a sleep (or
    a busy loop, spinning) for the GPU."""

    def __init__(self, task, spin):
        self.ms = NONE_JOB_MS[task.size.name.split("-")[0]]
        self.spin = spin
        self.task = task

    def info(self):
        return dict(stream_priority=self.task.stream_priority
                    if self.task.technique == "priority" else None, graph=self.task.graph)

    @staticmethod
    def _busy(ms):
        end = time.perf_counter() + ms / 1e3
        while time.perf_counter() < end:
            pass

    def launch(self, slot):
        # A graph is one launch instead of hundreds.
        self._busy(NONE_LAUNCH_MS / (10 if self.task.graph else 1))
        # Python objects the launch leaves for the collector (a reference
        # cycle), as a framework's may: what makes it run.
        cycle = [[] for _ in range(8)]
        cycle.append(cycle)

    def wait(self):
        if self.spin:
            self._busy(self.ms)
        else:
            time.sleep(self.ms / 1e3)

    def gpu_ms(self):
        return self.ms


class FakeSlot:
    def __init__(self, client, index, f):
        self.index, self.generation, self._f = index, 1, f
        self._client, self.held = client, True
        self.priority = None

    def release(self, sync=True):
        self.held = False
        fcntl.flock(self._f, fcntl.LOCK_UN)
        self._f.close()

    def torch_stream(self):
        return None

    def set_work(self, pending):
        """A flock publishes no work: nothing to report."""


class FakeClient:
    """The dry run's lock: slot i is an flock on DIR/slot<i> (k files)."""

    def __init__(self, directory):
        self.dir = directory
        self.k = len([n for n in os.listdir(directory) if n.startswith("slot")])

    def acquire(self, slots=None):
        allowed = sorted(slots) if slots is not None else range(self.k)
        while True:
            for i in allowed:
                f = open(os.path.join(self.dir, f"slot{i}"), "w")
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return FakeSlot(self, i, f)
                except BlockingIOError:
                    f.close()
            time.sleep(0.0005)

    def close(self):
        pass


class GcLog:
    """Every run of Python's garbage collector: when (perf_counter), which
    generation, how long; and the total so far in seconds."""

    def __init__(self):
        self.total = 0.0
        self.events = []
        self._since = None
        gc.callbacks.append(self._tick)

    def _tick(self, phase, info):
        now = time.perf_counter()
        if phase == "start":
            self._since = now
        elif self._since is not None:
            self.total += now - self._since
            self.events.append((self._since, info.get("generation"), (now - self._since) * 1e3,
                                info.get("collected")))
            self._since = None


def sleep_until(t, poll):
    """Sleep until time.monotonic() reaches ``t``: one sleep, or (``poll``,
    as earlier runs did) 5 ms steps."""
    if poll:
        while time.monotonic() < t:
            time.sleep(min(0.005, max(0.0, t - time.monotonic())))
    else:
        d = t - time.monotonic()
        if d > 0:
            time.sleep(d)


def one_job(task, job, client):
    """Run a job: (slot, acquire, launch, launch CPU, wait, wait CPU,
    release) in ms, and whether the thread ran SCHED_FIFO as it launched
    (gpuslot's boost, where the host allowed it: a host may refuse
    gpuslotd SCHED_FIFO, and then the hold is unboosted); slot -1 without
    the lock."""
    t0 = time.perf_counter()
    slot = client.acquire(slots=task.slots) if client is not None else None
    acquired = time.perf_counter()
    # (The boost sets SCHED_RESET_ON_FORK, which sched_getscheduler adds.)
    fifo = int((os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK) == os.SCHED_FIFO)
    t1, c1 = time.perf_counter(), time.thread_time()
    try:
        job.launch(slot)
        t2, c2 = time.perf_counter(), time.thread_time()
        job.wait()
        if slot is not None and task.gate and getattr(client, "holds", False):
            # A hold kept across jobs: the job's drain, as gpuslot-run
            # reports it at a synchronization (the next launch reports
            # work again); a released hold's end clears it.
            slot.set_work(False)
        t3, c3 = time.perf_counter(), time.thread_time()
    finally:
        if slot is not None and not getattr(client, "holds", False):
            # The GPU work is done (waited for above): no second wait.
            slot.release(sync=False)
    t4 = time.perf_counter()
    return (slot.index if slot is not None else -1, (acquired - t0) * 1e3, (t2 - t1) * 1e3,
            (c2 - c1) * 1e3, (t3 - t2) * 1e3, (c3 - c2) * 1e3, (t4 - t3) * 1e3, fifo)


class HeldClient:
    """A task's one hold (Task.hold): the first acquire takes the slot and
    every later one returns it; close() releases it (waiting for its
    stream). With a slot that no other task names, nobody waits for it:
    the job pays no round trip to gpuslotd, and the thread keeps its boost
    for the domain's max_hold_ms only."""

    holds = True

    def __init__(self, client):
        self._client, self._slot = client, None

    def acquire(self, slots=None):
        if self._slot is None:
            self._slot = self._client.acquire(slots=slots)
        return self._slot

    def close(self):
        try:
            if self._slot is not None:
                self._slot.release()
                self._slot = None
        finally:
            self._client.close()


def make_client(task, backend, env):
    if task.technique != "lock":
        return None
    if env.get("GPUSLOT_CH6_FAKE_LOCK"):
        client = FakeClient(env["GPUSLOT_CH6_FAKE_LOCK"])
    else:
        import gpuslot
        client = gpuslot.Client(backend="none" if backend == "none" else "auto")
    return HeldClient(client) if task.hold else client


def run_task(cmd, backend, networks, gclog, say, read_line):
    task = Task.from_json(cmd["task"])
    duration = float(cmd["duration"])
    suspects = set(cmd.get("options", {}).get("suspects", ()))
    spin, poll, keep_gc = "spin" in suspects, "poll" in suspects, "gc" in suspects
    env = cmd.get("env", {})
    os.environ.update(env)
    job = TorchJob(task, networks, spin) if backend == "torch" else NoneJob(task, spin)
    client = make_client(task, backend, env)
    rows = []
    try:
        slot_info = {}
        for _ in range(WARMUP_JOBS):
            one_job(task, job, client)
        if client is not None:
            # The priority the slot says it has, and the one its stream has
            # (cudaStreamGetPriority: what the GPU will honour).
            s = client.acquire(slots=task.slots)
            try:
                slot_info = dict(slot=s.index, slot_priority=getattr(s, "priority", None))
                stream = s.torch_stream() if backend == "torch" else None
                if stream is not None:
                    slot_info["slot_stream_priority"] = stream.priority
            finally:
                if not getattr(client, "holds", False):
                    s.release()
        info = dict(job.info(), **slot_info, spin=spin, poll=poll, gc=keep_gc,
                    context=networks.context_flags if networks else "none backend",
                    pid=os.getpid(), cpu=sorted(os.sched_getaffinity(0)))
        gc.collect()
        if not keep_gc:
            # Nothing the network and the warm-up made is garbage: out of
            # the collector's sight, and no collection until the end.
            gc.freeze()
            gc.disable()
        say("ready " + json.dumps(info))
        start_wall = float(read_line())
        start = time.monotonic() + (start_wall - time.time())
        sleep_until(start, poll)
        t0 = start
        base = time.perf_counter() - (time.monotonic() - t0)
        first_gc = len(gclog.events)
        release = t0 + task.phase_s if task.period_s else t0
        end = t0 + duration
        while release < end:
            if task.period_s:
                sleep_until(release, poll)
            else:
                release = time.monotonic()
            in_gc, cpu = gclog.total, time.thread_time()
            switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
            slot, acq, launch, launch_cpu, wait, wait_cpu, rel, fifo = one_job(task, job, client)
            done = time.monotonic()
            rows.append((round(release - t0, 6), round((done - release) * 1e3, 4), slot,
                         round(acq, 4), round(launch, 4), round(launch_cpu, 4), round(wait, 4),
                         round(wait_cpu, 4), round(rel, 4), round(job.gpu_ms(), 4),
                         round((gclog.total - in_gc) * 1e3, 3),
                         round((time.thread_time() - cpu) * 1e3, 3),
                         resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw - switches, fifo))
            if task.period_s:
                release += task.period_s
        gcs = [(round(t - base, 6), g, round(ms, 3), n) for t, g, ms, n in gclog.events[first_gc:]]
    finally:
        if not keep_gc:
            gc.enable()
            gc.unfreeze()
        if client:
            client.close()
        del job
        if networks is not None:
            networks.release_cache()
    with open(cmd["out"], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(JOB_FIELDS)
        w.writerows(rows)
    with open(cmd["out"] + ".gc.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(GC_FIELDS)
        w.writerows(gcs)
    say(f"done {len(rows)}")


def main(argv):
    backend = argv[0]
    if backend not in ("torch", "none"):
        raise SystemExit(f"ch6.worker: backend {backend!r}: torch or none")
    if len(argv) > 1:
        # Before any thread starts: the threads a runtime makes later (an
        # XSched launch thread) inherit the cores.
        os.sched_setaffinity(0, {int(c) for c in argv[1].split(",")})
    # Spinning is chosen per scenario, but the context's flag only once:
    # CH6_SPIN=1 in the environment makes a worker for spinning scenarios.
    networks = Networks(blocking=os.environ.get("CH6_SPIN") != "1") \
        if backend == "torch" else None
    gclog = GcLog()

    def say(line):
        print(line, flush=True)

    say("up")
    while line := sys.stdin.readline():
        cmd = json.loads(line)
        if cmd.get("quit"):
            break
        run_task(cmd, backend, networks, gclog, say, sys.stdin.readline)


if __name__ == "__main__":
    main(sys.argv[1:])
