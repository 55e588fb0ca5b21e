# SPDX-License-Identifier: GPL-2.0
"""The experiments as lists of scenarios: a gpuslot layout (or none) and
the tasks that run at once under it."""

import dataclasses
import re

from .tasks import SIZES, Task


@dataclasses.dataclass(frozen=True)
class Layout:
    """What gpuslotd is configured with: k and one size per slot in
    percent of the SMs ("all": the whole GPU, overlapping the others), or
    None for the planner's k equal partitions; and, where given, a priority
    per slot (0..15, more is more urgent: the slot's stream is made at CUDA
    priority least - p, issue 32)."""
    k: int
    percents: tuple = None
    priorities: tuple = None
    preempt_share: int = None   # gpuslotd's preempt_share (issue 40); None: its default

    def __post_init__(self):
        for name in ("percents", "priorities"):
            v = getattr(self, name)
            if v is not None and len(v) != self.k:
                raise ValueError(f"layout: {len(v)} {name} for k = {self.k}")
        for p in self.percents or ():
            if p != "all" and not (isinstance(p, int) and 0 < p <= 100):
                raise ValueError(f"layout: size {p!r}: a percentage 1..100 or 'all'")
        for p in self.priorities or ():
            if not (isinstance(p, int) and 0 <= p <= 15):
                raise ValueError(f"layout: priority {p!r}: 0..15")

    def config(self):
        text = f"[default]\nk = {self.k}\n"
        if self.percents:
            text += "sizes = " + ",".join(p if p == "all" else f"{p}%"
                                          for p in self.percents) + "\n"
        if self.priorities:
            text += "priorities = " + ",".join(map(str, self.priorities)) + "\n"
        if self.preempt_share is not None:
            text += f"preempt_share = {self.preempt_share}\n"
        return text


@dataclasses.dataclass(frozen=True)
class Scenario:
    experiment: str
    name: str
    layout: Layout      # None: no gpuslotd (unmanaged, priorities, MPS)
    tasks: tuple
    # Partitions on the whole GPU (k-exclusion without partitions): gpuslotd
    # plans k equal ones, then gpuslotctl sets every slot to "all".
    whole_gpu_slots: bool = False
    # What the scenario compares (issue 32's report groups by it): one of
    # TECHNIQUES, or "" for the dissertation's tables.
    technique: str = ""
    # Seconds of jobs per repetition, where not the run's (0): a camera
    # releases a frame every 50-150 ms and needs longer for a p99.
    duration_s: float = 0.0

    def __post_init__(self):
        uses_lock = any(t.technique in ("lock", "run") for t in self.tasks)
        if uses_lock != (self.layout is not None):
            raise ValueError(f"{self.name}: a layout exactly when a task locks")
        for t in self.tasks:
            if t.slots and self.layout and max(t.slots) >= self.layout.k:
                raise ValueError(f"{self.name}: {t.name} allows slot {max(t.slots)} of "
                                 f"k = {self.layout.k}")
        if len({t.name for t in self.tasks}) != len(self.tasks):
            raise ValueError(f"{self.name}: two tasks of one name")

    def to_json(self):
        """Everything the scenario is (a run's schedule.json keeps it, so that
        a resumed run runs exactly what it started with)."""
        layout = self.layout and dict(k=self.layout.k, percents=self.layout.percents,
                                      priorities=self.layout.priorities,
                                      preempt_share=self.layout.preempt_share)
        return dict(experiment=self.experiment, name=self.name, layout=layout,
                    tasks=[t.to_json() for t in self.tasks],
                    whole_gpu_slots=self.whole_gpu_slots, technique=self.technique,
                    duration_s=self.duration_s)

    @staticmethod
    def from_json(d):
        lay = d["layout"]
        layout = lay and Layout(lay["k"], lay["percents"] and tuple(lay["percents"]),
                                lay["priorities"] and tuple(lay["priorities"]),
                                lay.get("preempt_share"))
        return Scenario(d["experiment"], d["name"], layout,
                        tuple(Task.from_json(t) for t in d["tasks"]),
                        d["whole_gpu_slots"], d["technique"], d.get("duration_s", 0.0))


def four_of(size, technique, slots_of=lambda i: None):
    return tuple(Task(f"{size.name}{i}", size, technique, slots=slots_of(i), measured=i == 0)
                 for i in range(4))


