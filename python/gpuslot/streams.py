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


def torch_gate(slot, inflight):
    """A PyTorch dispatch mode in which each operator on CUDA tensors passes
    the slot's launch gate (Slot.launch): PyTorch's eager operators launch
    their own kernels, so this is where the package can hold them back. An
    operator is one command (it may launch several kernels); a view, which
    launches nothing, an operator on no CUDA tensor and one while another
    stream than the slot's is current pass ungated."""
    try:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError as e:
        raise ImportError(f"gpuslot: slot.torch_gate() needs PyTorch ({e})") from e
    tensor = torch.Tensor
    # The current stream's handle without a Stream object per operator.
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    device = torch.cuda.current_device()

    def current_stream():
        if raw_stream is not None:
            return raw_stream(device)
        return torch.cuda.current_stream().cuda_stream

    def cuda(x):
        if isinstance(x, tensor):
            return x.is_cuda
        if isinstance(x, (list, tuple)):
            return any(isinstance(y, tensor) and y.is_cuda for y in x)
        return False

    def on_gpu(args, kwargs):
        where = kwargs.get("device")
        if where is not None and torch.device(where).type == "cuda":
            return True  # a factory (zeros, randn, full) that fills on the GPU
        return any(cuda(a) for a in args) or any(cuda(v) for v in kwargs.values())

    class SlotGate(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            # Work on another stream is not the slot's: its markers would
            # say nothing of it, so it is not gated either.
            if (func.is_view or not on_gpu(args, kwargs)
                    or current_stream() != slot.stream):
                return func(*args, **kwargs)
            return slot.launch(func, *args, inflight=inflight, **kwargs)

    return SlotGate()
