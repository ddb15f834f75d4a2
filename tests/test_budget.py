"""The per-process time budget: PhaseClock's phases, budget_table's rows, the budget each
trial unit of a sweep records, scripts/process_budget.py, and the cached NVML handle."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from attn_analysis import record
from attn_analysis.analyse.process_budget import BUDGET_COLUMNS, budget_table
from attn_analysis.measure import budget, machine
from attn_analysis.measure.budget import PHASES, PhaseClock

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ PhaseClock

class _FakeTime:
    """time.time and time.perf_counter moved by hand (both advance together)."""

    def __init__(self, wall=1_000.0, perf=50.0):
        self.wall, self.perf = wall, perf

    def advance(self, s):
        self.wall += s
        self.perf += s

    def time(self):
        return self.wall

    def perf_counter(self):
        return self.perf


@pytest.fixture
def clock_time(monkeypatch):
    fake = _FakeTime()
    monkeypatch.setattr(budget, "time", fake)
    return fake


def test_phases_are_summed_and_start_is_charged_from_the_spawn(clock_time):
    clock = PhaseClock(spawned_at=clock_time.wall - 2.0)
    assert clock.seconds == {"start": 2.0}
    with clock.phase("build"):
        clock_time.advance(0.5)
    clock_time.advance(1.0)  # outside any phase: "other"
    with clock.phase("check"):
        clock_time.advance(0.25)
    with clock.phase("build"):
        clock_time.advance(0.25)
    rec = clock.as_record()
    assert rec == {"wall_s": 4.0, "phases_s": {"start": 2.0, "build": 0.75, "check": 0.25},
                   "other_s": 1.0}


def test_without_spawn_time_start_is_zero_and_wall_counts_from_construction(clock_time):
    clock = PhaseClock()
    assert clock.spawned_at == clock_time.wall
    clock_time.advance(3.0)
    assert clock.as_record() == {"wall_s": 3.0, "phases_s": {"start": 0.0}, "other_s": 3.0}


def test_record_lists_phases_in_phases_order_and_rounds(clock_time):
    clock = PhaseClock(spawned_at=clock_time.wall)
    for name, s in (("write", 0.123456), ("import", 0.2), ("timing", 1e-5)):
        with clock.phase(name):
            clock_time.advance(s)
    rec = clock.as_record()
    assert list(rec["phases_s"]) == ["start", "import", "timing", "write"]
    assert rec["phases_s"]["write"] == 0.1235 and rec["phases_s"]["timing"] == 0.0
    assert rec["wall_s"] == pytest.approx(0.3235, abs=1e-4)
    assert rec["other_s"] == 0.0


def test_a_phase_that_raises_is_still_charged(clock_time):
    clock = PhaseClock(spawned_at=clock_time.wall)
    with pytest.raises(KeyError):
        with clock.phase("lock"):
            clock_time.advance(0.5)
            raise KeyError("boom")
    assert clock.seconds["lock"] == 0.5


def test_unknown_phase_is_refused_and_charges_nothing(clock_time):
    clock = PhaseClock(spawned_at=clock_time.wall)
    with pytest.raises(ValueError, match=r"`name` must be one of .*'start'.*got 'compile'"):
        with clock.phase("compile"):
            clock_time.advance(1.0)
    assert clock.seconds == {"start": 0.0}
    assert "other" not in PHASES and "wall" not in PHASES and PHASES[0] == "start"


def test_real_clock_reports_a_positive_consistent_budget():
    import time
    clock = PhaseClock(spawned_at=time.time() - 0.05)
    with clock.phase("timing"):
        time.sleep(0.01)
    rec = clock.as_record()
    assert rec["phases_s"]["start"] >= 0.05 and rec["phases_s"]["timing"] >= 0.01
    assert rec["wall_s"] >= rec["phases_s"]["start"] + rec["phases_s"]["timing"] - 2e-4
    assert rec["other_s"] >= 0


# ------------------------------------------------------------------ budget_table

def _b(wall, other, **phases):
    return {"wall_s": wall, "phases_s": phases, "other_s": other}


def test_budget_table_rows_counts_and_shares():
    table = budget_table([_b(10.0, 6.0, start=1.0, build=3.0),
                          _b(20.0, 9.0, start=2.0, ceilings=4.0, build=5.0)])
    assert tuple(table.columns) == BUDGET_COLUMNS
    assert list(table["phase"]) == ["start", "build", "ceilings", "other", "wall"]
    rows = table.set_index("phase")
    assert list(table["processes"]) == [2, 2, 1, 2, 2]
    # a phase a process never entered counts 0 s for it
    assert rows.loc["ceilings", "median_s"] == 2.0 and rows.loc["ceilings", "mean_s"] == 2.0
    assert rows.loc["ceilings", "max_s"] == 4.0
    assert rows.loc["build", "median_s"] == 4.0 and rows.loc["build", "max_s"] == 5.0
    assert rows.loc["start", "share"] == pytest.approx(3 / 30)
    assert rows.loc["build", "share"] == pytest.approx(8 / 30)
    assert rows.loc["ceilings", "share"] == pytest.approx(4 / 30)
    assert rows.loc["other", "share"] == pytest.approx(15 / 30)
    assert rows.loc["wall", "share"] == 1.0
    assert rows.loc["wall", "median_s"] == 15.0 and rows.loc["wall", "max_s"] == 20.0
    # shares of the phases and other add up to the wall when the budgets are consistent
    assert table["share"].iloc[:-1].sum() == pytest.approx(1.0)


def test_budget_table_of_one_process_and_of_an_iterator():
    one = budget_table(iter([_b(2.0, 0.5, start=0.5, timing=1.0)]))
    assert list(one["phase"]) == ["start", "timing", "other", "wall"]
    assert list(one["processes"]) == [1, 1, 1, 1]
    assert list(one["share"]) == [0.25, 0.5, 0.25, 1.0]


def test_budget_table_of_recorded_clocks(monkeypatch):
    fake = _FakeTime()
    monkeypatch.setattr(budget, "time", fake)
    records = []
    for build_s in (1.0, 3.0):
        clock = PhaseClock(spawned_at=fake.wall - 1.0)
        with clock.phase("build"):
            fake.advance(build_s)
        fake.advance(0.5)
        records.append(clock.as_record())
    rows = budget_table(records).set_index("phase")
    assert rows.loc["build", "mean_s"] == 2.0
    assert rows.loc["wall", "max_s"] == 4.5 and rows.loc["other", "mean_s"] == 0.5


@pytest.mark.parametrize("budgets, message", [
    ([], "at least one process's budget"),
    ([{"wall_s": 1.0, "phases_s": {}}], r"`budgets\[0\]` must be a dict with wall_s"),
    ([_b(1.0, 0.0), "not a budget"], r"`budgets\[1\]` must be a dict"),
    ([_b(1.0, 0.0), None], r"`budgets\[1\]`"),
    ([_b(-1.0, 0.0)], "`wall_s` must be a number"),
    ([_b(0.0, 0.0)], "`wall_s` must be a number"),
    ([_b(float("nan"), 0.0)], "`wall_s` must be a number"),
    ([_b("3", 0.0)], "`wall_s` must be a number"),
])
def test_budget_table_refuses_empty_or_malformed_input(budgets, message):
    with pytest.raises(ValueError, match=message):
        budget_table(budgets)


# ------------------------------------------------------------------ scripts/process_budget.py

def _script():
    path = ROOT / "scripts" / "process_budget.py"
    spec = importlib.util.spec_from_file_location("script_process_budget", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trial_unit(trial, budget_record=None):
    unit = {"kind": "trial", "trial": trial,
            "fingerprint": {"fingerprint_hash": "abc", "device_kind": "cpu"}}
    if budget_record is not None:
        unit["budget"] = budget_record
    return unit


def _table_rows(text):
    """The data rows of the first Markdown table in ``text``, as lists of cells."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]


