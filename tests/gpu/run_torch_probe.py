"""A PyTorch program that knows nothing of gpuslot, for run_gpuslot_run.sh.

It makes a stream, runs JOBS jobs of matrix products on it, each ended by a
stream synchronization, and prints: the stream's priority as the driver
reports it (torch asks cudaStreamGetPriority), per job the host times at
which its first launch had returned and just before its synchronization (after
20 ms of host work)
(both inside gpuslot-run --per-sync's hold: the slot is taken before the
first launch after a synchronization and given back only inside the next
one), the wall time, and a checksum of the result.

    python3 run_torch_probe.py JOBS N
"""
import sys
import time

import torch


def main():
    jobs, n = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda") / n ** 0.5
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    least, greatest = torch.cuda.Stream.priority_range()
    print(f"priority {s.priority} range {least} {greatest}")
    x = a
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    gpu_ms = []
    wall = time.monotonic_ns()
    with torch.cuda.stream(s):
        for _ in range(jobs):
            x = torch.tanh(a @ b)
            first = time.monotonic_ns()
            begin.record(s)
            for _ in range(30):
                x = torch.tanh(x @ b)
            end.record(s)
            # Host work between the launches and the synchronization
            # (pre- and post-processing of a real pipeline): it widens
            # the window a hold must cover, so that two programs' windows
            # overlap unless something keeps them apart.
            time.sleep(0.02)
            last = time.monotonic_ns()
            s.synchronize()
            gpu_ms.append(begin.elapsed_time(end))
            print(f"job {first} {last} {gpu_ms[-1]:.2f}")
    print(f"wall {(time.monotonic_ns() - wall) / 1e6:.1f} ms")
    gpu = sorted(float(j) for j in gpu_ms)
    print(f"gpu_ms_p50 {gpu[len(gpu) // 2]:.2f}")
    print(f"result {x.double().sum().item():.6e}")


main()
