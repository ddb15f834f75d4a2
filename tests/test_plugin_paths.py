"""Plugins that moved (``configs.RENAMED_MODULES``): recorded plans and old command lines
name ``attn_analysis.peers`` and ``attn_analysis.controls``, which live in ``measure/`` now.
The old names still load, a plan records the new ones, a run recorded under the old ones
resumes and its shards merge, and no alias module is left at the package's top level."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from attn_analysis import __main__ as cli
from attn_analysis import configs, record
from attn_analysis.measure import candidates as cands
from attn_analysis.measure import sweep
from attn_analysis.measure.plan import with_recorded_defaults
from attn_analysis.record.merge import _merged_plan

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "data" / "runs"
OLD = {"attn_analysis.peers": "attn_analysis.measure.peers",
       "attn_analysis.controls": "attn_analysis.measure.controls"}


def _recorded_plans_with_old_names() -> list[Path]:
    return sorted(p for p in RUNS.glob("*/plan.json")
                  if set(json.loads(p.read_text()).get("plugins") or ()) & set(OLD))


def test_the_table_maps_each_old_path_to_a_module_of_this_checkout():
    assert configs.RENAMED_MODULES == OLD
    for old, new in configs.RENAMED_MODULES.items():
        assert importlib.util.find_spec(new) is not None
        assert importlib.util.find_spec(old) is None  # no alias module left behind
    assert configs.plugin_modules(["attn_analysis.peers", "fake_candidates"]) == (
        "attn_analysis.measure.peers", "fake_candidates")


def test_old_names_load_the_moved_module_once():
    cands.load_plugins(["attn_analysis.measure.controls"])
    before = dict(cands.CANDIDATES)
    cands.load_plugins(["attn_analysis.controls", "attn_analysis.measure.controls"])
    assert cands.CANDIDATES == before  # the same module: nothing registered twice
    assert "attn_analysis.controls" not in sys.modules


def test_a_plan_and_the_command_line_record_the_new_names():
    args = cli.build_parser().parse_args(
        ["sweep", "--out", "x", "--plugin", "attn_analysis.controls", "--candidates", "sdpa"])
    plan = sweep.Plan(configs=(configs.TARGET,), candidates=("sdpa", "sdpa_twin"),
                      plugins=tuple(args.plugin))
    assert plan.plugins == ("attn_analysis.measure.controls",)
    assert plan.to_json()["plugins"] == ["attn_analysis.measure.controls"]
    with pytest.raises(ValueError, match="`plugins`.*no module named 'attn_analysis.nothing'"):
        sweep.Plan(configs=(configs.TARGET,), candidates=("sdpa",),
                   plugins=("attn_analysis.nothing",))


def test_every_recorded_plan_with_old_names_still_builds():
    paths = _recorded_plans_with_old_names()
    assert paths, "no recorded run names a plugin by its old path"
    for path in paths:
        recorded = json.loads(path.read_text())
        plan = sweep.Plan.from_json(recorded)
        assert plan.plugins == configs.plugin_modules(recorded["plugins"]), path
        assert not set(plan.plugins) & set(OLD)


def test_a_run_recorded_under_old_names_resumes(tmp_path):
    recorded = next(plan for plan in map(json.loads, map(Path.read_text,
                                                     _recorded_plans_with_old_names()))
                    if set(sweep.SETTINGS_THAT_MUST_MATCH) - {"shard"} <= set(plan))
    assert with_recorded_defaults(recorded)["plugins"] == list(
        configs.plugin_modules(recorded["plugins"]))
    out = tmp_path / "old-run"
    out.mkdir()
    record.write_plan(out, recorded)
    plan = sweep.Plan.from_json(recorded)
    # the recorded plan as a resume compares it: no setting differs
    assert sweep._settings_diff(recorded, plan) == []
    sweep._check_resume(out, plan)  # accepted: the plan is rewritten with the new names
    assert record.read_plan(out)["plugins"] == list(plan.plugins)
    record.write_plan(out, recorded)
    with pytest.raises(sweep.SweepError, match="other settings \\(seed\\)"):
        sweep._check_resume(out, sweep.Plan.from_json(dict(recorded, seed=1)))


def test_shards_recorded_before_and_after_the_move_merge():
    old = {"plugins": ["attn_analysis.controls"], "trials": 4, "shard": [1, 2]}
    new = {"plugins": ["attn_analysis.measure.controls"], "trials": 4, "shard": [2, 2]}
    assert _merged_plan([old, new], ["s1", "s2"]) == {
        "plugins": ["attn_analysis.measure.controls"], "trials": 4}
    other = dict(new, plugins=["attn_analysis.measure.peers"])
    with pytest.raises(ValueError, match="differs in \\['plugins'\\]"):
        _merged_plan([old, other], ["s1", "s2"])
