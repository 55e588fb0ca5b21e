# SPDX-License-Identifier: GPL-2.0
"""python3 -m ch6 run|report — see tests/gpu/ch6.sh."""

import argparse
import sys

from . import report, runner, scenarios
from .tasks import SIZES, Size


def main(argv):
    p = argparse.ArgumentParser(prog="ch6")
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="run experiments into OUT/jobs.csv")
    r.add_argument("--experiments", default="6.1,6.3,only",
                   help="comma-separated: 6.1, 6.3, only, camera")
    r.add_argument("--backend", choices=("torch", "none"), default="torch")
    r.add_argument("--duration", type=float, default=20.0, help="seconds of jobs per scenario")
    r.add_argument("--out", required=True)
    r.add_argument("--gpuslotd", default="gpuslotd", help="gpuslotd's command line")
    r.add_argument("--gpuslotctl", default="gpuslotctl", help="gpuslotctl's command line")
    r.add_argument("--extra", default="", help="arguments for both (--topology ... --dri '')")
    r.add_argument("--sizes", default="",
                   help="calibrated sizes, name=batch/width,...: replaces Table 6.1's")
    r.add_argument("--camera", default="fcn_resnet50:1x520",
                   help="the camera network's batch and input size, BATCHxPIXELS")
    r.add_argument("--only", default="", help="run scenarios whose name contains this")
    rep = sub.add_parser("report", help="tables, CSVs and plots from a run")
    rep.add_argument("run_dir")
    a = p.parse_args(argv)
    if a.what == "report":
        summaries, plots = report.write_report(a.run_dir)
        print(f"ch6: {len(summaries)} summaries, plots: {', '.join(plots)}")
        return 0
    sizes = dict(SIZES)
    for item in filter(None, a.sizes.split(",")):
        name, spec = item.split("=")
        batch, width = spec.split("/")
        sizes[name] = Size(name, int(batch), float(width))
    picked = []
    for e in a.experiments.split(","):
        if e == "camera":
            batch, px = a.camera.split(":")[1].split("x")
            picked += scenarios.camera_pipeline(Size("camera", int(batch), 1.0, int(px)))
        elif e in scenarios.EXPERIMENTS:
            picked += scenarios.EXPERIMENTS[e](sizes)
        else:
            p.error(f"unknown experiment {e!r}")
    picked = [s for s in picked if a.only in s.name]
    gpuslotd = (runner.command_of(a.gpuslotd), runner.command_of(a.gpuslotctl),
                runner.command_of(a.extra))
    runner.run_all(picked, a.backend, a.duration, a.out, gpuslotd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
