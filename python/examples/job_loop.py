# A perception loop: one GPU slot per frame; a frame that gets no slot
# within 50 ms is skipped. The model runs on the slot's stream, so only on
# the slot's partition of the GPU.
import os
import time

import gpuslot


def infer(slot):
    if slot.stream is None:        # backend "none": no GPU stream
        time.sleep(0.002)          # stands in for the GPU work
        return
    import torch
    with torch.cuda.stream(slot.torch_stream()):
        x = torch.randn(1024, 1024, device="cuda")
        (x @ x).sum()              # queued on the slot's stream


done = skipped = 0
with gpuslot.Client(backend=os.environ.get("GPUSLOT_BACKEND", "auto")) as client:
    backend = client.layout().backend
    for frame in range(100):
        try:
            with client.acquire(timeout=0.05) as slot:
                infer(slot)        # leaving the with waits for its GPU work
            done += 1
        except gpuslot.SlotTimeout:
            skipped += 1
print(f"{done} frames done, {skipped} skipped on {backend}")
