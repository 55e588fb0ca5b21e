# SPDX-License-Identifier: LGPL-2.1-or-later
"""CUDA graphs on a gpuslot slot, and what a slot costs per job (issue 32).

Needs gpuslotd serving the GPU (socket transport, NVIDIA planner) and MPS,
as run_graphs.sh starts them. Each measurement prints JSON lines:

  sm_ids     per slot: the SMs (%smid) a many-block kernel ran on, launched
             on the slot's stream; captured there into a CUDA graph and
             replayed on the slot's stream; and that graph replayed on a
             plain stream of the process's primary context. "inside" says
             whether every SM was one of the eager launch's.
  medium     the chapter-6 medium job (MobileNet V2, width 0.5, 32 x 224
             px) on each slot's stream: eager against a CUDA graph captured
             on that stream (gpuslot.SlotGraph; its replay in a hold of
             another slot must be refused), interleaved in blocks; per-job time p50 and
             p99 (launch plus GPU, blocking wait), the CPU time per job, and
             the largest difference between the two outputs.
  lock_cost  acquire + release of a slot with no GPU work, over the socket:
             p50, p99 of the round trip, with and without the stream wait.

usage: graph_probe.py sm_ids | medium | lock_cost
"""

import json
import statistics
import sys
import time

import cupy
import torch
import torchvision

import gpuslot
from torch_slots import SMID  # the %smid kernel, beside this file

BLOCKS = 4096


def emit(**kw):
    print(json.dumps(kw), flush=True)


def pct(xs, p):
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p / 100 * len(xs)))], 4)


def sms_of(out):
    return set(out.get().tolist())


def sm_ids(client, layout):
    for s in range(layout.k):
        with client.acquire(slots={s}) as slot:
            st = slot.cupy_stream()
            with st:
                out = cupy.zeros(BLOCKS, dtype=cupy.uint32)
                SMID((BLOCKS,), (64,), (out, cupy.int64(200000)))
                st.synchronize()
                eager = sms_of(out)
                out.fill(0)
                st.synchronize()
                st.begin_capture()
                SMID((BLOCKS,), (64,), (out, cupy.int64(200000)))
                graph = st.end_capture()
                graph.launch(st)
                st.synchronize()
                replay = sms_of(out)
            out.fill(0)
            cupy.cuda.Device().synchronize()
            plain = cupy.cuda.Stream(non_blocking=True)
            graph.launch(plain)
            plain.synchronize()
            elsewhere = sms_of(out)
        emit(what="sm_ids", slot=s, sms=slot.units * layout.unit_size, eager=len(eager),
             graph_on_slot=len(replay), graph_on_slot_inside=replay <= eager,
             graph_on_plain_stream=len(elsewhere), graph_on_plain_inside=elsewhere <= eager)


def medium(client, layout, jobs=300, block=50):
    net = torchvision.models.mobilenet_v2(weights=None, width_mult=0.5).cuda().eval()
    x = torch.randn(32, 3, 224, 224, device="cuda")
    for s in range(layout.k):
        with client.acquire(slots={s}) as slot:
            stream = slot.torch_stream()
        with torch.no_grad():
            # Warm up on the slot's stream (cuDNN picks its kernels, the
            # allocator its blocks), then capture there.
            for _ in range(5):
                with client.acquire(slots={s}) as held, torch.cuda.stream(held.torch_stream()):
                    net(x)
            with client.acquire(slots={s}) as held:
                g = gpuslot.SlotGraph(held, lambda: net(x))
            y_graph = g.output
            with client.acquire(slots={s}) as held:
                with torch.cuda.stream(held.torch_stream()):
                    y_eager = net(x)
                g.replay(held)
            torch.cuda.synchronize()
            other = (s + 1) % layout.k
            try:
                with client.acquire(slots={other}) as held:
                    g.replay(held)
                refused = other == s
            except gpuslot.GpuslotError:
                refused = True
            diff = float((y_eager - y_graph).abs().max())
            done = torch.cuda.Event(blocking=True)
            times = {"eager": [], "graph": []}
            cpu = {"eager": [], "graph": []}
            for b in range(2 * jobs // block):
                how = ("eager", "graph")[b % 2]
                for _ in range(block):
                    w0, c0 = time.perf_counter(), time.thread_time()
                    with client.acquire(slots={s}) as held:
                        st = held.torch_stream()
                        if how == "eager":
                            with torch.cuda.stream(st):
                                net(x)
                        else:
                            g.replay(held)
                        done.record(st)
                        done.synchronize()
                    times[how].append((time.perf_counter() - w0) * 1e3)
                    cpu[how].append((time.thread_time() - c0) * 1e3)
        emit(what="medium", slot=s, sms=slot.units * layout.unit_size, stream=str(stream),
             max_abs_diff=diff, replay_on_another_slot_refused=refused, **{f"{h}_{k}": v for h in times for k, v in (
                 ("p50_ms", pct(times[h], 50)), ("p99_ms", pct(times[h], 99)),
                 ("cpu_ms", round(statistics.median(cpu[h]), 3)))})


def lock_cost(client, layout, cycles=3000):
    for sync in (False, True):
        rt = []
        for _ in range(cycles):
            t0 = time.perf_counter()
            slot = client.acquire(slots={0})
            slot.release(sync=sync)
            rt.append((time.perf_counter() - t0) * 1e6)
        emit(what="lock_cost", stream_wait=sync, cycles=cycles, p50_us=pct(rt, 50),
             p99_us=pct(rt, 99), max_us=round(max(rt), 1))


def main():
    what = sys.argv[1]
    with gpuslot.Client() as client:
        layout = client.layout()
        emit(what="layout", k=layout.k, nr_units=layout.nr_units, unit_size=layout.unit_size,
             backend=layout.backend, device=layout.device)
        {"sm_ids": sm_ids, "medium": medium, "lock_cost": lock_cost}[what](client, layout)


if __name__ == "__main__":
    main()
