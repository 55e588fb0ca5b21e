# SPDX-License-Identifier: LGPL-2.1-or-later
"""libgpuslot's launch gate (gpuslot_launch_begin(), Slot.launch,
Slot.torch_gate; issue 40) on an NVIDIA GPU, through the Python package.

Needs gpuslotd serving the GPU with k = 2, slot 0 above slot 1 in priority
(run_launch_gate.sh starts it). Each measurement prints one JSON line:

  bound     slot 1 (outranked by slot 0) sends 8 kernels of KERNEL_MS each
            through the gate with inflight 2, then 8 without it: when each
            send returned (ms after the first). With the bound a send waits
            until at most one earlier kernel is unfinished, so the i-th
            returns near (i - 1) * KERNEL_MS; without it, at once. The
            markers are CUDA events recorded on the slot's green-context
            stream: this is where that is checked on a real driver.
  suspend   slot 0's holder (another thread) reports work for HOLD_MS; slot
            1's next send waits in the gate until the report ends or the
            preemption budget (preempt_share of preempt_window_ms) runs out.
  cost      an empty kernel sent N times, interleaved in blocks: plainly
            (CuPy), through Slot.launch on slot 0 (nothing outranks it: a
            look at the published state), and on slot 1 (a marker each):
            CPU microseconds per send, p50 of the blocks.
  torch     a torchvision network on slot 1's stream, eager: plainly, under
            a dispatch mode that does nothing (any Python-level gate's
            floor), under Slot.torch_gate without a bound and with the
            default one: ms per forward (launch and GPU), the operators
            gated, and the largest difference between the outputs.

usage: launch_gate_probe.py bound | suspend | cost | torch
"""

import json
import statistics
import sys
import threading
import time

import cupy

import gpuslot

KERNEL_MS = 20
HOLD_MS = 300

SPIN = cupy.RawKernel(r"""
extern "C" __global__ void spin(long long ns)
{
	unsigned long long start, now;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
	while (now - start < (unsigned long long)ns);
}
""", "spin")


def emit(**kw):
    print(json.dumps(kw), flush=True)


def spin(ms):
    SPIN((1,), (1,), (cupy.int64(int(ms * 1e6)),))


def bound(client):
    with client.acquire(slots={1}) as slot, slot.cupy_stream():
        spin(1)  # the module loaded before the clock starts
        slot.cupy_stream().synchronize()
        out = {}
        for gated in (True, False):
            t0 = time.perf_counter()
            returns = []
            for _ in range(8):
                if gated:
                    slot.launch(spin, KERNEL_MS, inflight=2)
                else:
                    spin(KERNEL_MS)
                returns.append(round((time.perf_counter() - t0) * 1e3, 1))
            slot.cupy_stream().synchronize()
            out["gated" if gated else "plain"] = returns
        # Whether an event of the primary context (CuPy's, as a program's
        # own or gpuslot-run's interposer makes them) can be recorded on
        # the slot's green-context stream: libgpuslot makes its markers in
        # the stream's own context instead.
        try:
            cupy.cuda.Event(disable_timing=True).record(slot.cupy_stream())
            primary_event = "recorded"
        except cupy.cuda.runtime.CUDARuntimeError as e:
            primary_event = str(e)
        out["primary_context_event"] = primary_event
        expected = [max(0, i - 1) * KERNEL_MS for i in range(8)]
        # Kept where no send returned before its expected time (less a
        # tenth of a kernel for the clocks); the wait past it is the poll.
        kept = all(r >= e - KERNEL_MS / 10 for r, e in zip(out["gated"], expected))
        emit(what="bound", slot=slot.index, priority=slot.priority, kernel_ms=KERNEL_MS,
             inflight=2, expected_ms=expected, bound_kept=kept, **out)


