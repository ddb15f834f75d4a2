"""What a newcomer's mistakes do (issue 44, item 5): each is refused with one clear line
naming what was wrong, before anything is measured or written, or no longer happens.

The cases that need a sweep's trial processes are in tests/test_sweep_refusals.py (slow).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from attn_analysis import record
from attn_analysis.record import consolidate

from conftest import main_here, make_run


def _set_run_info(run: Path, **changes) -> None:
    """Edit run.json and recompute the manifest, as a newcomer who 'fixes' a run would."""
    info = json.loads((run / record.RUN_INFO).read_text())
    info.update(changes)
    (run / record.RUN_INFO).write_text(json.dumps(info))
    consolidate.write_manifest(run)


@pytest.mark.parametrize("bad", ["abc", True, 99, None, 2.5])
def test_a_bad_run_json_format_version_is_refused_naming_the_file_and_field(tmp_path, bad):
    run = make_run(tmp_path)
    _set_run_info(run, format_version=bad)
    with pytest.raises(record.RecordError, match=r"run\.json: `format_version` must be one of"):
        record.read_info(run)
    problems = record.verify(run)
    assert any(str(run / record.RUN_INFO) in p and "`format_version`" in p for p in problems)
    with pytest.raises(record.RecordError, match="`format_version`"):
        record.load(run)


@pytest.mark.parametrize("verb", ["verify", "show", "compare"])
def test_every_verb_refuses_a_bad_format_version_the_same_way(tmp_path, capsys, verb):
    run = make_run(tmp_path)
    _set_run_info(run, format_version="abc")
    result = main_here(capsys, verb, str(run))
    assert result.returncode == 1
    assert "invalid literal" not in result.stderr + result.stdout
    assert "`format_version`" in result.stderr + result.stdout
    assert str(run / record.RUN_INFO) in result.stderr + result.stdout


def test_every_file_of_a_run_has_one_mode_as_the_umask_allows(tmp_path):
    old = os.umask(0o022)
    try:
        run = make_run(tmp_path)
        modes = {p.relative_to(run).as_posix(): stat.S_IMODE(p.stat().st_mode)
                 for p in run.rglob("*") if p.is_file()}
        os.umask(0o027)
        record.write_plan(tmp_path / "other", {"x": 1})
        other = stat.S_IMODE((tmp_path / "other" / record.PLAN).stat().st_mode)
    finally:
        os.umask(old)
    assert any(k.endswith(".parquet") for k in modes) and any(k.endswith(".json") for k in modes)
    assert set(modes.values()) == {0o644}, modes
    assert other == 0o640


def test_an_unknown_notebook_run_is_refused_before_any_run_is_loaded(tmp_path, monkeypatch):
    from attn_analysis import notebook_support as nbs
    make_run(tmp_path)

    def no_loading(*args, **kwargs):
        raise AssertionError("a run was loaded before `run` was checked")
    monkeypatch.setattr(record, "load", no_loading)
    monkeypatch.setattr(nbs, "load_runs", no_loading)
    ns = dict(runs_dir=str(tmp_path), run="run-b", measure=False, n_resamples=1000)
    with pytest.raises(ValueError, match=r"`run` must be '' or a finalized run under .*"
                                         r"\['run-a'\]\); got 'run-b'"):
        nbs.prelude(ns)
    # the named run, '' and the documented default (absent here) pass the check
    for run in ("run-a", "", nbs.DEFAULT_LEAD_RUN):
        assert nbs.check_given(tmp_path, dict(nbs.MEASURE_DEFAULTS, **dict(ns, run=run)))["run"] == run


def test_the_readme_s_virtual_environment_is_ignored_by_git():
    root = Path(__file__).resolve().parents[1]
    assert ".venv" in (root / "README.md").read_text()
    import subprocess
    result = subprocess.run(["git", "check-ignore", "-q", ".venv/bin/python"], cwd=root)
    assert result.returncode == 0, ".venv is not in .gitignore"
