# SPDX-License-Identifier: GPL-2.0
"""python3 -m ch6 run|report — see tests/gpu/ch6.sh."""

import argparse
import dataclasses
import csv
import os
import subprocess
import sys

from . import calibrate, report, runner, scenarios, worker
from .tasks import SIZES, camera_sizes

EXPERIMENTS = ("calibrate", "6.1", "6.1c", "6.3", "only-18", "camera-18",
               "only", "only-graph", "camera")
# Issue 32's comparison (the default).
ISSUE32 = "only,only-graph,camera"


def calibrated_sizes(path):
    """The calibrated sizes that differ from the dissertation's (the same
    size again would only repeat Table 6.1)."""
    out = {}
    for name, size in calibrate.pick(calibrate.read(path)).items():
        own = SIZES[name.removesuffix("-cal")]
        if (size.batch, size.width) == (own.batch, own.width):
            print(f"ch6: {name} is {own.name} (batch {own.batch}): not run again in 6.1c")
        else:
            out[name] = size
    return out


def camera_busy_ms(a, size, calibration):
    """GPU-busy ms of one camera frame alone: --camera-busy-ms, the none
    backend's stand-in, or a calibration of the camera network (made now
    into OUT/calibration-camera.csv if no calibration has it)."""
    if a.camera_busy_ms:
        return a.camera_busy_ms, "--camera-busy-ms"
    if a.backend == "none":
        return worker.NONE_JOB_MS["camera"], "the none backend's stand-in"
    spec = f"{size.batch}x{size.resolution}"
    for path in (calibration, os.path.join(a.out, "calibration-camera.csv")):
        if os.path.exists(path):
            for r in calibrate.read(path):
                if (r["network"], r["batch"], r["resolution"]) == \
                        ("fcn_resnet50", size.batch, size.resolution):
                    return r["busy_ms"], path
    path = os.path.join(a.out, "calibration-camera.csv")
    subprocess.run([sys.executable, "-m", "ch6.calibrate", path, str(runner.cpu_for(0)),
                    "--camera", spec, "--camera-only"], check=True)
    return camera_busy_ms(a, size, calibration)


def pick_scenarios(a, wanted, calibration, notes):
    techniques = tuple(a.techniques.split(",")) if a.techniques else \
        tuple(scenarios.TECHNIQUES)
    for t in techniques:
        try:
            scenarios.parse_technique(t)
        except ValueError as e:
            raise SystemExit(f"ch6: {e}") from None
    picked = []
    for e in wanted:
        if e == "camera-18":
            for c in camera_sizes(a.camera_18):
                picked += scenarios.camera_pipeline(c)
        elif e == "camera":
            size = camera_sizes(a.camera)[0]
            busy, source = camera_busy_ms(a, size, calibration)
            for load in (int(x) for x in a.camera_loads.split(",")):
                period = scenarios.camera_period_s(busy, load / 100, a.cameras)
                notes[f"camera-{load}"] = dict(
                    load_percent=load, period_ms=round(period * 1e3, 3), busy_ms=busy,
                    busy_from=source, cameras=a.cameras, size=f"{size.batch}x{size.resolution}")
                picked += [dataclasses.replace(s, duration_s=a.camera_duration)
                           for s in scenarios.camera_load(size, period, f"camera-{load}",
                                                          a.cameras, techniques)]
        elif e == "only":
            picked += scenarios.only(techniques=techniques)
        elif e == "only-graph":
            picked += scenarios.only(graph=True, techniques=techniques)
        elif e == "6.1c":
            picked += scenarios.table_6_1(calibrated_sizes(calibration), "6.1c")
        elif e != "calibrate":
            picked += scenarios.EXPERIMENTS[e]()
    return [s for s in picked if a.only in s.name]


def suspects_of(text):
    if text == "none":
        return ()
    if text == "all":
        return runner.SUSPECTS
    out = tuple(filter(None, text.split(",")))
    for s in out:
        if s not in runner.SUSPECTS:
            raise SystemExit(f"ch6: unknown suspect {s!r}: {', '.join(runner.SUSPECTS)}, "
                             f"all or none")
    return out


