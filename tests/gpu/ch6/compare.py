# SPDX-License-Identifier: GPL-2.0
"""Issue 32's comparison from a run of repetitions: per repetition the
priority task's percentiles, the competitors' throughput and the other
cameras' deadline misses, with what the monitors saw (GPU clocks, CPU
steal, garbage collections, stall moments); per technique the median over
repetitions with a bootstrap 95 % interval; each technique against the best
alternative (scenarios.ALTERNATIVES) and against stream priorities, and
issue 32's bar."""

import collections
import csv
import json
import os
import statistics

from . import scenarios
from .stats import percentile

BOOTSTRAP = 10000
SEED = 32
# A stall moment: jobs of two or more tasks each this much over their
# task's median response, released within STALL_WINDOW_S of each other.
STALL_EXCESS_MS = 12.0
STALL_WINDOW_S = 0.1
BAR_P99 = 0.85
BAR_THROUGHPUT = 0.9

RUN_FIELDS = ["run", "rep", "experiment", "technique", "scenario", "front_stream_priority",
              "front_slot_priority", "front_fifo_share", "jobs", "p50", "p95", "p99",
              "mean", "misses", "competitor_jobs", "competitor_jobs_per_s", "others_jobs",
              "others_misses", "others_miss_share", "launch_ms", "launch_cpu_ms", "wait_ms",
              "wait_cpu_ms", "acquire_ms", "gc_runs", "gc_max_ms", "stall_moments",
              "stalls_with_gc", "stalls_with_steal", "steal_jiffies", "steal_jiffies_task_cpu",
              "sm_clock_median", "sm_clock_min", "mem_clock_median", "temp_max", "power_mean"]


def _csv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def _num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def stall_moments(rows, window=STALL_WINDOW_S, excess=STALL_EXCESS_MS):
    """Moments (release times, s) at which jobs of two or more tasks were
    each ``excess`` ms over their task's median response."""
    by_task = collections.defaultdict(list)
    for r in rows:
        by_task[r["task"]].append(r)
    slow = []
    for task, jobs in by_task.items():
        med = statistics.median(float(j["response_ms"]) for j in jobs)
        slow += [(float(j["release_s"]), task) for j in jobs
                 if float(j["response_ms"]) > med + excess]
    slow.sort()
    groups = []
    for t, task in slow:
        if groups and t - groups[-1][-1][0] < window:
            groups[-1].append((t, task))
        else:
            groups.append([(t, task)])
    return [g[0][0] for g in groups if len({task for _, task in g}) >= 2]


def run_monitors(rundir, info):
    """GPU clocks and CPU steal of one run's measured window."""
    out = {}
    start, duration = info.get("start"), info.get("duration")
    steal_rows = _csv(os.path.join(rundir, "cpu.csv"))
    # A task's cores: one number in runs before --cpus-per-task, a list since.
    cores = {name: set(c) if isinstance(c, list) else {c}
             for name, c in (info.get("cpus") or {}).get("tasks", {}).items()}
    task_cpus = set().union(*cores.values())
    measured_cpus = set()
    for t in info.get("scenario", {}).get("tasks", []):
        if t.get("measured"):
            measured_cpus = cores.get(t["name"], set())
    if steal_rows and start is not None:
        window = [r for r in steal_rows if start <= float(r["t_s"]) <= start + duration + 0.1]
        out["steal_jiffies"] = sum(int(r["steal"]) for r in window)
        out["steal_jiffies_task_cpu"] = sum(int(r["steal"]) for r in window
                                            if int(r["cpu"]) in measured_cpus)
        out["_steal_times"] = sorted(float(r["t_s"]) - start for r in window
                                     if int(r["steal"]) > 0 and int(r["cpu"]) in task_cpus)
    gpu = _csv(os.path.join(rundir, "gpu.csv"))
    if gpu:
        def col(prefix):
            key = next((k for k in gpu[0] if k.strip().startswith(prefix)), None)
            return [_num(r[key]) for r in gpu if key and _num(r[key]) is not None]
        sm, mem, temp, power = (col(p) for p in ("clocks.current.sm", "clocks.current.memory",
                                                  "temperature.gpu", "power.draw"))
        sm = sm or col("clocks.sm")
        mem = mem or col("clocks.mem")
        out.update(sm_clock_median=_median(sm), sm_clock_min=min(sm, default=None),
                   mem_clock_median=_median(mem), temp_max=max(temp, default=None),
                   power_mean=round(statistics.fmean(power), 1) if power else None)
    return out