def table_6_1(sizes=SIZES, experiment="6.1"):
    """Four identical tasks, each size, five techniques."""
    out = []
    for size in sizes.values():
        out += [
            Scenario(experiment, f"{size.name}/unmanaged", None, four_of(size, "unmanaged")),
            Scenario(experiment, f"{size.name}/exclusive k=1", Layout(1),
                     four_of(size, "lock")),
            Scenario(experiment, f"{size.name}/k=2 no partitions", Layout(2),
                     four_of(size, "lock"), whole_gpu_slots=True),
            Scenario(experiment, f"{size.name}/k=2 partitions", Layout(2, (50, 50)),
                     four_of(size, "lock")),
            Scenario(experiment, f"{size.name}/k=4 one slot each", Layout(4, (25, 25, 25, 25)),
                     four_of(size, "lock", lambda i: frozenset({i}))),
        ]
    return out


def table_6_3(sizes=SIZES, partitions=(None, 25, 33, 50)):
    """One measured medium task against three competitors (none, small,
    medium, large), unpartitioned or on p % of the SMs; the competitors
    each on a third of the rest."""
    out = []
    measured = sizes["medium"]
    for competitor in ("none", "small", "medium", "large"):
        for p in partitions:
            if p is None:
                tasks = [Task("measured", measured, "unmanaged", measured=True)]
                tasks += [Task(f"{competitor}{i}", sizes[competitor], "unmanaged")
                          for i in range(3) if competitor != "none"]
                out.append(Scenario("6.3", f"vs {competitor}/unpartitioned", None,
                                    tuple(tasks)))
                continue
            rest = (100 - p) // 3
            layout = Layout(4, (p, rest, rest, rest))
            tasks = [Task("measured", measured, "lock", slots=frozenset({0}), measured=True)]
            tasks += [Task(f"{competitor}{i}", sizes[competitor], "lock",
                           slots=frozenset({i + 1}))
                      for i in range(3) if competitor != "none"]
            out.append(Scenario("6.3", f"vs {competitor}/{p}%", layout, tuple(tasks)))
    return out


def only_gpuslot(sizes=SIZES, measured_percent=50):
    """The measured medium task pinned to a large slot, three large
    competitors sharing the two other slots through k-exclusion; against
    CUDA stream priorities and MPS thread limits on the competitors."""
    m, c = sizes["medium"], sizes["large"]
    rest = (100 - measured_percent) // 2
    layout = Layout(3, (measured_percent, rest, rest))
    pinned = Task("measured", m, "lock", slots=frozenset({0}), measured=True)
    shared = tuple(Task(f"large{i}", c, "lock", slots=frozenset({1, 2})) for i in range(3))
    return [
        Scenario("only", "alone on its slot", layout, (pinned,)),
        Scenario("only", "gpuslot: own slot, competitors share 2", layout, (pinned,) + shared),
        Scenario("only", "alone, whole GPU", None,
                 (Task("measured", m, "unmanaged", measured=True),)),
        Scenario("only", "unmanaged", None,
                 (Task("measured", m, "unmanaged", measured=True),) +
                 tuple(Task(f"large{i}", c, "unmanaged") for i in range(3))),
        Scenario("only", "stream priorities", None,
                 (Task("measured", m, "priority", stream_priority=-5, measured=True),) +
                 tuple(Task(f"large{i}", c, "priority", stream_priority=0) for i in range(3))),
        Scenario("only", f"MPS: competitors at {rest} %", None,
                 (Task("measured", m, "unmanaged", measured=True),) +
                 tuple(Task(f"large{i}", c, "mps", mps_percent=rest) for i in range(3))),
    ]


def camera_pipeline(size, cameras=8, period_s=0.1, front_percent=34):
    """Eight periodic vision tasks at 10 Hz, the front camera high
    priority: unmanaged, against the front camera on its own slot and the
    rest sharing the others through k-exclusion; and the front camera alone,
    on the whole GPU and on its slot. A camera whose jobs fall behind keeps
    every frame: its next job starts at once, late."""
    rest = (100 - front_percent) // 2
    layout = Layout(3, (front_percent, rest, rest))

    def cams(technique, front_slots, other_slots):
        return tuple(Task("front" if i == 0 else f"cam{i}", size, technique,
                          slots=front_slots if i == 0 else other_slots, period_s=period_s,
                          measured=i == 0, network="fcn_resnet50")
                     for i in range(cameras))

    px = f"{size.resolution} px"
    return [
        Scenario("camera", f"{px}/front alone, whole GPU", None,
                 cams("unmanaged", None, None)[:1]),
        Scenario("camera", f"{px}/front alone on its slot", layout,
                 cams("lock", frozenset({0}), None)[:1]),
        Scenario("camera", f"{px}/unmanaged", None, cams("unmanaged", None, None)),
        Scenario("camera", f"{px}/gpuslot", layout,
                 cams("lock", frozenset({0}), frozenset({1, 2}))),
    ]


