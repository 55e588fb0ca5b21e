# SPDX-License-Identifier: GPL-2.0
"""The part of the chapter-6 experiments that needs no GPU: task and
scenario definitions, statistics, running scenarios (none backend,
against a gpuslotd on its socket transport) and the report."""

import csv
import dataclasses
import json
import os
import random
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from ch6 import busy, calibrate, report, runner, scenarios, stats  # noqa: E402
from ch6 import __main__ as ch6_main  # noqa: E402
from ch6.tasks import SIZES, Size, Task, camera_sizes  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "../../../.."))


def test_percentiles_are_numpys():
    np = pytest.importorskip("numpy")
    rng = random.Random(7)
    for n in (1, 2, 5, 100, 1001):
        v = sorted(rng.uniform(0, 50) for _ in range(n))
        for q in (0, 50, 99, 100):
            assert stats.percentile(v, q) == pytest.approx(np.percentile(v, q))


def test_a_summary_counts_misses_only_with_a_deadline():
    s = stats.summarize([5, 1, 3, 120, 2], deadline_ms=100)
    assert (s.jobs, s.min, s.median, s.max, s.misses) == (5, 1, 3, 120, 1)
    assert s.mean == pytest.approx(26.2)
    assert stats.summarize([5, 200]).misses == 0
    with pytest.raises(ValueError):
        stats.summarize([])


def test_the_experiments_have_the_dissertations_shape():
    t61 = scenarios.table_6_1()
    assert len(t61) == 15
    assert {s.layout.k for s in t61 if s.layout} == {1, 2, 4}
    assert all(len(s.tasks) == 4 for s in t61)
    assert [(t.size.batch, t.size.width) for t in t61[0].tasks][0] == (8, 0.25)
    k4 = [s for s in t61 if s.layout and s.layout.k == 4][0]
    assert [sorted(t.slots) for t in k4.tasks] == [[0], [1], [2], [3]]
    t63 = scenarios.table_6_3()
    assert len(t63) == 16
    assert sum(1 for s in t63 if s.name == "vs none/unpartitioned") == 1
    half = [s for s in t63 if s.name == "vs large/50%"][0]
    assert half.layout.percents == (50, 16, 16, 16)
    only = scenarios.only_gpuslot()
    assert {t.technique for s in only for t in s.tasks} == {"lock", "unmanaged", "priority",
                                                            "mps"}
    assert camera_sizes("1x800,2x640") == [Size("camera", 1, 1.0, 800),
                                           Size("camera", 2, 1.0, 640)]
    cams = scenarios.camera_pipeline(Size("camera", 1, 1.0, 520))
    assert [s.name for s in cams] == ["520 px/front alone, whole GPU",
                                      "520 px/front alone on its slot", "520 px/unmanaged",
                                      "520 px/gpuslot"]
    assert len(cams[2].tasks) == 8 and all(t.period_s == 0.1 for t in cams[2].tasks)
    assert [t.slots for t in cams[3].tasks][:2] == [frozenset({0}), frozenset({1, 2})]
    cal = scenarios.table_6_1({"small-cal": Size("small-cal", 64, 0.25)}, "6.1c")
    assert {s.experiment for s in cal} == {"6.1c"} and cal[0].name == "small-cal/unmanaged"


def test_a_scenario_that_cannot_run_is_refused():
    small = SIZES["small"]
    with pytest.raises(ValueError, match="slot 4"):
        scenarios.Scenario("x", "bad", scenarios.Layout(4),
                           (Task("a", small, "lock", slots=frozenset({4})),))
    with pytest.raises(ValueError, match="layout"):
        scenarios.Scenario("x", "bad", None, (Task("a", small, "lock"),))
    with pytest.raises(ValueError, match="technique"):
        Task("a", small, "magic")
    with pytest.raises(ValueError, match="mps_percent"):
        Task("a", small, "mps", mps_percent=0)
    t = Task("a", small, "lock", slots=frozenset({1, 2}), period_s=0.1)
    assert Task.from_json(t.to_json()) == t


def gpuslotd_of_this_build():
    gpuslotd = os.environ.get("GPUSLOT_TEST_GPUSLOTD") or shutil.which("gpuslotd")
    ctl = os.environ.get("GPUSLOT_TEST_GPUSLOTCTL") or shutil.which("gpuslotctl")
    if not gpuslotd or not ctl or os.path.exists("/dev/gpuslot"):
        pytest.skip("needs gpuslotd and gpuslotctl of this build, on a host without the module")
    topology = os.path.join(REPO, "tests/fixtures/kfd/radeon-vii-gfx906")
    return [gpuslotd], [ctl], ["--topology", topology, "--dri", ""]


