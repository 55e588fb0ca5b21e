# SPDX-License-Identifier: GPL-2.0
"""Running scenarios: gpuslotd with the scenario's layout (socket
transport), the tasks on workers (worker.py) on CPU cores of their own, a
common start, and every job's record in one CSV."""

import csv
import hashlib
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import scenarios as scenarios_mod
from . import worker

HERE = os.path.dirname(os.path.abspath(__file__))
class Gpuslotd:
    """gpuslotd serving one layout on sockets in a fresh directory (its
    state there too); ``ctl`` None: no gpuslotctl (no whole-GPU slots, no
    status)."""

    def __init__(self, command, ctl, extra_args, layout, whole_gpu_slots, log):
        self.dir = tempfile.mkdtemp(prefix="ch6-gpuslotd-")
        os.chmod(self.dir, 0o755)
        with open(os.path.join(self.dir, "gpuslotd.conf"), "w") as f:
            f.write(layout.config())
        self.ctl = ctl
        self.ctl_options = ["--transport", "socket", "--socket-dir", self.dir] + extra_args
        self.proc = subprocess.Popen(
            command + ["--transport", "socket", "--socket-dir", self.dir, "--socket-group", "",
                       "--state-dir", self.dir, "--config",
                       os.path.join(self.dir, "gpuslotd.conf")] + extra_args,
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.dir, "gpu0.sock")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("gpuslotd did not start (see its log)")
            time.sleep(0.05)
        if whole_gpu_slots:
            subprocess.run(self.ctl + ["set-partitions"] + ["all"] * layout.k + ["--force"] +
                           self.ctl_options, check=True, stdout=log, stderr=subprocess.STDOUT)
        self.status = subprocess.run(self.ctl + ["status"] + self.ctl_options,
                                     capture_output=True, text=True).stdout if ctl else ""

    def stop(self):
        """End gpuslotd and remove its directory (as FakeLock.stop does)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        shutil.rmtree(self.dir, ignore_errors=True)


# The CPUs this process may use when it starts: the tasks get them, one
# each, all but the first, which the runner, gpuslotd and the monitors keep
# (run_all pins the runner there; the others inherit it).
CPUS = sorted(os.sched_getaffinity(0))
HOUSEKEEPING_CPU = CPUS[0]


def cpu_for(i):
    """Task i's core: one each, core 0 left to gpuslotd and the runner."""
    return CPUS[1 + i % (len(CPUS) - 1)] if len(CPUS) > 1 else CPUS[0]


def cpus_for(i, per_task=1):
    """Task i's cores: ``per_task`` each, none shared with another task or
    the runner's. One each is cpu_for()'s (wrapping round where there are
    fewer cores than tasks, as on a small machine's dry run). More than one
    (XSched adds a launch thread per queue to a task's process, which one
    core time-slices with the task's own) must fit: ValueError says so."""
    if per_task == 1:
        return (cpu_for(i),)
    first = 1 + i * per_task
    if first + per_task > len(CPUS):
        raise ValueError(f"task {i} with {per_task} CPUs each needs {first + per_task} CPUs "
                         f"(one for the runner); this process has {len(CPUS)}")
    return tuple(CPUS[first:first + per_task])


def check_cpus(scenarios, per_task):
    """That every scenario's tasks get ``per_task`` cores of their own: a
    ValueError naming the largest scenario where they do not fit."""
    if per_task < 1:
        raise ValueError(f"CPUs per task: at least 1, not {per_task}")
    for s in scenarios:
        cpus_for(len(s.tasks) - 1, per_task)