def jobs_per_s(jobs, duration):
    """Jobs done per second: from the start to the end of the repetition or
    of its last job, whichever is later. A periodic task is released a
    fixed number of times whatever the GPU does, so its count of jobs is
    its release rate; over capacity its backlog is worked off after the
    end, and that time is what its throughput loses."""
    if not jobs:
        return 0.0
    last = max(float(r["release_s"]) + float(r["response_ms"]) / 1e3 for r in jobs)
    return len(jobs) / max(float(duration), last)


def run_rows(run_dir, jobs):
    """One summary per run (a repetition of a scenario) of issue 32's
    experiments (the scenarios with a technique)."""
    with open(os.path.join(run_dir, "schedule.json")) as f:
        meta = json.load(f)
    duration = meta["duration"]
    by_run = collections.defaultdict(list)
    for r in jobs:
        if r.get("technique_compared"):
            by_run[int(r["run"])].append(r)
    out = []
    for n in sorted(by_run):
        rows = by_run[n]
        first = rows[0]
        mine = [r for r in rows if r["measured"]]
        others = [r for r in rows if not r["measured"]]
        v = sorted(r["response_ms"] for r in mine)
        if not v:
            continue
        rundir = os.path.join(run_dir, "runs", str(n))
        info = {}
        if os.path.exists(os.path.join(rundir, "info.json")):
            with open(os.path.join(rundir, "info.json")) as f:
                info = json.load(f)
        gcs = []
        for name in os.listdir(rundir) if os.path.isdir(rundir) else ():
            if name.endswith(".gc.csv"):
                gcs += [(float(g["t_s"]), float(g["ms"])) for g in
                        _csv(os.path.join(rundir, name))]
        mon = run_monitors(rundir, info) if info else {}
        front = (info.get("tasks") or {}).get(mine[0]["task"], {})
        mon["front_stream_priority"] = front.get("slot_stream_priority",
                                                 front.get("stream_priority"))
        mon["front_slot_priority"] = front.get("slot_priority")
        # The share of the measured jobs launched at SCHED_FIFO (the boost
        # took; None for a run recorded before the column).
        fifo = [_num(r.get("sched_fifo")) for r in mine]
        fifo = [x for x in fifo if x is not None]
        mon["front_fifo_share"] = round(sum(fifo) / len(fifo), 3) if fifo else None
        steal_times = mon.pop("_steal_times", [])
        moments = stall_moments(rows)
        near = lambda ts, t, w: any(abs(x - t) <= w for x in ts)  # noqa: E731
        periodic = first["period_ms"] > 0
        missed = sum(1 for r in others if r["response_ms"] > r["period_ms"]) if periodic else 0
        out.append(dict(
            run=n, rep=int(first["rep"]), experiment=first["experiment"],
            technique=first["technique_compared"], scenario=first["scenario"], jobs=len(v),
            p50=round(percentile(v, 50), 3), p95=round(percentile(v, 95), 3),
            p99=round(percentile(v, 99), 3), mean=round(statistics.fmean(v), 3),
            misses=sum(1 for x in v if periodic and x > first["period_ms"]),
            competitor_jobs=len(others),
            competitor_jobs_per_s=round(jobs_per_s(others, info.get("duration", duration)), 2),
            others_jobs=len(others), others_misses=missed,
            others_miss_share=round(missed / len(others), 4) if others else 0,
            launch_ms=_median([_num(r.get("launch_ms")) for r in mine]),
            launch_cpu_ms=_median([_num(r.get("launch_cpu_ms")) for r in mine]),
            wait_ms=_median([_num(r.get("wait_ms")) for r in mine]),
            wait_cpu_ms=_median([_num(r.get("wait_cpu_ms")) for r in mine]),
            acquire_ms=_median([_num(r.get("acquire_ms")) for r in mine]),
            gc_runs=len(gcs), gc_max_ms=round(max((ms for _, ms in gcs), default=0), 3),
            stall_moments=len(moments),
            stalls_with_gc=sum(1 for t in moments if near([g for g, _ in gcs], t, 0.06)),
            stalls_with_steal=sum(1 for t in moments if near(steal_times, t, 0.15)),
            **mon))
    return out


