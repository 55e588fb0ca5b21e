# SPDX-License-Identifier: GPL-2.0
"""python3 -m ch6 run|report — see tests/gpu/ch6.sh."""

import argparse
import os
import subprocess
import sys

from . import calibrate, report, runner, scenarios
from .tasks import SIZES, camera_sizes

EXPERIMENTS = ("calibrate", "6.1", "6.1c", "6.3", "only", "camera")


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


def main(argv):
    p = argparse.ArgumentParser(prog="ch6")
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="run experiments into OUT/jobs.csv")
    r.add_argument("--experiments", default="calibrate,6.1,6.1c,6.3,only,camera",
                   help="comma-separated, in this order: " + ", ".join(EXPERIMENTS) +
                   " (6.1c: Table 6.1 on the calibrated sizes)")
    r.add_argument("--backend", choices=("torch", "none"), default="torch")
    r.add_argument("--duration", type=float, default=20.0, help="seconds of jobs per scenario")
    r.add_argument("--out", required=True)
    r.add_argument("--gpuslotd", default="gpuslotd", help="gpuslotd's command line")
    r.add_argument("--gpuslotctl", default="gpuslotctl", help="gpuslotctl's command line")
    r.add_argument("--extra", default="", help="arguments for both (--topology ... --dri '')")
    r.add_argument("--calibration", default="",
                   help="6.1c's sizes from this calibration.csv (default: OUT's, made by "
                   "the calibrate experiment)")
    r.add_argument("--camera", default="1x800,1x1280",
                   help="the camera network's (FCN-ResNet50) batch and input sizes, "
                   "BATCHxPIXELS,...: one pipeline each")
    r.add_argument("--only", default="", help="run scenarios whose name contains this")
    rep = sub.add_parser("report", help="tables, CSVs and plots from a run")
    rep.add_argument("run_dir")
    a = p.parse_args(argv)
    if a.what == "report":
        summaries, plots = report.write_report(a.run_dir)
        print(f"ch6: {len(summaries)} summaries, plots: {', '.join(plots)}")
        return 0
    wanted = a.experiments.split(",")
    for e in wanted:
        if e not in EXPERIMENTS:
            p.error(f"unknown experiment {e!r}: one of {', '.join(EXPERIMENTS)}")
    cameras = camera_sizes(a.camera)
    os.makedirs(a.out, exist_ok=True)
    calibration = a.calibration or os.path.join(a.out, "calibration.csv")
    if "calibrate" in wanted:
        if a.backend != "torch":
            p.error("calibrate measures the GPU: it needs the torch backend")
        subprocess.run([sys.executable, "-m", "ch6.calibrate", calibration,
                        str(runner.cpu_for(0)),
                        "--camera", a.camera],
                       check=True)
    picked = []
    for e in wanted:
        if e == "camera":
            for c in cameras:
                picked += scenarios.camera_pipeline(c)
        elif e == "6.1c":
            picked += scenarios.table_6_1(calibrated_sizes(calibration), "6.1c")
        elif e != "calibrate":
            picked += scenarios.EXPERIMENTS[e]()
    picked = [s for s in picked if a.only in s.name]
    gpuslotd = (runner.command_of(a.gpuslotd), runner.command_of(a.gpuslotctl),
                runner.command_of(a.extra))
    runner.run_all(picked, a.backend, a.duration, a.out, gpuslotd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
