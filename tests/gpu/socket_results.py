#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Reads what run_socket.sh's slot_jobs printed and says what it shows."""
import sys


def overlap(mode, *files):
    kernels = []
    for proc, path in enumerate(files):
        for line in open(path):
            slot, start, end = map(int, line.split())
            kernels.append((start, end, proc))
    kernels.sort()
    pairs = 0
    worst = 0
    # Every later kernel that starts before an earlier one of the other
    # process ends overlaps it (one slot: k = 1).
    for i, (start, end, proc) in enumerate(kernels):
        for later in kernels[i + 1:]:
            if later[0] >= end:
                break
            if later[2] != proc:
                pairs += 1
                worst = max(worst, end - later[0])
    print(f"overlap {mode}: {len(kernels)} kernels of 1 ms from {len(files)} processes at "
          f"k = 1: {pairs} pairs of different processes overlap in time "
          f"(worst {worst / 1e6:.3f} ms)")


def parse_holds(path):
    holds = {}
    for line in open(path):
        w = line.split()
        holds[w[0]] = {w[i]: int(w[i + 1]) for i in range(1, len(w) - 1, 2)}
    return holds


def fifo(path):
    h = parse_holds(path)
    a, b, c = h["A"], h["B"], h["C"]
    side = min(a["end"], b["end"]) - max(a["start"], b["start"])
    first_release = min(a["end"], b["end"])
    print(f"fifo k = 2: A slot {a['slot']} ({a['units']} units), B slot {b['slot']} "
          f"({b['units']} units); A and B ran side by side for {side / 1e6:.1f} ms "
          f"(each ran {(a['end'] - a['start']) / 1e6:.1f} ms); C asked "
          f"{(c['asked'] - max(a['granted'], b['granted'])) / 1e6:.1f} ms after both held, "
          f"got slot {c['slot']} {(c['granted'] - first_release) / 1e6:.1f} ms after the "
          f"first release (never before: {c['granted'] >= first_release})")


def kill(killed_path, d_ms, e_path):
    killed = int(open(killed_path).read())
    e = parse_holds(e_path)["E"]
    print(f"kill k = 1: E waited behind D (a {int(d_ms) / 1000:.0f} s kernel on every SM); D was "
          f"SIGKILLed; the slot was E's {(e['host_granted'] - killed) / 1e6:.1f} ms later "
          f"(host clock); E's first kernel ran {(e['granted'] - killed) / 1e6:.1f} ms after the "
          f"kill (GPU clock): the dead holder's kernel runs to its end under MPS")


if __name__ == "__main__":
    {"overlap": overlap, "fifo": fifo, "kill": kill}[sys.argv[1]](*sys.argv[2:])