def bootstrap_median(values, rng, n=BOOTSTRAP):
    """The median of ``values`` and a 95 % percentile-bootstrap interval."""
    import numpy as np
    v = np.asarray(values, dtype=float)
    meds = np.median(rng.choice(v, size=(n, len(v)), replace=True), axis=1)
    return float(np.median(v)), float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))


def bootstrap_ratio(a, b, rng, n=BOOTSTRAP):
    """median(a) / median(b) and a 95 % interval (a and b resampled apart:
    the repetitions are interleaved, not paired)."""
    import numpy as np
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ra = np.median(rng.choice(a, size=(n, len(a)), replace=True), axis=1)
    rb = np.median(rng.choice(b, size=(n, len(b)), replace=True), axis=1)
    r = ra / rb
    return (float(np.median(a) / np.median(b)), float(np.percentile(r, 2.5)),
            float(np.percentile(r, 97.5)))


def technique_rows(runs, experiment_order=()):
    """Per experiment and technique: the medians over repetitions, p99's
    with a bootstrap interval, and the ratios of issue 32's bar."""
    order = list(experiment_order)
    try:
        import numpy as np
        rng = np.random.default_rng(SEED)
    except ImportError:
        rng = None
    out = []
    by = collections.OrderedDict()
    for r in sorted(runs, key=lambda r: (order.index(r["experiment"]) if r["experiment"] in
                                         order else len(order), r["experiment"],
                                         scenarios.technique_order(r["technique"]))):
        by.setdefault((r["experiment"], r["technique"]), []).append(r)
    experiments = list(dict.fromkeys(e for e, _ in by))
    for e in experiments:
        mine = {t: rs for (ex, t), rs in by.items() if ex == e}
        p99 = {t: [r["p99"] for r in rs] for t, rs in mine.items()}
        alts = [t for t in scenarios.ALTERNATIVES if t in p99]
        best = min(alts, key=lambda t: statistics.median(p99[t])) if alts else None
        prio = mine.get("stream-priority")
        under = e.startswith("camera-") and e[len("camera-"):].isdigit() and \
            int(e[len("camera-"):]) < 100
        for t, rs in mine.items():
            row = dict(experiment=e, technique=t, reps=len(rs),
                       p50=round(statistics.median(r["p50"] for r in rs), 3),
                       p95=round(statistics.median(r["p95"] for r in rs), 3),
                       p99_per_rep=" ".join(f"{x:g}" for x in p99[t]),
                       competitor_jobs_per_s=round(statistics.median(
                           r["competitor_jobs_per_s"] for r in rs), 2),
                       others_misses=statistics.median(r["others_misses"] for r in rs),
                       launch_ms=_median([r["launch_ms"] for r in rs]),
                       wait_ms=_median([r["wait_ms"] for r in rs]),
                       wait_cpu_ms=_median([r["wait_cpu_ms"] for r in rs]),
                       stall_moments=statistics.median(r["stall_moments"] for r in rs),
                       best_alternative=best or "")
            if rng is not None:
                m, lo, hi = bootstrap_median(p99[t], rng)
                row.update(p99=round(m, 3), p99_lo=round(lo, 3), p99_hi=round(hi, 3))
            else:
                row.update(p99=round(statistics.median(p99[t]), 3), p99_lo="", p99_hi="")
            if best and rng is not None:
                m, lo, hi = bootstrap_ratio(p99[t], p99[best], rng)
                row.update(p99_vs_best=round(m, 3), p99_vs_best_lo=round(lo, 3),
                           p99_vs_best_hi=round(hi, 3))
            if prio:
                ref = statistics.median(r["competitor_jobs_per_s"] for r in prio)
                row["throughput_vs_priority"] = round(
                    row["competitor_jobs_per_s"] / ref, 3) if ref else ""
                row["others_misses_priority"] = statistics.median(
                    r["others_misses"] for r in prio)
            if t == "hybrid" or scenarios.is_priority_layout(t):
                row["bar"] = bar(row, under)
            out.append(row)
    return out


