# SPDX-License-Identifier: GPL-2.0
"""CDF of MM1024's response time per scenario (tests/gpu/run.sh, step 3).

usage: plot_cdf.py SAMPLES.csv OUT.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

samples = {}
with open(sys.argv[1]) as f:
    for row in csv.DictReader(f):
        samples.setdefault(row["scenario"], []).append(float(row["ms"]))

fig, ax = plt.subplots(figsize=(8, 5))
for name, values in samples.items():
    values.sort()
    n = len(values)
    ax.plot(values, [(i + 1) / n for i in range(n)], label=f"{name} (n={n})")
ax.set_xscale("log")
ax.set_xlabel("MM1024 response time (ms, log scale)")
ax.set_ylabel("fraction of jobs")
ax.set_title("MM1024 against an MM256 competitor, green-context partitions")
ax.grid(True, which="both", alpha=0.3)
ax.legend(loc="lower right", fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
print(f"plot_cdf: wrote {sys.argv[2]}")