# Issue 32's comparison: how the priority task is protected. "alone" is
# the priority task with nothing beside it (the floor, not a technique).
TECHNIQUES = {
    "alone": "the priority task alone on the whole GPU",
    "unmanaged": "every task on a stream of its own, no lock",
    "stream-priority": "the priority task on a CUDA stream of priority -5, the others 0",
    "mps": "the competitors' processes limited by CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "gpuslot-partitions": "gpuslot's earlier layout: the priority task on a partition of "
                          "its own, the competitors k-exclusive on disjoint partitions",
    "gpuslot-prio-reserve": "slot 0 on the whole GPU at priority 5, the competitors "
                            "k-exclusive on slots confined to 25 % each (a 25 % reserve)",
    "gpuslot-prio-held": "as gpuslot-prio-reserve, the priority task holding slot 0 from "
                         "its first job to its last (no round trip to gpuslotd per job)",
    "gpuslot-prio-whole": "every slot on the whole GPU, slot 0 at priority 5, the "
                          "competitors k-exclusive on the other three",
    "hybrid": "the priority task on a CUDA stream of priority -5 on the whole GPU, no lock; "
              "the competitors k-exclusive (k = 2) on the whole GPU",
    "xsched": "every task under XSched (its stand-in libcuda, xserver highest priority "
              "first, Level 1, at most 4 commands in flight, none launched while "
              "suspended, one stream per "
              "process), the priority task's queue at priority 1, the others' at 0",
    "gpuslot-run-held": "gpuslot-prio-held's layout, every task an unmodified program under "
                        "gpuslot-run: the priority task --hold on slot 0, the competitors "
                        "--per-sync on slots 1-3; nothing held back (issue 39)",
    "gpuslot-preempt": "gpuslot-run-held, and while the priority task has work the "
                       "competitors send nothing, with at most 4 commands in flight at "
                       "any time (XSched's Level 1, issue 40)",
    "gpuslot-preempt-whole": "gpuslot-preempt with every slot on the whole GPU: the "
                             "competitors held back, not confined",
    "gpuslot-preempt-tight": "gpuslot-preempt with at most 1 command in flight (not 4)",
    "gpuslot-preempt-nobound": "gpuslot-preempt with no bound on the competitors' commands "
                               "in flight (--inflight 0: held back only while preempted, "
                               "no CUDA event per command)",
    "gpuslot-preempt-nobudget": "gpuslot-preempt with preempt_share 100: no bound on "
                                "what the priority task holds back",
    "gpuslot-pkg-preempt": "gpuslot-preempt through the Python package instead of "
                           "gpuslot-run: each task's commands pass libgpuslot's launch gate "
                           "(a graph's replay, eager operators under Slot.torch_gate), the "
                           "priority task holding slot 0 and reporting each job's drain",
}
# Issue 40's preemptive layouts: the competitors' commands in flight at any
# time (XSched's threshold in its authors' setting).
PREEMPT_INFLIGHT = 4
RUN_LAYOUTS = ("gpuslot-run-held", "gpuslot-preempt", "gpuslot-preempt-whole",
               "gpuslot-preempt-tight", "gpuslot-preempt-nobound", "gpuslot-preempt-nobudget")
# The alternatives a user has without gpuslot: issue 32's bar compares
# gpuslot's priority layouts against the best of them.
ALTERNATIVES = ("unmanaged", "stream-priority", "mps")
PRIORITY_LAYOUTS = ("gpuslot-prio-reserve", "gpuslot-prio-held", "gpuslot-prio-whole")
# The layouts with a reserve take another one as a suffix, for a sweep:
# "gpuslot-prio-held@10" leaves 10 % of the SMs to slot 0 alone (the
# competitors' three slots 30 % each). A reserve is at least 10 % (the
# planner rounds each slot to whole SM groups: a few per cent may round to
# nothing) and leaves the three slots equal whole percents of at least 10.
RESERVE_LAYOUTS = ("gpuslot-prio-reserve", "gpuslot-prio-held")
DEFAULT_RESERVE = 25
RESERVES = tuple(r for r in range(10, 71) if (100 - r) % 3 == 0)


