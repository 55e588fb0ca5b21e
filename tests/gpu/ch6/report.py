# SPDX-License-Identifier: GPL-2.0
"""Tables, CSVs and CDF plots from a run's jobs.csv."""

import collections
import csv
import os

from . import calibrate, compare
from .stats import summarize

COLUMNS = ["jobs", "min", "mean", "median", "p99", "max", "std", "misses"]


def read_jobs(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["response_ms"] = float(r["response_ms"])
        r["gpu_ms"] = float(r["gpu_ms"])
        r["gc_ms"] = float(r.get("gc_ms") or 0)
        r["period_ms"] = float(r["period_ms"])
        r["measured"] = r["measured"] == "1"
        r["slot"] = int(r["slot"])
    return rows


def group(rows, experiment, who):
    """Response times per scenario (in run order) of the tasks ``who``
    selects: "measured", "all", or "others"."""
    out = collections.OrderedDict()
    for r in rows:
        if r["experiment"] != experiment:
            continue
        if who == "measured" and not r["measured"] or who == "others" and r["measured"]:
            continue
        out.setdefault(r["scenario"], []).append(r)
    return out


def summary_rows(rows):
    """One summary per experiment, scenario and task group: the measured
    task, and (where there are) the others pooled."""
    out = []
    for experiment in dict.fromkeys(r["experiment"] for r in rows):
        for who in ("measured", "others"):
            for scenario, jobs in group(rows, experiment, who).items():
                s = summarize([j["response_ms"] for j in jobs], jobs[0]["period_ms"])
                busy = sum(j["gpu_ms"] for j in jobs) / sum(j["response_ms"] for j in jobs)
                out.append(dict(experiment=experiment, scenario=scenario, tasks=who,
                                **{c: round(getattr(s, c), 3) for c in COLUMNS},
                                gpu_share=round(busy, 3),
                                gc_max=round(max(j["gc_ms"] for j in jobs), 3)))
    return out


def markdown(summaries, experiment, tasks="measured"):
    head = "| scenario | " + " | ".join(COLUMNS) + " | GPU share | max GC ms |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 3)]
    for s in summaries:
        if s["experiment"] == experiment and s["tasks"] == tasks:
            lines.append(f"| {s['scenario']} | " + " | ".join(str(s[c]) for c in COLUMNS) +
                         f" | {s['gpu_share']} | {s['gc_max']} |")
    return "\n".join(lines) + "\n"


def calibration_markdown(rows, picked):
    """The measured sizes, and which the calibration picked."""
    chosen = {(s.width, s.batch): name for name, s in picked.items()}
    lines = ["| network | width | batch | px | job ms | GPU busy ms | busy share | picked |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = chosen.get((r["width"], r["batch"]), "") if r["network"] == "mobilenet_v2" else ""
        lines.append(f"| {r['network']} | {r['width']} | {r['batch']} | {r['resolution']} | "
                     f"{r['job_ms']} | {r['busy_ms']} | {r['share']:.0%} | {name} |")
    return "\n".join(lines) + "\n"


def cdf_plot(rows, experiment, path, title, select=lambda scenario: True, who="measured"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for scenario, jobs in group(rows, experiment, who).items():
        if not select(scenario):
            continue
        v = sorted(j["response_ms"] for j in jobs)
        ax.plot(v, [(i + 1) / len(v) for i in range(len(v))], label=scenario)
    ax.set_xlabel("response time (ms)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def reps_plot(run_dir, experiment, path):
    """The priority task's p99 in each repetition, per technique (runs.csv):
    how far repetitions of one technique spread against the gaps between
    techniques."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(os.path.join(run_dir, "runs.csv")) as f:
        runs = [r for r in csv.DictReader(f) if r["experiment"] == experiment]
    techniques = list(dict.fromkeys(r["technique"] for r in runs))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, t in enumerate(techniques):
        v = [float(r["p99"]) for r in runs if r["technique"] == t]
        ax.plot([i] * len(v), v, "o", alpha=0.6)
        ax.plot([i - 0.25, i + 0.25], [sorted(v)[len(v) // 2]] * 2, "k-")
    ax.set_xticks(range(len(techniques)), techniques, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("priority task p99 per repetition (ms)")
    ax.set_yscale("log")
    ax.set_title(f"{experiment}: p99 of each repetition (bar: median)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(run_dir):
    """summary.csv, tables.md and the plots, next to jobs.csv."""
    rows = read_jobs(os.path.join(run_dir, "jobs.csv"))
    summaries = summary_rows(rows)
    with open(os.path.join(run_dir, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, ["experiment", "scenario", "tasks"] + COLUMNS +
                           ["gpu_share", "gc_max"])
        w.writeheader()
        w.writerows(summaries)
    experiments = list(dict.fromkeys(r["experiment"] for r in rows))
    comparison = compare.write(run_dir, rows)
    with open(os.path.join(run_dir, "tables.md"), "w") as f:
        f.write(comparison)
        if comparison:
            f.write("### every repetition pooled\n\n")
        failed = os.path.join(run_dir, "failed.csv")
        if os.path.exists(failed):
            with open(failed) as ff:
                lost = list(csv.DictReader(ff))
            if lost:
                f.write("### scenarios that failed (their tracebacks are in run.log)\n\n"
                        "| experiment | scenario | error |\n|---|---|---|\n" +
                        "".join(f"| {r['experiment']} | {r['scenario']} | {r['error']} |\n"
                                for r in lost) + "\n")
        cal = os.path.join(run_dir, "calibration.csv")
        if os.path.exists(cal):
            measured = calibrate.read(cal)
            f.write("### calibration: GPU-busy share of each size alone\n\n" +
                    calibration_markdown(measured, calibrate.pick(measured)) + "\n")
        for e in experiments:
            f.write(f"### {e}: the measured task\n\n{markdown(summaries, e)}\n")
            if any(s["experiment"] == e and s["tasks"] == "others" for s in summaries):
                f.write(f"### {e}: the other tasks\n\n{markdown(summaries, e, 'others')}\n")
    plots = []
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("ch6: no matplotlib here: tables without plots")
        return summaries, plots
    for e in experiments:
        path = os.path.join(run_dir, f"cdf-{e}.png")
        cdf_plot(rows, e, path, f"experiment {e}: the measured task")
        plots.append(path)
    if comparison:
        for e in dict.fromkeys(r["experiment"] for r in rows if r.get("technique_compared")):
            path = os.path.join(run_dir, f"p99-{e}.png")
            reps_plot(run_dir, e, path)
            plots.append(path)
    if "6.3" in experiments:
        path = os.path.join(run_dir, "fig-6.3-large.png")
        cdf_plot(rows, "6.3", path, "Figure 6.3: medium task vs three large competitors",
                 select=lambda s: s.startswith("vs large") or s.startswith("vs none"))
        plots.append(path)
    return summaries, plots
