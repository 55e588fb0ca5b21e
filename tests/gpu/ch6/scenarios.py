# SPDX-License-Identifier: GPL-2.0
"""The experiments as lists of scenarios: a gpuslot layout (or none) and
the tasks that run at once under it."""

import dataclasses

from .tasks import SIZES, Task


@dataclasses.dataclass(frozen=True)
class Layout:
    """What gpuslotd is configured with: k and one size per slot in
    percent of the SMs, or None for k slots on the whole GPU."""
    k: int
    percents: tuple = None

    def config(self):
        text = f"[default]\nk = {self.k}\n"
        if self.percents:
            text += "sizes = " + ",".join(f"{p}%" for p in self.percents) + "\n"
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

    def __post_init__(self):
        uses_lock = any(t.technique == "lock" for t in self.tasks)
        if uses_lock != (self.layout is not None):
            raise ValueError(f"{self.name}: a layout exactly when a task locks")
        for t in self.tasks:
            if t.slots and self.layout and max(t.slots) >= self.layout.k:
                raise ValueError(f"{self.name}: {t.name} allows slot {max(t.slots)} of "
                                 f"k = {self.layout.k}")
        if len({t.name for t in self.tasks}) != len(self.tasks):
            raise ValueError(f"{self.name}: two tasks of one name")


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


EXPERIMENTS = {"6.1": table_6_1, "6.3": table_6_3, "only": only_gpuslot}
