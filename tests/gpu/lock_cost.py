# SPDX-License-Identifier: GPL-2.0
"""What the lock costs a job on this host (issue 32): an uncontended
acquire + release of a slot over gpuslotd's socket transport, from Python
(the package the chapter-6 tasks use) and measured against the floor of
any lock server on a socket: a round trip between two processes over a
SOCK_SEQPACKET socket pair.

Paths measured, each N times, interleaved in rounds of 200 so that drift
spreads over all of them:
  acquire            Client.acquire(): one try (one round trip) when a
                     slot is free, the queued path otherwise
  acquire, queued    the queued path alone (acquire_start, poll,
                     acquire_complete: two round trips and the grant's
                     message; what Client.acquire() did before it tried
                     first)
  release            Slot.release(sync=False), after either acquire (2N)
  round trip         the socket pair, Python at both ends
and the median of acquire + release, job by job, for either acquire.

The server runs as it runs for the chapter-6 experiments: gpuslotd
(socket transport, k = 4), holders boosted to SCHED_FIFO where it may
(asked when this runs as root; the host may still refuse it: the first
line says whether the holder ran SCHED_FIFO). The client uses the none backend: no
GPU stream is touched, only the lock.

usage: python3 lock_cost.py GPUSLOTD_CMD [N]   (GPUSLOT_LIBRARY names
libgpuslot.so.1; GPUSLOTD_CMD, split on spaces, may carry options such as
--topology for a host without a GPU)
prints one line per path: p50, p90, p99 and max in microseconds.
"""

import ctypes
import os
import shlex
import shutil
import socket
import sys
import tempfile
import time

from ch6.runner import Gpuslotd
from ch6.scenarios import Layout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))


def percentiles(xs):
    xs = sorted(xs)
    at = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
    return at(0.5), at(0.9), at(0.99), xs[-1]


def pair_round_trips(n):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        a.close()
        try:
            while True:
                m = b.recv(64)
                if not m:
                    break
                b.send(m)
        finally:
            os._exit(0)
    b.close()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        a.send(b"x" * 40)
        a.recv(64)
        out.append((time.perf_counter() - t0) * 1e6)
    a.close()
    os.waitpid(pid, 0)
    return out


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    daemon_cmd = shlex.split(argv[0])
    n = int(argv[1]) if len(argv) > 1 else 5000
    work = tempfile.mkdtemp(prefix="gpuslot-lockcost-")
    try:
        return measure(daemon_cmd, n, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(daemon_cmd, n, work):
    log = open(os.path.join(work, "gpuslotd.log"), "w")
    try:
        daemon = Gpuslotd(daemon_cmd, None, [], Layout(4), False, log)
    except RuntimeError:
        log.close()
        print(open(log.name).read(), file=sys.stderr)
        raise SystemExit("lock_cost: gpuslotd did not start")
    try:
        os.environ["GPUSLOT_TRANSPORT"] = "socket"
        os.environ["GPUSLOT_SOCKET_DIR"] = daemon.dir
        import gpuslot
        from gpuslot import _native
        c = gpuslot.Client(backend="none")
        # Whether the host let gpuslotd boost the holder (the boost sets
        # SCHED_RESET_ON_FORK, which sched_getscheduler adds).
        with c.acquire(slots={0}):
            boosted = (os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK) == os.SCHED_FIFO
        times = {"acquire": [], "acquire, queued": [], "release": [], "round trip": []}
        pairs = {"acquire": [], "acquire, queued": []}

        def queued_acquire():
            raw = _native.SlotStruct(size=ctypes.sizeof(_native.SlotStruct))
            handle = c._begin_call()
            try:
                c._wait_for_grant(handle, _native.WAIT_FOREVER, 1, raw)
                return c._hand_out(gpuslot.Slot(c, raw))
            finally:
                c._end_call()

        for i in range(0, n, 200):
            m = min(200, n - i)
            for name, take in (("acquire", lambda: c.acquire(slots={0})),
                               ("acquire, queued", queued_acquire)):
                for _ in range(m):
                    t0 = time.perf_counter()
                    s = take()
                    t1 = time.perf_counter()
                    s.release(sync=False)
                    t2 = time.perf_counter()
                    times[name].append((t1 - t0) * 1e6)
                    times["release"].append((t2 - t1) * 1e6)
                    pairs[name].append((t2 - t0) * 1e6)
            times["round trip"] += pair_round_trips(m)
        c.close()
        print(f"lock_cost: {n} each (release {2 * n}), gpuslotd socket transport, k = 4, "
              f"boost {'asked (root)' if os.geteuid() == 0 else 'off (not root)'}, "
              f"the holder {'ran' if boosted else 'did not run'} SCHED_FIFO; "
              "microseconds")
        print(f"{'path':18} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}")
        for name, xs in times.items():
            print(f"{name:18} " + " ".join(f"{v:8.1f}" for v in percentiles(xs)))
        a50 = percentiles(pairs["acquire"])[0]
        q50 = percentiles(pairs["acquire, queued"])[0]
        print(f"acquire + release, job by job, p50: {a50:.1f} us (queued path {q50:.1f} us); "
              f"{a50 / percentiles(times['round trip'])[0]:.2f} socket-pair round trips")
    finally:
        daemon.stop()
        log.close()
        with open(log.name) as f:
            print("gpuslotd's log:\n" + f.read().rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