class Worker:
    """One worker process (worker.py) on the cores ``cpus``, started through
    ``launcher`` (a command prefix, e.g. gpuslot-run's) where given."""

    def __init__(self, backend, cpus, env, log, launcher=()):
        cpus = ",".join(map(str, cpus))
        self.proc = subprocess.Popen(list(launcher) +
                                     [sys.executable, "-m", "ch6.worker", backend, cpus],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, text=True)
        self.expect("up", f"worker on CPUs {cpus}")

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, word, who):
        line = self.proc.stdout.readline().strip()
        if line.split(" ")[0] != word:
            raise RuntimeError(f"{who}: said {line!r}, not {word!r} (exit {self.proc.poll()})")
        return line

    def quit(self):
        if self.proc.poll() is None:
            try:
                self.send(json.dumps({"quit": True}))
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class Pool:
    """Workers kept from scenario to scenario, one per core: task i of a
    scenario runs on worker i. A task that MPS limits gets a worker of its
    own, made for the scenario and ended after it. ``spin``: the workers'
    CUDA contexts wait by spinning (the "spin" suspect), not blocking.
    ``cpus_per_task``: the cores each worker has (cpus_for())."""

    def __init__(self, backend, log, spin=False, cpus_per_task=1):
        self.backend, self.log = backend, log
        self.cpus_per_task = cpus_per_task
        self.env = dict(os.environ, CH6_SPIN="1" if spin else "0")
        self.env["PYTHONPATH"] = os.pathsep.join(
            [os.path.dirname(HERE)] + self.env.get("PYTHONPATH", "").split(os.pathsep))
        self.kept = {}

    def cpus(self, i):
        """Task i's cores."""
        return cpus_for(i, self.cpus_per_task)

    def worker(self, i, task, lock_env=None):
        """Task i's worker, and whether it is the scenario's own (started
        for it, ended after it). ``lock_env``: where gpuslotd listens."""
        if task.technique == "mps":
            env = dict(self.env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=str(task.mps_percent))
            return Worker(self.backend, self.cpus(i), env, self.log), True
        if task.technique == "xsched":
            return Worker(self.backend, self.cpus(i), xsched_env(self.env, task),
                          self.log), True
        if task.technique == "run":
            # gpuslot-run's folder holds the libgpuslot its interposer needs
            # (only gpuslot's libraries: a bundle's glibc stays out).
            env = dict(self.env, **(lock_env or {}), GPUSLOT_RUN_STATS="1")
            env["LD_LIBRARY_PATH"] = os.pathsep.join(
                [os.path.dirname(os.environ.get("CH6_GPUSLOT_RUN", ""))] +
                [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
            return Worker(self.backend, self.cpus(i), env, self.log,
                          launcher=gpuslot_run_launcher(task)), True
        if i not in self.kept:
            self.kept[i] = Worker(self.backend, self.cpus(i), self.env, self.log)
        return self.kept[i], False

    def close(self):
        for w in self.kept.values():
            w.quit()
        self.kept.clear()

    def kill(self):
        for w in self.kept.values():
            w.proc.kill()
            w.proc.wait()
        self.kept.clear()


def xsched_dir():
    d = os.environ.get("CH6_XSCHED_DIR")
    if not d or not os.path.isfile(os.path.join(d, "bin", "xserver")):
        raise RuntimeError("technique xsched: CH6_XSCHED_DIR must name XSched's install "
                           "directory (bin/xserver, lib/libcuda.so.1)")
    return d


def xsched_env(env, task):
    """A process under XSched as its authors run PyTorch (examples/Linux/
    1_transparent_sched, protocol/README.md): its stand-in libcuda first,
    the global scheduler (xserver, highest priority first), an XQueue per
    stream at Level 1 (on Hopper the only level it implements), one stream
    per process."""
    d = xsched_dir()
    return dict(env, LD_LIBRARY_PATH=os.pathsep.join(
        [os.path.join(d, "lib")] + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep)
                                    if p]),
        XSCHED_SCHEDULER="GLB", XSCHED_AUTO_XQUEUE="ON",
        XSCHED_AUTO_XQUEUE_PRIORITY=str(task.xsched_priority), XSCHED_AUTO_XQUEUE_LEVEL="1",
        XSCHED_AUTO_XQUEUE_THRESHOLD=str(task.inflight or 4),
        XSCHED_AUTO_XQUEUE_BATCH_SIZE=str(max(1, (task.inflight or 4) // 2)),
        XSCHED_CUDA_SINGLE_STREAM_PER_PROCESS="ON")


def gpuslot_run_launcher(task):
    """gpuslot-run's command line for ``task`` (CH6_GPUSLOT_RUN: its path;
    its interposer is GPUSLOT_RUN_LIBRARY or the one beside it)."""
    run = os.environ.get("CH6_GPUSLOT_RUN")
    if not run:
        raise RuntimeError("technique run: CH6_GPUSLOT_RUN must name gpuslot-run")
    slots = ",".join(map(str, sorted(task.slots))) if task.slots else None
    cmd = [run] + (["--slots", slots] if slots else [])
    cmd += ["--hold" if task.hold else "--per-sync"]
    cmd += ["--inflight", str(task.inflight)] if task.preempt else ["--no-preempt"]
    cmd += ["--"]
    return cmd


class XServer:
    """XSched's scheduler daemon for a scenario with xsched tasks."""

    def __init__(self, log):
        self.proc = subprocess.Popen([os.path.join(xsched_dir(), "bin", "xserver"), "HPF",
                                      "50000"], stdout=log, stderr=log)
        time.sleep(1.0)
        if self.proc.poll() is not None:
            raise RuntimeError(f"xserver exited at once ({self.proc.returncode})")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class FakeLock:
    """The dry run's stand-in for gpuslotd: k flock files (worker.FakeClient)."""

    def __init__(self, layout, log):
        self.dir = tempfile.mkdtemp(prefix="ch6-fakelock-")
        for i in range(layout.k):
            open(os.path.join(self.dir, f"slot{i}"), "w").close()
        self.status = "fake lock (dry run), gpuslotd.conf would be:\n" + layout.config()

    def stop(self):
        shutil.rmtree(self.dir, ignore_errors=True)


# What may cause the periodic stalls (issue 32), each switched on or off
# for a run: gc, poll and spin are the workers' (worker.py); smi logs the
# GPU's clocks with nvidia-smi every 100 ms, steal samples /proc/stat every
# 100 ms (both on the housekeeping CPU, both on by default: the run needs
# them, and their cost is measured by switching them off).
SUSPECTS = ("gc", "poll", "spin", "smi", "steal")
DEFAULT_SUSPECTS = ("smi", "steal")
SMI_FIELDS = "timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu"


class Monitors:
    """nvidia-smi's clocks and the CPUs' /proc/stat, sampled every 100 ms
    into DIR/gpu.csv and DIR/cpu.csv while a scenario runs."""

    def __init__(self, rundir, suspects, log):
        self.procs = []
        if "smi" in suspects:
            if shutil.which("nvidia-smi"):
                f = open(os.path.join(rundir, "gpu.csv"), "w")
                self.procs.append(subprocess.Popen(
                    ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,nounits",
                     "-lms", "100"], stdout=f, stderr=log))
                f.close()
            else:
                log.write("   no nvidia-smi: no GPU clocks logged\n")
        if "steal" in suspects:
            p = subprocess.Popen(
                [sys.executable, "-m", "ch6.monitor", os.path.join(rundir, "cpu.csv"), "0.1"],
                env=dict(os.environ, PYTHONPATH=os.path.dirname(HERE)), stdout=subprocess.PIPE,
                stderr=log, text=True)
            self.procs.append(p)
            # Sampling before the run starts (EOF if it died: then no file).
            p.stdout.readline()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.stdout:
                p.stdout.close()


def run_scenario(scenario, pool, duration, workdir, gpuslotd=None, log=sys.stderr,
                 suspects=DEFAULT_SUSPECTS):
    """Run ``scenario`` on ``pool``'s workers: its rows (dicts of FIELDS),
    gpuslotd's status and what the workers set up (a dict per task).
    ``gpuslotd``: (command, gpuslotctl command, extra arguments of both)
    when a task locks, or "fake" (the dry run's flock lock)."""
    os.makedirs(workdir, exist_ok=True)
    daemon = None
    env = {}
    if scenario.layout is not None:
        if gpuslotd == "fake":
            daemon = FakeLock(scenario.layout, log)
            env = dict(GPUSLOT_CH6_FAKE_LOCK=daemon.dir)
        else:
            command, ctl, extra = gpuslotd
            daemon = Gpuslotd(command, ctl, extra, scenario.layout, scenario.whole_gpu_slots,
                              log)
            env = dict(GPUSLOT_TRANSPORT="socket", GPUSLOT_SOCKET_DIR=daemon.dir)
    options = dict(suspects=sorted(suspects))
    running, own, infos = [], [], {}
    monitors = None
    xserver = None
    try:
        if any(t.technique == "xsched" for t in scenario.tasks):
            xserver = XServer(log)
        for i, task in enumerate(scenario.tasks):
            out = os.path.join(workdir, f"{task.name}.csv")
            w, fresh = pool.worker(i, task, env)
            if fresh:
                own.append(w)
            w.send(json.dumps(dict(task=task.to_json(), duration=duration, out=out, env=env,
                                   options=options)))
            running.append((task, out, w))
        for task, _, w in running:
            said = w.expect("ready", f"{scenario.name}: task {task.name}")
            infos[task.name] = json.loads(said[len("ready"):] or "{}")
        monitors = Monitors(workdir, suspects, log)
        start = time.time() + 0.5
        for _, _, w in running:
            w.send(f"{start}")
        for task, _, w in running:
            w.expect("done", f"{scenario.name}: task {task.name}")
    except BaseException:
        pool.kill()
        raise
    finally:
        if monitors:
            monitors.stop()
        for w in own:
            w.quit()
        if xserver:
            xserver.stop()
        if daemon:
            daemon.stop()
    rows = []
    for task, out, _ in running:
        with open(out) as f:
            for r in csv.DictReader(f):
                rows.append(dict(experiment=scenario.experiment, scenario=scenario.name,
                                 task=task.name, size=task.size.name,
                                 technique=task.technique, measured=int(task.measured),
                                 period_ms=task.period_s * 1000, **r))
        # Every job is in OUT/jobs.csv (a run must fit the device's
        # transfer limits); the collections and the monitors stay here.
        os.remove(out)
    with open(os.path.join(workdir, "info.json"), "w") as f:
        json.dump(dict(scenario=scenario.to_json(), start=start, duration=duration,
                       suspects=sorted(suspects), tasks=infos, cpus=dict(
                           housekeeping=HOUSEKEEPING_CPU,
                           tasks={t.name: list(pool.cpus(i)) for i, t in enumerate(scenario.tasks)})),
                  f, indent=1)
    return rows, (daemon.status if daemon else ""), infos


def source_fingerprint(root=os.path.dirname(os.path.dirname(os.path.dirname(HERE)))):
    """A hash of the harness's and the Python package's sources: a resumed
    run refuses a tree whose code differs from the one it started with,
    even where the commit cannot be read (a copy of the tree without .git)."""
    h = hashlib.sha256()
    for d in ("tests/gpu/ch6", "python/gpuslot"):
        for name in sorted(os.listdir(os.path.join(root, d))):
            if name.endswith(".py"):
                h.update(name.encode() + b"\0")
                with open(os.path.join(root, d, name), "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:16]


def interleave(count, reps, seed):
    """The order of ``reps`` repetitions of ``count`` scenarios: every round
    (one repetition of each) in a random order of its own, seeded, so that
    drift over the run (clocks, temperature) spreads over every scenario
    and a run cut short has whole rounds. [(scenario, repetition), ...]"""
    rng = random.Random(seed)
    order = []
    for r in range(reps):
        round_ = list(range(count))
        rng.shuffle(round_)
        order += [(i, r) for i in round_]
    return order


class Schedule:
    """OUT/schedule.json: the scenarios, the order of their repetitions and
    what the run was started with; OUT/done.jsonl: the runs finished."""

    def __init__(self, outdir, meta):
        self.outdir, self.meta = outdir, meta
        self.scenarios = [scenarios_mod.Scenario.from_json(s) for s in meta["scenarios"]]
        self.order = [tuple(x) for x in meta["order"]]

    @staticmethod
    def create(outdir, scenarios, reps, seed, duration, backend, suspects, commit,
               fingerprint, **more):
        os.makedirs(outdir, exist_ok=True)
        path = os.path.join(outdir, "schedule.json")
        if os.path.exists(path):
            raise SystemExit(f"ch6: {outdir} has a run already (schedule.json): go on with "
                             f"--resume, or give a new OUT")
        keys = [(s.experiment, s.name) for s in scenarios]
        if len(set(keys)) != len(keys):
            raise ValueError("two scenarios of one experiment and name")
        meta = dict(version=1, commit=commit, fingerprint=fingerprint, seed=seed, reps=reps,
                    duration=duration, backend=backend, suspects=sorted(suspects),
                    created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    scenarios=[s.to_json() for s in scenarios],
                    order=interleave(len(scenarios), reps, seed), **more)
        with open(path + ".tmp", "w") as f:
            json.dump(meta, f, indent=1)
        os.rename(path + ".tmp", path)
        return Schedule(outdir, meta)

    @staticmethod
    def load(outdir, commit, fingerprint):
        """The run in ``outdir``, if this tree may go on with it."""
        try:
            with open(os.path.join(outdir, "schedule.json")) as f:
                meta = json.load(f)
        except FileNotFoundError:
            raise SystemExit(f"ch6: {outdir}: no schedule.json: nothing to resume") from None
        if meta["commit"] != commit or meta["fingerprint"] != fingerprint:
            raise SystemExit(
                f"ch6: {outdir} was started at commit {meta['commit']} (sources "
                f"{meta['fingerprint']}); this is {commit} (sources {fingerprint}): a run's "
                f"repetitions must all come from one commit: check that one out, or start a "
                f"new OUT")
        return Schedule(outdir, meta)

    def done(self):
        path = os.path.join(self.outdir, "done.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def pending(self):
        finished = {d["run"] for d in self.done()}
        return [n for n in range(len(self.order)) if n not in finished]

    def estimate_s(self, n, done, fresh_workers=False):
        """How long run ``n`` will take: the longest this scenario took so
        far; else the longest overhead (beyond the jobs' duration) any
        scenario had, plus the duration; else the duration plus 30 s (a
        fresh worker's PyTorch, CUDA context and networks). Plus 30 s when
        the call's workers are still to start (``fresh_workers``, torch).
        Failed runs do not count: they may have ended early."""
        i = self.order[n][0]
        duration = self.scenarios[i].duration_s or self.meta["duration"]
        done = [d for d in done if not d["failed"]]
        start = 30.0 if fresh_workers and self.meta["backend"] == "torch" else 0.0
        same = [d["elapsed_s"] for d in done if d["scenario_index"] == i]
        if same:
            return max(same) + start
        over = [d["elapsed_s"] - (self.scenarios[d["scenario_index"]].duration_s
                                  or self.meta["duration"]) for d in done]
        return duration + (max(over) if over else 30.0) + start


FIELDS = ["experiment", "scenario", "technique_compared", "run", "rep", "task", "size",
          "technique", "measured", "period_ms"] + worker.JOB_FIELDS


def run_schedule(schedule, gpuslotd=None, budget_s=None, call=None, max_runs=None):
    """Run the schedule's pending repetitions in order, each only if it fits
    in what is left of ``budget_s`` (None: all), at most ``max_runs`` of
    them, appending to OUT's files. The number of runs still pending
    afterwards."""
    outdir, meta = schedule.outdir, schedule.meta
    t_call = time.monotonic()
    suspects = set(meta["suspects"])
    jobs_path = os.path.join(outdir, "jobs.csv")
    new_jobs = not os.path.exists(jobs_path)
    failed_path = os.path.join(outdir, "failed.csv")
    new_failed = not os.path.exists(failed_path)
    # The runner, gpuslotd (its child) and the monitors off the tasks' CPUs
    # (given back at the end: the caller may be a test run).
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {HOUSEKEEPING_CPU})
    try:
        return _run_pending(schedule, gpuslotd, budget_s, call, max_runs, t_call, suspects,
                            jobs_path, new_jobs, failed_path, new_failed)
    finally:
        os.sched_setaffinity(0, affinity)


def _run_pending(schedule, gpuslotd, budget_s, call, max_runs, t_call, suspects, jobs_path,
                 new_jobs, failed_path, new_failed):
    outdir, meta = schedule.outdir, schedule.meta
    with open(jobs_path, "a", newline="") as f, open(failed_path, "a", newline="") as failed, \
            open(os.path.join(outdir, "run.log"), "a") as log, \
            open(os.path.join(outdir, "done.jsonl"), "a") as done_log:
        w = csv.DictWriter(f, FIELDS)
        if new_jobs:
            w.writeheader()
        fails = csv.writer(failed)
        if new_failed:
            fails.writerow(["experiment", "scenario", "run", "rep", "error"])
        log.write(f"=== call {call}: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, "
                  f"budget {budget_s} s, commit {meta['commit']}\n")
        log.flush()
        pool = Pool(meta["backend"], log, spin="spin" in suspects,
                    cpus_per_task=meta.get("cpus_per_task", 1))
        done = schedule.done()
        pending = schedule.pending()
        try:
            ran = 0
            while pending and (max_runs is None or ran < max_runs):
                ran += 1
                n = pending[0]
                i, rep = schedule.order[n]
                s = schedule.scenarios[i]
                if budget_s is not None:
                    left = budget_s - (time.monotonic() - t_call)
                    if schedule.estimate_s(n, done, fresh_workers=ran == 1) > left:
                        log.write(f"   run {n} ({s.experiment}: {s.name}, rep {rep}) may not "
                                  f"fit in the {left:.0f} s left: stopping here\n")
                        break
                log.write(f"== run {n}: {s.experiment}: {s.name} (repetition {rep})\n")
                log.flush()
                t0 = time.monotonic()
                rundir = os.path.join(outdir, "runs", str(n))
                error = None
                try:
                    rows, status, _ = run_scenario(s, pool, s.duration_s or meta["duration"],
                                                   rundir,
                                                   gpuslotd, log, suspects)
                except RuntimeError as e:
                    error = str(e)
                    log.write(f"   FAILED: {e}\n")
                    fails.writerow([s.experiment, s.name, n, rep, error])
                    failed.flush()
                    print(f"ch6: run {n}: {s.experiment} {s.name} rep {rep}: FAILED: {e}",
                          flush=True)
                    rows = []
                else:
                    for r in rows:
                        r.update(run=n, rep=rep, technique_compared=s.technique)
                    w.writerows(rows)
                    f.flush()
                    log.write(status)
                elapsed = time.monotonic() - t0
                log.write(f"   {len(rows)} jobs in {elapsed:.1f} s\n")
                log.flush()
                d = dict(run=n, scenario_index=i, rep=rep, experiment=s.experiment,
                         scenario=s.name, jobs=len(rows), elapsed_s=round(elapsed, 2),
                         failed=error is not None, call=call)
                done_log.write(json.dumps(d) + "\n")
                done_log.flush()
                done.append(d)
                pending.pop(0)
                if error is None:
                    print(f"ch6: run {n}: {s.experiment} {s.name} rep {rep}: {len(rows)} jobs",
                          flush=True)
        finally:
            pool.close()
    print(f"ch6: {len(pending)} of {len(schedule.order)} runs pending"
          + (f": go on with --resume {outdir}" if pending else ""), flush=True)
    return len(pending)


def run_all(scenarios, backend, duration, outdir, gpuslotd=None, reps=1, seed=32,
            suspects=DEFAULT_SUSPECTS, commit="unknown", budget_s=None):
    """A new run of ``reps`` repetitions of every scenario into ``outdir``.
    A scenario that fails (a worker died: its traceback is in run.log) goes
    into outdir/failed.csv and the run goes on with the next."""
    schedule = Schedule.create(outdir, scenarios, reps, seed, duration, backend, suspects,
                               commit, source_fingerprint())
    return run_schedule(schedule, gpuslotd, budget_s, call=0)


def command_of(text):
    return shlex.split(text)
