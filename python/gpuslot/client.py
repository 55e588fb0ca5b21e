# SPDX-License-Identifier: LGPL-2.1-or-later
"""Client and Slot: libgpuslot's per-job loop as context managers.

    with gpuslot.Client() as client:
        with client.acquire(timeout=0.05) as slot:
            model(x)                      # on slot.torch_stream()

A Client attaches the process to one GPU domain and builds one
partition-restricted stream per slot, once. Any number of threads then
acquire slots from it; each thread's hold is its own. Leaving the ``with``
of a slot waits for the work queued on its stream, then hands the slot to
the next waiter (the release rule: two holders' GPU work never overlaps on
one slot).
"""

import ctypes
import dataclasses
import errno
import math
import threading

from . import _native, errors, status, streams

# GPUSLOT_UNIT_* of <linux/gpuslot.h>
UNIT_KINDS = {0: "none", 1: "cu", 2: "sm_group"}


def slot_mask(slots):
    """A set of slot indices as libgpuslot's bit mask; None: any slot."""
    if slots is None:
        return 0
    mask = 0
    for s in slots:
        if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s < 64:
            raise ValueError(f"gpuslot: slot {s!r} is not a slot index (0 .. 63)")
        mask |= 1 << s
    if not mask:
        raise ValueError("gpuslot: an empty set of slots allows no slot; pass None for any")
    return mask


def timeout_ns(timeout):
    """Seconds (None: wait forever, 0: try once) as libgpuslot's timeout."""
    if timeout is None:
        return _native.WAIT_FOREVER
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or math.isnan(timeout) or timeout < 0:
        raise ValueError(f"gpuslot: timeout {timeout!r}: seconds >= 0, or None to wait "
                         "without a deadline")
    if math.isinf(timeout):
        return _native.WAIT_FOREVER
    # A positive timeout never rounds down to a try.
    return max(1, int(timeout * 1e9)) if timeout > 0 else 0


@dataclasses.dataclass(frozen=True)
class Layout:
    """The layout the client's current streams are built for."""
    k: int
    unit_kind: str      # "cu" (AMD compute units), "sm_group" (NVIDIA), "none"
    nr_units: int       # the GPU's units
    unit_size: int      # SMs per unit of an "sm_group" layout; 1 otherwise
    generation: int
    hqd_reserved: int   # hardware queues this process reserved
    live_generations: int
    rebuilds: int
    backend: str        # "none", "hip", "cuda"
    device: int         # the runtime's device number of the GPU; -1 none
    notice: str         # "" or what the user should know


class Slot:
    """A slot held by the thread that acquired it, until released.

    ``index`` is the slot, ``units`` its partition's units (CUs; NVIDIA SM
    groups of ``layout().unit_size`` SMs), ``stream`` the
    raw hipStream_t / CUstream (an int, None for the none backend),
    ``generation`` the layout generation of that stream.
    """

    def __init__(self, client, raw):
        self._client = client
        self._raw = raw
        self._held = True

    index = property(lambda self: self._raw.index)
    units = property(lambda self: self._raw.units)
    generation = property(lambda self: self._raw.generation)
    stream = property(lambda self: self._raw.stream)
    held = property(lambda self: self._held)

    def release(self, sync=True):
        """Wait for the stream's queued work (unless ``sync=False``: the
        caller synchronised it), then give the slot to the next waiter.
        The slot is released even when the wait reports the job's error,
        which is raised afterwards."""
        self._end_hold()
        self._client._release(self._raw, sync)

    def _end_hold(self):
        """Mark the slot released; an error if it was already."""
        if not self._held:
            raise errors.GpuslotError(errno.EINVAL,
                                      f"gpuslot: slot {self.index} was released already")
        self._held = False

    def torch_stream(self):
        """The slot's stream as a ``torch.cuda.ExternalStream``: torch's
        kernels launched on it run on the slot's partition only."""
        return streams.torch_stream(self._client, self)

    def cupy_stream(self):
        """The slot's stream as a ``cupy.cuda.ExternalStream``."""
        return streams.cupy_stream(self._client, self)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._held:
            # After an exception the job's work is still waited for: the
            # next holder must not run beside it.
            self.release()
        return False

    def __repr__(self):
        state = "held" if self._held else "released"
        return (f"<gpuslot.Slot {self.index} ({self.units} units, generation "
                f"{self.generation}) {state}>")


