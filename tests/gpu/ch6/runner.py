# SPDX-License-Identifier: GPL-2.0
"""Running scenarios: gpuslotd with the scenario's layout (socket
transport), one worker process per task on a CPU core of its own, a
common start, and every job's record in one CSV."""

import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIELDS = ["experiment", "scenario", "task", "size", "technique", "measured", "period_ms",
          "release_s", "response_ms", "slot", "gpu_ms"]


class Gpuslotd:
    """gpuslotd serving one layout on sockets in a fresh directory."""

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
                                     capture_output=True, text=True).stdout

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


def cpu_for(i):
    """Task i's core: one each, core 0 left to gpuslotd and the runner."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[1 + i % (len(cpus) - 1)] if len(cpus) > 1 else cpus[0]


def run_scenario(scenario, backend, duration, workdir, gpuslotd=None, log=sys.stderr):
    """Run ``scenario``; its rows (dicts of FIELDS). ``gpuslotd``: (command,
    gpuslotctl command, extra arguments of both) when a task locks."""
    os.makedirs(workdir, exist_ok=True)
    daemon = None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE)] +
                                        env.get("PYTHONPATH", "").split(os.pathsep))
    if scenario.layout is not None:
        command, ctl, extra = gpuslotd
        daemon = Gpuslotd(command, ctl, extra, scenario.layout, scenario.whole_gpu_slots, log)
        env.update(GPUSLOT_TRANSPORT="socket", GPUSLOT_SOCKET_DIR=daemon.dir)
    procs = []
    try:
        for i, task in enumerate(scenario.tasks):
            out = os.path.join(workdir, f"{task.name}.csv")
            task_env = dict(env)
            if task.technique == "mps":
                task_env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(task.mps_percent)
            cmd = [sys.executable, "-m", "ch6.worker", json.dumps(task.to_json()), backend,
                   str(duration), out, str(cpu_for(i))]
            procs.append((task, out, subprocess.Popen(cmd, env=task_env, stdin=subprocess.PIPE,
                                                      stdout=subprocess.PIPE, stderr=log,
                                                      text=True)))
        for task, _, p in procs:
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"{scenario.name}: task {task.name} did not get ready "
                                   f"(exit {p.wait()})")
        start = time.time() + 0.5
        for _, _, p in procs:
            p.stdin.write(f"{start}\n")
            p.stdin.flush()
        for task, _, p in procs:
            if p.wait(timeout=duration + 120):
                raise RuntimeError(f"{scenario.name}: task {task.name} failed")
    finally:
        for _, _, p in procs:
            if p.poll() is None:
                p.kill()
        if daemon:
            daemon.stop()
    rows = []
    for task, out, _ in procs:
        with open(out) as f:
            for r in csv.DictReader(f):
                rows.append(dict(experiment=scenario.experiment, scenario=scenario.name,
                                 task=task.name, size=task.size.name,
                                 technique=task.technique, measured=int(task.measured),
                                 period_ms=task.period_s * 1000, **r))
    return rows, (daemon.status if daemon else "")


def run_all(scenarios, backend, duration, outdir, gpuslotd=None):
    """Every scenario, one after another; all rows in outdir/jobs.csv."""
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "jobs.csv"), "w", newline="") as f, \
            open(os.path.join(outdir, "run.log"), "a") as log:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for n, s in enumerate(scenarios):
            log.write(f"== {s.experiment}: {s.name}\n")
            log.flush()
            t0 = time.monotonic()
            rows, status = run_scenario(s, backend, duration,
                                        os.path.join(outdir, "scenarios", str(n)), gpuslotd, log)
            w.writerows(rows)
            f.flush()
            log.write(status)
            log.write(f"   {len(rows)} jobs in {time.monotonic() - t0:.1f} s\n")
            log.flush()
            print(f"ch6: {s.experiment} {s.name}: {len(rows)} jobs", flush=True)


def command_of(text):
    return shlex.split(text)