def test_script_prints_a_markdown_table_and_counts_processes_without_budget(tmp_path, capsys):
    run = tmp_path / "run"
    record.write_unit(run, _trial_unit(0, _b(10.0, 6.0, start=1.0, build=3.0)))
    record.write_unit(run, _trial_unit(1, _b(20.0, 9.0, start=2.0, ceilings=4.0, build=5.0)))
    record.write_unit(run, _trial_unit(2))  # measured before budgets were recorded
    assert _script().main([str(run)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"## {run}: 2 processes with a budget (1 without)"
    assert "| phase | processes | median s | mean s | max s | share of wall |" in out
    assert _table_rows(out) == [
        ["start", "2", "1.50", "1.50", "2.00", "10.0%"],
        ["build", "2", "4.00", "4.00", "5.00", "26.7%"],
        ["ceilings", "1", "2.00", "2.00", "4.00", "13.3%"],
        ["other", "2", "7.50", "7.50", "9.00", "50.0%"],
        ["wall", "2", "15.00", "15.00", "20.00", "100.0%"]]


def test_script_without_budgets_prints_no_table_and_without_runs_prints_usage(tmp_path,
                                                                               capsys):
    run = tmp_path / "old"
    record.write_unit(run, _trial_unit(0))
    script = _script()
    assert script.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"## {run}: 0 processes with a budget (1 without)"
    assert script.main([]) == 2
    assert "Usage: python scripts/process_budget.py RUN_DIR" in capsys.readouterr().err


# ------------------------------------------------------------------ a CPU sweep's budgets

@pytest.fixture(scope="module")
def controls_sweep(tmp_path_factory):
    """The CPU sweep of sdpa and the sparse spin control through the command line."""
    out = tmp_path_factory.mktemp("budget") / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    proc = subprocess.run(
        [sys.executable, "-m", "attn_analysis", "sweep", "--out", str(out), "--device", "cpu",
         "--shape", "2,2,64", "--samples", "3", "--placements", "2", "--trials", "2",
         "--plugin", "attn_analysis.measure.controls", "--candidates", "sdpa", "sdpa_spin1000e3",
         "--no-kernel-times", "--quiet"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_each_trial_unit_of_a_sweep_records_its_budget(controls_sweep):
    run = controls_sweep
    assert record.verify(run) == []
    paths = record.journal_paths(run, "trial")
    assert [p.name for p in paths] == ["trial__t0.json", "trial__t1.json"]
    for path in paths:
        unit = record.read_unit(path)
        b = unit["budget"]
        assert set(b) == {"wall_s", "phases_s", "other_s"}
        assert b["wall_s"] > 0 and b["other_s"] >= 0
        assert set(b["phases_s"]) <= set(PHASES)
        assert list(b["phases_s"]) == [p for p in PHASES if p in b["phases_s"]]
        # what every trial process does on a CPU sweep
        for phase in ("start", "journal", "import", "lock", "fingerprint", "build", "check",
                      "warmup", "placement", "timing", "state", "write"):
            assert phase in b["phases_s"], (path.name, phase)
        assert b["phases_s"]["timing"] > 0 and b["phases_s"]["start"] > 0
        assert sum(b["phases_s"].values()) <= b["wall_s"] + 1e-3 * len(b["phases_s"])
    # the ceilings are measured by trial 0 only
    assert "ceilings" in record.read_unit(paths[0])["budget"]["phases_s"]
    assert "ceilings" not in record.read_unit(paths[1])["budget"]["phases_s"]
    # the sparse spin control was timed in both processes
    units = record.load(run).units
    timed = units[units["status"] == "ok"]
    assert set(timed["candidate"]) == {"sdpa", "sdpa_spin1000e3"}
    assert set(timed["trial"]) == {0, 1}


@pytest.mark.slow  # reads the sweep above
def test_process_budget_script_tables_the_sweep(controls_sweep, capsys):
    run = controls_sweep
    assert _script().main([str(run)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"## {run}: 2 processes with a budget"
    rows = _table_rows(out)
    budgets = [record.read_unit(p)["budget"] for p in record.journal_paths(run, "trial")]
    assert [r[0] for r in rows] == list(budget_table(budgets)["phase"])
    assert rows[-2][0] == "other" and rows[-1][0] == "wall"
    assert rows[-1][1:2] == ["2"] and rows[-1][-1] == "100.0%"
    assert {r[0]: r[1] for r in rows}["ceilings"] == "1"
    assert float(rows[-1][4]) == pytest.approx(max(b["wall_s"] for b in budgets), abs=0.006)


# ------------------------------------------------------------------ cached NVML handle

class _CountingNVML:
    """pynvml stand-in counting its handle look-ups (by UUID, and by index)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, uuid_finds=True):
        self.uuid_finds = uuid_finds
        self.by_uuid, self.by_index = [], []

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self.by_uuid.append(uuid)
        if not self.uuid_finds:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return f"handle:{uuid}"

    def nvmlDeviceGetHandleByIndex(self, index):
        self.by_index.append(index)
        return f"handle#{index}"

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return {1: 1500, 2: 6251}[kind]

    def nvmlDeviceGetTemperature(self, handle, kind):
        return 60

    def nvmlDeviceGetPowerUsage(self, handle):
        return 100_000 if handle.startswith("handle:GPU-uuid-1") else 50_000


@pytest.fixture
def fake_gpu(monkeypatch):
    """A fake CUDA device 0 (uuid-0) or 1 (uuid-1) and an empty handle cache."""
    device = {"index": 0}
    monkeypatch.setattr(machine, "_handles", {})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: device["index"])
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: types.SimpleNamespace(uuid=f"uuid-{i}"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return device


def test_nvml_handle_is_looked_up_once_per_device(monkeypatch, fake_gpu):
    nv = _CountingNVML()
    monkeypatch.setattr(machine, "_nvml", lambda: nv)
    for _ in range(3):
        state = machine.gpu_state()
        assert state["sm_clock_mhz"] == 1500 and state["power_draw_w"] == 50.0
    assert nv.by_uuid == ["GPU-uuid-0"] and nv.by_index == []
    fake_gpu["index"] = 1  # another current device: its own look-up, then cached
    assert machine.gpu_state()["power_draw_w"] == 100.0
    assert machine.gpu_state()["power_draw_w"] == 100.0
    assert nv.by_uuid == ["GPU-uuid-0", "GPU-uuid-1"]
    fake_gpu["index"] = 0
    assert machine.gpu_state()["power_draw_w"] == 50.0
    assert len(nv.by_uuid) == 2
    other = _CountingNVML()  # another NVML module object: not its cache
    monkeypatch.setattr(machine, "_nvml", lambda: other)
    machine.gpu_state()
    assert other.by_uuid == ["GPU-uuid-0"]


def test_nvml_index_fallback_is_cached_and_a_miss_is_not(monkeypatch, fake_gpu):
    nv = _CountingNVML(uuid_finds=False)
    monkeypatch.setattr(machine, "_nvml", lambda: nv)
    machine.gpu_state()
    machine.gpu_state()
    assert nv.by_uuid == ["GPU-uuid-0"] and nv.by_index == [0]  # found by index, cached
    # under CUDA_VISIBLE_DEVICES an index is not NVML's: no fallback, no handle, no cache
    monkeypatch.setattr(machine, "_handles", {})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert machine.gpu_state()["sm_clock_mhz"] is None
    assert machine.gpu_state()["sm_clock_mhz"] is None
    assert nv.by_uuid == ["GPU-uuid-0"] * 3 and nv.by_index == [0]
    assert machine._handles == {}


def test_no_nvml_gives_no_handle_and_caches_nothing(monkeypatch, fake_gpu):
    monkeypatch.setattr(machine, "_nvml", lambda: None)
    assert machine._nvml_handle() == (None, None)
    assert machine._handles == {}
