"""The per-machine tuning cache (``measure.tuning_cache``) and how a trial uses it: a
build that tuned stores its choice once it passed the float64 gate, a later run's build
reuses it, and every unit says which happened (``info["hint_source"]``)."""

import dataclasses
import json
import os
import types

import pytest

from attn_analysis.configs import Config
from attn_analysis.measure import candidates as cands, trial, tuning_cache

TINY = Config(1, 2, 16, 64, "float16", False)


def test_a_stored_choice_comes_back_under_its_key_only(tmp_path):
    path = tmp_path / "tuning.json"
    key = tuning_cache.cache_key("triton", TINY.key, "fp1", "code1")
    assert tuning_cache.lookup(key, path) is None  # no file yet
    tuning_cache.store(key, {"tuning": {"BLOCK_M": 64}}, path)
    assert tuning_cache.lookup(key, path) == {"tuning": {"BLOCK_M": 64}}
    for other in (tuning_cache.cache_key("triton", TINY.key, "fp2", "code1"),  # other GPU/stack
                  tuning_cache.cache_key("triton", TINY.key, "fp1", "code2"),  # other code
                  tuning_cache.cache_key("gluon", TINY.key, "fp1", "code1")):
        assert tuning_cache.lookup(other, path) is None
    assert [p.name for p in tmp_path.iterdir()] == ["tuning.json"]  # no temporary left


def test_a_damaged_or_foreign_file_is_ignored_and_replaced(tmp_path):
    path = tmp_path / "tuning.json"
    key = tuning_cache.cache_key("triton", TINY.key, "fp", "code")
    for text in ("{not json", json.dumps([1, 2]), json.dumps({"format": 99, "entries": {}})):
        path.write_text(text)
        assert tuning_cache.lookup(key, path) is None
    tuning_cache.store(key, {"a": 1}, path)
    assert tuning_cache.lookup(key, path) == {"a": 1}


