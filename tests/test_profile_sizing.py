"""The profile at each placement: ten calls, or as many as hold about ten milliseconds of
work where that is fewer (``profiler.calls_within``), sized on the unrecorded call before
the session; a trial records the calls beside the kernel time (``kernel_calls``).

``profile_device_time`` runs here against a fake clock and a fake profiler session: a call
advances the clock by a fixed time, and each profiled call gives one kernel event."""

from __future__ import annotations

import types

import pytest

from attn_analysis.measure import profiler, trial


@pytest.mark.parametrize("call_ms, most, expected", [
    (0.035, 10, 10),   # a short call keeps every call
    (1.0, 10, 10),     # ten calls of 1 ms are the budget exactly
    (1.05, 10, 10),    # ceil(9.5): still ten
    (2.0, 10, 5),
    (3.0, 10, 4),      # at least the budget: 12 ms, not 9
    (30.0, 10, 1),     # never fewer than one
    (0.0, 10, 10),     # no time measured: the most
    (float("nan"), 7, 7),
])
def test_calls_within(call_ms, most, expected):
    assert profiler.calls_within(10.0, call_ms, most) == expected


@pytest.fixture
def fake_profiler(monkeypatch):
    """A GPU whose call takes ``state.call_ms`` of host time to the end of its kernels and
    runs one kernel of that length; ``state.sessions`` lists the calls of each session."""
    state = types.SimpleNamespace(call_ms=2.0, now=0.0, sessions=[], calls=0)

    def fn():
        state.calls += 1
        state.now += state.call_ms

    def session(fn_, n_calls, torch):
        state.sessions.append(n_calls)
        for _ in range(n_calls):
            fn_()
        return [("kernel", state.call_ms * 1e3)] * n_calls  # durations in microseconds
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(profiler, "_cuda_available", lambda: True)
    monkeypatch.setattr(profiler, "_torch", lambda: fake_torch)
    monkeypatch.setattr(profiler, "_now_ms", lambda: state.now)
    monkeypatch.setattr(profiler, "_session", session)
    monkeypatch.setattr(profiler, "_started", True)  # the process's start-up pass is done
    state.fn = fn
    return state


@pytest.mark.parametrize("call_ms, calls", [(0.05, 10), (2.0, 5), (25.0, 1)])
def test_a_budget_sizes_the_session_on_the_unrecorded_call(fake_profiler, call_ms, calls):
    fake_profiler.call_ms = call_ms
    got = profiler.profile_device_time(fake_profiler.fn, n_calls=10, budget_ms=10.0)
    assert fake_profiler.sessions == [calls]
    assert fake_profiler.calls == 1 + calls  # the unrecorded call, then the session
    assert got["n_calls"] == calls
    assert got["device_ms_per_call"] == pytest.approx(call_ms)
    assert got["kernels"] == [{"name": "kernel", "ms_per_call": pytest.approx(call_ms),
                               "count_per_call": 1.0}]


def test_without_a_budget_every_call_is_profiled(fake_profiler):
    fake_profiler.call_ms = 25.0
    got = profiler.profile_device_time(fake_profiler.fn, n_calls=10)
    assert fake_profiler.sessions == [10] and got["n_calls"] == 10


def test_the_start_up_pass_profiles_as_many_calls(fake_profiler, monkeypatch):
    monkeypatch.setattr(profiler, "_started", False)
    got = profiler.profile_device_time(fake_profiler.fn, n_calls=10, budget_ms=10.0)
    assert fake_profiler.sessions == [5, 5] and got["n_calls"] == 5
    assert profiler._started is True


@pytest.mark.parametrize("budget", [0, -1.0, float("inf"), "10", True])
def test_a_bad_budget_is_refused_before_any_call(fake_profiler, budget):
    with pytest.raises(ValueError, match="`budget_ms` must be a positive finite number"):
        profiler.profile_device_time(fake_profiler.fn, budget_ms=budget)
    assert fake_profiler.calls == 0 and fake_profiler.sessions == []


def _worker(device="cuda", kernel_times=True):
    worker = object.__new__(trial._Worker)
    worker.plan = types.SimpleNamespace(device=device, kernel_times=kernel_times)
    return worker


def test_a_trial_profiles_each_placement_to_the_budget(monkeypatch):
    asked = []

    def profile(fn, n_calls, budget_ms=None):
        asked.append((n_calls, budget_ms))
        return {"device_ms_per_call": 12.5, "n_calls": 1, "kernels": []}
    monkeypatch.setattr(profiler, "profile_device_time", profile)
    assert _worker()._placement_kernel_ms(lambda: None) == (12.5, 1)
    assert asked == [(profiler.PLACEMENT_CALLS, profiler.PLACEMENT_BUDGET_MS)]
    assert (profiler.PLACEMENT_CALLS, profiler.PLACEMENT_BUDGET_MS) == (10, 10.0)


def test_a_trial_without_kernel_times_or_whose_profile_fails_records_none(monkeypatch):
    def boom(fn, n_calls, budget_ms=None):
        raise RuntimeError("CUPTI busy")
    monkeypatch.setattr(profiler, "profile_device_time", boom)
    assert _worker()._placement_kernel_ms(lambda: None) == (None, None)
    assert _worker(kernel_times=False)._placement_kernel_ms(lambda: None) == (None, None)
    assert _worker(device="cpu")._placement_kernel_ms(lambda: None) == (None, None)


def test_the_schema_takes_the_calls_and_refuses_a_bad_count():
    from attn_analysis import record
    place = {"placement": 0, "times_ms": [1.0], "kernel_ms": 2.0, "kernel_calls": 5}
    unit = {"format_version": 1, "kind": "timing", "trial": 0,
            "config": "B1-H2-S32-D64-fp16", "candidate": "sdpa", "mode": "graph",
            "status": "ok", "reason": "", "times_ms": [1.0], "placements": [place]}
    assert not any("kernel_calls" in p for p in record.unit_problems(unit))
    older = dict(unit, placements=[{k: v for k, v in place.items() if k != "kernel_calls"}])
    assert not any("kernel_calls" in p for p in record.unit_problems(older))
    bad = dict(unit, placements=[dict(place, kernel_calls=2.5)])
    assert any("kernel_calls" in p for p in record.unit_problems(bad))
