"""Tests for attn_analysis.measure.timing on the CPU: wall clock, stopping rule, validation, processes.

Most tests replace the module's host clock (``timing._now_ns``) with a fake one that only
moves when the timed function runs, so each sample's time and the budget are exact.
"""

import dataclasses
import inspect
import json
import os
import time

import numpy as np
import pytest

from attn_analysis.measure import profiler, processes, timing
from attn_analysis.analyse.intervals import median_ci


class FakeClock:
    """A clock in ns that advances only by the durations (ms) the fake function spends."""

    def __init__(self, durations_ms):
        self.t = 0
        self.calls = 0
        self._next = durations_ms if callable(durations_ms) else (lambda: durations_ms)

    def now(self):
        return self.t

    def fn(self):
        self.calls += 1
        self.t += int(round(self._next() * 1e6))


@pytest.fixture
def clock(monkeypatch):
    """Install a fake clock; the test sets its durations through the returned factory."""
    def install(durations_ms):
        c = FakeClock(durations_ms)
        monkeypatch.setattr(timing, "_now_ns", c.now)
        return c
    return install


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(timing, "_cuda_available", lambda: False)


def _noisy(seed=0, sigma=1.0):
    rng = np.random.default_rng(seed)
    return lambda: float(rng.lognormal(0.0, sigma))


# ---------------------------------------------------------------- defaults and docstring

DEFAULTS = dict(mode="graph", device=None, n_samples=None, ci_target=0.005, budget_s=2.0,
                min_samples=20, max_samples=5000, warmup_ms=25.0, calls_per_sample=None,
                flush_bytes=None, confidence=0.95)


def test_defaults_pinned_and_documented():
    params = inspect.signature(timing.measure).parameters
    got = {k: v.default for k, v in params.items() if k != "fn"}
    assert got == DEFAULTS
    doc = " ".join(timing.__doc__.split())  # the module docstring states the signature
    for name, value in DEFAULTS.items():
        assert f"{name}={value!r}" in doc.replace('"', "'"), name
    assert timing.MODES == ("per_call", "cold_l2", "graph")


# ---------------------------------------------------------------- real wall clock

@pytest.mark.parametrize("mode", ["per_call", "graph"])
def test_sleep_of_2ms_reads_about_2ms(mode):
    r = timing.measure(lambda: time.sleep(0.002), mode, device="cpu", n_samples=8,
                       warmup_ms=5.0)
    assert r.clock == "cpu_wall" and r.device == "cpu" and r.mode == mode
    assert all(t > 0 for t in r.times_ms)
    # ms, not s (0.002) or us (2000). Sleep only overshoots, by the scheduler's latency,
    # which a loaded machine stretches: the upper bound checks the unit, not the machine.
    assert 1.95 <= r.median_ms <= 50
    assert r.calls_per_sample == 1  # a 2 ms call needs no batching to pass GRAPH_TARGET_MS
    assert r.pid == os.getpid() and r.elapsed_s > 8 * 0.002


def test_device_none_without_cuda_uses_wall_clock(no_cuda):
    r = timing.measure(lambda: None, "per_call", n_samples=3, warmup_ms=0)
    assert (r.device, r.clock) == ("cpu", "cpu_wall")


# ---------------------------------------------------------------- counts and divisors

@pytest.mark.parametrize("mode", timing.MODES)
def test_n_samples_honoured_exactly(clock, mode):
    c = clock(0.5)
    kw = {"flush_bytes": 4096} if mode == "cold_l2" else {}
    r = timing.measure(c.fn, mode, device="cpu", n_samples=37, **kw)
    assert r.n == len(r.times_ms) == 37 and r.stop_reason == "n_samples"
    assert r.times_ms == (0.5,) * 37  # the flush lies outside the timed span


def test_graph_divisor_applied(clock):
    c = clock(1.0)
    r = timing.measure(c.fn, "graph", device="cpu", n_samples=5, calls_per_sample=4,
                       warmup_ms=0)
    assert r.calls_per_sample == 4
    assert r.times_ms == (1.0,) * 5  # 4 ms per sample / 4 calls
    assert c.calls == 1 + timing.N_ESTIMATE_CALLS + 5 * 4


