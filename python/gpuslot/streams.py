# SPDX-License-Identifier: LGPL-2.1-or-later
"""A slot's stream for PyTorch and CuPy, each imported only when asked for.

The wrapper of a stream is made once and kept by the client until its
generation is retired, so a model captured or tuned on it keeps working.
"""

from . import errors


def _stream_of(slot, framework):
    if not slot.stream:
        raise errors.GpuslotError(
            95, f"gpuslot: slot {slot.index} has no GPU stream (the client's backend is "
                f"'none'): open the client with backend='auto', 'cuda' or 'hip' for "
                f"{framework}")
    return slot.stream


def torch_stream(client, slot):
    try:
        import torch
    except ImportError as e:
        raise ImportError("gpuslot: slot.torch_stream() needs PyTorch (import torch "
                          f"failed: {e})") from e
    ptr = _stream_of(slot, "PyTorch")
    device = torch.device("cuda", client.layout().device)
    return client._cached_stream(("torch", ptr, slot.generation),
                                 lambda: torch.cuda.ExternalStream(ptr, device=device))


def cupy_stream(client, slot):
    try:
        import cupy
    except ImportError as e:
        raise ImportError("gpuslot: slot.cupy_stream() needs CuPy (import cupy failed: "
                          f"{e})") from e
    ptr = _stream_of(slot, "CuPy")
    device = client.layout().device
    return client._cached_stream(("cupy", ptr, slot.generation),
                                 lambda: cupy.cuda.ExternalStream(ptr, device_id=device))
