# SPDX-License-Identifier: GPL-2.0
"""The part of the chapter-6 experiments that needs no GPU: task and
scenario definitions, statistics, running scenarios (none backend,
against a gpuslotd on its socket transport) and the report."""

import csv
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
    log = (tmp_path / "run.log").read_text()
    no_parts = log[log.index("== 6.1: small/k=2 no partitions"):log.index("== 6.1: small/k=2 partitions")]
    assert "A slot 0  whole GPU" in no_parts and "B slot 1  whole GPU" in no_parts
    parts = log[log.index("== 6.1: small/k=2 partitions"):]
    assert "A slot 0  30 CUs" in parts


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
