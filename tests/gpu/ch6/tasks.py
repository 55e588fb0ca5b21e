# SPDX-License-Identifier: GPL-2.0
"""What a task is: a process that runs jobs of one network in a loop.

Sizes are the dissertation's US-MobileNet configurations (batch, width
multiplier), run as torchvision's MobileNet V2 with ``width_mult`` and
random weights. How a task reaches the GPU is its technique:

  unmanaged   a stream of its own, no lock
  lock        a gpuslot slot per job (per-job locking), among ``slots``;
              with ``hold``, one slot acquired before the first job and
              held to the end (a slot no other task names: no round trip
              to gpuslotd per job)
  priority    unmanaged, on a stream of CUDA priority ``stream_priority``
  mps         unmanaged, its process limited by MPS to ``mps_percent`` %
  xsched      unmanaged, its process under XSched's stand-in libcuda
              (XSCHED_SCHEDULER=GLB, highest priority first), its queue at
              ``xsched_priority`` (more is more urgent), Level 1, at most
              ``inflight`` commands in flight at any time and none launched
              while suspended, one stream per process (issue 40)
  run         unmanaged, its process under gpuslot-run (issues 39, 40): on
              one of ``slots``, holding it from the first GPU call to exit
              with ``hold``, else per synchronization (--per-sync); with
              ``preempt``, no command sent while a higher slot has work and,
              where a higher slot outranks it, at most ``inflight`` unfinished
              at any time (--inflight; 0: no bound); without, --no-preempt

A task with ``period_s`` releases a job every period (deadline = period),
the first ``phase_s`` after the common start (cameras are not released in
lockstep); without, it runs jobs back to back. ``graph``: the job is a CUDA
graph captured once and replayed (gpuslot.SlotGraph on a slot's stream,
torch.cuda.CUDAGraph on a stream of its own), one launch instead of hundreds.
"""

import dataclasses

TECHNIQUES = ("unmanaged", "lock", "priority", "mps", "xsched", "run")
# The techniques whose process is started for the scenario, with its own
# environment (or launcher), and ended after it.
FRESH_PROCESS = ("mps", "xsched", "run")


@dataclasses.dataclass(frozen=True)
class Size:
    name: str
    batch: int
    width: float
    resolution: int = 224


def camera_sizes(text):
    """The camera network's sizes from "BATCHxPIXELS,...": one Size each."""
    out = []
    for spec in filter(None, text.split(",")):
        batch, px = spec.split("x")
        out.append(Size("camera", int(batch), 1.0, int(px)))
    return out


# Table 6.1's sizes: batch and width multiplier.
SIZES = {
    "small": Size("small", 8, 0.25),
    "medium": Size("medium", 32, 0.5),
    "large": Size("large", 64, 1.0),
}


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    size: Size
    technique: str = "unmanaged"
    slots: frozenset = None        # lock: the allowed slots (None: any)
    stream_priority: int = 0       # priority: CUDA stream priority (lower is higher)
    mps_percent: int = 0           # mps: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
    period_s: float = 0.0          # 0: back to back
    measured: bool = False         # the task the scenario reports on
    network: str = "mobilenet_v2"  # or "fcn_resnet50" (the camera pipeline)
    phase_s: float = 0.0           # periodic: the first release after the start
    graph: bool = False            # replay a CUDA graph of the job
    hold: bool = False             # lock, run: one hold for every job
    xsched_priority: int = 0       # xsched: the XQueue's priority
    inflight: int = 0              # xsched: its threshold; run: gpuslot-run --inflight
    preempt: bool = True           # run: held back while a higher slot has work
    gate: bool = False             # lock: every command through libgpuslot's launch gate

    def __post_init__(self):
        if self.technique not in TECHNIQUES:
            raise ValueError(f"task {self.name}: technique {self.technique!r}, not one of "
                             f"{', '.join(TECHNIQUES)}")
        if self.technique == "lock" and self.slots is not None and not self.slots:
            raise ValueError(f"task {self.name}: an empty set of slots")
        if self.hold and self.technique not in ("lock", "run"):
            raise ValueError(f"task {self.name}: only a task that locks can hold its slot")
        if self.technique == "run" and self.slots is not None and not self.slots:
            raise ValueError(f"task {self.name}: an empty set of slots")
        if self.gate and self.technique != "lock":
            raise ValueError(f"task {self.name}: only a task that locks passes the launch gate")
        if self.inflight < 0:
            raise ValueError(f"task {self.name}: inflight {self.inflight}: 0 or more")
        if self.technique == "mps" and not 0 < self.mps_percent <= 100:
            raise ValueError(f"task {self.name}: mps_percent {self.mps_percent}: 1..100")
        if self.period_s < 0:
            raise ValueError(f"task {self.name}: a negative period")
        if self.phase_s < 0 or self.phase_s and self.phase_s >= self.period_s:
            raise ValueError(f"task {self.name}: phase {self.phase_s} s: 0 up to the period")

    def to_json(self):
        d = dataclasses.asdict(self)
        d["slots"] = sorted(self.slots) if self.slots is not None else None
        return d

    @staticmethod
    def from_json(d):
        d = dict(d)
        d["size"] = Size(**d["size"])
        d["slots"] = frozenset(d["slots"]) if d["slots"] is not None else None
        d.setdefault("hold", False)
        d.setdefault("xsched_priority", 0)
        d.setdefault("inflight", 0)
        d.setdefault("gate", False)
        # Schedules written before gpuslot-run held every command back
        # while preempted (--window): inflight 0 was --no-preempt then.
        if "preempt" not in d:
            d["preempt"] = not (d["technique"] == "run" and d["inflight"] == 0)
        d.pop("window", None)
        return Task(**d)
