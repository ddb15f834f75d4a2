"""The scripts kept under ``benchmarks/``: the analysis scripts beside the recorded runs of
the README's GPU command (``benchmarks/readme-command/*.py``: they read run folders as the
sweep records them, and the tables recorded there, ``first_sample.txt`` and
``run_spread_new.txt``, come from them), and the one-off probes moved there with the data
they produced (``benchmarks/readme-command/probes/``, ``benchmarks/startup-probe/``,
``benchmarks/triton-kernel/``): each imports without a GPU and checks its arguments before
touching one."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from attn_analysis import record
from conftest import copy_run, make_timing_unit

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "benchmarks" / "readme-command"
PROBES = TOOLS / "probes"
BENCHMARK_SCRIPTS = sorted((ROOT / "benchmarks").rglob("*.py"))


def load(name: str | Path):
    """Import a benchmarks script as a module (``name`` relative to ``TOOLS``, or a path)."""
    path = TOOLS / name
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_moved_probes_are_here():
    names = {p.name for p in BENCHMARK_SCRIPTS}
    assert {"cold_start_probe.py", "fork_after_import_probe.py", "prebuild_probe.py",
            "profile_calls_probe.py", "settle_replays_probe.py", "sweep_cost_probe.py",
            "trial_overhead_probe.py", "startup_probe.py", "kernel_explore.py"} <= names


@pytest.mark.parametrize("path", BENCHMARK_SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_benchmarks_script_imports_without_a_gpu(path):
    if "triton" in path.read_text():
        pytest.importorskip("triton")
    assert load(path).__name__ == f"bench_{path.stem}"


def _placement(index, times, calls, sized):
    return {"placement": index, "times_ms": list(times), "timing": {"calls_per_sample": calls},
            "elapsed_s": 0.1, "calls_per_sample_sized": sized}


def test_first_sample_groups_graph_placements_by_kind_and_graph_size(tmp_path):
    tool = load("first_sample.py")
    run = tmp_path / "run"
    # a long call (one a replay): sized, then told; a short one: sized, then two told
    long = make_timing_unit(candidate="sdpa_math", times=())
    long["placements"] = [_placement(0, (1.1, 1.0, 1.0, 1.0, 1.0), 1, True),
                          _placement(1, (1.3, 1.02, 1.0, 1.0, 1.0), 1, False)]
    short = make_timing_unit(candidate="sdpa", times=())
    short["placements"] = [_placement(0, (1.2, 1.0, 1.0), 40, True),
                           _placement(1, (1.0, 1.0, 1.0), 40, False),
                           _placement(2, (2.0, 1.0, 1.0), 40, False)]
    other_mode = make_timing_unit(candidate="sdpa", mode="per_call", times=())
    other_mode["placements"] = [_placement(0, (9.0, 1.0, 1.0), 1, True)]
    for unit in (long, short, other_mode):
        record.write_unit(run, unit)
    table = tool.first_samples(run).set_index(["kind", "calls"])
    assert table.loc[("sized", "one"), "first"] == pytest.approx(1.1)
    assert table.loc[("told", "one"), "first"] == pytest.approx(1.3)
    assert table.loc[("told", "one"), "second"] == pytest.approx(1.02)
    assert table.loc[("sized", "more"), "placements"] == 1  # per_call is left out
    assert table.loc[("told", "more"), "placements"] == 2
    assert table.loc[("told", "more"), "first"] == pytest.approx(1.5)  # median of 1.0, 2.0


def test_run_spread_sets_new_runs_against_the_old_ones_of_their_gpu_model(swept_run, tmp_path):
    tool = load("run_spread.py")
    run = swept_run[0]
    same = tool.against([run], [run])
    assert len(same) and same["over_old"].eq(1.0).all() and same["inside"].all()
    assert tool.spread([run, copy_run(run, tmp_path)])["runs"].eq(2).all()


# ------------------------------------------ the probes (benchmarks/readme-command/probes/)

def test_sweep_cost_probe_refuses_unknown_parts_before_the_gpu():
    probe = load(PROBES / "sweep_cost_probe.py")
    with pytest.raises(ValueError, match="`--parts` may name only"):
        probe.main(["--parts", "imports,nonsense"])


def test_trial_overhead_probe_refuses_unknown_parts_before_the_gpu():
    probe = load(PROBES / "trial_overhead_probe.py")
    with pytest.raises(ValueError, match="`--parts` may name only"):
        probe.main(["--parts", "sessions,nonsense"])


def test_fork_probe_tries_every_preloaded_module(monkeypatch, capsys):
    from attn_analysis.measure.sweep import FORKSERVER_ENV, FORKSERVER_PRELOAD
    probe = load(PROBES / "fork_after_import_probe.py")
    seen = []
    envs = []
    monkeypatch.setattr(probe, "probe", lambda m, env: seen.append(m) or envs.append(env) or (
        "fork-BAD" if m == "extra.module" else "fork-ok"))
    assert probe.main([]) == 0 and seen == list(FORKSERVER_PRELOAD)
    assert probe.main(["extra.module"]) == 1
    assert "extra.module fork-BAD" in capsys.readouterr().out
    # the modules are imported as the fork server imports them: with its environment
    assert envs and all(e[k] == v for e in envs for k, v in FORKSERVER_ENV.items())
    envs.clear()
    assert probe.main(["--plain"]) == 0 and envs and all(e is None for e in envs)


def test_prebuild_probe_counts_what_the_prebuild_did():
    probe = load(PROBES / "prebuild_probe.py")
    summary = {"wall_s": 4.5, "workers": 3, "timing_choices_removed": 0, "jobs": [
        {"candidate": "flex", "status": "cached", "s": 0.25},
        {"candidate": "flex", "status": "ok", "s": 1.5},
        {"candidate": "triton", "status": "not_done", "s": None}]}
    assert probe.summarize(summary) == {
        "wall_s": 4.5, "workers": 3, "timing_choices_removed": 0,
        "statuses": {"cached": 1, "ok": 1, "not_done": 1},
        "job_s_by_candidate": {"flex": 1.75, "triton": 0.0}}


def test_cold_start_probe_refuses_unknown_parts_and_times_a_child_that_imports_torch(capsys):
    probe = load(PROBES / "cold_start_probe.py")
    with pytest.raises(ValueError, match="`--parts` may name only"):
        probe.main(["--parts", "cold,lukewarm"])
    assert capsys.readouterr().out == ""  # refused before it dropped or timed anything
    files = probe.library_files()
    assert files and all(".so" in p.name for p in files)
    probe.advise([ROOT / "no-such-library.so", *files[:1]], probe.os.POSIX_FADV_WILLNEED)
    probe.main(["--parts", "warm", "--device", "cpu"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[1]["part"] == "warm" and lines[1]["import_torch_s"] > 0
    assert lines[1]["mapped_libraries"] > 0 and lines[-1]["mapped_library_bytes"] > 0


def test_profile_calls_probe_splits_a_session_into_equal_calls_by_start_time():
    probe = load(PROBES / "profile_calls_probe.py")
    # (start_ns, duration_us), out of order: two calls of two kernels each
    events = [(30, 500.0), (10, 2000.0), (20, 1000.0), (40, 250.0)]
    assert probe.per_call_ms(events, 2) == [3.0, 0.75]
    with pytest.raises(ValueError, match="3 kernels do not split into 2 equal calls"):
        probe.per_call_ms(events[:3], 2)
    with pytest.raises(ValueError, match="do not split"):
        probe.per_call_ms([], 1)


def test_settle_replays_probe_balances_the_order_of_its_arms_and_refuses_bad_counts():
    script = load(PROBES / "settle_replays_probe.py")

    def row(config, cand, upload, three, first="upload", lead=1.0):
        order = ["upload", "three"] if first == "upload" else ["three", "upload"]
        return {"config": config, "candidate": cand, "k": 2, "order": order,
                "upload": {"median_ms": upload, "first_over_median": lead},
                "three": {"median_ms": three, "first_over_median": 1.0}}
    # the arm that runs second is 10 % slower whichever it is: no effect of the arm, and
    # three placements of one order against one of the other must not hide that
    rows = [row("A", "sdpa", 1.0, 1.1, "upload", lead=1.5), row("A", "sdpa", 1.0, 1.1, "upload"),
            row("A", "sdpa", 1.0, 1.1, "upload"), row("A", "sdpa", 1.1, 1.0, "three"),
            row("B", "flex", 1.0, 1.02, "upload")]
    got = script.summarize(rows)
    a = next(p for p in got["pairs"] if p["config"] == "A")
    assert a["placements"] == 4 and a["orders"] == {"upload_first": 3, "three_first": 1}
    assert a["three_over_upload"] == pytest.approx(1.0)
    assert a["range"] == pytest.approx([1 / 1.1, 1.1])
    assert a["first_over_median_upload"] == 1.0 and a["k"] == [2]
    b = next(p for p in got["pairs"] if p["config"] == "B")
    assert b["three_over_upload"] == pytest.approx(1.02)  # one order only: that order's
    assert got["n_pairs"] == 2 and got["pairs_above_1"] == 1
    assert got["median_of_pair_ratios"] == pytest.approx(1.01)
    assert got["range_of_pair_ratios"] == pytest.approx([1.0, 1.02])
    with pytest.raises(ValueError, match="rows"):
        script.summarize([])
    with pytest.raises(SystemExit, match="placements"):
        script.main(["--placements", "0"])
