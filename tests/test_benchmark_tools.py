"""The analysis scripts beside the recorded runs of the README's GPU command
(``benchmarks/readme-command/*.py``): they read run folders as the sweep records them, and
the tables recorded there (``first_sample.txt``, ``run_spread_new.txt``) come from them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from attn_analysis import record
from conftest import copy_run, make_timing_unit

TOOLS = Path(__file__).resolve().parents[1] / "benchmarks" / "readme-command"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{Path(name).stem}", TOOLS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
