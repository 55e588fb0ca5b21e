# SPDX-License-Identifier: LGPL-2.1-or-later
"""A slot's stream for PyTorch and CuPy, each imported only when asked for.

The wrapper of a stream is made once and kept by the client until its
generation is retired, so a model captured or tuned on it keeps working.
"""

import importlib

from . import errors


def _external(client, slot, framework, module, make):
    """``make(module, stream pointer, device number)``, once per stream
    (per job, this is a dictionary lookup)."""
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"gpuslot: slot.{module}_stream() needs {framework} (import "
                          f"{module} failed: {e})") from e
    if not slot.stream:
        raise errors.GpuslotError(
            95, f"gpuslot: slot {slot.index} has no GPU stream (the client's backend is "
                f"'none'): open the client with backend='auto', 'cuda' or 'hip' for "
                f"{framework}")
    ptr = slot.stream
    return client._cached_stream((module, ptr, slot.generation),
                                 lambda: make(mod, ptr, client.layout().device))


def torch_stream(client, slot):
    return _external(client, slot, "PyTorch", "torch",
                     lambda torch, ptr, device: torch.cuda.ExternalStream(
                         ptr, device=torch.device("cuda", device)))


def cupy_stream(client, slot):
    return _external(client, slot, "CuPy", "cupy",
                     lambda cupy, ptr, device: cupy.cuda.ExternalStream(ptr, device_id=device))
