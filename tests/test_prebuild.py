"""The sweep's prebuild (measure.prebuild): which candidates it compiles, in how many
processes, in what order; that its workers are other processes that fill caches and time
nothing; that a failing or hanging compile is recorded and the sweep measures anyway; and
what run.json and the trial unit record."""

from __future__ import annotations

import json
import zlib

import pytest
import torch

import fake_candidates  # noqa: F401  (registers the candidates that compile)
from attn_analysis import record
from attn_analysis.configs import Config
from attn_analysis.measure import candidates as cands, prebuild, sweep
from attn_analysis.measure import triton_attention as ta, tuning_cache
from conftest import TINY_CONFIGS, tiny_plan

KEYS = list(TINY_CONFIGS)
# The workers read ATTN_TEST_WARM_DIR, which a test sets: spawned, they see this test's
# value (a fork server keeps the environment it started with).
SPAWN = {"start_method": "spawn"}


@pytest.fixture(autouse=True)
def own_tuning_cache(tmp_path_factory, monkeypatch):
    """Each test its own per-machine cache, where the prebuild keeps its markers (spawned
    workers see it; a test's second prebuild finds the first one's)."""
    path = tmp_path_factory.mktemp("tuning-cache") / "tuning.json"
    monkeypatch.setenv(tuning_cache.ENV_VAR, str(path))
    return path


def test_only_candidates_that_compile_are_prebuilt_in_plan_order():
    plan = tiny_plan(candidates=("sdpa", "eager_compiled", "eager", "flex", "triton"),
                     device="cuda")
    assert [c for _, c in prebuild.jobs(plan)] == ["eager_compiled", "flex", "triton"] * len(KEYS)
    assert prebuild.jobs(plan) == [(k, c) for k in KEYS
                                   for c in ("eager_compiled", "flex", "triton")]
    one = [Config.from_key(KEYS[1])]
    assert prebuild.jobs(plan, one) == [(KEYS[1], c) for c in ("eager_compiled", "flex", "triton")]
    assert prebuild.jobs(tiny_plan(candidates=("sdpa", "eager"))) == []
    # the registry says which compile: SDPA and eager compile nothing
    assert {n for n, c in cands.CANDIDATES.items() if c.warm is not None} >= {
        "eager_compiled", "flex", "triton"}
    assert cands.get("sdpa").warm is None and cands.get("eager").warm is None


