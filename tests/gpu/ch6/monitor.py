# SPDX-License-Identifier: GPL-2.0
"""Every CPU's time, sampled: what each CPU spent since the last sample,
in jiffies (USER_HZ), per field of /proc/stat, every INTERVAL seconds until
SIGTERM. "steal" is the time the hypervisor ran something else while this
VM's CPU wanted to run: a stall that no process on this host caused.

usage: python3 -m ch6.monitor OUT_CSV [INTERVAL]
"""

import signal
import sys
import time

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def read_stat(path="/proc/stat"):
    """{cpu number: (jiffies of each of FIELDS)} of every CPU."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                parts = line.split()
                out[int(parts[0][3:])] = tuple(int(x) for x in parts[1:1 + len(FIELDS)])
    return out


def deltas(before, after):
    """Per CPU, what each field grew by between two reads."""
    return {cpu: tuple(a - b for a, b in zip(after[cpu], before[cpu]))
            for cpu in after if cpu in before}


def main(argv):
    out = argv[0]
    interval = float(argv[1]) if len(argv) > 1 else 0.1
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(out, "w") as f:
        f.write("t_s,cpu," + ",".join(FIELDS) + "\n")
        last = read_stat()
        next_t = time.monotonic()
        # Up once SIGTERM is ours: the runner waits for this line, so a
        # short run's stop cannot kill the monitor before it has a file.
        print("up", flush=True)
        # At least one sample, however soon the stop comes.
        while True:
            next_t += interval
            d = next_t - time.monotonic()
            if d > 0:
                time.sleep(d)
            now = read_stat()
            t = round(time.time(), 3)
            for cpu, v in sorted(deltas(last, now).items()):
                f.write(f"{t},{cpu}," + ",".join(map(str, v)) + "\n")
            last = now
            if stop:
                break


if __name__ == "__main__":
    main(sys.argv[1:])
