"""Run identity: run.json records the run id and a content hash; verify refuses a folder
whose name is not the id, pooling refuses the same run twice (by id or by content), and a
legacy run without a recorded id verifies, explicitly, without its name checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attn_analysis import record
from attn_analysis.record import RECORD_FORMAT_VERSION
from attn_analysis.__main__ import main
from attn_analysis.cli.notebook_support import runs_iv
from conftest import make_run

ROOT = Path(__file__).resolve().parents[1]


def _edit_run_json(run: Path, edit) -> None:
    """Edit run.json and re-sign the manifest, as someone who means it would."""
    info = json.loads((run / record.RUN_INFO).read_text())
    edit(info)
    (run / record.RUN_INFO).write_text(json.dumps(info, indent=1, sort_keys=True))
    record.write_manifest(run)


def _as_legacy(run: Path) -> None:
    """Make ``run`` look like a format-2 run finalized before run ids were recorded."""
    def edit(info):
        info.pop("run_id"), info.pop("content_hash")
        info["format_version"] = 2
    _edit_run_json(run, edit)
    manifest = json.loads((run / record.MANIFEST).read_text())
    manifest["format_version"] = 2
    (run / record.MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))


def test_run_json_records_the_id_and_the_journal_content_hash(tmp_path):
    run = make_run(tmp_path)
    info = json.loads((run / record.RUN_INFO).read_text())
    manifest = json.loads((run / record.MANIFEST).read_text())
    assert info["run_id"] == "run-a" and info["format_version"] == RECORD_FORMAT_VERSION == 3
    assert info["content_hash"] == record.content_hash(manifest["files"])
    assert record.verify(run) == []
    assert record.load(run).content_hash == info["content_hash"]
    # the hash is the journal's: finalizing again (a new finished_utc) keeps it
    record.finalize(run, {"plan": {"device": "cpu"}, "finished_utc": "later"})
    assert json.loads((run / record.RUN_INFO).read_text())["content_hash"] == info["content_hash"]


def test_content_hash_covers_the_journal_only():
    files = {"journal/a.json": "1", "journal/b.json": "2", "run.json": "x", "units.parquet": "y"}
    same = dict(files, **{"run.json": "other id", "units.parquet": "z"})
    assert record.content_hash(files) == record.content_hash(same)
    assert record.content_hash(files) != record.content_hash(dict(files, **{"journal/b.json": "3"}))
    assert record.content_hash(files) != record.content_hash(
        {"journal/a.json": "1", "journal/c.json": "2"})  # a renamed unit


def test_verify_refuses_a_renamed_copy_naming_both_names(tmp_path, capsys):
    run = make_run(tmp_path)
    copy = tmp_path / "copy-of-a"
    shutil.copytree(run, copy)
    problems = record.verify(copy)
    assert problems == [
        "run.json: the recorded run id 'run-a' differs from the folder's name 'copy-of-a'; a "
        "run is known by its id, so a renamed or copied run folder is refused: name the "
        "folder 'run-a' (a copy is not a new run)"]
    with pytest.raises(record.RecordError, match="differs from the folder's name"):
        record.load(copy)
    assert main(["verify", str(run), str(copy)]) == 1
    out = capsys.readouterr().out
    assert f"{run}: ok\n" in out and f"{copy}: FAILED" in out and "'copy-of-a'" in out


def test_verify_refuses_an_edited_content_hash_and_a_format_3_run_without_identity(tmp_path):
    run = make_run(tmp_path)
    _edit_run_json(run, lambda info: info.update(content_hash="0" * 64))
    assert record.verify(run) == [
        "run.json: the recorded content hash does not match the journal"]
    _edit_run_json(run, lambda info: (info.pop("content_hash"), info.pop("run_id")))
    assert record.verify(run) == ["run.json: `run_id` missing (format 3 records it)",
                                   "run.json: `content_hash` missing (format 3 records it)"]


def test_a_legacy_run_without_an_id_verifies_without_its_name_checked(tmp_path, capsys):
    run = make_run(tmp_path)
    original = record.load(run).content_hash
    legacy = tmp_path / "renamed-legacy"
    shutil.copytree(run, legacy)
    _as_legacy(legacy)
    assert record.verify(legacy) == []
    assert record.is_legacy_identity(legacy) and not record.is_legacy_identity(run)
    loaded = record.load(legacy)
    assert loaded.content_hash == original  # computed from the manifest's journal entries
    assert main(["verify", str(legacy)]) == 0
    assert capsys.readouterr().out == (
        f"{legacy}: ok (legacy run: run.json records no run id, so the folder's name is not "
        f"checked)\n")
    with pytest.raises(ValueError, match="hold the same measurements"):
        record.distinct_runs([record.load(run), loaded])


def test_a_format_2_run_with_its_id_is_still_checked_by_name(tmp_path):
    run = make_run(tmp_path)
    _as_legacy(run)
    _edit_run_json(run, lambda info: info.update(run_id="run-a"))
    manifest = json.loads((run / record.MANIFEST).read_text())
    manifest["format_version"] = 2
    (run / record.MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    assert record.verify(run) == [] and not record.is_legacy_identity(run)
    moved = tmp_path / "elsewhere"
    shutil.copytree(run, moved)
    assert "differs from the folder's name 'elsewhere'" in record.verify(moved)[0]


def test_every_recorded_run_records_its_id_and_is_not_legacy():
    runs = record.find_runs(ROOT / "data" / "runs")
    assert runs
    for run in runs:
        info = json.loads((run / record.RUN_INFO).read_text())
        assert info["run_id"] == run.name and not record.is_legacy_identity(run), run.name


def test_distinct_runs_refuses_the_same_id_or_the_same_content(tmp_path):
    run = make_run(tmp_path)
    copy = tmp_path / "copy" / "run-b"
    shutil.copytree(run, copy)
    _edit_run_json(copy, lambda info: info.update(run_id="run-b"))  # re-signed: it verifies
    assert record.verify(copy) == []
    a, b = record.load(run), record.load(copy)
    assert a.content_hash == b.content_hash
    with pytest.raises(ValueError, match=r"`runs` must hold distinct runs; 'run-a' and 'run-b' "
                                         r"hold the same measurements \(content hash "):
        record.distinct_runs([a, b])
    with pytest.raises(ValueError, match="`runs` must name each run once; 'run-a' is given twice"):
        record.distinct_runs([a, a])
    with pytest.raises(ValueError, match=r"`runs` must hold loaded runs \(record.Run\)"):
        record.distinct_runs([str(run)])
    assert record.distinct_runs([a])[0] is a
    one_trial = make_run(tmp_path / "short", n_trials=1)  # also called run-a: refused
    with pytest.raises(ValueError, match="'run-a' is given twice"):
        record.distinct_runs([a, record.load(one_trial)])
    c = tmp_path / "short" / "run-c"
    one_trial.rename(c)
    _edit_run_json(c, lambda info: info.update(run_id="run-c"))
    assert [r.run_id for r in record.distinct_runs([a, record.load(c)])] == ["run-a", "run-c"]


def test_calibrate_refuses_to_pool_a_run_twice_or_its_copy(tmp_path, capsys):
    run = make_run(tmp_path)
    copy = tmp_path / "copy" / "run-b"
    shutil.copytree(run, copy)
    _edit_run_json(copy, lambda info: info.update(run_id="run-b"))
    assert main(["calibrate", str(run), str(copy)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: `runs` must hold distinct runs; 'run-a' "
                                               "and 'run-b' hold the same measurements")
    assert main(["calibrate", str(run), str(run)]) == 1
    assert "'run-a' is given twice" in capsys.readouterr().err


def test_a_notebook_refuses_to_pool_a_run_twice(tmp_path):
    make_run(tmp_path)
    params = {"runs_dir": str(tmp_path)}
    assert list(runs_iv("calibration_runs", "run-a", params)) == ["run-a"]
    with pytest.raises(ValueError, match="`calibration_runs` must name each run once"):
        runs_iv("calibration_runs", "run-a, run-a", params)
