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

close() from any thread is safe while others use the client: it wakes the
acquires waiting on it (they leave the queue and raise ClientClosed), waits
for the client's other calls in progress, then ends the holds that remain.
"""

import ctypes
import dataclasses
import errno
import math
import os
import select
import threading
import time
import weakref

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
    # Per slot, its stream priority: 0 (the default) .. 15 levels above it,
    # what the slot's stream was made at.
    priorities: tuple = ()


@dataclasses.dataclass(frozen=True)
class WorkState:
    """A domain's work state (preemptive slots, docs/preemption.md): the
    held slots, those whose holder reported GPU work pending, those of
    them that preempt (within their budget), 1 + the highest priority
    preempting (0: none), and how many changes it has seen."""
    k: int
    generation: int
    held: frozenset
    work: frozenset
    preempting: frozenset
    preempt_level: int
    updates: int


def _slots_of(mask):
    return frozenset(i for i in range(64) if mask >> i & 1)


# gpuslot_launch_begin()'s bound by default (GPUSLOT_LAUNCH_INFLIGHT_DEFAULT).
LAUNCH_INFLIGHT_DEFAULT = 4


class Slot:
    """A slot held by the thread that acquired it, until released.

    ``index`` is the slot, ``units`` its partition's units (CUs; NVIDIA SM
    groups of ``layout().unit_size`` SMs), ``priority`` the slot's stream
    priority (0 .. 15 levels above the default), ``stream`` the
    raw hipStream_t / CUstream (an int, None for the none backend),
    ``generation`` the layout generation of that stream.
    """

    def __init__(self, client, raw):
        self._client = client
        self._raw = raw
        self._held = True
        self._closed_with_client = False

    index = property(lambda self: self._raw.index)
    units = property(lambda self: self._raw.units)
    priority = property(lambda self: self._raw.priority)
    generation = property(lambda self: self._raw.generation)
    stream = property(lambda self: self._raw.stream)
    held = property(lambda self: self._held)

    def release(self, sync=True):
        """Wait for the stream's queued work (unless ``sync=False``: the
        caller synchronised it), then give the slot to the next waiter.
        The slot is released even when the wait reports the job's error,
        which is raised afterwards."""
        self._end_hold()
        self._client._release(self, sync)

    def _end_hold(self):
        """Mark the slot released; an error if it was already."""
        if not self._held:
            if self._closed_with_client:
                raise errors.ClientClosed(
                    errno.EBADF, f"gpuslot: slot {self.index} was released when its client "
                                 "was closed (without waiting for its stream's work)")
            raise errors.GpuslotError(errno.EINVAL,
                                      f"gpuslot: slot {self.index} was released already")
        self._held = False

    def _client_closed(self):
        """The client's close ended this hold."""
        self._closed_with_client = True
        self._held = False

    def set_work(self, pending):
        """Tell the lock that this hold has GPU work pending (``True``: call it
        as the job's first work is queued) or has drained (``False``: once
        the stream's work finished, after a synchronization). While a slot
        reports work within its preemption budget, the programs on slots of
        lower priority that run under gpuslot-run send no command
        (docs/preemption.md); releasing the slot clears the report. Two
        calls per job, not per kernel."""
        if not self._held:
            raise errors.GpuslotError(errno.EINVAL,
                                      f"gpuslot: slot {self.index} is not held: no work to report")
        self._client._set_work(self, bool(pending))

    def launch(self, send, *args, inflight=LAUNCH_INFLIGHT_DEFAULT, **kwargs):
        """Send one command on the slot's stream through libgpuslot's launch
        gate (gpuslot_launch_begin(), docs/preemption.md): ``send(*args,
        **kwargs)`` is called once the gate admits it, and its result
        returned. The
        hold's first command reports its work pending (as set_work(True));
        while a slot of higher priority preempts it waits; where a slot of
        the layout outranks this one, at most ``inflight`` of the hold's
        commands are unfinished on the GPU (0: no bound; one bound per
        hold). A command is a kernel, a graph launch, a copy: PyTorch's
        eager operators launch their own and pass no gate outside
        torch_gate(); a SlotGraph's replay(gated=True) does. GpuslotError
        EOPNOTSUPP for the none backend (no stream), EINVAL for a slot not
        held; nothing is sent then."""
        if not self._held:
            raise errors.GpuslotError(errno.EINVAL,
                                      f"gpuslot: slot {self.index} is not held: nothing to launch")
        if (not isinstance(inflight, int) or isinstance(inflight, bool)
                or not 0 <= inflight < 2**32):
            raise ValueError(f"gpuslot: inflight {inflight!r}: a count of commands, 0 or more")
        self._client._launch_call(self, "gpuslot_launch_begin", inflight)
        try:
            result = send(*args, **kwargs)
        except BaseException:
            # send's own error is the one to see.
            self._client._launch_call(self, "gpuslot_launch_end", check=False)
            raise
        self._client._launch_call(self, "gpuslot_launch_end")
        return result

    def torch_stream(self):
        """The slot's stream as a ``torch.cuda.ExternalStream``: torch's
        kernels launched on it run on the slot's partition only."""
        return streams.torch_stream(self._client, self)

    def cupy_stream(self):
        """The slot's stream as a ``cupy.cuda.ExternalStream``."""
        return streams.cupy_stream(self._client, self)

    def torch_gate(self, inflight=LAUNCH_INFLIGHT_DEFAULT):
        """A context (a PyTorch dispatch mode) in which every operator on
        CUDA tensors passes this slot's launch gate, as launch() does: use
        it around eager work on the slot's stream (``with
        torch.cuda.stream(slot.torch_stream()), slot.torch_gate(): ...``)
        so that it reports the hold's work and yields to higher slots. It
        costs a few microseconds of CPU per operator."""
        return streams.torch_gate(self, inflight)

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
        # Reentrant: close() may run in a signal handler of a thread that
        # holds it.
        self._lock = threading.RLock()
        self._streams = {}  # (framework, stream pointer) -> wrapper
        self.domain = domain
        # What close() needs to end the client only under no call
        # (issue 28): the native calls in progress (all threads, and this
        # thread's own), the held Slots, and the waits to wake.
        self._calls_done = threading.Condition(self._lock)
        self._calls = 0
        self._mine = threading.local()
        self._closing = False
        self._close_deferred = False
        self._slots = weakref.WeakSet()
        self._on_close = set()  # callables: an AsyncClient's waits
        # Readable from close() on: every waiting acquire polls it too.
        self._wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)

    def _closed_error(self):
        return errors.ClientClosed(errno.EBADF, f"gpuslot: the client of domain {self.domain} "
                                                "is closed")

    def _begin_call(self):
        """Count a native call in progress and return the handle; raises
        ClientClosed once close() began.

        This thread's own count goes up first and down last, so that a
        close() from a signal handler run anywhere in between never waits
        for its own thread's call, nor frees the handle under it."""
        self._mine.calls = getattr(self._mine, "calls", 0) + 1
        with self._lock:
            if self._closing:
                self._mine.calls -= 1
                raise self._closed_error()
            self._calls += 1
            handle = self._handle
        if handle is None:
            self._end_call()
            raise self._closed_error()
        return handle

    def _end_call(self):
        with self._lock:
            self._calls -= 1
            if not self._calls:
                self._calls_done.notify_all()
                # close() was called by a thread inside a call of its own
                # (a signal handler): the last call to end finishes it.
                if self._close_deferred:
                    self._close_deferred = False
                    self._close_now()
        self._mine.calls -= 1

    def _call(self, fn, *args):
        """libgpuslot's @fn on this client: its result (-errno on failure)."""
        handle = self._begin_call()
        try:
            return fn(handle, *args)
        finally:
            self._end_call()

    def close(self):
        """Wake the acquires waiting on this client (they raise
        ClientClosed, errno ECANCELED, and leave the queue), wait for its
        other calls in progress in other threads, then release what is
        still held (without waiting for its work; its Slots read
        ``held == False``) and give back the streams and queues.
        Idempotent; safe from any thread."""
        with self._lock:
            if not self._closing:
                self._closing = True
                os.eventfd_write(self._wake, 1)
            # Calls of this very thread (close() from a signal handler
            # that interrupted one) cannot end while it waits here: the
            # last of them finishes the close.
            while self._calls > getattr(self._mine, "calls", 0):
                self._calls_done.wait()
            if self._calls:
                self._close_deferred = True
                return
            self._close_now()

    def _close_now(self):
        """Under _lock, with no call in progress. A second close() waits
        on the lock until the first is done."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        # Ends the holds and the acquires still pending (an AsyncClient's).
        self._lib.gpuslot_close(handle)
        for slot in list(self._slots):
            slot._client_closed()
        self._slots.clear()
        self._streams.clear()
        for wake in list(self._on_close):
            wake()
        os.close(self._wake)

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
        release. Returns a Slot, which is also a context manager.
        close() from another thread ends the wait with ClientClosed
        (ECANCELED); the waiter leaves the queue."""
        return self._acquire(timeout_ns(timeout), slot_mask(slots), Slot)

    def _acquire(self, timeout, mask, make_slot):
        raw = _native.SlotStruct(size=ctypes.sizeof(_native.SlotStruct))
        handle = self._begin_call()
        try:
            # One try first: a free slot is granted in one round trip (the
            # queued path below costs two and the grant's message on the
            # socket transport), and exactly when a waiting acquire would
            # get it at once: a slot is free only while no queued waiter
            # accepts it. The try (which may build a new layout's streams)
            # counts against the timeout: the wait gets what is left, and a
            # try that used all of it does not queue.
            start = time.monotonic()
            result = self._lib.gpuslot_acquire_slot(handle, 0, mask, ctypes.byref(raw))
            if timeout == 0 or result != -errno.EAGAIN:
                errors.check(result, "gpuslot_acquire_slot")
            else:
                left = timeout
                if timeout != _native.WAIT_FOREVER:
                    left = timeout - int((time.monotonic() - start) * 1e9)
                    if left <= 0:
                        raise self._timed_out(timeout)
                self._wait_for_grant(handle, left, mask, raw, timeout)
            return self._hand_out(make_slot(self, raw))
        finally:
            self._end_call()

    def _timed_out(self, timeout):
        return errors.SlotTimeout(errno.ETIMEDOUT, f"gpuslot: no slot of domain {self.domain} "
                                                   f"within {timeout / 1e9} s")

    def _wait_for_grant(self, handle, timeout, mask, raw, whole=None):
        """Queue (libgpuslot's pollable acquire) and wait for the grant, or
        for close(), which the library's sleeping acquire could not see;
        ``timeout`` ns, what is left of the caller's ``whole`` timeout (the
        one a timeout's message names)."""
        lib = self._lib
        errors.check(lib.gpuslot_acquire_start(handle, mask, ctypes.byref(raw)),
                     "gpuslot_acquire_start")
        deadline = None if timeout == _native.WAIT_FOREVER else time.monotonic() + timeout / 1e9
        poller = select.poll()
        poller.register(raw.poll_fd, select.POLLIN)
        poller.register(self._wake, select.POLLIN)
        granted = False
        try:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                # A signal's handler runs in poll() (PEP 475); one that
                # raises ends the wait through the finally below.
                events = poller.poll(None if left is None else math.ceil(left * 1000))
                if any(fd == self._wake for fd, _ in events):
                    raise errors.ClientClosed(
                        errno.ECANCELED, f"gpuslot: the client of domain {self.domain} was "
                                         "closed while this thread waited for a slot; it left "
                                         "the queue and holds nothing")
                if not events and left:
                    continue
                # Granted, or the deadline: a grant that raced with it wins.
                result = lib.gpuslot_acquire_complete(handle, ctypes.byref(raw))
                if result != -errno.EAGAIN:
                    errors.check(result, "gpuslot_acquire_complete")
                    granted = True
                    return
                # EAGAIN: still queued (a new layout queued it again).
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._timed_out(timeout if whole is None else whole)
        finally:
            if not granted:
                # Leave the queue, or give back a grant not taken; nothing
                # to cancel after a failed complete.
                lib.gpuslot_acquire_cancel(handle, ctypes.byref(raw))

    def _hand_out(self, slot):
        """@slot was granted inside a call: close() ends it from now on."""
        with self._lock:
            self._slots.add(slot)
        return slot

    def _release(self, slot, sync):
        flags = 0 if sync else _native.RELEASE_NO_SYNC
        with self._lock:
            self._slots.discard(slot)
        errors.check(self._call(self._lib.gpuslot_release_slot, ctypes.byref(slot._raw), flags),
                     "gpuslot_release_slot")

    def _set_work(self, slot, pending):
        fn = self._work_call("gpuslot_set_work")
        errors.check(self._call(fn, ctypes.byref(slot._raw), int(pending)), "gpuslot_set_work")

    def _launch_call(self, slot, name, *args, check=True):
        fn = self._work_call(name, "its launch gate (1.7)")
        ret = self._call(fn, ctypes.byref(slot._raw), *args)
        if check:
            errors.check(ret, name)

    def _work_call(self, name, feature="preemptive slots (1.4)"):
        fn = getattr(self._lib, name, None)
        if fn is None:
            raise errors.GpuslotError(errno.EOPNOTSUPP,
                                      f"gpuslot: {name}: the loaded libgpuslot predates "
                                      f"{feature}")
        return fn

    def work_state(self):
        """The domain's published work state now, as a WorkState: which
        slots are held, which report work, which of those preempt (within
        their budget). A few loads after the first call, no system call."""
        info = _native.WorkInfo(size=ctypes.sizeof(_native.WorkInfo))
        errors.check(self._call(self._work_call("gpuslot_work_snapshot"), ctypes.byref(info)),
                     "gpuslot_work_snapshot")
        return WorkState(k=info.k, generation=info.generation, held=_slots_of(info.held_mask),
                         work=_slots_of(info.work_mask), preempting=_slots_of(info.preempt_mask),
                         preempt_level=info.preempt_level, updates=info.updates)

    def preempted(self, priority):
        """Whether a slot of priority above ``priority`` preempts now."""
        if not isinstance(priority, int) or isinstance(priority, bool) or priority < 0:
            raise ValueError(f"gpuslot: priority {priority!r}: a slot priority, 0 or more")
        return errors.check(self._call(self._work_call("gpuslot_work_preempts"), priority),
                            "gpuslot_work_preempts") == 1

    def layout(self):
        """The Layout the current streams are built for."""
        info = _native.LayoutInfo(size=ctypes.sizeof(_native.LayoutInfo))
        errors.check(self._call(self._lib.gpuslot_client_layout, ctypes.byref(info)),
                     "gpuslot_client_layout")
        return Layout(k=info.k, unit_kind=UNIT_KINDS.get(info.unit_kind, str(info.unit_kind)),
                      nr_units=info.nr_units, unit_size=info.unit_size or 1,
                      generation=info.generation,
                      hqd_reserved=info.hqd_reserved,
                      live_generations=info.live_generations, rebuilds=info.rebuilds,
                      backend=(info.backend or b"").decode(), device=info.device,
                      notice=(info.notice or b"").decode(errors="replace"),
                      priorities=tuple(
                          errors.check(self._call(self._lib.gpuslot_slot_priority, i),
                                       "gpuslot_slot_priority")
                          for i in range(info.k)))

    def attribute(self, name):
        """The domain's attribute ``name`` with its file's text, through the
        client's transport: the one-value files of /sys/class/gpuslot/gpu<N>/
        (k, generation, nr_holders, stats/acquisitions, slot0/units,
        slot0/priority, ...), the debug tables (debug/holders, debug/waiters,
        debug/queues, debug/wait_hist: root's or an admin's only, else
        errors.NotPermitted), or fdinfo (what the client's control file
        holds)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"gpuslot: {name!r} is not an attribute name")
        size = 4096
        while True:
            buf = ctypes.create_string_buffer(size)
            n = errors.check(self._call(self._lib.gpuslot_domain_attr, name.encode(), buf, size),
                             f"reading {name}")
            if n < size:
                return buf.value.decode(errors="replace")
            size = n + 1

    def status(self):
        """The domain now, as a gpuslot.Status."""
        return status.parse_status(self.attribute)

    def refresh(self):
        """Build streams for a newer layout now, outside any hold: True if it
        built new ones."""
        return errors.check(self._call(self._lib.gpuslot_refresh), "gpuslot_refresh") == 1

    def retire_generation(self, generation):
        """Done with the streams of layout generations up to ``generation``
        (and with whatever was built on them): they are destroyed."""
        errors.check(self._call(self._lib.gpuslot_retire_generation, generation),
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