class Client:
    """A process's client of one GPU domain.

    ``domain``: the GPU domain (0 ..). ``backend``: "auto" (HIP for AMD CU
    layouts, CUDA for NVIDIA SM layouts), "none" (no GPU streams: CPU-side
    gating), "hip" or "cuda". ``slots``: the slots to build streams for
    (default all). ``wait_for_queues``: wait for the hardware-queue budget
    instead of failing with ENOSPC. ``gpu_index``: the runtime's device
    number, instead of finding the GPU by the PCI address gpuslotd recorded.
    ``device`` / ``sysfs_root``: another /dev/gpuslot and sysfs (tests).
    The transport (module or gpuslotd's socket) is chosen as libgpuslot
    does: GPUSLOT_TRANSPORT, GPUSLOT_SOCKET_DIR.
    """

    def __init__(self, domain=0, *, backend="auto", slots=None, wait_for_queues=False,
                 gpu_index=None, device=None, sysfs_root=None):
        if backend not in _native.BACKENDS:
            raise ValueError(f"gpuslot: backend {backend!r}: use one of "
                             f"{', '.join(_native.BACKENDS)}")
        if isinstance(domain, bool) or not isinstance(domain, int) or domain < 0:
            raise ValueError(f"gpuslot: domain {domain!r} is not a domain number (0 ..)")
        lib = _native.lib()
        o = _native.Options(size=ctypes.sizeof(_native.Options), domain=domain,
                            backend=_native.BACKENDS[backend])
        o.slot_mask = slot_mask(slots)
        if wait_for_queues:
            o.flags |= _native.OPEN_WAIT_QUEUES
        if gpu_index is not None:
            o.flags |= _native.OPEN_GPU_INDEX
            o.gpu_index = gpu_index
        o.device = device.encode() if device else None
        o.sysfs_root = sysfs_root.encode() if sysfs_root else None
        handle = ctypes.c_void_p()
        errors.check(lib.gpuslot_open(ctypes.byref(o), ctypes.byref(handle)), "gpuslot_open")
        self._lib = lib
        self._handle = handle
        self._lock = threading.Lock()
        self._streams = {}  # (framework, stream pointer) -> wrapper
        self.domain = domain

    def _h(self):
        if self._handle is None:
            raise errors.GpuslotError(9, "gpuslot: the client is closed")
        return self._handle

    def close(self):
        """Release what is still held (without waiting for its work) and
        give back the streams and queues. Idempotent."""
        with self._lock:
            handle, self._handle = self._handle, None
            self._streams.clear()
        if handle is not None:
            self._lib.gpuslot_close(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()

    def acquire(self, timeout=None, slots=None):
        """Take a slot in strict FIFO order with every waiter of the domain.

        ``timeout`` in seconds: None waits, 0 tries once, > 0 waits at most
        that long (SlotTimeout). ``slots``: the set of slot indices
        accepted (None: any with a stream). While it holds the slot the
        calling thread runs SCHED_FIFO, and gets its old policy back at
        release. Returns a Slot, which is also a context manager."""
        raw = _native.SlotStruct(size=ctypes.sizeof(_native.SlotStruct))
        errors.check(self._lib.gpuslot_acquire_slot(self._h(), timeout_ns(timeout),
                                                    slot_mask(slots), ctypes.byref(raw)),
                     "gpuslot_acquire_slot")
        return Slot(self, raw)

    def _release(self, raw, sync):
        flags = 0 if sync else _native.RELEASE_NO_SYNC
        errors.check(self._lib.gpuslot_release_slot(self._h(), ctypes.byref(raw), flags),
                     "gpuslot_release_slot")

    def layout(self):
        """The Layout the current streams are built for."""
        info = _native.LayoutInfo(size=ctypes.sizeof(_native.LayoutInfo))
        errors.check(self._lib.gpuslot_client_layout(self._h(), ctypes.byref(info)),
                     "gpuslot_client_layout")
        return Layout(k=info.k, unit_kind=UNIT_KINDS.get(info.unit_kind, str(info.unit_kind)),
                      nr_units=info.nr_units, unit_size=info.unit_size or 1,
                      generation=info.generation,
                      hqd_reserved=info.hqd_reserved,
                      live_generations=info.live_generations, rebuilds=info.rebuilds,
                      backend=(info.backend or b"").decode(), device=info.device,
                      notice=(info.notice or b"").decode(errors="replace"))

    def attribute(self, name):
        """The domain's attribute ``name`` (k, holders, waiters, stats, ...)
        with its sysfs text, through the client's transport."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"gpuslot: {name!r} is not an attribute name")
        size = 4096
        while True:
            buf = ctypes.create_string_buffer(size)
            n = errors.check(self._lib.gpuslot_domain_attr(self._h(), name.encode(), buf,
                                                           size), f"reading {name}")
            if n < size:
                return buf.value.decode(errors="replace")
            size = n + 1

    def status(self):
        """The domain now, as a gpuslot.Status."""
        return status.parse_status(self.attribute)

    def refresh(self):
        """Build streams for a newer layout now, outside any hold: True if it
        built new ones."""
        return errors.check(self._lib.gpuslot_refresh(self._h()), "gpuslot_refresh") == 1

    def retire_generation(self, generation):
        """Done with the streams of layout generations up to ``generation``
        (and with whatever was built on them): they are destroyed."""
        errors.check(self._lib.gpuslot_retire_generation(self._h(), generation),
                     "gpuslot_retire_generation")
        with self._lock:
            self._streams = {key: s for key, s in self._streams.items()
                             if key[2] > generation}

    def _cached_stream(self, key, make):
        with self._lock:
            stream = self._streams.get(key)
            if stream is None:
                stream = self._streams[key] = make()
            return stream

    def __repr__(self):
        state = "closed" if self._handle is None else "open"
        return f"<gpuslot.Client domain {self.domain} {state}>"