def test_an_unwritable_cache_is_skipped(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    tuning_cache.store("k", {"a": 1}, blocker / "sub" / "tuning.json")  # no error raised


def test_keys_and_records_are_checked():
    with pytest.raises(ValueError, match="`fingerprint_hash` must be a non-empty string"):
        tuning_cache.cache_key("triton", TINY.key, "", "code")
    with pytest.raises(ValueError, match="`info` must be a dict"):
        tuning_cache.store("k", [1])


def test_many_entries_are_kept_in_one_write_beside_the_others(tmp_path):
    path = tmp_path / "tuning.json"
    tuning_cache.store("old", {"a": 1}, path)
    tuning_cache.store_many({"x": {"b": 2}, "y": {"c": 3}}, path)
    assert [tuning_cache.lookup(k, path) for k in ("old", "x", "y")] == [
        {"a": 1}, {"b": 2}, {"c": 3}]
    tuning_cache.store_many({}, path)  # nothing to keep: the file as it was
    assert tuning_cache.lookup("x", path) == {"b": 2}
    with pytest.raises(ValueError, match="every key must be a non-empty string"):
        tuning_cache.store_many({"": {"a": 1}}, path)
    with pytest.raises(ValueError, match="`info` must be a dict"):
        tuning_cache.store_many({"z": "no"}, path)
    assert tuning_cache.lookup("z", path) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuning.json"]


def test_the_cache_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(tuning_cache.ENV_VAR, str(tmp_path / "t.json"))
    assert tuning_cache.cache_path() == tmp_path / "t.json"
    monkeypatch.delenv(tuning_cache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tuning_cache.cache_path() == tmp_path / "attn_analysis" / "tuning.json"


def test_the_code_hash_changes_with_the_measuring_code(monkeypatch, tmp_path):
    assert len(tuning_cache.code_hash()) == 64
    (tmp_path / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(tuning_cache, "__file__", str(tmp_path / "tuning_cache.py"))
    first = tuning_cache.code_hash()
    (tmp_path / "a.py").write_text("x = 2\n")
    assert tuning_cache.code_hash() != first


# ------------------------------------------------------------------ a trial's use of it

def _worker(tmp_path, device="cuda", earlier=None):
    worker = object.__new__(trial._Worker)
    worker.plan = types.SimpleNamespace(device=device)
    worker.fingerprint_hash = "fp"
    worker._code_hash = "code"
    worker.build_s = {}
    worker._earlier_info = lambda config, cand: earlier
    return worker


@pytest.fixture
def cache_file(monkeypatch, tmp_path):
    path = tmp_path / "tuning.json"
    monkeypatch.setenv(tuning_cache.ENV_VAR, str(path))
    return path


def test_the_run_comes_first_then_the_machine_then_tuning(tmp_path, cache_file):
    assert cands.accepts_hint("triton") and not cands.accepts_hint("sdpa")
    assert _worker(tmp_path)._hint(TINY, "triton") == (None, None)  # nothing to reuse: tune
    key = tuning_cache.cache_key("triton", TINY.key, "fp", "code")
    tuning_cache.store(key, {"tuning": "from an earlier run"})
    assert _worker(tmp_path)._hint(TINY, "triton") == ({"tuning": "from an earlier run"},
                                                      "machine")
    this_run = {"tuning": "from trial 0"}
    assert _worker(tmp_path, earlier=this_run)._hint(TINY, "triton") == (this_run, "run")
    assert _worker(tmp_path)._hint(TINY, "sdpa") == (None, None)  # tunes nothing
    assert _worker(tmp_path, device="cpu")._hint(TINY, "triton") == (None, None)  # no GPU


def test_a_tuned_build_is_stored_only_after_it_passed_the_gate(monkeypatch, tmp_path,
                                                                cache_file):
    calls = []

    def build(config, device, hint=None):
        calls.append(hint)
        return cands.Built(lambda q, k, v: q, {"tuning": (hint or {}).get("tuning", "tuned")})
    monkeypatch.setitem(cands.CANDIDATES, "fake_tuner",
                        cands.Candidate("fake_tuner", "a tuning candidate", build))
    passed = {"value": False}

    @dataclasses.dataclass
    class Result:
        passed: bool
        reason: str = "r"
    monkeypatch.setattr(cands, "check", lambda built, config, device, seed, name="":
                        Result(passed["value"]))
    written = []
    worker = _worker(tmp_path, device="cpu")
    worker.out, worker.trial, worker.done = tmp_path, 0, set()
    worker.clock = trial.PhaseClock()
    worker._write = written.append
    worker._emit = lambda path: None
    worker._tuning_key = lambda config, cand: "key"
    worker.plan = types.SimpleNamespace(device="cpu", seed=0, trials=1, configs=(TINY,))
    monkeypatch.setattr(trial, "_input_seed", lambda plan, t, ci: 1)
    monkeypatch.setattr(trial, "_write_failure", lambda *a: None)
    monkeypatch.setattr(cands, "build", lambda name, config, device, hint=None:
                        build(config, device, hint))
    names = ["correctness__t0__x", "timing__x"]
    assert worker._prepare(TINY, 0, "fake_tuner", names) is None  # failed the gate
    assert tuning_cache.lookup("key") is None
    passed["value"] = True
    built = worker._prepare(TINY, 0, "fake_tuner", names)
    assert built.info["hint_source"] == "tuned" and tuning_cache.lookup("key") == {
        "tuning": "tuned"}
    # a build that reused a choice is not stored again, and says where it came from
    worker._tuning_key = lambda config, cand: "key"
    worker._hint = lambda config, cand: ({"tuning": "reused"}, "machine")
    os.remove(cache_file)
    again = worker._prepare(TINY, 0, "fake_tuner", names)
    assert again.info == {"tuning": "reused", "hint_source": "machine"}
    assert tuning_cache.lookup("key") is None