def bar(row, under_capacity):
    """Issue 32's bar for a gpuslot technique: what it met, what it missed
    and by how much."""
    said = []
    ratio = row.get("p99_vs_best")
    if ratio is None:
        return "no alternative measured"
    said.append(f"p99 {ratio:.2f}x best ({'met' if ratio <= BAR_P99 else 'missed'} "
                f"<= {BAR_P99})")
    tp = row.get("throughput_vs_priority")
    if tp not in (None, ""):
        said.append(f"throughput {tp:.2f}x stream priorities "
                    f"({'met' if tp >= BAR_THROUGHPUT else 'missed'} >= {BAR_THROUGHPUT})")
    if under_capacity and "others_misses_priority" in row:
        ok = row["others_misses"] <= row["others_misses_priority"]
        said.append(f"others' misses {row['others_misses']:g} vs {row['others_misses_priority']:g}"
                    f" ({'met' if ok else 'missed'})")
    return "; ".join(said)


TECH_COLUMNS = [("technique", "technique"), ("reps", "reps"), ("p50", "p50"), ("p95", "p95"),
                ("p99 [95 % CI]", None), ("p99 per rep", "p99_per_rep"),
                ("p99 / best alt. [CI]", None), ("competitors jobs/s", "competitor_jobs_per_s"),
                ("vs stream prio", "throughput_vs_priority"), ("others' misses", "others_misses"),
                ("launch ms", "launch_ms"), ("wait ms", "wait_ms"), ("wait CPU ms", "wait_cpu_ms"),
                ("stall moments", "stall_moments"), ("bar", "bar")]


def _fmt(x):
    if x is None or x == "":
        return ""
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"
    return str(x)


def markdown(rows, experiment):
    lines = ["| " + " | ".join(h for h, _ in TECH_COLUMNS) + " |",
             "|" + "---|" * len(TECH_COLUMNS)]
    for r in rows:
        if r["experiment"] != experiment:
            continue
        cells = []
        for h, key in TECH_COLUMNS:
            if h.startswith("p99 ["):
                ci = f" [{_fmt(r['p99_lo'])}, {_fmt(r['p99_hi'])}]" if r["p99_lo"] != "" else ""
                cells.append(f"{_fmt(r['p99'])}{ci}")
            elif h.startswith("p99 / best"):
                cells.append(f"{_fmt(r['p99_vs_best'])} [{_fmt(r['p99_vs_best_lo'])}, "
                             f"{_fmt(r['p99_vs_best_hi'])}]" if "p99_vs_best" in r else "")
            else:
                cells.append(_fmt(r.get(key)))
        lines.append("| " + " | ".join(cells) + " |")
    best = next((r["best_alternative"] for r in rows if r["experiment"] == experiment), "")
    return "\n".join(lines) + (f"\n\nbest alternative (lowest median p99 of "
                               f"{', '.join(scenarios.ALTERNATIVES)}): {best or 'none run'}\n")


def write(run_dir, jobs):
    """runs.csv, techniques.csv and the comparison's markdown (or "" when
    the run has no issue-32 experiment)."""
    if not os.path.exists(os.path.join(run_dir, "schedule.json")):
        return ""
    runs = run_rows(run_dir, jobs)
    if not runs:
        return ""
    with open(os.path.join(run_dir, "runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, RUN_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(runs)
    with open(os.path.join(run_dir, "schedule.json")) as f:
        meta = json.load(f)
    techs = technique_rows(runs, dict.fromkeys(s["experiment"] for s in meta["scenarios"]))
    keys = list(dict.fromkeys(k for r in techs for k in r))
    with open(os.path.join(run_dir, "techniques.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(techs)
    done = _csv_jsonl(os.path.join(run_dir, "done.jsonl"))
    text = (f"### issue 32: {len(done)} of {len(meta['order'])} runs done, {meta['reps']} "
            f"repetitions x {meta['duration']:g} s, commit {meta['commit']}, seed "
            f"{meta['seed']}, stall suspects on: {', '.join(meta['suspects']) or 'none'}\n\n")
    for e, n in (meta.get("notes") or {}).items():
        text += (f"- {e}: {n['cameras']} cameras of {n['size']} px, a frame {n['busy_ms']:g} ms "
                 f"GPU-busy alone ({n['busy_from']}), period {n['period_ms']:g} ms: "
                 f"{n['load_percent']} % of the GPU offered\n")
    for e in dict.fromkeys(r["experiment"] for r in techs):
        text += f"\n#### {e}: the priority task (ms) and its competitors\n\n"
        text += markdown(techs, e)
    return text + "\n"


def _csv_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