def test_scenarios_run_and_report_with_the_none_backend(tmp_path):
    daemon = gpuslotd_of_this_build()
    picked = [s for s in scenarios.table_6_1() if s.name.startswith("small/")]
    picked += [s for s in scenarios.table_6_3() if s.name == "vs small/25%"]
    picked += scenarios.camera_pipeline(Size("camera", 1, 1.0, 64), cameras=3,
                                        period_s=0.05)[1:]
    # An MPS-limited task gets a worker of its own (the none backend
    # ignores the limit).
    picked += [s for s in scenarios.only_gpuslot() if s.name.startswith("MPS")]
    # A scenario whose worker dies (no stand-in job of this size) is
    # recorded as failed, and the run goes on.
    bogus = scenarios.Scenario("6.1", "bogus/unmanaged", None,
                               scenarios.four_of(Size("bogus", 1, 1.0), "unmanaged"))
    picked.insert(1, bogus)
    runner.run_all(picked, "none", 0.6, str(tmp_path), daemon)
    rows = report.read_jobs(str(tmp_path / "jobs.csv"))
    by = {}
    for r in rows:
        by.setdefault((r["scenario"], r["task"]), []).append(r)
    # Every task of every scenario ran jobs, and only on slots it allows.
    for s in picked:
        if s is bogus:
            assert not any(sc == s.name for sc, _ in by)
            continue
        for t in s.tasks:
            jobs = by[(s.name, t.name)]
            assert len(jobs) >= 10, (s.name, t.name)
            held = {j["slot"] for j in jobs}
            if t.technique != "lock":
                assert held == {-1}
            elif t.slots is not None:
                assert held <= t.slots, (s.name, t.name, held)
            else:
                assert held <= set(range(s.layout.k))
    # k = 1: four tasks of 2 ms jobs share one slot: they wait.
    excl = [j["response_ms"] for (sc, _), js in by.items() if sc == "small/exclusive k=1"
            for j in js]
    alone = [j["response_ms"] for (sc, _), js in by.items() if sc == "small/k=4 one slot each"
             for j in js]
    assert stats.summarize(excl).mean > stats.summarize(alone).mean
    # Periodic tasks: releases 50 ms apart.
    front = [j["release_s"] for j in by[("64 px/gpuslot", "front")]]
    assert float(front[1]) - float(front[0]) == pytest.approx(0.05, abs=1e-3)
    with open(tmp_path / "failed.csv") as f:
        assert [(r["scenario"], "did not" in r["error"] or "said" in r["error"])
                for r in csv.DictReader(f)] == [("bogus/unmanaged", True)]
    assert "KeyError: 'bogus'" in (tmp_path / "run.log").read_text()
    summaries, plots = report.write_report(str(tmp_path))
    assert "| 6.1 | bogus/unmanaged |" in (tmp_path / "tables.md").read_text()
    assert any(s["experiment"] == "6.1" and s["scenario"] == "small/k=2 partitions"
               for s in summaries)
    with open(tmp_path / "summary.csv") as f:
        assert len(list(csv.DictReader(f))) == len(summaries)
    assert "| small/exclusive k=1 |" in (tmp_path / "tables.md").read_text()
    for p in plots:
        assert os.path.getsize(p) > 10_000
    # gpuslotd had the partitions each scenario asked for.
    sections = {}
    for part in (tmp_path / "run.log").read_text().split("== run ")[1:]:
        sections[part.split(": ", 1)[1].split(" (repetition")[0]] = part
    no_parts = sections["6.1: small/k=2 no partitions"]
    assert "A slot 0  whole GPU" in no_parts and "B slot 1  whole GPU" in no_parts
    assert "A slot 0  30 CUs" in sections["6.1: small/k=2 partitions"]


def fifo_allowed_here():
    """Whether gpuslotd, run by the tests as this user, boosts holders
    here: it boosts only with CAP_SYS_NICE (the tests' gpuslotd inherits
    this process's), and the host may still refuse SCHED_FIFO (a thread of
    this process tries)."""
    import threading
    with open("/proc/self/status") as f:
        caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    if not caps & (1 << 23):  # CAP_SYS_NICE
        return False
    ok = []

    def probe():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        except OSError:
            return
        ok.append(True)
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return bool(ok)


def test_each_job_records_whether_the_boost_took(tmp_path):
    """Issue 32: a job records whether its thread ran SCHED_FIFO as it
    launched (gpuslot's boost, which a host may refuse), and runs.csv the
    share of the measured task's jobs that did. A task that locks per job
    is boosted in every job (where gpuslotd boosts at all); one that holds
    its slot (Task.hold) has lost the boost by its last job (the hold, taken
    before the warm-up, is then over 1.5 s old, past max_hold_ms = 500 ms);
    one that does not lock never is."""
    daemon = gpuslotd_of_this_build()
    small = SIZES["small"]
    tasks = (Task("held", small, "lock", slots=frozenset({0}), hold=True, measured=True),
             Task("per-job", small, "lock", slots=frozenset({1})),
             Task("free", small, "unmanaged"))
    runner.run_all([scenarios.Scenario("boost", "held", scenarios.Layout(2), tasks,
                                       technique="gpuslot-prio-held")],
                   "none", 1.5, str(tmp_path), daemon)
    rows = report.read_jobs(str(tmp_path / "jobs.csv"))
    jobs = {}
    for r in rows:
        jobs.setdefault(r["task"], []).append(r["sched_fifo"])
    assert set(jobs) == {"held", "per-job", "free"}
    boosted = "1" if fifo_allowed_here() else "0"
    assert set(jobs["per-job"]) == {boosted}
    assert set(jobs["free"]) == {"0"}
    # The held task's boost ended at max_hold_ms, its hold did not.
    assert jobs["held"][-1] == "0"
    from ch6 import compare
    run = compare.run_rows(str(tmp_path), rows)[0]
    assert run["front_fifo_share"] == round(jobs["held"].count("1") / len(jobs["held"]), 3)


