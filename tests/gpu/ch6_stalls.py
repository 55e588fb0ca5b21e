#!/usr/bin/python3
"""The shared stalls of a ch6 run (issue 32): jobs whose launch took more
than 8 ms of CPU over their task's median, grouped when they begin within
0.15 s of each other, kept when two or more tasks stall together.

usage: ch6_stalls.py RUN_DIR...   (each with jobs.csv or jobs.csv.gz)
Prints per run: jobs, slow launches, shared stalls, when, and the gaps."""
import csv
import gzip
import os
import statistics
import sys
from collections import defaultdict


def jobs(run_dir):
    path = os.path.join(run_dir, "jobs.csv")
    if os.path.exists(path):
        return list(csv.DictReader(open(path)))
    return list(csv.DictReader(gzip.open(path + ".gz", "rt")))


def shared_stalls(rows, over_ms=8.0, window_s=0.15):
    by_task = defaultdict(list)
    for r in rows:
        by_task[(r["run"], r["task"])].append(r)
    slow = []
    for (run, task), rs in by_task.items():
        median = statistics.median(float(r["launch_cpu_ms"]) for r in rs)
        slow += [(run, float(r["release_s"]), task) for r in rs
                 if float(r["launch_cpu_ms"]) > median + over_ms]
    slow.sort()
    groups = []
    for e in slow:
        if groups and e[0] == groups[-1][-1][0] and e[1] - groups[-1][-1][1] < window_s:
            groups[-1].append(e)
        else:
            groups.append([e])
    return slow, [g for g in groups if len({task for _, _, task in g}) >= 2]


def main():
    for d in sys.argv[1:]:
        rows = jobs(d)
        slow, shared = shared_stalls(rows)
        at = [g[0][1] for g in shared]
        gaps = [round(b - a, 2) for a, b in zip(at, at[1:]) if b > a]
        print(f"{d}: {len(rows)} jobs, {len(slow)} slow launches, {len(shared)} shared stalls "
              f"at {[round(t, 2) for t in at]}; gaps {gaps}")


if __name__ == "__main__":
    main()