def test_each_candidates_first_configuration_goes_first():
    pairs = [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y"), ("c", "z")]
    assert prebuild.job_order(pairs) == [("a", "x"), ("a", "y"), ("c", "z"), ("b", "x"),
                                         ("b", "y")]
    pairs = [(c, n) for c in "abc" for n in "xy"]
    assert prebuild.job_order(pairs) == [("a", "x"), ("a", "y"), ("b", "x"), ("c", "x"),
                                         ("b", "y"), ("c", "y")]
    assert sorted(prebuild.job_order(pairs)) == sorted(pairs)
    assert prebuild.job_order([]) == []


def test_the_candidates_that_tune_go_first():
    pairs = [(c, n) for c in "abc" for n in ("ec", "flex", "triton")]
    order = prebuild.job_order(pairs, heavy=["triton"])
    assert order[:3] == [("a", "triton"), ("b", "triton"), ("c", "triton")]
    assert order[3:] == prebuild.job_order([p for p in pairs if p[1] != "triton"])
    assert prebuild.job_order(pairs, heavy=["nothing"]) == prebuild.job_order(pairs)
    # the sweep's heavy candidates are those that tune
    assert cands.accepts_hint("triton") and not cands.accepts_hint("eager_compiled")


@pytest.mark.parametrize("n_jobs, cpus, want", [(0, 16, 0), (30, 16, 15), (30, 64, 16),
                                                (3, 16, 3),
                                                (30, 2, 1), (30, None, 1), (30, 1, 1),
                                                (30, 5, 4)])
def test_worker_count_leaves_a_core_to_the_sweep(n_jobs, cpus, want):
    assert prebuild.worker_count(n_jobs, cpus) == want


def test_on_a_gpu_by_default_and_named_when_invalid():
    assert prebuild.wanted(tiny_plan(device="cuda"), None) is True
    assert prebuild.wanted(tiny_plan(), None) is False
    assert prebuild.wanted(tiny_plan(), True) is True
    assert prebuild.wanted(tiny_plan(device="cuda"), False) is False
    with pytest.raises(ValueError, match=r"`prebuild` must be True, False or None"):
        prebuild.wanted(tiny_plan(), "yes")


def test_pending_configs_are_those_with_a_unit_left():
    plan = tiny_plan()
    names = sweep.plan_units(plan)[1]
    assert prebuild.pending_configs(plan, []) == []
    left = [n for n in names if record.parse_unit_name(n).get("config") == KEYS[1]]
    assert [c.key for c in prebuild.pending_configs(plan, left)] == [KEYS[1]]
    assert [c.key for c in prebuild.pending_configs(plan, names)] == KEYS


@pytest.mark.slow  # starts processes that import torch
def test_workers_are_other_processes_and_failures_are_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_TEST_WARM_DIR", str(tmp_path))
    plan = tiny_plan(candidates=("sdpa", "fake_warmed", "fake_warm_fails"), **SPAWN)
    summary = prebuild.run(sweep.trial_context(plan.start_method), plan)
    rows = {(r["config"], r["candidate"]): r for r in summary["jobs"]}
    assert set(rows) == {(k, c) for k in KEYS for c in ("fake_warmed", "fake_warm_fails")}
    for key in KEYS:
        assert rows[(key, "fake_warmed")]["status"] == "ok"
        failed = rows[(key, "fake_warm_fails")]
        assert failed["status"] == "error"
        assert failed["reason"] == ("RuntimeError: simulated compiler failure while "
                                    "prebuilding")
    markers = sorted(p.name for p in tmp_path.iterdir())
    assert sorted(m.split("__")[0] for m in markers) == sorted(KEYS)
    import os
    assert all(int(m.split("__")[1]) != os.getpid() for m in markers)
    assert summary["workers"] == prebuild.worker_count(4, os.cpu_count())
    assert json.loads(json.dumps(summary)) == summary  # what run.json records


@pytest.mark.slow  # starts processes that import torch
def test_a_pair_is_compiled_once_per_machine(tmp_path, monkeypatch, own_tuning_cache):
    """The second prebuild on this machine finds the first one's markers and compiles
    nothing it had compiled; what failed is tried again; another measuring code (or
    machine) compiles again."""
    warm_dir = tmp_path / "warm"
    warm_dir.mkdir()
    monkeypatch.setenv("ATTN_TEST_WARM_DIR", str(warm_dir))
    plan = tiny_plan(candidates=("fake_warmed", "fake_warm_fails"), **SPAWN)
    ctx = sweep.trial_context(plan.start_method)
    first = prebuild.run(ctx, plan)
    assert len(list(warm_dir.iterdir())) == len(KEYS)
    assert "marker" not in first["jobs"][0]  # the key stays in the cache, not in run.json
    second = prebuild.run(ctx, plan)
    assert len(list(warm_dir.iterdir())) == len(KEYS)  # nothing compiled again
    assert {(r["candidate"], r["status"]) for r in second["jobs"]} == {
        ("fake_warmed", "cached"), ("fake_warm_fails", "error")}
    entries = json.loads(own_tuning_cache.read_text())["entries"]
    prebuilt = [k for k in entries if k.startswith(prebuild.MARKER_PREFIX)]
    assert sorted(k.split("|")[1] for k in prebuilt) == sorted(KEYS)
    assert all(k.startswith(prebuild.MARKER_PREFIX + "fake_warmed|") for k in prebuilt)
    # another measuring code: the markers do not apply
    monkeypatch.setattr(tuning_cache, "code_hash", lambda: "other code")
    (own_tuning_cache).write_text(json.dumps({"format": 1, "entries": {
        prebuild.marker_key("fake_warmed", k, "some-other-machine", "c"): {} for k in KEYS}}))
    third = prebuild.run(ctx, plan)
    assert {r["status"] for r in third["jobs"] if r["candidate"] == "fake_warmed"} == {"ok"}
    assert len(list(warm_dir.iterdir())) == 2 * len(KEYS)


@pytest.mark.slow  # starts processes that import torch
def test_no_choice_made_by_timing_outlives_the_prebuild(tmp_path, monkeypatch):
    """Inductor keeps what its first launch timed (``.best_config``, the selector's
    records); the workers' are removed, an earlier run's and the compiled code stay."""
    inductor = tmp_path / "inductor"
    (inductor / "old").mkdir(parents=True)
    earlier = [inductor / "old" / "k.best_config", inductor / "old" / "k.py"]
    for path in earlier:
        path.write_text("{}")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor))
    assert prebuild.inductor_cache_dir() == inductor
    assert prebuild.timing_choices(inductor) == {earlier[0]}
    assert prebuild.timing_choices(tmp_path / "none") == set()
    plan = tiny_plan(candidates=("fake_warm_times",), **SPAWN)
    summary = prebuild.run(sweep.trial_context(plan.start_method), plan)
    assert {r["status"] for r in summary["jobs"]} == {"ok"}
    assert summary["timing_choices_removed"] == 2 * len(KEYS)
    left = {p.relative_to(inductor).as_posix() for p in inductor.rglob("*") if p.is_file()}
    assert {"old/k.best_config", "old/k.py"} <= left
    assert len([n for n in left if n.startswith("ab/") and n.endswith(".py")]) == len(KEYS)
    assert not [n for n in left if n.startswith(("ab/", "cache/")) and not n.endswith(".py")]


