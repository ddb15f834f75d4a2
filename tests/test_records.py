"""The recorded-data format: atomic units, consolidation, manifest, verifier, loader."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from attn_analysis import RECORD_FORMAT_VERSION, records, sweep
from attn_analysis.configs import Config

import fake_candidates  # noqa: F401


def make_timing_unit(config="B1-H2-S16-D64-fp16", candidate="sdpa", mode="graph", trial=0,
                     times=(0.5, 0.52, 0.51), status="ok", reason=""):
    """Builder for a timing unit as the sweep writes it."""
    return {"kind": "timing", "config": config, "candidate": candidate, "mode": mode,
            "trial": trial, "status": status, "reason": reason, "times_ms": list(times),
            "timing": {"clock": "cpu_wall", "stop_reason": "n_samples",
                       "ci_rel_halfwidth": 0.01, "calls_per_sample": 1},
            "gpu_state_start": {"sm_clock_mhz": None}, "gpu_state_end": {},
            "measurement_id": f"{candidate}-{mode}-{trial}"}


def make_run(tmp_path, n_trials=2):
    run = tmp_path / "run-a"
    for t in range(n_trials):
        records.write_unit(run, {"kind": "trial", "trial": t,
                                 "fingerprint": {"fingerprint_hash": "abc", "device_kind": "cpu"}})
        for mode in ("graph", "per_call"):
            records.write_unit(run, make_timing_unit(mode=mode, trial=t,
                                                     times=(0.5 + t, 0.6 + t, 0.55 + t)))
        records.write_unit(run, {"kind": "correctness", "config": "B1-H2-S16-D64-fp16",
                                 "candidate": "sdpa", "trial": t, "status": "ok", "reason": "",
                                 "result": {"passed": True, "rel_error": 3e-4,
                                            "max_abs_error": 1e-3, "threshold": 5e-3,
                                            "nonfinite": 0}})
    records.write_unit(run, make_timing_unit(candidate="sdpa_flash", status="unsupported",
                                             reason="cuda only", times=()))
    records.write_unit(run, {"kind": "kernels", "config": "B1-H2-S16-D64-fp16",
                             "candidate": "sdpa", "status": "ok",
                             "kernels": [{"name": "k1", "calls_per_call": 1.0,
                                          "device_ms_per_call": 0.4}]})
    records.write_unit(run, {"kind": "ceilings", "ceilings": {"matmul": {"tflops": 1.0}}})
    records.finalize(run, {"plan": {"device": "cpu"}})
    return run


def test_unit_is_self_checksummed_and_versioned(tmp_path):
    path = records.write_unit(tmp_path, make_timing_unit())
    unit = records.read_unit(path)
    assert unit["format_version"] == RECORD_FORMAT_VERSION
    assert path.name == "timing__t0__B1-H2-S16-D64-fp16__sdpa__graph.json"
    assert not list(tmp_path.rglob(".tmp-*"))


def test_edited_unit_is_refused(tmp_path):
    path = records.write_unit(tmp_path, make_timing_unit())
    body = json.loads(path.read_text())
    body["times_ms"][0] = 0.1
    path.write_text(json.dumps(body))
    with pytest.raises(records.RecordError, match="checksum mismatch"):
        records.read_unit(path)


def test_unknown_format_version_is_refused(tmp_path):
    path = records.write_unit(tmp_path, make_timing_unit())
    body = json.loads(path.read_text())
    body["format_version"] = 99
    path.write_text(json.dumps(body))
    with pytest.raises(records.RecordError, match="unknown format version 99"):
        records.read_unit(path)


def test_finalized_run_verifies_and_loads_as_tidy_tables(tmp_path):
    run = make_run(tmp_path)
    assert records.verify(run) == []
    loaded = records.load(run)
    assert list(loaded.samples.columns) == list(records.SAMPLE_COLUMNS)
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
    problems = records.verify(run)
    assert problems == ["samples.parquet: SHA-256 does not match the manifest"]
    with pytest.raises(records.RecordError, match="samples.parquet"):
        records.load(run)


def test_verifier_catches_an_edited_number_even_with_a_fresh_manifest(tmp_path):
    run = make_run(tmp_path)
    frame = pd.read_parquet(run / "samples.parquet")
    frame.loc[0, "ms"] = frame.loc[0, "ms"] * 0.5  # a "better" number
    frame.to_parquet(run / "samples.parquet", index=False)
    assert "samples.parquet: SHA-256 does not match the manifest" in records.verify(run)
    records.write_manifest(run)  # someone re-signs the edited file
    problems = records.verify(run)
    assert len(problems) == 1
    assert problems[0].startswith("samples.parquet: column 'ms' differs from the journal "
                                  "(first at row 0:")


def test_verifier_reports_missing_and_unlisted_files(tmp_path):
    run = make_run(tmp_path)
    (run / "kernels.parquet").unlink()
    (run / "extra.txt").write_text("x")
    problems = records.verify(run)
    assert "kernels.parquet: listed in the manifest but missing" in problems
    assert "extra.txt: present but not listed in the manifest" in problems


def test_unfinalized_and_absent_runs_do_not_verify(tmp_path):
    records.write_unit(tmp_path / "r", make_timing_unit())
    assert records.verify(tmp_path / "r") == ["manifest.json: missing (the run was never finalized)"]
    assert "no such run folder" in records.verify(tmp_path / "nope")[0]


def test_finished_units_skips_bad_files_and_reports_them(tmp_path):
    good = records.write_unit(tmp_path, make_timing_unit())
    bad = records.write_unit(tmp_path, make_timing_unit(mode="per_call"))
    bad.write_text("{not json")
    names, complaints = records.finished_units(tmp_path)
    assert names == {good.name}
    assert len(complaints) == 1 and bad.name in complaints[0]


def test_unit_name_validates_kind():
    with pytest.raises(ValueError, match="`kind` must be one of"):
        records.unit_name("bogus")


def test_atomic_write_leaves_old_file_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    records.atomic_write_bytes(target, b"old")

    def boom(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(records.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        records.atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert not list(tmp_path.glob(".tmp-*"))


def test_find_runs_lists_finalized_runs_only(tmp_path):
    make_run(tmp_path)
    records.write_unit(tmp_path / "unfinished", make_timing_unit())
    assert [p.name for p in records.find_runs(tmp_path)] == ["run-a"]


# ------------------------------------------- derived files rebuilt from the journal

@pytest.fixture(scope="module")
def swept_run(tmp_path_factory):
    """A tiny CPU run recorded by the sweep, with one kernels unit as a GPU records it."""
    out = tmp_path_factory.mktemp("swept") / "run"
    plan = sweep.Plan(configs=(Config(1, 2, 16, 64),),
                      candidates=("sdpa", "eager", "fake_wrong_scale"),
                      modes=("per_call", "graph"), trials=1, device="cpu",
                      timing={"n_samples": 4}, plugins=("fake_candidates",),
                      ceilings=True, profile=True)
    sweep.run(out, plan, progress=False)
    # The CPU has no kernel evidence; give sdpa's kernels unit the shape a GPU run has.
    records.write_unit(out, {"kind": "kernels", "config": "B1-H2-S16-D64-fp16",
                             "candidate": "sdpa", "status": "ok", "reason": "",
                             "kernels": [{"name": "flash_fwd", "calls_per_call": 1.0,
                                          "device_ms_per_call": 0.0123},
                                         {"name": "memset", "calls_per_call": 2.0,
                                          "device_ms_per_call": 0.0011}]})
    info = json.loads((out / "run.json").read_text())
    records.finalize(out, info)
    assert records.verify(out) == []
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
def test_verifier_rebuilds_every_derived_file_from_the_journal(swept_run, tmp_path, case):
    tamper, expected = TAMPERING[case]
    run = tmp_path / "run"
    shutil.copytree(swept_run, run)
    assert records.verify(run) == []
    tamper(run)
    assert records.verify(run) != []  # the manifest notices first ...
    records.write_manifest(run)  # ... so the tamperer re-signs every file
    problems = records.verify(run)
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected), problems
    with pytest.raises(records.RecordError, match=expected.split(":")[0]):
        records.load(run)


def test_verifier_reports_the_first_differing_row_and_both_values(tmp_path):
    run = make_run(tmp_path)
    frame = pd.read_parquet(run / "units.parquet")
    frame.loc[1, "reason"] = "edited"
    frame.to_parquet(run / "units.parquet", index=False)
    records.write_manifest(run)
    assert records.verify(run) == [
        "units.parquet: column 'reason' differs from the journal "
        "(first at row 1: 'edited' on disk, '' in the journal)"]


def test_verifier_reports_a_changed_column_type(tmp_path):
    run = make_run(tmp_path)
    frame = pd.read_parquet(run / "correctness.parquet")
    frame["nonfinite"] = frame["nonfinite"].astype("float64")  # same values, other type
    frame.to_parquet(run / "correctness.parquet", index=False)
    records.write_manifest(run)
    assert records.verify(run) == [
        "correctness.parquet: column 'nonfinite' is float64, the journal gives int64"]
