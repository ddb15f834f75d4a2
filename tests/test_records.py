"""The recorded-data format: atomic units, consolidation, manifest, verifier, loader."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_analysis import record
from attn_analysis.record import RECORD_FORMAT_VERSION, journal

import fake_candidates  # noqa: F401
from conftest import copy_run, make_run, make_timing_unit


def test_unit_is_self_checksummed_and_versioned(tmp_path):
    path = record.write_unit(tmp_path, make_timing_unit())
    unit = record.read_unit(path)
    assert unit["format_version"] == RECORD_FORMAT_VERSION
    assert path.name == "timing__t0__B1-H2-S16-D64-fp16__sdpa__graph.json"
    assert not list(tmp_path.rglob(".tmp-*"))


def test_edited_unit_is_refused(tmp_path):
    path = record.write_unit(tmp_path, make_timing_unit())
    body = json.loads(path.read_text())
    body["times_ms"][0] = 0.1
    path.write_text(json.dumps(body))
    with pytest.raises(record.RecordError, match="checksum mismatch"):
        record.read_unit(path)


def test_unknown_format_version_is_refused(tmp_path):
    path = record.write_unit(tmp_path, make_timing_unit())
    body = json.loads(path.read_text())
    body["format_version"] = 99
    path.write_text(json.dumps(body))
    with pytest.raises(record.RecordError, match="unknown format version 99"):
        record.read_unit(path)


def test_finalized_run_verifies_and_loads_as_tidy_tables(tmp_path):
    run = make_run(tmp_path)
    assert record.verify(run) == []
    loaded = record.load(run)
    assert list(loaded.samples.columns) == list(record.SAMPLE_COLUMNS)
    assert len(loaded.samples) == 2 * 2 * 3  # trials x modes x samples
    assert set(loaded.samples["trial"]) == {0, 1}
    assert loaded.samples["seq_len"].unique().tolist() == [16]
    unsupported = loaded.units[loaded.units["status"] == "unsupported"]
    assert unsupported["reason"].tolist() == ["cuda only"]
    assert loaded.kernels["device_ms_per_call"].tolist() == [0.4]
    assert loaded.ceilings == {"matmul": {"tflops": 1.0}}
    assert loaded.device == "cpu"
    assert loaded.info["format_version"] == RECORD_FORMAT_VERSION


def test_verifier_names_a_corrupted_file(tmp_path):
    run = make_run(tmp_path)
    target = run / "samples.parquet"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    problems = record.verify(run)
    assert problems == ["samples.parquet: SHA-256 does not match the manifest"]
    with pytest.raises(record.RecordError, match="samples.parquet"):
        record.load(run)


def test_verifier_catches_an_edited_number_even_with_a_fresh_manifest(tmp_path):
    run = make_run(tmp_path)
    frame = pd.read_parquet(run / "samples.parquet")
    frame.loc[0, "ms"] = frame.loc[0, "ms"] * 0.5  # a "better" number
    frame.to_parquet(run / "samples.parquet", index=False)
    assert "samples.parquet: SHA-256 does not match the manifest" in record.verify(run)
    record.write_manifest(run)  # someone re-signs the edited file
    problems = record.verify(run)
    assert len(problems) == 1
    assert problems[0].startswith("samples.parquet: column 'ms' differs from the journal "
                                  "(first at row 0:")


def test_verifier_reports_missing_and_unlisted_files(tmp_path):
    run = make_run(tmp_path)
    (run / "kernels.parquet").unlink()
    (run / "extra.txt").write_text("x")
    problems = record.verify(run)
    assert "kernels.parquet: listed in the manifest but missing" in problems
    assert "extra.txt: present but not listed in the manifest" in problems


def test_unfinalized_and_absent_runs_do_not_verify(tmp_path):
    record.write_unit(tmp_path / "r", make_timing_unit())
    assert record.verify(tmp_path / "r") == ["manifest.json: missing (the run was never finalized)"]
    assert "no such run folder" in record.verify(tmp_path / "nope")[0]


def test_finished_units_skips_bad_files_and_reports_them(tmp_path):
    good = record.write_unit(tmp_path, make_timing_unit())
    bad = record.write_unit(tmp_path, make_timing_unit(mode="per_call"))
    bad.write_text("{not json")
    names, complaints = record.finished_units(tmp_path)
    assert names == {good.name}
    assert len(complaints) == 1 and bad.name in complaints[0]


def test_finished_units_of_named_units_reads_only_those(tmp_path, monkeypatch):
    good = record.write_unit(tmp_path, make_timing_unit())
    bad = record.write_unit(tmp_path, make_timing_unit(mode="per_call"))
    other = record.write_unit(tmp_path, make_timing_unit(mode="cold_l2"))
    bad.write_text("{not json")
    read = []
    real = journal.read_unit
    monkeypatch.setattr(journal, "read_unit", lambda path: read.append(Path(path).name)
                        or real(path))
    names, complaints = record.finished_units(tmp_path, [good.name, bad.name, "absent.json"])
    assert names == {good.name} and len(complaints) == 1 and bad.name in complaints[0]
    assert other.name not in read and sorted(read) == sorted([good.name, bad.name])


def test_unit_name_validates_kind():
    with pytest.raises(ValueError, match="`kind` must be one of"):
        record.unit_name("bogus")


def test_atomic_write_leaves_old_file_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    record.atomic_write_bytes(target, b"old")

    def boom(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(journal.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        record.atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert not list(tmp_path.glob(".tmp-*"))


def test_find_runs_lists_finalized_runs_only(tmp_path):
    make_run(tmp_path)
    record.write_unit(tmp_path / "unfinished", make_timing_unit())
    assert [p.name for p in record.find_runs(tmp_path)] == ["run-a"]


# ------------------------------------------- derived files rebuilt from the journal

@pytest.fixture(scope="module")
def swept_run_with_kernels(swept_run, tmp_path_factory):
    """The session's tiny CPU run recorded by the sweep (conftest), copied, with one
    kernels unit as a GPU records it."""
    out = copy_run(swept_run[0], tmp_path_factory.mktemp("swept"))
    # The CPU has no kernel evidence; give sdpa's kernels unit the shape a GPU run has.
    record.write_unit(out, {"kind": "kernels", "config": "B1-H2-S16-D64-fp16",
                             "candidate": "sdpa", "status": "ok", "reason": "",
                             "kernels": [{"name": "flash_fwd", "calls_per_call": 1.0,
                                          "device_ms_per_call": 0.0123},
                                         {"name": "memset", "calls_per_call": 2.0,
                                          "device_ms_per_call": 0.0011}]})
    info = json.loads((out / "run.json").read_text())
    record.finalize(out, info)
    assert record.verify(out) == []
    return out


def _edit_table(name, edit):
    def tamper(run):
        frame = pd.read_parquet(run / name)
        edited = edit(frame)  # edits in place, or returns a new frame
        (frame if edited is None else edited).to_parquet(run / name, index=False)
    return tamper


def _edit_json(name, edit):
    def tamper(run):
        obj = json.loads((run / name).read_text())
        edit(obj)
        (run / name).write_text(json.dumps(obj, indent=1, sort_keys=True, allow_nan=True))
    return tamper


def _halve(frame, column, row=0):
    frame.loc[row, column] = frame.loc[row, column] * 0.5


def _relabel(frame, column, old, new):
    frame.loc[frame[column] == old, column] = new


def _nudge_ms(frame):  # the smallest possible edit: one float64 ulp
    frame.loc[3, "ms"] = np.nextafter(frame.loc[3, "ms"], 0.0)


def _unfail(frame):
    _relabel(frame, "status", "failed_correctness", "ok")


def _faster_matmul(obj):
    obj["matmul"]["tflops"] = obj["matmul"]["tflops"] * 2


def _other_machine(obj):
    obj["trials"]["0"]["fingerprint_hash"] = "0ther0machine"


def _more_trials(plan):
    plan["trials"] += 1


def _drop_candidate(plan):
    plan["candidates"] = plan["candidates"][:-1]


def _both_plans(edit):
    """Edit the plan in plan.json and in run.json alike, as a careful tamperer would."""
    def tamper(run):
        _edit_json("plan.json", edit)(run)
        _edit_json("run.json", lambda info: edit(info["plan"]))(run)
    return tamper


def _reformat(run):
    obj = json.loads((run / "ceilings.json").read_text())
    (run / "ceilings.json").write_text(json.dumps(obj, sort_keys=True))


TAMPERING = {
    "kernel time halved": (_edit_table("kernels.parquet", lambda f: _halve(
        f, "device_ms_per_call")), "kernels.parquet: column 'device_ms_per_call' differs"),
    "kernel renamed": (_edit_table("kernels.parquet", lambda f: _relabel(
        f, "kernel", "memset", "flash_fwd")), "kernels.parquet: column 'kernel' differs"),
    "kernel row dropped": (_edit_table("kernels.parquet", lambda f: f.drop(
        index=1)), "kernels.parquet: 1 rows, the journal has 2"),
    "unit median halved": (_edit_table("units.parquet", lambda f: _halve(f, "median_ms")),
                           "units.parquet: column 'median_ms' differs"),
    "failed unit marked ok": (_edit_table("units.parquet", _unfail),
                              "units.parquet: column 'status' differs"),
    "samples relabelled": (_edit_table("samples.parquet", lambda f: _relabel(
        f, "candidate", "eager", "sdpa")), "samples.parquet: column 'candidate' differs"),
    "sample nudged one ulp": (_edit_table("samples.parquet", _nudge_ms),
                              "samples.parquet: column 'ms' differs"),
    "correctness flipped": (_edit_table("correctness.parquet", lambda f: _relabel(
        f, "passed", False, True)), "correctness.parquet: column 'passed' differs"),
    "ceiling raised": (_edit_json("ceilings.json", _faster_matmul),
                       "ceilings.json: key 'matmul.tflops' differs from the journal"),
    "fingerprint edited": (_edit_json("fingerprint.json", _other_machine),
                           "fingerprint.json: key 'trials.0.fingerprint_hash' differs"),
    "ceilings reformatted": (_reformat, "ceilings.json: not formatted as finalize writes it"),
    "plan.json claims more trials": (_edit_json("plan.json", _more_trials),
                                     "plan.json: differs from the plan in run.json"),
    "both plans claim more trials": (_both_plans(_more_trials),
                                     "run.json: the plan calls for"),
    "both plans drop a candidate": (_both_plans(_drop_candidate),
                                    "run.json: the journal holds"),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_verifier_rebuilds_every_derived_file_from_the_journal(swept_run_with_kernels,
                                                                tmp_path, case):
    tamper, expected = TAMPERING[case]
    run = copy_run(swept_run_with_kernels, tmp_path)
    assert record.verify(run) == []
    tamper(run)
    assert record.verify(run) != []  # the manifest notices first ...
    record.write_manifest(run)  # ... so the tamperer re-signs every file
    problems = record.verify(run)
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected), problems
    with pytest.raises(record.RecordError, match=expected.split(":")[0]):
        record.load(run)


def test_verifier_reports_the_first_differing_row_and_both_values(tmp_path):
    run = make_run(tmp_path)
    frame = pd.read_parquet(run / "units.parquet")
    frame.loc[1, "reason"] = "edited"
    frame.to_parquet(run / "units.parquet", index=False)
    record.write_manifest(run)
    assert record.verify(run) == [
        "units.parquet: column 'reason' differs from the journal "
        "(first at row 1: 'edited' on disk, '' in the journal)"]


def test_verifier_reports_a_changed_column_type(tmp_path):
    run = make_run(tmp_path)
    frame = pd.read_parquet(run / "correctness.parquet")
    frame["nonfinite"] = frame["nonfinite"].astype("float64")  # same values, other type
    frame.to_parquet(run / "correctness.parquet", index=False)
    record.write_manifest(run)
    assert record.verify(run) == [
        "correctness.parquet: column 'nonfinite' is float64, the journal gives int64"]


# ------------------------------------------------------------- schema and run folder

@pytest.mark.parametrize("change, message", [
    ({"mode": "warm"}, r"`mode` must be one of \('per_call', 'cold_l2', 'graph'\); got 'warm'"),
    ({"status": "fine"}, r"`status` must be one of \('ok'"),
    ({"trial": "0"}, r"`trial` must be an integer; got '0'"),
    ({"trial": True}, r"`trial` must be an integer; got True"),
    ({"trial": -1}, r"`trial` must be >= 0"),
    ({"config": "B1-H2-S16"}, r"`config` must look like"),
    ({"times_ms": [0.5, "0.6"]}, r"`times_ms` must hold only numbers; got '0.6'"),
    ({"timing": []}, r"`timing` must be an object; got \[\]"),
    ({"sample_count": 3}, r"`sample_count` is not a declared field"),
    ({"placements": [{"times_ms": [1.0]}]}, r"`placements\[0\].placement` is missing"),
])
def test_a_unit_that_breaks_the_schema_is_refused_when_written(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        record.write_unit(tmp_path, {**make_timing_unit(), **change})
    assert not (tmp_path / record.JOURNAL).exists() or not list(
        (tmp_path / record.JOURNAL).iterdir())


def test_a_required_field_is_named_when_missing(tmp_path):
    unit = make_timing_unit()
    del unit["times_ms"]
    with pytest.raises(ValueError, match="`times_ms` is missing"):
        record.write_unit(tmp_path, unit)
    with pytest.raises(ValueError, match="`kind` must be one of"):
        record.write_unit(tmp_path, {"kind": "bogus"})
    with pytest.raises(ValueError, match="`fingerprint` is missing"):
        record.write_unit(tmp_path, {"kind": "trial", "trial": 0})


def test_a_sealed_unit_that_breaks_the_schema_is_refused_when_read(tmp_path):
    # A unit whose checksum is right but whose content the schema refuses (written by
    # other code, or before a field was declared) does not enter a run.
    path = record.write_unit(tmp_path, make_timing_unit())
    body = json.loads(path.read_text())
    body.pop("sha256")
    body["times_ms"] = "fast"
    body["sha256"] = hashlib.sha256(journal.canonical_json(body)).hexdigest()
    path.write_text(json.dumps(body))
    with pytest.raises(record.RecordError, match=r"does not fit the journal's schema: "
                                                  r"`times_ms` must be a list"):
        record.read_unit(path)
    assert record.finished_units(tmp_path)[0] == set()


@pytest.mark.parametrize("kind, identity", [
    ("timing", {"trial": 3, "config": "B1-H2-S16-D64-fp16", "candidate": "sdpa_flash",
                "mode": "cold_l2"}),
    ("correctness", {"trial": 0, "config": "B32-H8-S512-D64-bf16-causal",
                     "candidate": "eager"}),
    ("kernels", {"config": "B1-H2-S16-D64-fp16", "candidate": "sdpa"}),
    ("trial", {"trial": 12}),
    ("ceilings", {}),
])
def test_unit_names_parse_back_to_the_identity_they_were_built_from(kind, identity):
    name = record.unit_name(kind, **identity)
    assert record.parse_unit_name(name) == {"kind": kind, **identity}
    assert [f.name for f in record.UNIT_IDENTITY[kind]] == list(identity)


@pytest.mark.parametrize("name", ["timing__t0__B1-H2-S16-D64-fp16__sdpa.json",
                                  "trial__0.json", "bogus__t0.json", "trial__t0",
                                  "kernels__t0__B1-H2-S16-D64-fp16__sdpa.json"])
def test_a_name_that_is_no_unit_is_refused(name):
    with pytest.raises(ValueError, match="`name` must"):
        record.parse_unit_name(name)


def test_the_run_folder_files_are_built_and_read_in_one_place(tmp_path):
    for trial in (0, 1):
        record.write_unit(tmp_path, make_timing_unit(trial=trial, candidate="sdpa"))
        record.write_unit(tmp_path, make_timing_unit(trial=trial, candidate="eager"))
    assert [p.name for p in record.journal_paths(tmp_path, "timing", candidate="eager")] == [
        record.unit_name("timing", trial=t, config="B1-H2-S16-D64-fp16", candidate="eager",
                          mode="graph") for t in (0, 1)]
    assert record.journal_paths(tmp_path, "trial") == []
    assert record.read_plan(tmp_path) is None
    record.write_plan(tmp_path, {"trials": 2})
    assert record.read_plan(tmp_path) == {"trials": 2}
    assert (tmp_path / record.PLAN).is_file()
    record.write_fatal(tmp_path, "trial 0: another machine\n")
    assert record.read_fatal(tmp_path) == "trial 0: another machine"
    assert record.read_current(tmp_path, 1) is None
    record.write_current(tmp_path, 1, "B1-H2-S16-D64-fp16", ("sdpa", "eager"))
    assert record.read_current(tmp_path, 1) == {"config": "B1-H2-S16-D64-fp16",
                                                 "candidates": ["sdpa", "eager"]}
    record.clear_current(tmp_path, 1)
    record.clear_current(tmp_path, 1)  # clearing twice is harmless
    assert record.read_current(tmp_path, 1) is None


def test_every_table_column_reads_a_declared_field_of_its_unit_kind():
    for table, kind in ((record.UNITS_TABLE, "timing"), (record.PLACEMENTS_TABLE, "timing"),
                        (record.CORRECTNESS_TABLE, "correctness"),
                        (record.KERNELS_TABLE, "kernels")):
        fields = {f.name: f for f in record.UNIT_SCHEMA[kind]}
        for column in table:
            root, _, rest = column.source.partition(".")
            assert root in fields, (kind, column.name, column.source)
            items = fields[root].items
            if items and isinstance(items[0], record.Field):  # a list of records
                assert rest.partition(".")[0] in {f.name for f in items}, column.source
    assert record.table_columns(1) == {name: cols for name, cols in
                                        record.table_columns(2).items()
                                        if name != "placements.parquet"} | {
        "samples.parquet": record.SAMPLE_COLUMNS_V1}
