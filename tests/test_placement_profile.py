"""The profile at each placement: ``profiler.PLACEMENT_CALLS`` calls whatever a call lasts
(a shorter profile for long calls was tried on the GPU and dropped), recorded beside the
kernel time (``kernel_calls``). The probe behind that decision is tested in
``test_scripts.py``."""

from __future__ import annotations

import types

from attn_analysis.measure import profiler, trial


def _worker(device="cuda", kernel_times=True):
    worker = object.__new__(trial._Worker)
    worker.plan = types.SimpleNamespace(device=device, kernel_times=kernel_times)
    return worker


def test_a_trial_profiles_ten_calls_at_each_placement_and_records_them(monkeypatch):
    asked = []

    def profile(fn, n_calls):
        asked.append(n_calls)
        return {"device_ms_per_call": 12.5, "n_calls": n_calls, "kernels": []}
    monkeypatch.setattr(profiler, "profile_device_time", profile)
    assert _worker()._placement_kernel_ms(lambda: None) == (12.5, 10)
    assert asked == [profiler.PLACEMENT_CALLS] == [10]


def test_a_trial_without_kernel_times_or_whose_profile_fails_records_none(monkeypatch):
    def boom(fn, n_calls):
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