def suspend(client):
    started, done = threading.Event(), threading.Event()

    def front():
        with client.acquire(slots={0}) as top:
            top.set_work(True)
            started.set()
            time.sleep(HOLD_MS / 1e3)
            top.set_work(False)
            done.set()

    def attribute(name):
        try:
            return int(client.attribute(name))
        except (gpuslot.GpuslotError, ValueError):
            return None

    share, window = attribute("preempt_share"), attribute("preempt_window_ms")
    with client.acquire(slots={1}) as slot, slot.cupy_stream():
        spin(1)  # the kernel compiled and loaded before the clock starts
        slot.cupy_stream().synchronize()
        slot.set_work(False)
        t = threading.Thread(target=front)
        t.start()
        started.wait()
        t0 = time.perf_counter()
        preempted = client.preempted(slot.priority)
        slot.launch(spin, 1)
        waited = (time.perf_counter() - t0) * 1e3
        t.join()
        emit(what="suspend", preempted_at_start=preempted, hold_ms=HOLD_MS,
             preempt_share=share, preempt_window_ms=window, waited_ms=round(waited, 1),
             budget_ms=window * share / 100 if share is not None and window else None)


def cost(client, n=2000, blocks=10):
    empty = cupy.RawKernel('extern "C" __global__ void empty() {}', "empty")

    def send():
        empty((1,), (1,), ())

    times = {"plain": [], "gate-top": [], "gate-outranked": []}
    with client.acquire(slots={0}) as top, client.acquire(slots={1}) as low:
        for _ in range(blocks):
            for name, slot in (("plain", low), ("gate-top", top), ("gate-outranked", low)):
                with slot.cupy_stream() as st:
                    send()
                    st.synchronize()
                    c0 = time.thread_time()
                    for _ in range(n):
                        if name == "plain":
                            send()
                        else:
                            slot.launch(send)
                    c1 = time.thread_time()
                    st.synchronize()
                times[name].append((c1 - c0) / n * 1e6)
                if slot is top:
                    # Its report drained: nothing preempts the next block.
                    top.set_work(False)
    emit(what="cost", sends_per_block=n, blocks=blocks,
         cpu_us_per_send={k: round(statistics.median(v), 2) for k, v in times.items()},
         cpu_us_per_send_min={k: round(min(v), 2) for k, v in times.items()})


def torch_probe(client, jobs=30):
    """Per forward: plainly; under a dispatch mode that does nothing else
    (what any Python-level gate costs); under torch_gate with no bound; and
    under torch_gate with the default bound (4). Each variant its own hold of
    slot 1 (outranked by slot 0), interleaved job by job."""
    import torch
    import torchvision
    from torch.utils._python_dispatch import TorchDispatchMode

    class Nothing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    variants = ("plain", "mode-only", "gate-nobound", "gate-bound4")
    ms = {v: [] for v in variants}
    outs = {}
    with client.acquire(slots={1}) as slot:
        with torch.cuda.stream(slot.torch_stream()):
            model = torchvision.models.resnet18().cuda().eval()
            x = torch.randn(8, 3, 224, 224, device="cuda")
        slot.torch_stream().synchronize()
    with torch.no_grad():
        for i in range(jobs + 3):
            for v in variants:
                with client.acquire(slots={1}) as slot:
                    stream = slot.torch_stream()
                    with torch.cuda.stream(stream):
                        t0 = time.perf_counter()
                        if v == "plain":
                            outs[v] = model(x)
                        elif v == "mode-only":
                            with Nothing():
                                outs[v] = model(x)
                        else:
                            with slot.torch_gate(inflight=0 if v == "gate-nobound" else 4):
                                outs[v] = model(x)
                        stream.synchronize()
                        if i >= 3:
                            ms[v].append((time.perf_counter() - t0) * 1e3)
    # The operators one forward sends through the gate.
    gated_ops = [0]
    with client.acquire(slots={1}) as slot, torch.cuda.stream(slot.torch_stream()):
        launch = slot.launch

        def counted(send, *a, **kw):
            gated_ops[0] += 1
            return launch(send, *a, **kw)
        slot.launch = counted
        with torch.no_grad(), slot.torch_gate():
            model(x)
        slot.torch_stream().synchronize()
    diff = max((outs["plain"] - outs[v]).abs().max().item() for v in variants)
    emit(what="torch", model="resnet18", batch=8, jobs=jobs,
         ms_p50={k: round(statistics.median(v), 3) for k, v in ms.items()},
         gated_ops_per_forward=gated_ops[0], max_abs_diff=diff)


def main():
    what = sys.argv[1]
    with gpuslot.Client() as client:
        {"bound": bound, "suspend": suspend, "cost": cost, "torch": torch_probe}[what](client)


if __name__ == "__main__":
    main()