@pytest.mark.parametrize("call_ms, k", [(2.0, 1), (1.0, 1), (0.3, 4), (0.02, 50), (0.015, 67),
                                        (0.0001, 100)])
def test_graph_calls_per_sample_auto(clock, call_ms, k):
    assert timing.GRAPH_TARGET_MS == 1.0  # k = min(max(ceil(1.0 / call_ms), 1), 100)
    r = timing.measure(clock(call_ms).fn, "graph", device="cpu", n_samples=3, warmup_ms=0)
    assert r.calls_per_sample == k


def test_warmup_count_from_millisecond_budget(clock):
    r = timing.measure(clock(1.0).fn, "per_call", device="cpu", n_samples=2, warmup_ms=25.0)
    assert r.n_warmup_calls == 1 + 5 + 25
    r = timing.measure(clock(1.0).fn, "per_call", device="cpu", n_samples=2, warmup_ms=0)
    assert r.n_warmup_calls == 1 + 5


def test_cold_l2_flush_bytes_recorded(clock):
    r = timing.measure(clock(1.0).fn, "cold_l2", device="cpu", n_samples=2, flush_bytes=8192)
    assert r.flush_bytes == 8192
    r = timing.measure(clock(1.0).fn, "cold_l2", device="cpu", n_samples=1, warmup_ms=0)
    assert r.flush_bytes == timing.CPU_FLUSH_BYTES == 64 * 2**20
    r = timing.measure(clock(1.0).fn, "graph", device="cpu", n_samples=1)
    assert r.flush_bytes is None


# ---------------------------------------------------------------- stopping rule

def test_stops_on_ci_target_for_constant_fn(clock):
    rng = np.random.default_rng(1)
    c = clock(lambda: 1.0 + 1e-4 * rng.random())
    r = timing.measure(c.fn, "per_call", device="cpu")
    assert r.stop_reason == "ci_target"
    assert r.n == 20  # never below min_samples, and the first batch already suffices
    lo, hi = median_ci(r.times_ms, 0.95)
    assert r.ci_rel_halfwidth == pytest.approx((hi - lo) / 2 / np.median(r.times_ms))
    assert r.ci_rel_halfwidth <= 0.005


def test_min_samples_respected_by_ci_stop(clock):
    r = timing.measure(clock(1.0).fn, "per_call", device="cpu", min_samples=57)
    assert (r.stop_reason, r.n) == ("ci_target", 57)


def test_stops_on_budget_for_noisy_fn(clock):
    r = timing.measure(clock(_noisy()).fn, "per_call", device="cpu", budget_s=2.0)
    assert r.stop_reason == "budget"
    assert r.ci_rel_halfwidth > 0.005 and r.n >= 20
    assert 2.0 <= r.elapsed_s <= 2.2  # batches sized to the budget left (2.47 s if not)


def test_stops_on_max_samples(clock):
    r = timing.measure(clock(_noisy()).fn, "per_call", device="cpu", budget_s=1e6,
                       max_samples=150)
    assert (r.stop_reason, r.n) == ("max_samples", 150)


def test_looser_target_stops_sooner(clock):
    n = [timing.measure(clock(_noisy(3, 0.2)).fn, "per_call", device="cpu", budget_s=1e6,
                        ci_target=t).n for t in (0.05, 0.02)]
    assert n[0] < n[1]


# ---------------------------------------------------------------- the result type

def test_timing_sample_is_frozen_and_validates():
    kw = dict(times_ms=[1.0, 3.0, 2.0], mode="graph", clock="cpu_wall", device="cpu",
              calls_per_sample=1, n_warmup_calls=0, flush_bytes=None, stop_reason="n_samples",
              ci_rel_halfwidth=1.0, elapsed_s=0.1)
    s = timing.TimingSample(**kw)
    assert s.times_ms == (1.0, 3.0, 2.0) and s.median_ms == 2.0 and s.n == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.mode = "cold_l2"
    with pytest.raises(ValueError, match="`stop_reason` must be one of"):
        timing.TimingSample(**{**kw, "stop_reason": "tired"})
    with pytest.raises(ValueError, match="`clock` must be one of"):
        timing.TimingSample(**{**kw, "clock": "sundial"})
    with pytest.raises(ValueError, match="`times_ms` must hold"):
        timing.TimingSample(**{**kw, "times_ms": []})