def parse_technique(technique):
    """A technique's name as (the technique of TECHNIQUES, the reserve in
    percent of the SMs, None where it has none); ValueError says what is
    wrong with a name."""
    base, at, reserve = technique.partition("@")
    if base not in TECHNIQUES:
        raise ValueError(f"unknown technique {technique!r}: one of {', '.join(TECHNIQUES)}, "
                         f"or {' or '.join(RESERVE_LAYOUTS)} with @RESERVE")
    if not at:
        return base, DEFAULT_RESERVE if base in RESERVE_LAYOUTS else None
    if base not in RESERVE_LAYOUTS:
        raise ValueError(f"technique {technique!r}: only {' and '.join(RESERVE_LAYOUTS)} "
                         "take a reserve (@PERCENT)")
    if not re.fullmatch(r"[1-9][0-9]", reserve) or int(reserve) not in RESERVES:
        raise ValueError(f"technique {technique!r}: the reserve is a percent of the SMs from "
                         f"{RESERVES[0]} to {RESERVES[-1]} that leaves the competitors' three "
                         f"slots equal whole percents: one of {', '.join(map(str, RESERVES))} "
                         "(100 - reserve divisible by 3)")
    if int(reserve) == DEFAULT_RESERVE:
        raise ValueError(f"technique {technique!r}: {DEFAULT_RESERVE} % is {base}'s own "
                         f"reserve: name it {base}")
    return base, int(reserve)


def is_priority_layout(technique):
    """Whether a technique's name is one of gpuslot's priority layouts
    (with any reserve); False for a name that is no technique."""
    try:
        return parse_technique(technique)[0] in PRIORITY_LAYOUTS
    except ValueError:
        return False


def technique_order(technique):
    """Where a technique's rows go in a table: TECHNIQUES' order, a
    technique's reserves in increasing order after it; unknown names last."""
    try:
        base, reserve = parse_technique(technique)
    except ValueError:
        return (len(TECHNIQUES), 0)
    return (list(TECHNIQUES).index(base), reserve or 0)
HIGH_STREAM_PRIORITY = -5   # CUDA: lower is more urgent (the H100's range is -5..0)
HIGH_SLOT_PRIORITY = 5      # gpuslot: more is more urgent (stream at least - 5)