def main(argv):
    p = argparse.ArgumentParser(prog="ch6")
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="run experiments into OUT/jobs.csv")
    r.add_argument("--experiments", default=ISSUE32,
                   help="comma-separated, of: " + ", ".join(EXPERIMENTS) +
                   f" (default {ISSUE32}: issue 32's comparison; 6.1c: Table 6.1 on the "
                   "calibrated sizes; only-18, camera-18: issue 18's versions)")
    r.add_argument("--backend", choices=("torch", "none"), default="torch")
    r.add_argument("--duration", type=float, default=60.0,
                   help="seconds of jobs per scenario and repetition (default 60)")
    r.add_argument("--reps", type=int, default=5, help="repetitions of each scenario (5)")
    r.add_argument("--seed", type=int, default=32, help="of the repetitions' order (32)")
    r.add_argument("--budget", type=float, default=None,
                   help="seconds this call may run scenarios: stop before a repetition "
                   "that may not fit (its earlier length, else an estimate); go on later "
                   "with --resume")
    r.add_argument("--max-runs", type=int, default=None,
                   help="run at most this many repetitions in this call")
    r.add_argument("--resume", action="store_true",
                   help="go on with OUT's pending repetitions (everything else as OUT was "
                   "started; refused if this tree's commit or sources differ)")
    r.add_argument("--commit", default=os.environ.get("GPUSLOT_COMMIT", "unknown"),
                   help="the commit this tree is (default $GPUSLOT_COMMIT)")
    r.add_argument("--cpus-per-task", type=int, default=1,
                   help="cores each task's process is pinned to, none shared (1; 2 gives a "
                   "runtime that adds a thread, as XSched's launch thread, a core of its own "
                   "beside the task's, every technique alike)")
    r.add_argument("--suspects", default=",".join(runner.DEFAULT_SUSPECTS),
                   help="the possible sources of periodic stalls left on: comma-separated of "
                   f"{', '.join(runner.SUSPECTS)}; all; none (default "
                   f"{','.join(runner.DEFAULT_SUSPECTS)}: the monitors)")
    r.add_argument("--techniques", default="",
                   help="issue 32's experiments: only these, comma-separated, of " +
                   ", ".join(scenarios.TECHNIQUES) + "; " + " and ".join(
                       scenarios.RESERVE_LAYOUTS) + " also with another reserve than "
                   f"{scenarios.DEFAULT_RESERVE} %% ({scenarios.RESERVES[0]} to "
                   f"{scenarios.RESERVES[-1]}, 100 - reserve divisible by 3), e.g. "
                   "gpuslot-prio-held@10 (slot 0 alone on 10 %% of the SMs, as asked of the "
                   "planner: run.log shows the SMs it gave)")
    r.add_argument("--out", required=True)
    r.add_argument("--dry-run", action="store_true",
                   help="the whole schedule on the CPU: none backend, a flock lock in "
                   "gpuslotd's place (no GPU, no gpuslotd)")
    r.add_argument("--plan", action="store_true",
                   help="print the schedule and its estimated length; run nothing")
    r.add_argument("--overhead", type=float, default=10.0,
                   help="--plan: seconds each repetition costs beyond its duration (10)")
    r.add_argument("--gpuslotd", default="gpuslotd",
                   help="gpuslotd's command line; 'fake': a flock lock in its place (as "
                   "--dry-run, with any backend)")
    r.add_argument("--gpuslotctl", default="gpuslotctl", help="gpuslotctl's command line")
    r.add_argument("--extra", default="", help="arguments for both (--topology ... --dri '')")
    r.add_argument("--calibration", default="",
                   help="6.1c's sizes and the camera's busy time from this calibration.csv "
                   "(default: OUT's, made by the calibrate experiment)")
    r.add_argument("--camera", default="1x1280",
                   help="camera: the camera network's (FCN-ResNet50) BATCHxPIXELS (1x1280)")
    r.add_argument("--camera-loads", default="85,130",
                   help="camera: the loads to run, in percent of the GPU's capacity: each "
                   "sets the cameras' period to cameras x busy ms / load (85,130)")
    r.add_argument("--camera-busy-ms", type=float, default=0.0,
                   help="camera: a frame's GPU-busy ms alone (default: measured)")
    r.add_argument("--cameras", type=int, default=8)
    r.add_argument("--camera-duration", type=float, default=0.0,
                   help="camera: seconds of jobs per repetition (default --duration)")
    r.add_argument("--camera-18", default="1x800,1x1280",
                   help="camera-18: BATCHxPIXELS,...: one pipeline each")
    r.add_argument("--only", default="", help="run scenarios whose name contains this")
    rep = sub.add_parser("report", help="tables, CSVs and plots from a run")
    rep.add_argument("run_dir")
    a = p.parse_args(argv)
    if a.what == "report":
        summaries, plots = report.write_report(a.run_dir)
        print(f"ch6: {len(summaries)} summaries, plots: {', '.join(plots) or 'none'}")
        return 0
    if a.dry_run:
        a.backend = "none"
    gpuslotd = "fake" if a.dry_run or a.gpuslotd == "fake" else (runner.command_of(a.gpuslotd),
                                         runner.command_of(a.gpuslotctl),
                                         runner.command_of(a.extra))
    fingerprint = runner.source_fingerprint()
    if a.resume:
        schedule = runner.Schedule.load(a.out, a.commit, fingerprint)
        if schedule.meta.get("dry_run") != a.dry_run:
            p.error("--dry-run: as the run was started")
        calls = 1 + max((d.get("call") or 0 for d in schedule.done()), default=0)
        runner.run_schedule(schedule, gpuslotd, a.budget, call=calls, max_runs=a.max_runs)
        return 0
    if a.reps < 1 or a.duration <= 0:
        p.error("--reps and --duration: positive")
    wanted = a.experiments.split(",")
    for e in wanted:
        if e not in EXPERIMENTS:
            p.error(f"unknown experiment {e!r}: one of {', '.join(EXPERIMENTS)}")
    suspects = suspects_of(a.suspects)
    if not a.plan:
        os.makedirs(a.out, exist_ok=True)
        if os.path.exists(os.path.join(a.out, "schedule.json")):
            p.error(f"{a.out} has a run already: --resume to go on with it, or a new --out")
    calibration = a.calibration or os.path.join(a.out, "calibration.csv")
    if "calibrate" in wanted and not a.plan:
        if a.backend != "torch":
            p.error("calibrate measures the GPU: it needs the torch backend")
        subprocess.run([sys.executable, "-m", "ch6.calibrate", calibration,
                        str(runner.cpu_for(0)), "--camera", a.camera_18 + "," + a.camera],
                       check=True)
    notes = {}
    if a.plan and "camera" in wanted and not a.camera_busy_ms and a.backend != "none":
        a.camera_busy_ms = 15.0
        print("ch6: --plan: the camera's busy time taken as 15 ms (measured when run)")
    picked = pick_scenarios(a, wanted, calibration, notes)
    try:
        runner.check_cpus(picked, a.cpus_per_task)
    except ValueError as e:
        p.error(f"--cpus-per-task: {e}")
    if a.plan:
        order = runner.interleave(len(picked), a.reps, a.seed)
        total = sum((picked[i].duration_s or a.duration) + a.overhead for i, _ in order)
        print(f"ch6: {len(picked)} scenarios x {a.reps} repetitions = {len(order)} runs of "
              f"{a.duration:g} s (cameras {a.camera_duration or a.duration:g} s) + "
              f"~{a.overhead:g} s each: ~{total / 60:.1f} min")
        for e, n in notes.items():
            print(f"  {e}: {n}")
        for n, (i, rep) in enumerate(order):
            print(f"  {n:3d} rep {rep}  {picked[i].experiment}: {picked[i].name}")
        return 0
    schedule = runner.Schedule.create(a.out, picked, a.reps, a.seed, a.duration, a.backend,
                                      suspects, a.commit, fingerprint, dry_run=a.dry_run,
                                      experiments=wanted, notes=notes,
                                      cpus_per_task=a.cpus_per_task, argv=list(argv))
    with open(os.path.join(a.out, "order.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "rep", "experiment", "scenario"])
        for n, (i, rep) in enumerate(schedule.order):
            w.writerow([n, rep, picked[i].experiment, picked[i].name])
    runner.run_schedule(schedule, gpuslotd, a.budget, call=0, max_runs=a.max_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