# ---------------------------------------------------------------- settings kept in the sample

NEW_SETTINGS = ("n_samples", "ci_target", "budget_s", "min_samples", "max_samples",
                "warmup_ms")


def test_settings_names_are_measure_keywords():
    assert timing.SETTINGS == NEW_SETTINGS + ("confidence",)
    params = inspect.signature(timing.measure).parameters
    fields = {f.name for f in dataclasses.fields(timing.TimingSample)}
    assert set(timing.SETTINGS) <= set(params) and set(timing.SETTINGS) <= fields


def test_timing_sample_setting_defaults_are_measures():
    # Pinned twice: a TimingSample built by hand claims measure's documented defaults.
    got = {f.name: f.default for f in dataclasses.fields(timing.TimingSample)
           if f.name in timing.SETTINGS}
    assert got == {k: DEFAULTS[k] for k in timing.SETTINGS}
    assert got == dict(n_samples=None, ci_target=0.005, budget_s=2.0, min_samples=20,
                       max_samples=5000, warmup_ms=25.0, confidence=0.95)


def test_measure_records_settings_passed(clock):
    passed = dict(ci_target=0.02, budget_s=3.5, min_samples=7, max_samples=99,
                  warmup_ms=1.5, confidence=0.9)
    r = timing.measure(clock(1.0).fn, "per_call", device="cpu", **passed)
    assert {k: getattr(r, k) for k in timing.SETTINGS} == {"n_samples": None, **passed}
    r = timing.measure(clock(1.0).fn, "per_call", device="cpu", n_samples=37, **passed)
    assert r.n_samples == 37 == r.n
    assert {k: getattr(r, k) for k in passed} == passed  # passed, unused, still recorded


def test_measure_records_documented_defaults(clock):
    r = timing.measure(clock(1.0).fn, "graph", device="cpu")
    assert {k: getattr(r, k) for k in timing.SETTINGS} == {k: DEFAULTS[k]
                                                          for k in timing.SETTINGS}
    assert r.n_samples is None and r.n == 20  # requested (adaptive) vs taken


def test_recorded_settings_are_plain_json_values(clock):
    r = timing.measure(clock(1.0).fn, "per_call", device="cpu", n_samples=np.int64(5),
                       ci_target=np.float32(0.25), budget_s=2, min_samples=np.int32(3),
                       max_samples=np.int64(40), warmup_ms=0, confidence=np.float64(0.9))
    settings = {k: getattr(r, k) for k in timing.SETTINGS}
    types = {k: type(v) for k, v in settings.items()}
    assert types == dict(n_samples=int, ci_target=float, budget_s=float, min_samples=int,
                         max_samples=int, warmup_ms=float, confidence=float)
    assert json.loads(json.dumps(settings, allow_nan=False)) == settings
    assert settings == dict(n_samples=5, ci_target=pytest.approx(0.25), budget_s=2.0,
                            min_samples=3, max_samples=40, warmup_ms=0.0, confidence=0.9)
    # What the sweep records: asdict minus times_ms; every value a plain JSON scalar.
    unit_timing = {k: v for k, v in dataclasses.asdict(r).items() if k != "times_ms"}
    assert all(type(v) in (int, float, str, type(None)) for v in unit_timing.values())
    assert json.loads(json.dumps(unit_timing))["n_samples"] == 5