@pytest.mark.slow  # starts processes that import torch
def test_a_hanging_compile_is_left_not_done_and_its_worker_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_TEST_WARM_DIR", str(tmp_path))
    plan = tiny_plan(configs=(Config.from_key(KEYS[0]),),
                     candidates=("fake_warm_hangs",))
    summary = prebuild.run(sweep.trial_context(plan.start_method), plan, timeout_s=3)
    assert [(r["candidate"], r["status"], r["s"]) for r in summary["jobs"]] == [
        ("fake_warm_hangs", "not_done", None)]
    assert summary["timeout_s"] == 3.0
    import multiprocessing
    assert not [p for p in multiprocessing.active_children()
                if p.name.startswith("attn-prebuild")]


def test_no_jobs_starts_no_process():
    summary = prebuild.run(sweep.trial_context("spawn"), tiny_plan())
    assert summary["jobs"] == [] and summary["workers"] == 0


@pytest.mark.slow  # starts processes that import torch
def test_a_sweep_records_its_prebuild_and_measures_anyway(tmp_path, monkeypatch):
    warm_dir = tmp_path / "warm"
    warm_dir.mkdir()
    monkeypatch.setenv("ATTN_TEST_WARM_DIR", str(warm_dir))
    plan = tiny_plan(candidates=("sdpa", "fake_warmed", "fake_warm_fails"), trials=1, **SPAWN)
    out = tmp_path / "run"
    summary = sweep.run(out, plan, progress=False, prebuild=True)
    assert summary["not_timed"] == {} and summary["errored"] == 0, summary
    info = record.read_info(out)
    done = info["prebuild_last_invocation"]
    assert {(r["candidate"], r["status"]) for r in done["jobs"]} == {
        ("fake_warmed", "ok"), ("fake_warm_fails", "error")}
    assert sorted(p.name.split("__")[0] for p in warm_dir.iterdir()) == sorted(KEYS)
    trial = record.read_unit(next(iter(record.journal_paths(out, "trial"))))
    assert set(trial["build_s_by_candidate"]) == set(plan.candidates)
    assert all(s >= 0 for s in trial["build_s_by_candidate"].values())
    assert record.verify(out) == []
    # a finished run asks for nothing: no prebuild, nothing rewritten
    again = sweep.run(out, plan, progress=False, prebuild=True)
    assert again["finished"] and record.read_info(out) == info


