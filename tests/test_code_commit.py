"""record.code_commit: the commit a run's code came from, by git or by the environment."""

from __future__ import annotations

import subprocess

import pytest

from attn_analysis.record import code_commit as cc


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "HOME": str(cwd),
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                        "PATH": "/usr/bin:/bin"})


def test_a_checkout_records_its_head_and_whether_it_was_edited(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "c")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True,
                          text=True, check=True).stdout.strip()
    got = cc.code_commit(pkg, environ={cc.ENV: "abcdef1"})  # git wins over the variable
    assert got == {"code_commit": head, "code_dirty": False, "code_commit_source": "git"}
    (pkg / "m.py").write_text("x = 2\n")
    assert cc.code_commit(pkg, environ={})["code_dirty"] is True


def test_an_exported_copy_takes_the_commit_from_the_environment(tmp_path):
    assert cc.code_commit(tmp_path, environ={cc.ENV: " ABCDEF1234 "}) == {
        "code_commit": "abcdef1234", "code_dirty": None, "code_commit_source": "env"}
    assert cc.code_commit(tmp_path, environ={}) == {
        "code_commit": None, "code_dirty": None, "code_commit_source": None}
    with pytest.raises(ValueError, match="`ATTN_CODE_COMMIT`"):
        cc.code_commit(tmp_path, environ={cc.ENV: "main"})


def test_this_checkout_records_its_commit():
    from pathlib import Path
    root = Path(cc.__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("an exported copy without .git: the commit comes from ATTN_CODE_COMMIT")
    got = cc.code_commit(environ={})
    assert got["code_commit_source"] == "git" and len(got["code_commit"]) == 40


def test_a_sweep_records_the_commit_of_its_code(swept_run):
    """run.json says which code measured the run: this checkout's commit, as a sweep finds
    it (git here; ATTN_CODE_COMMIT in an exported copy)."""
    from attn_analysis.record import read_info
    out, _, _ = swept_run
    info = read_info(out)
    assert {k: info[k] for k in ("code_commit", "code_dirty", "code_commit_source")} == \
        cc.code_commit()


def test_a_malformed_commit_variable_is_refused_before_any_folder(tmp_path, monkeypatch):
    from conftest import tiny_plan
    from attn_analysis.measure import sweep
    monkeypatch.setattr(cc, "_git", lambda root, *args: None)  # an exported copy: no git
    monkeypatch.setenv(cc.ENV, "not-a-hash")
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="`ATTN_CODE_COMMIT`"):
        sweep.run(out, tiny_plan(), progress=False)
    assert not out.exists()