@pytest.mark.parametrize("field, value, match", [
    ("n_samples", 0, r"`n_samples` must be an integer >= 1 or None"),
    ("ci_target", 0.0, r"`ci_target` must be a finite number > 0"),
    ("budget_s", float("nan"), r"`budget_s` must be a finite number > 0"),
    ("min_samples", True, r"`min_samples` must be an integer >= 1"),
    ("max_samples", 2.5, r"`max_samples` must be an integer >= 1"),
    ("warmup_ms", -1.0, r"`warmup_ms` must be a finite number >= 0"),
    ("confidence", 1.5, r"`confidence` must be a number in \(0, 1\)"),
])
def test_timing_sample_validates_settings(field, value, match):
    kw = dict(times_ms=[1.0], mode="graph", clock="cpu_wall", device="cpu",
              calls_per_sample=1, n_warmup_calls=0, flush_bytes=None, stop_reason="n_samples",
              ci_rel_halfwidth=1.0, elapsed_s=0.1)
    with pytest.raises(ValueError, match=match):
        timing.TimingSample(**kw, **{field: value})


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("kwargs, match", [
    (dict(mode="hot"), r"`mode` must be one of \('per_call', 'cold_l2', 'graph'\)"),
    (dict(device="tpu"), r"`device` must be one of None, 'cpu', 'cuda'"),
    (dict(n_samples=0), r"`n_samples` must be an integer >= 1 or None"),
    (dict(n_samples=2.5), r"`n_samples` must be an integer"),
    (dict(n_samples=True), r"`n_samples` must be an integer"),
    (dict(ci_target=0), r"`ci_target` must be a finite number > 0"),
    (dict(ci_target=-0.1), r"`ci_target` must be a finite number > 0"),
    (dict(budget_s=0), r"`budget_s` must be a finite number > 0"),
    (dict(budget_s=float("inf")), r"`budget_s` must be a finite number > 0"),
    (dict(min_samples=30, max_samples=20), r"`min_samples` must be <= `max_samples`"),
    (dict(min_samples=0), r"`min_samples` must be an integer >= 1"),
    (dict(calls_per_sample=0), r"`calls_per_sample` must be an integer >= 1 or None"),
    (dict(mode="per_call", calls_per_sample=4), r"`calls_per_sample` must be None or 1"),
    (dict(mode="graph", flush_bytes=1024), r"`flush_bytes` must be None unless"),
    (dict(mode="cold_l2", flush_bytes=0), r"`flush_bytes` must be an integer >= 1"),
    (dict(warmup_ms=-1.0), r"`warmup_ms` must be a finite number >= 0"),
    (dict(confidence=1.0), r"`confidence` must be a number in \(0, 1\)"),
    (dict(confidence=0), r"`confidence` must be a number in \(0, 1\)"),
])
def test_invalid_arguments_raise_before_any_call(kwargs, match):
    calls = []
    kw = {"device": "cpu", **kwargs}
    with pytest.raises(ValueError, match=match):
        timing.measure(lambda: calls.append(1), **kw)
    assert calls == []


def test_non_callable_fn_rejected():
    with pytest.raises(ValueError, match="`fn` must be a zero-argument callable"):
        timing.measure(42, device="cpu")


def test_cuda_requested_without_cuda(no_cuda):
    with pytest.raises(ValueError, match="`device` is 'cuda' but CUDA is not available"):
        timing.measure(lambda: None, device="cuda")


def test_profile_device_time_needs_cuda(no_cuda):
    with pytest.raises(ValueError, match="`n_calls` must be an integer >= 1"):
        profiler.profile_device_time(lambda: None, n_calls=0)
    with pytest.raises(ValueError, match="needs CUDA"):
        profiler.profile_device_time(lambda: None)


# ---------------------------------------------------------------- fresh processes

def pid_factory():
    """Module-level, hence picklable: the child builds its own function."""
    return lambda: sum(range(100))


def test_measure_in_processes_uses_distinct_fresh_processes():
    out = processes.measure_in_processes(pid_factory, 2, mode="per_call", device="cpu",
                                      n_samples=5, warmup_ms=0)
    assert len(out) == 2 and all(isinstance(s, timing.TimingSample) for s in out)
    pids = {s.pid for s in out}
    assert len(pids) == 2 and os.getpid() not in pids
    assert all(s.n == 5 and s.mode == "per_call" and s.clock == "cpu_wall" for s in out)
    assert all(s.n_samples == 5 and s.warmup_ms == 0.0 and s.budget_s == 2.0 for s in out)


@pytest.mark.parametrize("args, kwargs, match", [
    ((lambda: None, 2), {}, "`factory` must be picklable"),
    ((pid_factory, 0), {}, "`n_trials` must be an integer >= 1"),
    ((pid_factory, 1), {"mode": "warm"}, "`mode` must be one of"),
    ((pid_factory, 1), {"n_sample": 3}, "`measure_kwargs` may hold only"),
    ((pid_factory, 1), {"budget_s": -1}, "`budget_s` must be a finite number > 0"),
])
def test_measure_in_processes_validates_before_spawning(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        processes.measure_in_processes(*args, device="cpu", **kwargs)