def protection(experiment, front, competitors, techniques=tuple(TECHNIQUES),
               earlier_front_percent=50, earlier_competitor_slots=2, mps_percent=25):
    """Issue 32's scenarios of one workload: the priority task (``front(technique,
    slots, stream_priority)``, a Task) protected from its competitors
    (``competitors(technique, slots, stream_priority, mps_percent)``, a tuple of
    Tasks) by each of ``techniques``. Each scenario's name is its technique."""
    out = []
    for name in techniques:
        t, reserve = parse_technique(name)
        if t == "alone":
            out.append(Scenario(experiment, t, None, (front("unmanaged", None, 0),),
                                technique=t))
        elif t == "unmanaged":
            out.append(Scenario(experiment, t, None, (front("unmanaged", None, 0),) +
                                competitors("unmanaged", None, 0, 0), technique=t))
        elif t == "stream-priority":
            out.append(Scenario(experiment, t, None,
                                (front("priority", None, HIGH_STREAM_PRIORITY),) +
                                competitors("priority", None, 0, 0), technique=t))
        elif t == "mps":
            out.append(Scenario(experiment, t, None, (front("unmanaged", None, 0),) +
                                competitors("mps", None, 0, mps_percent), technique=t))
        elif t == "gpuslot-partitions":
            n = earlier_competitor_slots
            rest = (100 - earlier_front_percent) // n
            layout = Layout(n + 1, (earlier_front_percent,) + (rest,) * n)
            out.append(Scenario(experiment, t, layout,
                                (front("lock", frozenset({0}), 0),) +
                                competitors("lock", frozenset(range(1, n + 1)), 0, 0),
                                technique=t))
        elif t in PRIORITY_LAYOUTS:
            sizes = ("all",) * 4 if t == "gpuslot-prio-whole" else \
                ("all",) + ((100 - reserve) // 3,) * 3
            layout = Layout(4, sizes, (HIGH_SLOT_PRIORITY, 0, 0, 0))
            first = front("lock", frozenset({0}), 0)
            if t == "gpuslot-prio-held":
                first = dataclasses.replace(first, hold=True)
            out.append(Scenario(experiment, name, layout, (first,) +
                                competitors("lock", frozenset({1, 2, 3}), 0, 0),
                                technique=name))
        elif t == "xsched":
            first = dataclasses.replace(front("xsched", None, 0), xsched_priority=1,
                                        inflight=PREEMPT_INFLIGHT)
            rest = tuple(dataclasses.replace(c, inflight=PREEMPT_INFLIGHT)
                         for c in competitors("xsched", None, 0, 0))
            out.append(Scenario(experiment, t, None, (first,) + rest, technique=t))
        elif t in RUN_LAYOUTS:
            sizes = ("all",) * 4 if t == "gpuslot-preempt-whole" else \
                ("all",) + ((100 - DEFAULT_RESERVE) // 3,) * 3
            layout = Layout(4, sizes, (HIGH_SLOT_PRIORITY, 0, 0, 0),
                            100 if t == "gpuslot-preempt-nobudget" else None)
            inflight = {"gpuslot-preempt-tight": 1,
                        "gpuslot-preempt-nobound": 0}.get(t, PREEMPT_INFLIGHT)
            first = dataclasses.replace(front("run", frozenset({0}), 0), hold=True)
            rest = tuple(dataclasses.replace(c, inflight=inflight,
                                             preempt=t != "gpuslot-run-held")
                         for c in competitors("run", frozenset({1, 2, 3}), 0, 0))
            out.append(Scenario(experiment, t, layout, (first,) + rest, technique=t))
        elif t == "gpuslot-pkg-preempt":
            layout = Layout(4, ("all",) + ((100 - DEFAULT_RESERVE) // 3,) * 3,
                            (HIGH_SLOT_PRIORITY, 0, 0, 0))
            first = dataclasses.replace(front("lock", frozenset({0}), 0), hold=True, gate=True)
            rest = tuple(dataclasses.replace(c, gate=True, inflight=PREEMPT_INFLIGHT)
                         for c in competitors("lock", frozenset({1, 2, 3}), 0, 0))
            out.append(Scenario(experiment, t, layout, (first,) + rest, technique=t))
        elif t == "hybrid":
            out.append(Scenario(experiment, t, Layout(2),
                                (front("priority", None, HIGH_STREAM_PRIORITY),) +
                                competitors("lock", None, 0, 0),
                                whole_gpu_slots=True, technique=t))
        else:
            raise ValueError(f"technique {t!r} has no scenario here")
    return out


def only(sizes=SIZES, graph=False, techniques=tuple(TECHNIQUES)):
    """The "only" experiment of issue 32: the medium task (launch-bound;
    with ``graph`` replayed as one CUDA graph) against three large
    competitors running back to back."""
    m, c = sizes["medium"], sizes["large"]

    def front(technique, slots, prio):
        return Task("measured", m, technique, slots=slots, stream_priority=prio,
                    measured=True, graph=graph)

    def competitors(technique, slots, prio, mps):
        return tuple(Task(f"large{i}", c, technique, slots=slots, stream_priority=prio,
                          mps_percent=mps) for i in range(3))

    return protection("only-graph" if graph else "only", front, competitors, techniques)


def camera_period_s(busy_ms, load, cameras=8):
    """The period at which ``cameras`` cameras whose frame keeps the GPU busy
    ``busy_ms`` alone offer ``load`` (1.0: the GPU's capacity)."""
    if busy_ms <= 0 or load <= 0:
        raise ValueError(f"camera: busy {busy_ms} ms at load {load}: both must be positive")
    return cameras * busy_ms / 1e3 / load


def camera_load(size, period_s, experiment, cameras=8, techniques=tuple(TECHNIQUES)):
    """Issue 32's camera pipeline at one load: ``cameras`` FCN-ResNet50
    cameras each releasing a frame every ``period_s`` (deadline = period),
    camera i first at i/cameras of the period, as free-running cameras are;
    camera 0 (the front camera) is the priority task."""

    def cam(i, technique, slots, prio, mps=0):
        return Task("front" if i == 0 else f"cam{i}", size, technique, slots=slots,
                    stream_priority=prio, mps_percent=mps, period_s=period_s,
                    phase_s=period_s * i / cameras, measured=i == 0, network="fcn_resnet50")

    return protection(
        experiment, lambda t, s, p: cam(0, t, s, p),
        lambda t, s, p, mps: tuple(cam(i, t, s, p, mps) for i in range(1, cameras)),
        techniques, earlier_front_percent=34, earlier_competitor_slots=2, mps_percent=33)


EXPERIMENTS = {"6.1": table_6_1, "6.3": table_6_3, "only-18": only_gpuslot,
               "only": only, "only-graph": lambda: only(graph=True)}
