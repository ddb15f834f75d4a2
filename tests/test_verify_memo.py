"""The memo of verified runs: a run's deeper checks are skipped only for manifest bytes
that passed them under the same checking code; the manifest's checksums and the run id
are checked every time, and nothing is remembered without a memo folder."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from attn_analysis import record
from attn_analysis.record import journal, verification, verify_memo
from conftest import make_run


@pytest.fixture
def memo(tmp_path, monkeypatch):
    folder = tmp_path / "memo"
    monkeypatch.setenv(verify_memo.ENV, str(folder))
    return folder


def _no_deep_checks(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the deeper checks ran")
    monkeypatch.setattr(verification, "_journal_agrees", refuse)
    monkeypatch.setattr(journal, "read_journal", refuse)


def test_without_a_memo_folder_nothing_is_remembered(tmp_path, monkeypatch):
    monkeypatch.delenv(verify_memo.ENV, raising=False)
    run = make_run(tmp_path)
    assert record.verify(run) == []
    assert verify_memo.marker(b"{}") is None and not verify_memo.seen(b"{}")
    _no_deep_checks(monkeypatch)
    with pytest.raises(AssertionError, match="the deeper checks ran"):
        record.verify(run)


def test_a_verified_run_is_checked_once_in_depth(tmp_path, memo, monkeypatch):
    run = make_run(tmp_path)
    assert record.verify(run) == []
    assert len(list(memo.iterdir())) == 1
    _no_deep_checks(monkeypatch)
    assert record.verify(run) == []  # the same bytes, the same checking code
    assert record.load(run).run_id == "run-a"


def test_a_resigned_edit_is_checked_in_depth_and_caught(tmp_path, memo):
    run = make_run(tmp_path)
    assert record.verify(run) == []
    frame = pd.read_parquet(run / "units.parquet")
    frame.loc[0, "median_ms"] = frame.loc[0, "median_ms"] * 0.5
    frame.to_parquet(run / "units.parquet", index=False)
    assert record.verify(run)[0].startswith("units.parquet: SHA-256 does not match")
    record.write_manifest(run)  # re-signed: new manifest bytes, so no memo applies
    assert record.verify(run)[0].startswith("units.parquet: column 'median_ms' differs")
    assert len(list(memo.iterdir())) == 1  # a failed run is not remembered


def test_an_edited_file_under_a_remembered_manifest_is_caught(tmp_path, memo):
    run = make_run(tmp_path)
    assert record.verify(run) == []
    (run / "ceilings.json").write_text("{}")  # the manifest, and so the memo key, unchanged
    assert record.verify(run) == ["ceilings.json: SHA-256 does not match the manifest"]


def test_a_renamed_copy_is_refused_though_its_bytes_were_verified(tmp_path, memo):
    run = make_run(tmp_path)
    assert record.verify(run) == []
    copy = shutil.copytree(run, tmp_path / "copy-of-a")
    assert "differs from the folder's name 'copy-of-a'" in record.verify(copy)[0]


def test_other_checking_code_misses_the_memo(tmp_path, memo, monkeypatch):
    run = make_run(tmp_path)
    assert record.verify(run) == []
    manifest = (run / record.MANIFEST).read_bytes()
    assert verify_memo.seen(manifest)
    monkeypatch.setattr(verify_memo, "verifier_id", lambda: "another verifier")
    assert not verify_memo.seen(manifest)
    assert record.verify(run) == [] and len(list(memo.iterdir())) == 2


def test_the_verifier_id_covers_the_checking_code_and_libraries():
    key = verify_memo.verifier_id()
    assert len(key) == 64 and key == verify_memo.verifier_id()
    assert {"__init__.py", "schema.py", "journal.py", "consolidate.py", "verification.py",
            "run.py", "../configs.py", "../_validate.py"} <= set(verify_memo._CHECKING_CODE)
    assert all((verify_memo._HERE / name).is_file() for name in verify_memo._CHECKING_CODE)
