# SPDX-License-Identifier: LGPL-2.1-or-later
"""A CUDA graph captured on a slot's stream (PyTorch), replayed in later
holds of that slot.

A launch-bound job (hundreds of small kernels, as a small network is) spends
more CPU time launching than the GPU spends running it, and its tail comes
from the launch path. Captured once into a CUDA graph and replayed, it costs
one launch: on the H100 the chapter-6 medium job went from 4 ms of CPU and a
p99 of 6.6-17.9 ms to 0.2 ms of CPU and a p99 of 2.6 ms on an 88-SM slot
(docs/results-ch6/graphs/).

A graph keeps the partition it was captured on: its kernels run on that
slot's SMs whatever stream it is later launched on (measured there too). So
replaying it outside a hold of that very slot would run GPU work that no
hold covers, beside that slot's holder: replay() refuses anything but a
held slot of the same client, index and layout generation. A new layout
generation needs a new capture (the slot's streams are new ones).
"""

import errno

from . import client, errors


class SlotGraph:
    """``fn`` (no arguments; PyTorch work) captured on ``slot``'s stream.

    ``slot`` must be held. ``fn`` runs ``warmup`` times on the stream first
    (cuDNN and cuBLAS choose their kernels and the allocator its blocks
    outside the capture), then once under capture; its return value is
    ``output``, the tensors every replay writes again (static input and
    output tensors, as with ``torch.cuda.CUDAGraph``)."""

    def __init__(self, slot, fn, warmup=3):
        _check_held(slot, "capture a graph on")
        import torch
        stream = slot.torch_stream()
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                fn()
        stream.synchronize()
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph, stream=stream):
            self.output = fn()
        self._torch = torch
        self._client = slot._client
        self.index, self.generation = slot.index, slot.generation

    def replay(self, slot, gated=False, inflight=client.LAUNCH_INFLIGHT_DEFAULT):
        """Launch the graph on ``slot``'s stream; ``output``. With ``gated``,
        through the slot's launch gate (Slot.launch with ``inflight``: the
        replay reports the hold's work and waits while a higher slot
        preempts; a hold kept across jobs then reports its drain with
        set_work(False)). ``slot`` must be a held slot of the client, index
        and generation it was captured on (GpuslotError EINVAL otherwise,
        and nothing is launched)."""
        _check_held(slot, "replay a graph on")
        if (slot._client is not self._client or slot.index != self.index
                or slot.generation != self.generation):
            raise errors.GpuslotError(
                errno.EINVAL,
                f"gpuslot: this graph was captured on slot {self.index} (generation "
                f"{self.generation}) and its kernels run on that slot's partition only: it "
                f"cannot be replayed in a hold of slot {slot.index} (generation "
                f"{slot.generation}){'' if slot._client is self._client else ' of another client'};"
                f" capture it again on that slot")
        with self._torch.cuda.stream(slot.torch_stream()):
            if gated:
                slot.launch(self._graph.replay, inflight=inflight)
            else:
                self._graph.replay()
        return self.output

    def __repr__(self):
        return f"<gpuslot.SlotGraph of slot {self.index} (generation {self.generation})>"


def _check_held(slot, what):
    if not getattr(slot, "held", False):
        raise errors.GpuslotError(errno.EINVAL,
                                  f"gpuslot: cannot {what} a slot that is not held ({slot!r})")
