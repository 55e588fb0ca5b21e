# SPDX-License-Identifier: GPL-2.0
"""Running scenarios: gpuslotd with the scenario's layout (socket
transport), the tasks on workers (worker.py) on CPU cores of their own, a
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
          "release_s", "response_ms", "slot", "gpu_ms", "gc_ms", "cpu_ms", "preempted"]


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


class Worker:
    """One worker process (worker.py) on core ``cpu``."""

    def __init__(self, backend, cpu, env, log):
        self.proc = subprocess.Popen([sys.executable, "-m", "ch6.worker", backend, str(cpu)],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, text=True)
        self.expect("up", f"worker on CPU {cpu}")

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
    own, made for the scenario and ended after it."""

    def __init__(self, backend, log):
        self.backend, self.log = backend, log
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(
            [os.path.dirname(HERE)] + self.env.get("PYTHONPATH", "").split(os.pathsep))
        self.kept = {}

    def worker(self, i, task):
        if task.technique == "mps":
            env = dict(self.env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=str(task.mps_percent))
            return Worker(self.backend, cpu_for(i), env, self.log), True
        if i not in self.kept:
            self.kept[i] = Worker(self.backend, cpu_for(i), self.env, self.log)
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


def run_scenario(scenario, pool, duration, workdir, gpuslotd=None, log=sys.stderr):
    """Run ``scenario`` on ``pool``'s workers; its rows (dicts of FIELDS).
    ``gpuslotd``: (command, gpuslotctl command, extra arguments of both)
    when a task locks."""
    os.makedirs(workdir, exist_ok=True)
    daemon = None
    env = {}
    if scenario.layout is not None:
        command, ctl, extra = gpuslotd
        daemon = Gpuslotd(command, ctl, extra, scenario.layout, scenario.whole_gpu_slots, log)
        env = dict(GPUSLOT_TRANSPORT="socket", GPUSLOT_SOCKET_DIR=daemon.dir)
    running, own = [], []
    try:
        for i, task in enumerate(scenario.tasks):
            out = os.path.join(workdir, f"{task.name}.csv")
            w, fresh = pool.worker(i, task)
            if fresh:
                own.append(w)
            w.send(json.dumps(dict(task=task.to_json(), duration=duration, out=out, env=env)))
            running.append((task, out, w))
        for task, _, w in running:
            w.expect("ready", f"{scenario.name}: task {task.name}")
        start = time.time() + 0.5
        for _, _, w in running:
            w.send(f"{start}")
        for task, _, w in running:
            w.expect("done", f"{scenario.name}: task {task.name}")
    except BaseException:
        pool.kill()
        raise
    finally:
        for w in own:
            w.quit()
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
    return rows, (daemon.status if daemon else "")


def run_all(scenarios, backend, duration, outdir, gpuslotd=None):
    """Every scenario, one after another; all rows in outdir/jobs.csv. A
    scenario that fails (a worker died: its traceback is in run.log) goes
    into outdir/failed.csv and the run goes on with the next."""
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "jobs.csv"), "w", newline="") as f, \
            open(os.path.join(outdir, "failed.csv"), "w", newline="") as failed, \
            open(os.path.join(outdir, "run.log"), "a") as log:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        fails = csv.writer(failed)
        fails.writerow(["experiment", "scenario", "error"])
        pool = Pool(backend, log)
        try:
            for n, s in enumerate(scenarios):
                log.write(f"== {s.experiment}: {s.name}\n")
                log.flush()
                t0 = time.monotonic()
                try:
                    rows, status = run_scenario(s, pool, duration,
                                                os.path.join(outdir, "scenarios", str(n)),
                                                gpuslotd, log)
                except RuntimeError as e:
                    log.write(f"   FAILED: {e}\n")
                    log.flush()
                    fails.writerow([s.experiment, s.name, str(e)])
                    failed.flush()
                    print(f"ch6: {s.experiment} {s.name}: FAILED: {e}", flush=True)
                    continue
                w.writerows(rows)
                f.flush()
                log.write(status)
                log.write(f"   {len(rows)} jobs in {time.monotonic() - t0:.1f} s\n")
                log.flush()
                print(f"ch6: {s.experiment} {s.name}: {len(rows)} jobs", flush=True)
        finally:
            pool.close()


def command_of(text):
    return shlex.split(text)
