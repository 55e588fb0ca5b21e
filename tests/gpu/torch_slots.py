# SPDX-License-Identifier: LGPL-2.1-or-later
"""PyTorch and CuPy inside gpuslot slots on an NVIDIA GPU (the Python
package's GPU check, docs/results-nvidia.md section 5).

Needs gpuslotd serving the GPU (socket transport, NVIDIA planner) and MPS.
Every measurement prints one JSON line:

  sm_ids      a CuPy kernel of many blocks on each slot's stream, and on a
              plain stream: the distinct SMs (%smid) its blocks ran on
  throughput  a torchvision model (random weights) on each slot's stream
              alone, and on a plain stream (the whole GPU): images/s
  pair        two processes at once, each pinned to one slot by its
              allowed-slot set, acquiring per job: images/s of each

usage: torch_slots.py sm_ids | throughput | pair SLOT SECONDS
"""

import json
import sys
import time

import cupy
import torch
import torchvision

import gpuslot

# fp32: on a green-context stream cuBLAS failed a small fp16 GEMM (the
# classifier's m 1000 n 32 k 2048) with CUBLAS_STATUS_EXECUTION_FAILED on
# CUDA 13 (docs/results-nvidia.md section 5); fp32 runs.
MODEL, BATCH = "resnet50", 32

SMID = cupy.RawKernel(r"""
extern "C" __global__ void smid(unsigned int *out, long long spin)
{
	unsigned int id;
	asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
	long long start = clock64();
	while (clock64() - start < spin)
		;
	if (threadIdx.x == 0)
		out[blockIdx.x] = id;
}
""", "smid")


def distinct_sms(stream, blocks=4096):
    with stream:
        out = cupy.zeros(blocks, dtype=cupy.uint32)
        SMID((blocks,), (64,), (out, cupy.int64(200000)))
        stream.synchronize()
        return len(set(out.get().tolist()))


def model():
    m = getattr(torchvision.models, MODEL)(weights=None).cuda().eval()
    x = torch.randn(BATCH, 3, 224, 224, device="cuda")
    return m, x


def images_per_s(run_job, seconds=5.0):
    for _ in range(5):
        run_job()
    jobs, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        run_job()
        jobs += 1
    return jobs * BATCH / (time.monotonic() - start)


def emit(**kw):
    print(json.dumps(kw), flush=True)


def main():
    what = sys.argv[1]
    with gpuslot.Client() as client:
        layout = client.layout()
        emit(what="layout", k=layout.k, unit_kind=layout.unit_kind, nr_units=layout.nr_units,
             unit_size=layout.unit_size,
             backend=layout.backend, device=layout.device, notice=layout.notice)
        if what == "sm_ids":
            for s in range(layout.k):
                with client.acquire(slots={s}) as slot:
                    emit(what="sm_ids", slot=s, sms=slot.units * layout.unit_size,
                         distinct_sms=distinct_sms(slot.cupy_stream()))
            emit(what="sm_ids", slot="whole GPU", sms=layout.nr_units * layout.unit_size,
                 distinct_sms=distinct_sms(cupy.cuda.Stream(non_blocking=True)))
        elif what == "throughput":
            m, x = model()
            with torch.no_grad():
                for s in range(layout.k):
                    with client.acquire(slots={s}) as slot:
                        stream, units = slot.torch_stream(), slot.units

                    def job():
                        with client.acquire(slots={s}) as held:
                            with torch.cuda.stream(held.torch_stream()):
                                m(x)

                    emit(what="throughput", slot=s, sms=units * layout.unit_size, model=MODEL,
                         batch=BATCH,
                         images_per_s=round(images_per_s(job), 1), stream=str(stream))
                plain = torch.cuda.Stream()

                def whole():
                    with torch.cuda.stream(plain):
                        m(x)
                    plain.synchronize()

                emit(what="throughput", slot="whole GPU",
                     sms=layout.nr_units * layout.unit_size, model=MODEL,
                     batch=BATCH, images_per_s=round(images_per_s(whole), 1))
        elif what == "pair":
            s, seconds = int(sys.argv[2]), float(sys.argv[3])
            m, x = model()
            holds = []

            def job():
                with client.acquire(slots={s}) as held:
                    holds.append(held.index)
                    with torch.cuda.stream(held.torch_stream()):
                        m(x)

            with torch.no_grad():
                rate = images_per_s(job, seconds)
            emit(what="pair", slot=s, model=MODEL, batch=BATCH, images_per_s=round(rate, 1),
                 slots_held=sorted(set(holds)))
        else:
            sys.exit(f"torch_slots.py: unknown measurement {what!r}")


if __name__ == "__main__":
    main()