@pytest.mark.slow  # starts processes that import torch
def test_off_by_default_on_a_cpu_and_refused_before_anything_is_written(tmp_path):
    plan = tiny_plan(candidates=("sdpa", "fake_warmed"), trials=1)
    out = tmp_path / "run"
    sweep.run(out, plan, progress=False)
    assert "prebuild_last_invocation" not in record.read_info(out)
    with pytest.raises(ValueError, match="`prebuild` must be"):
        sweep.run(tmp_path / "other", plan, progress=False, prebuild="always")
    assert not (tmp_path / "other").exists()


def test_triton_precompile_compiles_what_tune_tries_and_times_nothing(monkeypatch):
    """On a GPU, ``precompile`` runs each configuration ``tune`` would try once; here the
    launch is replaced by a recorder (one configuration fails, as ``tune`` skips it)."""
    tried = []

    def attention(q, k, v, *, causal=False, config=None, out=None):
        tried.append(config)
        if len(tried) == 2:
            raise RuntimeError("out of shared memory")
        return out

    monkeypatch.setattr(ta, "INTERPRETED", False)
    monkeypatch.setattr(ta, "_attention_iv", lambda *args: None)
    monkeypatch.setattr(ta, "attention", attention)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    monkeypatch.setattr(ta.triton.testing, "do_bench",
                        lambda *a, **k: pytest.fail("precompile timed something"))
    q = torch.randn(1, 2, 64, 64).half()
    got = ta.precompile(q, q, q, start=0)
    want = [c for c in ta._candidates(64) if c["BLOCK_M"] <= 64 and c["BLOCK_N"] <= 64]
    assert tried == want and len(want) >= 2
    assert got == {"n_compiled": len(want) - 1, "n_failed": 1}
    # another start: the same configurations, begun at that one and wrapping around
    for start in (1, len(want) + 1):
        tried.clear()
        ta.precompile(q, q, q, start=start)
        assert tried == want[1:] + want[:1]
    for bad in (-1, 1.5, None, "B32-H8-S512-D64-fp16"):
        with pytest.raises(ValueError, match=r"`start` must be an integer >= 0"):
            ta.precompile(q, q, q, start=bad)


def test_triton_precompile_needs_a_gpu(monkeypatch):
    monkeypatch.setattr(ta, "INTERPRETED", True)
    q = torch.randn(1, 2, 8, 64).half()
    with pytest.raises(RuntimeError, match=r"`precompile` runs on a GPU"):
        ta.precompile(q, q, q)
    with pytest.raises(RuntimeError, match=r"`tune` runs on a GPU"):
        ta.tune(q, q, q)


def test_the_prebuild_begins_each_shapes_triton_precompile_at_its_key(monkeypatch):
    got = []
    monkeypatch.setattr(ta, "precompile", lambda q, k, v, *, causal, start: got.append(start))
    monkeypatch.setattr(cands, "make_inputs", lambda config, device, seed: (None,) * 3)
    for key in KEYS:
        cands._warm_triton(Config.from_key(key), "cuda")
    assert got == [zlib.crc32(key.encode()) for key in KEYS]


def test_warm_says_when_a_candidate_compiles_nothing():
    config = Config.from_key(KEYS[0])
    assert prebuild.warm("sdpa", config, "cpu") is False
    assert prebuild.warm("flex", config, "cpu") is False  # a GPU candidate: not here
    assert prebuild.warm("fake_warmed", config, "cpu") is True
    with pytest.raises(ValueError):
        prebuild.warm("sdpa", config, "tpu")