def test_busy_time_is_the_union_of_gpu_activity(tmp_path):
    events = [
        {"ph": "X", "cat": "kernel", "name": "a", "ts": 100.0, "dur": 10.0},
        {"ph": "X", "cat": "kernel", "name": "b", "ts": 105.0, "dur": 10.0},  # overlaps a
        {"ph": "X", "cat": "gpu_memcpy", "name": "c", "ts": 130.0, "dur": 5.0},
        {"ph": "X", "cat": "gpu_memset", "name": "d", "ts": 134.0, "dur": 2.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "ts": 90.0, "dur": 100.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 95.0, "dur": 3.0},
        {"ph": "i", "cat": "kernel", "name": "instant", "ts": 200.0},
        {"ph": "X", "cat": "kernel", "name": "empty", "ts": 300.0, "dur": 0.0},
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    intervals = busy.read_trace(str(path))
    assert len(intervals) == 5
    assert busy.union(intervals) == [(100.0, 115.0), (130.0, 136.0)]
    assert busy.busy_us(intervals) == pytest.approx(21.0)
    path.write_text(json.dumps(events))  # a bare list of events is a trace too
    assert busy.busy_us(busy.read_trace(str(path))) == pytest.approx(21.0)


def test_calibration_picks_the_batch_nearest_each_share(tmp_path):
    shares = {(0.25, 8): 0.05, (0.25, 64): 0.15, (0.25, 128): 0.18,
              (0.5, 32): 0.30, (0.5, 128): 0.55, (1.0, 64): 0.70, (1.0, 128): 0.85}
    path = tmp_path / "calibration.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, calibrate.FIELDS)
        w.writeheader()
        for (width, batch), share in shares.items():
            w.writerow(dict(network="mobilenet_v2", width=width, batch=batch, resolution=224,
                            job_ms=10, busy_ms=10 * share, share=share))
        w.writerow(dict(network="fcn_resnet50", width=1.0, batch=1, resolution=800,
                        job_ms=20, busy_ms=19, share=0.95))
    rows = calibrate.read(str(path))
    picked = calibrate.pick(rows)
    assert picked == {"small-cal": Size("small-cal", 64, 0.25),
                      "medium-cal": Size("medium-cal", 128, 0.5),
                      "large-cal": Size("large-cal", 64, 1.0)}
    assert [(s.batch, s.width) for s in calibrate.candidates()][:2] == [(1, 0.25), (2, 0.25)]
    assert len(calibrate.candidates()) == 3 * len(calibrate.BATCHES)
    table = report.calibration_markdown(rows, picked)
    assert "| mobilenet_v2 | 0.5 | 128 | 224 | 10.0 | 5.5 | 55% | medium-cal |" in table
    assert "| fcn_resnet50 | 1.0 | 1 | 800 | 20.0 | 19.0 | 95% |  |" in table
    with pytest.raises(ValueError, match="width 1.0"):
        calibrate.pick([r for r in rows if r["width"] != 1.0])
    # 6.1c runs only the calibrated sizes that are not the dissertation's.
    assert list(ch6_main.calibrated_sizes(str(path))) == ["small-cal", "medium-cal"]


def test_the_pool_keeps_workers_and_gives_mps_tasks_their_own(tmp_path):
    with open(tmp_path / "log", "w") as log:
        pool = runner.Pool("none", log)
        try:
            small = SIZES["small"]
            w0, fresh = pool.worker(0, Task("a", small))
            assert not fresh and pool.worker(0, Task("b", small, "lock")) == (w0, False)
            w1, _ = pool.worker(1, Task("c", small))
            assert w1 is not w0
            mps, fresh = pool.worker(0, Task("d", small, "mps", mps_percent=25))
            assert fresh and mps is not w0
            mps.quit()
            assert mps.proc.returncode == 0
        finally:
            pool.close()
        assert w0.proc.returncode == 0 and w1.proc.returncode == 0


def test_tasks_get_cores_of_their_own_one_or_more_each(monkeypatch):
    monkeypatch.setattr(runner, "CPUS", list(range(16)))
    # One each: cpu_for()'s, wrapping round past the 15 task cores.
    assert [runner.cpus_for(i) for i in (0, 1, 14, 15)] == [(1,), (2,), (15,), (1,)]
    # Two each: disjoint, never core 0 (the runner's, gpuslotd's).
    cores = [runner.cpus_for(i, 2) for i in range(7)]
    assert cores[0] == (1, 2) and cores[6] == (13, 14)
    assert len(set().union(*cores)) == 14 and 0 not in set().union(*cores)
    with pytest.raises(ValueError, match="task 7 with 2 CPUs each needs 17 CPUs"):
        runner.cpus_for(7, 2)
    # only-graph's 4 tasks fit at 2 each on 16 cores; camera-130's 8 do not.
    only = scenarios.only(graph=True, techniques=("xsched",))
    runner.check_cpus(only, 2)
    cameras = [dataclasses.replace(only[0], tasks=only[0].tasks + tuple(
        dataclasses.replace(t, name=t.name + "-2", measured=False) for t in only[0].tasks))]
    with pytest.raises(ValueError, match="needs 17 CPUs"):
        runner.check_cpus(cameras, 2)
    with pytest.raises(ValueError, match="at least 1"):
        runner.check_cpus(only, 0)


def test_a_worker_runs_on_every_core_it_is_given(tmp_path):
    cores = tuple(sorted(os.sched_getaffinity(0)))[:2]
    with open(tmp_path / "log", "w") as log:
        w = runner.Worker("none", cores, runner.Pool("none", log).env, log)
        try:
            assert set(os.sched_getaffinity(w.proc.pid)) == set(cores)
        finally:
            w.quit()
    assert w.proc.returncode == 0


def test_a_too_large_cpus_per_task_is_refused_before_anything_runs(tmp_path):
    out = tmp_path / "run"
    rc, said = ch6_run("--out", str(out), "--dry-run", "--experiments", "only",
                       "--techniques", "alone", "--cpus-per-task", str(len(runner.CPUS) + 1),
                       check=False)
    # "alone": one task, task 0.
    assert rc != 0 and "--cpus-per-task: task 0 with" in said and "(one for the runner)" in said
    assert not (out / "schedule.json").exists()


# Issue 32: repetitions, interleaving, resume, timing breakdown, stall
# suspects, monitors and the comparison.

from ch6 import compare, monitor, worker  # noqa: E402

GPU_DIR = os.path.dirname(os.path.dirname(HERE))


def ch6_run(*args, commit="c0ffee", check=True):
    """python3 -m ch6 run ARGS as ch6.sh runs it; (exit status, output)."""
    import subprocess
    env = dict(os.environ, PYTHONPATH=GPU_DIR + os.pathsep + os.path.join(REPO, "python"))
    p = subprocess.run([sys.executable, "-m", "ch6", "run", "--commit", commit, *args],
                       cwd=GPU_DIR, env=env, capture_output=True, text=True, timeout=600)
    if check and p.returncode:
        raise AssertionError(f"ch6 run {args}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.returncode, p.stdout + p.stderr


def test_repetitions_are_interleaved_in_seeded_rounds():
    order = runner.interleave(7, 5, seed=32)
    assert len(order) == 35
    # Each round is one repetition of every scenario, in an order of its own.
    rounds = [order[7 * r:7 * (r + 1)] for r in range(5)]
    for r, round_ in enumerate(rounds):
        assert sorted(round_) == [(i, r) for i in range(7)]
    assert len({tuple(i for i, _ in round_) for round_ in rounds}) > 1
    assert [i for i, _ in rounds[0]] != list(range(7))
    assert runner.interleave(7, 5, seed=32) == order
    assert runner.interleave(7, 5, seed=33) != order


def test_issue32_scenarios_carry_the_priority_layouts():
    only = {s.name: s for s in scenarios.only()}
    assert list(only) == list(scenarios.TECHNIQUES)
    assert all(s.technique == s.name for s in only.values())
    reserve = only["gpuslot-prio-reserve"]
    assert reserve.layout.config() == ("[default]\nk = 4\nsizes = all,25%,25%,25%\n"
                                       "priorities = 5,0,0,0\n")
    held = only["gpuslot-prio-held"]
    assert held.layout == reserve.layout and held.tasks[1:] == reserve.tasks[1:]
    assert held.tasks[0].hold and not any(t.hold for t in reserve.tasks)
    assert only["gpuslot-prio-whole"].layout.config() == (
        "[default]\nk = 4\nsizes = all,all,all,all\npriorities = 5,0,0,0\n")
    assert [t.slots for t in reserve.tasks] == [frozenset({0})] + [frozenset({1, 2, 3})] * 3
    earlier = only["gpuslot-partitions"]
    assert earlier.layout.config() == "[default]\nk = 3\nsizes = 50%,25%,25%\n"
    hybrid = only["hybrid"]
    assert hybrid.whole_gpu_slots and hybrid.layout.k == 2
    assert (hybrid.tasks[0].technique, hybrid.tasks[0].stream_priority) == ("priority", -5)
    assert {t.technique for t in hybrid.tasks[1:]} == {"lock"}
    prio = only["stream-priority"]
    assert [t.stream_priority for t in prio.tasks] == [-5, 0, 0, 0]
    assert {t.mps_percent for t in only["mps"].tasks[1:]} == {25}
    assert len(only["alone"].tasks) == 1
    assert not any(t.graph for s in only.values() for t in s.tasks)
    graphs = scenarios.only(graph=True)
    assert {s.experiment for s in graphs} == {"only-graph"}
    assert all(s.tasks[0].graph and not any(t.graph for t in s.tasks[1:]) for s in graphs)
    # The camera pipeline: phase offsets of i/8 of the period; the period
    # from the load.
    period = scenarios.camera_period_s(15.0, 0.85)
    assert period == pytest.approx(8 * 0.015 / 0.85)
    cams = {s.name: s for s in scenarios.camera_load(Size("camera", 1, 1.0, 1280), period,
                                                     "camera-85")}
    unmanaged = cams["unmanaged"]
    assert [t.phase_s for t in unmanaged.tasks] == pytest.approx(
        [period * i / 8 for i in range(8)])
    assert cams["gpuslot-partitions"].layout.percents == (34, 33, 33)
    assert {t.mps_percent for t in cams["mps"].tasks[1:]} == {33}
    for s in list(only.values()) + list(cams.values()):
        assert scenarios.Scenario.from_json(json.loads(json.dumps(s.to_json()))) == s
    with pytest.raises(ValueError, match="priority 16"):
        scenarios.Layout(2, ("all", 50), (16, 0))
    with pytest.raises(ValueError, match="2 priorities for k = 3"):
        scenarios.Layout(3, None, (1, 0))
    with pytest.raises(ValueError, match="'most'"):
        scenarios.Layout(1, ("most",))
    with pytest.raises(ValueError, match="phase"):
        Task("a", SIZES["small"], period_s=0.1, phase_s=0.1)


def test_a_reserve_sweep_names_its_layouts_and_refuses_what_it_cannot_plan():
    """Issue 32's reserve sweep: the layouts with a reserve take another
    one as "@PERCENT"; the competitors' three slots share the rest equally;
    the report orders and judges them as the priority layouts they are."""
    picked = scenarios.only(techniques=("stream-priority", "gpuslot-prio-held@10",
                                        "gpuslot-prio-reserve@40", "gpuslot-prio-reserve"))
    by = {s.name: s for s in picked}
    assert by["gpuslot-prio-held@10"].layout.config() == (
        "[default]\nk = 4\nsizes = all,30%,30%,30%\npriorities = 5,0,0,0\n")
    assert by["gpuslot-prio-held@10"].tasks[0].hold
    assert by["gpuslot-prio-held@10"].technique == "gpuslot-prio-held@10"
    assert by["gpuslot-prio-reserve@40"].layout.percents == ("all", 20, 20, 20)
    assert by["gpuslot-prio-reserve"].layout.percents == ("all", 25, 25, 25)
    assert not any(t.hold for t in by["gpuslot-prio-reserve@40"].tasks)
    for bad, said in (("gpuslot-prio-whole@10", "only gpuslot-prio-reserve and gpuslot-prio-held"),
                      ("mps@10", "take a reserve"), ("gpuslot-prio-held@11", "divisible by 3"),
                      ("gpuslot-prio-held@73", "from 10 to 70"), ("gpuslot-prio-held@", "one of"),
                      ("gpuslot-prio-held@-2", "one of"), ("gpuslot-prio-held@4", "from 10"),
                      ("gpuslot-prio-held@010", "one of"), ("gpuslot-prio-held@\u0661\u0660", "one of"),
                      ("gpuslot-prio-held@\u00b2", "one of"),
                      ("gpuslot-prio-reserve@25", "name it gpuslot-prio-reserve"),
                      ("prio-held", "unknown technique")):
        with pytest.raises(ValueError, match=said):
            scenarios.only(techniques=(bad,))
    with pytest.raises(SystemExit, match="divisible by 3"):
        ch6_main.main(["run", "--out", "/nonexistent", "--dry-run", "--plan",
                       "--techniques", "gpuslot-prio-reserve@11"])
    assert sorted(["gpuslot-prio-held", "gpuslot-prio-reserve@40", "hybrid", "mps",
                   "gpuslot-prio-reserve@10", "gpuslot-prio-reserve", "nonsense"],
                  key=scenarios.technique_order) == [
        "mps", "gpuslot-prio-reserve@10", "gpuslot-prio-reserve", "gpuslot-prio-reserve@40",
        "gpuslot-prio-held", "hybrid", "nonsense"]
    pytest.importorskip("numpy")
    rows = {r["technique"]: r for r in compare.technique_rows(synthetic_runs(
        {"stream-priority": [8, 9, 8.5], "gpuslot-prio-held@10": [6, 6.5, 7]}))}
    held = rows["gpuslot-prio-held@10"]
    assert held["p99_vs_best"] == pytest.approx(6.5 / 8.5, abs=1e-3)
    assert held["bar"].startswith("p99 0.77x best (met <= 0.85)")


def worker_jobs(tmp_path, task, suspects, duration=1.0, cmd_env=None, on_ready=None,
                started=None):
    """Run ``task`` on a none-backend worker with ``suspects`` (and the
    command's ``cmd_env``; ``on_ready()`` called once it is ready; the common
    start, time.time(), appended to ``started``): its jobs and garbage
    collections (lists of dicts) and what it said when ready."""
    import subprocess
    env = dict(os.environ, PYTHONPATH=GPU_DIR)
    p = subprocess.Popen([sys.executable, "-m", "ch6.worker", "none"], cwd=GPU_DIR, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out = str(tmp_path / f"{task.name}-{'-'.join(suspects) or 'quiet'}.csv")
    try:
        assert p.stdout.readline().strip() == "up"
        p.stdin.write(json.dumps(dict(task=task.to_json(), duration=duration, out=out,
                                      env=cmd_env or {},
                                      options=dict(suspects=list(suspects)))) + "\n")
        p.stdin.flush()
        ready = p.stdout.readline()
        assert ready.startswith("ready ")
        if on_ready:
            on_ready()
        start = __import__('time').time() + 0.1
        if started is not None:
            started.append(start)
        p.stdin.write(f"{start}\n")
        p.stdin.flush()
        assert p.stdout.readline().startswith("done ")
        p.stdin.write(json.dumps({"quit": True}) + "\n")
        p.stdin.flush()
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
    with open(out) as f:
        jobs = list(csv.DictReader(f))
    with open(out + ".gc.csv") as f:
        gcs = list(csv.DictReader(f))
    return jobs, gcs, json.loads(ready[len("ready "):])


def test_a_job_records_its_launch_and_its_wait_apart(tmp_path):
    small = SIZES["small"]
    jobs, _, info = worker_jobs(tmp_path, Task("a", small), [], duration=0.5)
    assert (info["spin"], info["gc"], info["poll"]) == (False, False, False)
    assert len(jobs) >= 20
    for j in jobs:
        assert list(j) == ["release_s"] + worker.JOB_FIELDS[1:]
        launch, wait = float(j["launch_ms"]), float(j["wait_ms"])
        # The stand-in launch is 0.2 ms of busy loop; its GPU 2 ms asleep.
        assert 0.2 <= launch
        assert wait >= 2.0
        assert float(j["response_ms"]) >= launch + wait
    # The busy loop is CPU time, unless the thread was preempted in it (one
    # job in a busy host may be): the median job's.
    launch_cpu = sorted(float(j["launch_cpu_ms"]) for j in jobs)
    assert launch_cpu[len(launch_cpu) // 2] >= 0.1
    # A blocking wait costs next to no CPU; a spinning one all of it.
    quiet = sorted(float(j["wait_cpu_ms"]) for j in jobs)
    assert quiet[len(quiet) // 2] < 0.5
    spun, _, info = worker_jobs(tmp_path, Task("a", small), ["spin"], duration=0.5)
    assert info["spin"]
    spin = sorted(float(j["wait_cpu_ms"]) for j in spun)
    assert spin[len(spin) // 2] > 1.5


def test_a_task_that_holds_its_slot_keeps_it_from_its_first_job_to_its_last(tmp_path):
    """Task.hold (issue 32's private slot): one hold for every job. A
    competitor queued for the same slot (an flock, the dry run's lock) from
    the moment the worker is ready gets it only after the worker's last job;
    with per-job locking it gets it at the first release."""
    import fcntl
    import threading
    import time
    lock = tmp_path / "lock"
    lock.mkdir()
    for i in range(2):
        (lock / f"slot{i}").touch()

    def run(hold):
        granted = []

        def compete():
            with open(lock / "slot0", "w") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                granted.append(time.time())
                fcntl.flock(f, fcntl.LOCK_UN)

        competitor = threading.Thread(target=compete)
        started = []
        task = Task("p", SIZES["small"], "lock", slots=frozenset({0}), hold=hold)
        jobs, _, info = worker_jobs(tmp_path, task, [], duration=1.0,
                                    cmd_env={"GPUSLOT_CH6_FAKE_LOCK": str(lock)},
                                    on_ready=competitor.start, started=started)
        competitor.join(timeout=10)
        assert granted and {j["slot"] for j in jobs} == {"0"} and info["slot"] == 0
        # When, from the run's common start, the competitor got slot 0 (the
        # jobs' release_s count from there too).
        return granted[0] - started[0], jobs

    at, jobs = run(hold=True)
    assert len(jobs) >= 20
    last = max(float(j["release_s"]) + float(j["response_ms"]) / 1e3 for j in jobs)
    assert at > last
    at, jobs = run(hold=False)
    assert at < max(float(j["release_s"]) for j in jobs)
    with pytest.raises(ValueError, match="only a task that locks can hold"):
        Task("a", SIZES["small"], "priority", hold=True)


def test_the_collector_is_off_in_the_measured_window_unless_suspected(tmp_path):
    small = SIZES["small"]
    jobs, gcs, _ = worker_jobs(tmp_path, Task("a", small), [], duration=1.5)
    assert gcs == [] and all(float(j["gc_ms"]) == 0 for j in jobs)
    jobs, gcs, info = worker_jobs(tmp_path, Task("a", small), ["gc"], duration=1.5)
    assert info["gc"]
    # Hundreds of jobs allocate enough for the collector to run; each run is
    # logged (when, which generation, how long) and charged to its job.
    assert gcs, "the collector never ran"
    assert all(0 <= float(g["t_s"]) <= 1.6 and g["generation"] in "012" for g in gcs)
    assert sum(float(j["gc_ms"]) for j in jobs) > 0


def test_a_periodic_task_is_released_at_its_phase(tmp_path):
    cam = Task("cam3", Size("camera", 1, 1.0, 64), period_s=0.04, phase_s=0.015)
    jobs, _, _ = worker_jobs(tmp_path, cam, [], duration=0.3)
    releases = [float(j["release_s"]) for j in jobs]
    assert releases[:3] == pytest.approx([0.015, 0.055, 0.095], abs=1e-6)
    assert len(jobs) == 8


def test_the_monitor_reads_every_cpus_steal(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 0 10 100 0 0 0 5 0 0\n"
                    "cpu0 5 0 5 50 0 0 0 2 0 0\ncpu1 5 0 5 50 0 0 0 3 0 0\nintr 1\n")
    before = monitor.read_stat(str(stat))
    assert before == {0: (5, 0, 5, 50, 0, 0, 0, 2), 1: (5, 0, 5, 50, 0, 0, 0, 3)}
    stat.write_text("cpu0 6 0 5 59 0 0 0 2 0 0\ncpu1 5 0 5 50 0 0 0 13 0 0\n")
    after = monitor.read_stat(str(stat))
    assert monitor.deltas(before, after) == {0: (1, 0, 0, 9, 0, 0, 0, 0),
                                             1: (0, 0, 0, 0, 0, 0, 0, 10)}
    assert len(monitor.read_stat()) == len(os.sched_getaffinity(0)) or \
        len(monitor.read_stat()) >= 1


def test_a_monitor_stopped_at_once_has_its_file_and_a_sample(tmp_path):
    # A run shorter than the monitor's start (a dry run on a loaded
    # machine) once left no cpu.csv: the stop killed it before it had one.
    with open(tmp_path / "log", "w") as log:
        m = runner.Monitors(str(tmp_path), {"steal"}, log)
        m.stop()
    with open(tmp_path / "cpu.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= len(monitor.read_stat()) >= 1
    assert m.procs[0].returncode == 0


def test_steal_is_counted_on_the_measured_tasks_cores_one_or_several(tmp_path):
    fields = ",".join(monitor.FIELDS)
    zeros = ",".join("0" for _ in monitor.FIELDS[:-1])    # steal is the last
    with open(tmp_path / "cpu.csv", "w") as f:
        f.write(f"t_s,cpu,{fields}\n")
        for cpu, steal in ((1, 3), (2, 5), (3, 7)):
            f.write(f"100.5,{cpu},{zeros},{steal}\n")
    tasks = [dict(name="front", measured=True), dict(name="other", measured=False)]
    for cores, mine in (({"front": 1, "other": 3}, 3),            # before --cpus-per-task
                        ({"front": [1, 2], "other": [3]}, 8)):     # since
        info = dict(start=100.0, duration=1.0, scenario=dict(tasks=tasks),
                    cpus=dict(housekeeping=0, tasks=cores))
        out = compare.run_monitors(str(tmp_path), info)
        assert out["steal_jiffies"] == 15 and out["steal_jiffies_task_cpu"] == mine


def test_stall_moments_are_shared_by_two_tasks():
    def job(task, t, ms):
        return dict(task=task, release_s=str(t), response_ms=ms)
    rows = [job("a", i * 0.01, 5.0) for i in range(100)]
    rows += [job("b", i * 0.01, 7.0) for i in range(100)]
    rows += [job("a", 0.5, 30.0), job("b", 0.55, 40.0),   # a shared stall
             job("a", 0.8, 30.0)]                          # one task only
    assert compare.stall_moments(rows) == [0.5]


def synthetic_runs(p99s, jobs_per_s=None, misses=None, experiment="only"):
    out = []
    for t, values in p99s.items():
        for rep, v in enumerate(values):
            out.append(dict(experiment=experiment, technique=t, rep=rep, p50=v / 2,
                            p95=v * 0.9, p99=v,
                            competitor_jobs_per_s=(jobs_per_s or {}).get(t, 100.0),
                            others_misses=(misses or {}).get(t, 0), launch_ms=1.0,
                            wait_ms=1.0, wait_cpu_ms=0.0, stall_moments=0))
    return out


def test_throughput_counts_a_backlog_worked_off_after_the_end():
    """A periodic competitor's jobs are its releases: over capacity they end
    late, and its throughput is jobs over the time until the last one ends."""
    from ch6 import compare
    on_time = [dict(release_s=i * 0.1, response_ms=20.0) for i in range(100)]
    assert compare.jobs_per_s(on_time, 10.0) == pytest.approx(10.0)
    late = [dict(release_s=i * 0.1, response_ms=20.0 + i * 50.0) for i in range(100)]
    # The last release at 9.9 s ends 4.97 s later.
    assert compare.jobs_per_s(late, 10.0) == pytest.approx(100 / (9.9 + 4.97))
    assert compare.jobs_per_s([], 10.0) == 0.0


def test_the_comparison_takes_the_best_alternative_and_states_the_bar():
    pytest.importorskip("numpy")
    runs = synthetic_runs({"unmanaged": [30, 31, 29, 35, 33],
                           "stream-priority": [8, 9, 8.5, 10, 7],
                           "mps": [14, 13, 15, 12, 16],
                           "gpuslot-prio-reserve": [6, 6.5, 7, 6.2, 6.1],
                           "gpuslot-prio-whole": [8, 8.1, 8.2, 9, 8.4]},
                          jobs_per_s={"stream-priority": 100.0, "gpuslot-prio-reserve": 95.0,
                                      "gpuslot-prio-whole": 80.0})
    rows = {r["technique"]: r for r in compare.technique_rows(runs)}
    assert {r["best_alternative"] for r in rows.values()} == {"stream-priority"}
    reserve = rows["gpuslot-prio-reserve"]
    assert reserve["p99"] == 6.2 and reserve["p99_lo"] <= 6.2 <= reserve["p99_hi"]
    assert reserve["p99_vs_best"] == pytest.approx(round(6.2 / 8.5, 3))
    assert reserve["p99_vs_best_lo"] <= reserve["p99_vs_best"] <= reserve["p99_vs_best_hi"]
    assert reserve["throughput_vs_priority"] == 0.95
    assert reserve["bar"] == ("p99 0.73x best (met <= 0.85); throughput 0.95x stream "
                              "priorities (met >= 0.9)")
    whole = rows["gpuslot-prio-whole"]
    assert whole["bar"].startswith("p99 0.96x best (missed <= 0.85); throughput 0.80x")
    assert "missed >= 0.9" in whole["bar"]
    assert "bar" not in rows["mps"]
    # The interval is the bootstrap's, seeded: the same every time.
    again = {r["technique"]: r for r in compare.technique_rows(runs)}
    assert again["gpuslot-prio-reserve"] == reserve
    # Under capacity the other cameras' misses count too.
    cam = synthetic_runs({"stream-priority": [40, 41, 42], "gpuslot-prio-reserve": [30, 31, 29]},
                         misses={"stream-priority": 2, "gpuslot-prio-reserve": 5},
                         experiment="camera-85")
    r = {x["technique"]: x for x in compare.technique_rows(cam)}["gpuslot-prio-reserve"]
    assert r["bar"].endswith("others' misses 5 vs 2 (missed)")
    over = synthetic_runs({"stream-priority": [40], "gpuslot-prio-reserve": [30]},
                          misses={"gpuslot-prio-reserve": 5}, experiment="camera-130")
    assert "misses" not in compare.technique_rows(over)[1]["bar"]


def test_a_dry_run_interleaves_resumes_and_reports(tmp_path):
    pytest.importorskip("numpy")
    out = str(tmp_path / "run")
    common = ["--out", out, "--dry-run"]
    # The first call runs four of the 18 repetitions.
    ch6_run(*common, "--reps", "2", "--duration", "0.25", "--experiments", "only,camera",
            "--techniques", "unmanaged,stream-priority,gpuslot-prio-reserve", "--cameras", "3",
            "--camera-loads", "85,130", "--camera-duration", "0.35", "--max-runs", "4")
    with open(os.path.join(out, "schedule.json")) as f:
        meta = json.load(f)
    assert len(meta["scenarios"]) == 9 and meta["reps"] == 2
    assert meta["commit"] == "c0ffee" and meta["seed"] == 32
    assert [tuple(x) for x in meta["order"]] == runner.interleave(9, 2, 32)
    with open(os.path.join(out, "order.csv")) as f:
        assert len(list(csv.DictReader(f))) == 18
    done = [json.loads(x) for x in open(os.path.join(out, "done.jsonl"))]
    assert [d["run"] for d in done] == [0, 1, 2, 3]
    # A new run into the same OUT, or a resume from another commit, is refused.
    rc, said = ch6_run(*common, check=False)
    assert rc != 0 and "--resume" in said
    rc, said = ch6_run(*common, "--resume", commit="badc0de", check=False)
    assert rc != 0 and "started at commit c0ffee" in said and "badc0de" in said
    # A budget too short for the next repetition runs nothing.
    rc, said = ch6_run(*common, "--resume", "--budget", "0.1")
    assert "14 of 18 runs pending" in said
    assert len(open(os.path.join(out, "done.jsonl")).readlines()) == 4
    ch6_run(*common, "--resume")
    done = [json.loads(x) for x in open(os.path.join(out, "done.jsonl"))]
    assert [d["run"] for d in done] == list(range(18))
    assert {d["call"] for d in done} == {0, 1}
    assert not any(d["failed"] for d in done)
    # Every repetition of every scenario ran once, in the schedule's order.
    assert sorted((d["scenario_index"], d["rep"]) for d in done) == \
        sorted(runner.interleave(9, 2, 32))
    rows = report.read_jobs(os.path.join(out, "jobs.csv"))
    assert {int(r["run"]) for r in rows} == set(range(18))
    # The monitors sampled every CPU in every run.
    for n in range(18):
        with open(os.path.join(out, "runs", str(n), "cpu.csv")) as f:
            assert len(list(csv.DictReader(f))) >= len(runner.CPUS)
        with open(os.path.join(out, "runs", str(n), "info.json")) as f:
            info = json.load(f)
        assert all(info["cpus"]["housekeeping"] not in cores
                   for cores in info["cpus"]["tasks"].values()) or len(runner.CPUS) == 1
        assert info["duration"] == (0.35 if info["scenario"]["experiment"].startswith("camera")
                                    else 0.25)
    report.write_report(out)
    with open(os.path.join(out, "techniques.csv")) as f:
        techs = list(csv.DictReader(f))
    assert {(t["experiment"], t["technique"]) for t in techs} == {
        (e, t) for e in ("only", "camera-85", "camera-130")
        for t in ("unmanaged", "stream-priority", "gpuslot-prio-reserve")}
    assert all(t["reps"] == "2" and float(t["p99_lo"]) <= float(t["p99"]) <= float(t["p99_hi"])
               for t in techs)
    with open(os.path.join(out, "runs.csv")) as f:
        assert len(list(csv.DictReader(f))) == 18
    tables = open(os.path.join(out, "tables.md")).read()
    assert "### issue 32: 18 of 18 runs done, 2 repetitions x 0.25 s, commit c0ffee" in tables
    assert "period 6.4 ms" not in tables and "85 % of the GPU offered" in tables
    assert "| gpuslot-prio-reserve | 2 |" in tables and "p99 " in tables


def test_ch6_sh_runs_one_run_in_two_calls(tmp_path):
    """ch6.sh as the lead runs it on the GPU host, with --dry-run: the first
    call stops after two repetitions, the second resumes at the same commit
    and the report covers both."""
    import subprocess
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    out = tmp_path / "out"
    script = os.path.join(GPU_DIR, "ch6.sh")
    env = dict(os.environ, GPUSLOT_COMMIT="feedbee")
    common = ["--dry-run"]
    first = subprocess.run([script, str(bundle), str(out), "only", "0.2", *common, "--reps", "2",
                            "--techniques", "unmanaged,gpuslot-prio-whole", "--max-runs", "2"],
                           env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 of 4 runs pending: go on with --resume" in first.stdout
    second = subprocess.run([script, str(bundle), str(out), "--resume", *common], env=env,
                            capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "0 of 4 runs pending" in second.stdout
    env_txt = (out / "env.txt").read_text()
    assert env_txt.count("== call at") == 2 and "commit feedbee" in env_txt
    assert "### issue 32: 4 of 4 runs done, 2 repetitions x 0.2 s, commit feedbee" in \
        (out / "tables.md").read_text()
    other = subprocess.run([script, str(bundle), str(out), "--resume", *common],
                           env=dict(env, GPUSLOT_COMMIT="0ther"), capture_output=True,
                           text=True, timeout=300)
    assert other.returncode != 0 and "started at commit feedbee" in other.stderr + other.stdout


def test_a_repetition_is_estimated_from_what_ran(tmp_path):
    picked = scenarios.only(techniques=("unmanaged", "stream-priority"))
    s = runner.Schedule.create(str(tmp_path), picked, 2, 32, 10.0, "torch", (), "c", "f")
    first = s.order[0][0]
    other = 1 - first
    assert s.estimate_s(0, []) == 40.0
    assert s.estimate_s(0, [], fresh_workers=True) == 70.0
    done = [dict(scenario_index=other, elapsed_s=14.0, failed=False)]
    assert s.estimate_s(0, done) == 14.0            # duration + the overhead seen
    done.append(dict(scenario_index=first, elapsed_s=2.0, failed=True))
    assert s.estimate_s(0, done) == 14.0            # a failed run says nothing
    done.append(dict(scenario_index=first, elapsed_s=12.5, failed=False))
    assert s.estimate_s(0, done) == 12.5            # this scenario's own
    with pytest.raises(SystemExit, match="--resume"):
        runner.Schedule.create(str(tmp_path), picked, 2, 32, 10.0, "torch", (), "c", "f")


def test_preemptive_layouts_and_xsched_scenarios():
    """Issue 40's techniques: XSched's processes get its stand-in libcuda
    and their priorities; gpuslot-run's the slot they may take, the hold
    policy and the in-flight bound."""
    camera = Size("camera", 1, 1.0, 1280)
    names = ("xsched", "gpuslot-run-held", "gpuslot-preempt", "gpuslot-preempt-whole")
    by_name = {s.technique: s for s in scenarios.camera_load(camera, 0.1, "camera-130",
                                                              techniques=names)}
    assert set(by_name) == set(names)
    x = by_name["xsched"]
    assert x.layout is None
    assert [t.xsched_priority for t in x.tasks] == [1] + [0] * 7
    held, pre, whole = (by_name[n] for n in names[1:])
    for s in (held, pre, whole):
        assert s.tasks[0].hold and s.tasks[0].slots == frozenset({0})
        assert all(t.technique == "run" and not t.hold and t.slots == frozenset({1, 2, 3})
                   for t in s.tasks[1:])
        assert s.layout.priorities == (scenarios.HIGH_SLOT_PRIORITY, 0, 0, 0)
    assert {t.preempt for t in held.tasks[1:]} == {False}
    assert {t.preempt for t in pre.tasks[1:]} == {True}
    assert {t.inflight for t in pre.tasks[1:]} == {scenarios.PREEMPT_INFLIGHT}
    assert pre.layout.percents == ("all", 25, 25, 25)
    assert whole.layout.percents == ("all",) * 4
    # Each survives the schedule's JSON.
    for s in by_name.values():
        assert scenarios.Scenario.from_json(json.loads(json.dumps(s.to_json()))) == s


def test_the_packages_preemptive_layout_gates_every_task():
    """gpuslot-pkg-preempt: gpuslot-preempt's layout through the Python
    package: every task locks and passes the launch gate, the priority task
    holding slot 0, the competitors bounded; a gate outside a lock is
    refused, and a schedule written before the gate reads as ungated."""
    (pkg,) = scenarios.only(graph=True, techniques=("gpuslot-pkg-preempt",))
    front, *rest = pkg.tasks
    assert front.technique == "lock" and front.hold and front.gate and front.graph
    assert front.slots == frozenset({0})
    assert all(t.technique == "lock" and t.gate and not t.hold and
               t.inflight == scenarios.PREEMPT_INFLIGHT and t.slots == frozenset({1, 2, 3})
               for t in rest)
    assert pkg.layout.percents == ("all", 25, 25, 25)
    assert pkg.layout.priorities == (scenarios.HIGH_SLOT_PRIORITY, 0, 0, 0)
    assert scenarios.Scenario.from_json(json.loads(json.dumps(pkg.to_json()))) == pkg
    with pytest.raises(ValueError, match="launch gate"):
        dataclasses.replace(front, technique="unmanaged", hold=False)
    old = front.to_json()
    del old["gate"]
    assert not Task.from_json(old).gate


def test_launchers_of_xsched_and_gpuslot_run(tmp_path, monkeypatch):
    os.makedirs(tmp_path / "bin")
    (tmp_path / "bin" / "xserver").write_text("")
    monkeypatch.setenv("CH6_XSCHED_DIR", str(tmp_path))
    t = Task("front", SIZES["medium"], "xsched", xsched_priority=1, inflight=4)
    env = runner.xsched_env({"LD_LIBRARY_PATH": "/x"}, t)
    assert env["LD_LIBRARY_PATH"] == f"{tmp_path}/lib:/x"
    assert env["XSCHED_AUTO_XQUEUE_PRIORITY"] == "1"
    assert env["XSCHED_AUTO_XQUEUE_THRESHOLD"] == "4"
    assert env["XSCHED_SCHEDULER"] == "GLB"
    monkeypatch.setenv("CH6_GPUSLOT_RUN", "/b/gpuslot-run")
    r = Task("cam1", SIZES["medium"], "run", slots=frozenset({3, 1}), inflight=4)
    assert runner.gpuslot_run_launcher(r) == ["/b/gpuslot-run", "--slots", "1,3",
                                              "--per-sync", "--inflight", "4", "--"]
    h = Task("front", SIZES["medium"], "run", slots=frozenset({0}), hold=True)
    assert runner.gpuslot_run_launcher(h)[3] == "--hold"
    off = dataclasses.replace(r, preempt=False)
    assert runner.gpuslot_run_launcher(off)[3:] == ["--per-sync", "--no-preempt", "--"]
    # A schedule of before --inflight's present meaning: inflight 0 was off.
    old = dict(r.to_json(), inflight=0, window=0)
    del old["preempt"]
    assert not Task.from_json(old).preempt
    assert Task.from_json(dict(old, inflight=4)).preempt
    monkeypatch.delenv("CH6_XSCHED_DIR")
    with pytest.raises(RuntimeError, match="CH6_XSCHED_DIR"):
        runner.xsched_env({}, t)
    with pytest.raises(ValueError, match="inflight"):
        Task("bad", SIZES["medium"], "run", inflight=-1)
