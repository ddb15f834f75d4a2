"""A plan splits into shards (``--shard K/N``) deterministically; ``merge`` verifies the
finalized shard runs and joins them into the run the unsharded plan calls for, every
provenance field intact, and refuses what is not the N shards of one plan (CPU)."""

import json
import shutil
from pathlib import Path

import pytest

from attn_analysis import record
from attn_analysis.measure import sweep
from attn_analysis.record import journal, read_info

import fake_candidates  # noqa: F401
from conftest import main_here, tiny_plan


def _plan(**kw):
    base = dict(configs=tiny_plan().configs[:1], candidates=("sdpa", "eager"),
                modes=("per_call",), trials=3)
    base.update(kw)
    return tiny_plan(**base)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The two shards of a 3-process plan, each swept into its own finalized run."""
    root = tmp_path_factory.mktemp("shards")
    dirs = []
    for k in (1, 2):
        out = root / f"run-s{k}"
        sweep.run(out, _plan(shard=(k, 2)), progress=False, gpus=("fakeA", "fakeB"))
        dirs.append(out)
    return dirs


def test_shard_trials_partition_every_plan():
    for trials in (1, 2, 5, 12):
        for n in range(1, trials + 1):
            parts = [journal.shard_trials(trials, (k, n)) for k in range(1, n + 1)]
            assert sorted(t for p in parts for t in p) == list(range(trials))
            assert all(parts)  # no shard empty when N <= trials
            assert 0 in parts[0]  # shard 1 holds trial 0 (ceilings, kernels)
    assert journal.shard_trials(4, None) == [0, 1, 2, 3]
    assert journal.shard_trials(7, "2/3") == [1, 4]


def test_shard_is_validated_naming_the_parameter():
    for bad in ("0/2", "3/2", "1", "a/b", (1,), (True, 2), "1/2/3"):
        with pytest.raises(ValueError, match="`shard`"):
            journal.shard_iv(bad)
    with pytest.raises(ValueError, match="`shard`.*holds no trial"):
        _plan(trials=2, shard=(3, 3))


def test_a_shard_records_its_trials_only_and_verifies(shards):
    s1, s2 = shards
    assert record.verify(s1) == [] and record.verify(s2) == []
    trials = lambda d: sorted(u["trial"] for u in journal.read_journal(d)[0].values()
                              if u["kind"] == "trial")
    assert trials(s1) == [0, 2] and trials(s2) == [1]
    assert read_info(s1)["plan"]["shard"] == [1, 2]
    # an unsharded plan's JSON carries no shard key: plans recorded before shards read alike
    assert "shard" not in _plan().to_json()


def test_merge_joins_shards_into_the_unsharded_run(shards, tmp_path):
    out = record.merge(tmp_path / "merged", shards)
    assert record.verify(out) == []
    info = read_info(out)
    assert info["plan"] == _plan().to_json()
    assert info["run_id"] == "merged"
    names = {n for names in sweep.plan_units(_plan()).values() for n in names}
    assert set(journal.read_journal(out)[0]) == names
    # every journal file is the shard's, byte for byte
    for d in shards:
        for path in (d / "journal").glob("*.json"):
            assert (out / "journal" / path.name).read_bytes() == path.read_bytes()
    # provenance: each shard's own run.json, with its id, content hash and invocation
    merged_from = info["merged_from"]
    assert [m["shard"] for m in merged_from] == [[1, 2], [2, 2]]
    for m, d in zip(merged_from, shards):
        own = read_info(d)
        assert m["run_id"] == d.name and m["content_hash"] == own["content_hash"]
        assert m["gpus_last_invocation"] == ["fakeA", "fakeB"]
        assert {k: v for k, v in m.items() if k != "shard"} == own
    # each process's pin survives in the merged fingerprint and trial units
    units = journal.read_journal(out)[0]
    assert {u["cuda_visible_devices"] for u in units.values() if u["kind"] == "trial"} <= {
        "fakeA", "fakeB"}
    fp = json.loads((out / "fingerprint.json").read_text())
    assert sorted(fp["trials"]) == ["0", "1", "2"]
    assert record.load(out).samples["trial"].nunique() == 3


def test_merge_refuses_what_is_not_the_shards_of_one_plan(shards, tmp_path):
    s1, s2 = shards
    cases = [([s1], "missing \\[2\\]"), ([s1, s1, s2], "given twice \\[1\\]")]
    for dirs, words in cases:
        with pytest.raises(ValueError, match=f"`shard_dirs`.*{words}"):
            record.merge(tmp_path / "x", dirs)
    # another plan (more samples) as shard 2
    other = tmp_path / "other-s2"
    sweep.run(other, _plan(shard=(2, 2), timing={"n_samples": 5}), progress=False)
    with pytest.raises(ValueError, match="another plan.*timing"):
        record.merge(tmp_path / "x", [s1, other])
    # an unsharded run
    whole = tmp_path / "whole"
    sweep.run(whole, _plan(trials=1), progress=False)
    with pytest.raises(ValueError, match="not a shard"):
        record.merge(tmp_path / "x", [whole])
    # a shard that does not verify
    broken = Path(shutil.copytree(s2, tmp_path / "b" / s2.name))
    first = sorted((broken / "journal").glob("timing__*.json"))[0]
    first.write_text(first.read_text().replace('"per_call"', '"per_call" '))
    with pytest.raises(ValueError, match="does not verify"):
        record.merge(tmp_path / "x", [s1, broken])
    # an existing output folder
    (tmp_path / "exists").mkdir()
    with pytest.raises(ValueError, match="`out_dir`.*exists"):
        record.merge(tmp_path / "exists", shards)
    assert not (tmp_path / "x").exists()
    assert not list(tmp_path.glob(".merge-*"))


def test_merge_refuses_different_machines_unless_the_plan_allows_mixed(tmp_path):
    import importlib
    merge_module = importlib.import_module("attn_analysis.record.merge")
    dirs = []
    for name, h in (("a", "abc"), ("b", "def")):
        d = tmp_path / name
        d.mkdir()
        (d / "fingerprint.json").write_text(json.dumps(
            {"trials": {"0": {"fingerprint_hash": h}}}))
        dirs.append(d)
    with pytest.raises(ValueError, match="`shard_dirs`.*different fingerprints"):
        merge_module._same_machine(dirs, {"allow_mixed": False})
    merge_module._same_machine(dirs, {"allow_mixed": True})
    merge_module._same_machine(dirs[:1], {"allow_mixed": False})


def test_cli_sweeps_a_shard_and_merges(capsys, tmp_path, shards):
    out = tmp_path / "cli-s1"
    done = main_here(capsys, "sweep", "--out", str(out), "--device", "cpu", "--matrix",
                     "tiny-v1", "--candidates", "sdpa", "--modes", "per_call", "--trials", "3",
                     "--samples", "3", "--placements", "1", "--no-ceilings", "--no-profile",
                     "--no-prebuild", "--shard", "2/3", "--quiet")
    assert done.returncode == 0, done.stderr
    assert read_info(out)["plan"]["shard"] == [2, 3]
    bad = main_here(capsys, "sweep", "--out", str(tmp_path / "y"), "--device", "cpu",
                    "--shard", "4/3", "--quiet")
    assert bad.returncode == 1 and "`--shard`" in bad.stderr
    gpu = main_here(capsys, "sweep", "--out", str(tmp_path / "z"), "--device", "cpu",
                    "--matrix", "tiny-v1", "--gpus", "0", "--quiet")
    assert gpu.returncode == 1 and "`--gpus`" in gpu.stderr
    merged = main_here(capsys, "merge", str(tmp_path / "m"), *map(str, shards))
    assert merged.returncode == 0, merged.stderr
    assert record.verify(tmp_path / "m") == []
    refused = main_here(capsys, "merge", str(tmp_path / "m2"), str(shards[0]))
    assert refused.returncode == 1 and "missing [2]" in refused.stderr


def test_merge_across_versions_only_on_request(shards, tmp_path):
    s1, s2 = shards
    newer = Path(shutil.copytree(s2, tmp_path / "v" / s2.name))
    info = json.loads((newer / "run.json").read_text())
    info["attn_analysis_version"] = "9.9.9"
    (newer / "run.json").write_text(json.dumps(info))
    from attn_analysis.record import consolidate
    consolidate.write_manifest(newer)  # a shard recorded by another version, as it would be
    assert record.verify(newer) == []
    with pytest.raises(ValueError, match="different versions.*across_versions"):
        record.merge(tmp_path / "x", [s1, newer])
    with pytest.raises(ValueError, match="`across_versions` must be a bool"):
        record.merge(tmp_path / "x", [s1, newer], across_versions="yes")
    assert not (tmp_path / "x").exists()
    out = record.merge(tmp_path / "x", [s1, newer], across_versions=True)
    assert record.verify(out) == []
    merged = read_info(out)
    own = read_info(s1)["attn_analysis_version"]
    assert merged["attn_analysis_version"] == " + ".join(sorted([own, "9.9.9"]))
    assert merged["across_versions"] is True
    assert [m["attn_analysis_version"] for m in merged["merged_from"]] == [own, "9.9.9"]
    # shards of one version merge as before, without the flag in run.json
    same = record.merge(tmp_path / "same", shards, across_versions=True)
    assert "across_versions" not in read_info(same)
