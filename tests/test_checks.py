"""checks: the sealed format of data/checks/ (format version and SHA-256), and its verify."""

import json
import math
from pathlib import Path

import pytest

from attn_analysis.record import checks
from attn_analysis.__main__ import main

ROOT = Path(__file__).resolve().parents[1]


def make_check(path, payload=None, kind="graph_anatomy"):
    """Write a sealed check file with a small payload; return its path."""
    payload = payload if payload is not None else {"results": {"x": [1.5, math.nan]}, "ks": [1, 2]}
    return checks.write(path, payload, kind)


def test_write_then_read_returns_the_payload(tmp_path):
    p = make_check(tmp_path / "a.json", {"results": {128: {"ms": 0.1}}, "nan": math.nan})
    doc = json.loads(p.read_text())
    assert doc["check"] == "graph_anatomy"
    assert doc["format_version"] == checks.CHECK_FORMAT_VERSION == 1
    assert len(doc["sha256"]) == 64
    back = checks.read(p, "graph_anatomy")
    assert set(back) == {"results", "nan"}  # the seal's keys are not the script's
    assert back["results"] == {"128": {"ms": 0.1}}  # as JSON reads it: keys are strings
    assert math.isnan(back["nan"])
    assert checks.read(p)["results"] == back["results"]  # kind optional
    assert checks.verify(p) == []


def test_sealing_is_independent_of_key_order_and_int_keys(tmp_path):
    a = checks.seal({"b": 1, "r": {512: 1, 1024: 2, 128: 3}}, "check_timer")
    b = checks.seal({"r": {"1024": 2, "128": 3, "512": 1}, "b": 1}, "check_timer")
    assert a["sha256"] == b["sha256"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["results"].update(x=[1.6]), "checksum mismatch"),
    (lambda d: d.update(format_version=2), "unknown format version 2"),
    (lambda d: d.pop("sha256"), "not a sealed check file"),
    (lambda d: d.update(check="other"), "checksum mismatch"),
])
def test_an_edited_file_is_refused_and_named(tmp_path, edit, message):
    p = make_check(tmp_path / "a.json")
    doc = json.loads(p.read_text())
    edit(doc)
    p.write_text(json.dumps(doc))
    with pytest.raises(checks.CheckFileError, match=message):
        checks.read(p)
    problems = checks.verify(tmp_path)
    assert len(problems) == 1 and problems[0].startswith("a.json: ") and message in problems[0]


def test_unsealed_and_unreadable_files_and_the_wrong_kind(tmp_path):
    (tmp_path / "old.json").write_text(json.dumps({"results": {}}))
    (tmp_path / "cut.json").write_text('{"results": ')
    make_check(tmp_path / "ok.json")
    problems = checks.verify(tmp_path)
    assert [p.split(":")[0] for p in problems] == ["cut.json", "old.json"]
    assert "unreadable" in problems[0] and "no sha256" in problems[1]
    with pytest.raises(checks.CheckFileError,
                       match="holds a graph_anatomy check, not audit_extras"):
        checks.read(tmp_path / "ok.json", "audit_extras")
    (tmp_path / "empty").mkdir()
    assert checks.verify(tmp_path / "empty") == [f"{tmp_path / 'empty'}: no check files (*.json)"]
    missing = checks.verify(tmp_path / "missing.json")
    assert "missing.json: unreadable (FileNotFoundError" in missing[0]


@pytest.mark.parametrize("call, message", [
    (lambda: checks.seal({"a": 1}, "timer"), "`kind` must be one of"),
    (lambda: checks.seal([1], "check_timer"), "`payload` must be a dict"),
    (lambda: checks.seal({"sha256": "x"}, "check_timer"), "`payload` must not hold the keys"),
    (lambda: checks.read("x.json", "timer"), "`kind` must be one of"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_is_check_path_tells_check_files_from_run_folders(tmp_path):
    make_check(tmp_path / "c" / "a.json")
    run = tmp_path / "run"
    (run / "journal").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    assert checks.is_check_path(tmp_path / "c") and checks.is_check_path(tmp_path / "c" / "a.json")
    assert not checks.is_check_path(run) and not checks.is_check_path(tmp_path / "missing")


def test_every_committed_check_file_verifies_and_names_its_script():
    folder = ROOT / "data" / "checks"
    assert checks.verify(folder) == []
    kinds = {p.name: json.loads(p.read_text())["check"] for p in folder.glob("*.json")}
    # every script has run on the device but those awaiting their first run (test_scripts)
    assert set(kinds.values()) == set(checks.KINDS)
    for name, kind in kinds.items():
        prefixes = {"triton_check": ("triton_grid",), "peers_check": ("peers_check", "peers2_check"),
                    "gluon_check": ("gluon_check", "gluon_ablation")}
        assert name.startswith(prefixes.get(kind, (kind,))), (name, kind)


def test_cli_verify_reads_check_files(tmp_path, capsys):
    make_check(tmp_path / "a.json")
    assert main(["verify", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"{tmp_path}: ok\n"
    (tmp_path / "a.json").write_text((tmp_path / "a.json").read_text().replace("1.5", "1.25"))
    assert main(["verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{tmp_path}: FAILED" in out and "a.json: checksum mismatch" in out
