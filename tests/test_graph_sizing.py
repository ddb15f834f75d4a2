"""Graph mode's calls per replay: the CUDA timer sizes them on a replay (capturing twice when
the eager estimate was too long) unless told how many, and a trial sizes them at a unit's
first placement and keeps that number at the others, so later placements capture once. A
graph is replayed once to upload it, three more times where those replays size the calls
or the graph holds one call, then once per sample.

The CUDA timer runs here against a fake ``torch.cuda`` whose clock advances by a fixed host
time per eager call and a fixed device time per replayed call."""

from __future__ import annotations

import contextlib
import types

import pytest

from attn_analysis.measure import timing, trial, unit_records


class _FakeCuda:
    """Just enough of ``torch.cuda`` for ``timing._CudaTimer``: one clock in ms."""

    def __init__(self, host_ms: float, device_ms: float):
        self.host_ms, self.device_ms, self.now = host_ms, device_ms, 0.0
        self.capturing, self.captures, self.graphs = None, [], []
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self):
                self.t = fake.now

            def elapsed_time(self, end):
                return end.t - self.t

        class CUDAGraph:
            def __init__(self):
                self.calls, self.replays = 0, 0
                fake.graphs.append(self)

            def replay(self):
                self.replays += 1
                fake.now += self.calls * fake.device_ms

        self.Event, self.CUDAGraph = Event, CUDAGraph

    def call(self):
        """The timed function: recorded into a graph while capturing, else eager."""
        if self.capturing is not None:
            self.capturing.calls += 1
        else:
            self.now += self.host_ms

    @contextlib.contextmanager
    def graph(self, g):
        self.capturing = g
        yield
        self.capturing = None
        self.captures.append(g.calls)

    def is_available(self):
        return True

    def Stream(self):
        return types.SimpleNamespace(wait_stream=lambda other: None)

    def current_stream(self):
        return self.Stream()

    def stream(self, s):
        return contextlib.nullcontext()

    def synchronize(self):
        pass


@pytest.fixture
def fake_cuda(monkeypatch):
    # eager calls look 50 us long (host-bound); replayed, a call is 10 us of device time
    cuda = _FakeCuda(host_ms=0.05, device_ms=0.01)
    monkeypatch.setattr(timing, "_torch", lambda: types.SimpleNamespace(cuda=cuda))
    return cuda


def test_sizing_on_a_replay_captures_twice_when_the_estimate_was_too_long(fake_cuda):
    r = timing.measure(fake_cuda.call, "graph", device="cuda", n_samples=5, warmup_ms=0.0)
    # the estimate (50 us) asks for 20 calls; their replay says 10 us a call: 100 calls
    assert fake_cuda.captures == [20, 100]
    assert r.calls_per_sample == 100
    assert r.times_ms == pytest.approx((0.01,) * 5)
    # the first graph: its upload and the three replays that sized the calls; the second:
    # its upload and the five samples (its replays size nothing)
    assert [g.replays for g in fake_cuda.graphs] == [1 + 3, 1 + 5]


def test_sizing_that_keeps_the_estimate_captures_once_and_samples_after_its_timed_replays(
        monkeypatch):
    # host time no longer than the device's: the replay confirms the estimate's 100 calls
    cuda = _FakeCuda(host_ms=0.01, device_ms=0.01)
    monkeypatch.setattr(timing, "_torch", lambda: types.SimpleNamespace(cuda=cuda))
    r = timing.measure(cuda.call, "graph", device="cuda", n_samples=5, warmup_ms=0.0)
    assert cuda.captures == [100] and r.calls_per_sample == 100
    assert [g.replays for g in cuda.graphs] == [1 + 3 + 5]


def test_given_calls_per_replay_capture_once(fake_cuda):
    r = timing.measure(fake_cuda.call, "graph", device="cuda", n_samples=5, warmup_ms=0.0,
                       calls_per_sample=100)
    assert fake_cuda.captures == [100]
    assert r.calls_per_sample == 100 and r.times_ms == pytest.approx((0.01,) * 5)
    # told its calls, the timer times no replay before the samples: the upload, then them
    assert [g.replays for g in fake_cuda.graphs] == [1 + 5]


def _worker(device="cpu"):
    worker = object.__new__(trial._Worker)
    worker.plan = types.SimpleNamespace(device=device, timing={"n_samples": 4, "warmup_ms": 0.0})
    return worker


def test_a_trial_sizes_at_the_units_first_placement_and_keeps_it(monkeypatch, fake_cuda):
    asked = []
    real = timing.measure

    def spy(fn, **kwargs):
        asked.append(kwargs["calls_per_sample"])
        return real(fn, **kwargs)
    monkeypatch.setattr(timing, "measure", spy)
    worker, entry = _worker("cuda"), {"placements": [], "failure": None}
    first = worker._time_placement(fake_cuda.call, "graph", entry)
    second = worker._time_placement(fake_cuda.call, "graph", entry)
    assert asked == [None, 100]
    assert fake_cuda.captures == [20, 100, 100]  # the second placement captured once
    assert first["calls_per_sample_sized"] is True
    assert second["calls_per_sample_sized"] is False
    assert first["timing"]["calls_per_sample"] == second["timing"]["calls_per_sample"] == 100
    # another unit (its own entry) sizes again; the other modes are never given a count
    other = {"placements": [], "failure": None}
    worker._time_placement(fake_cuda.call, "graph", other)
    per_call = worker._time_placement(fake_cuda.call, "per_call", entry)
    assert asked[2:] == [None, None]
    assert "calls_per_sample_sized" not in per_call


def test_a_failed_placement_records_its_reason_and_leaves_the_size_unset():
    def boom():
        raise RuntimeError("launch failed\nsecond line")
    entry = {"placements": [], "failure": None}
    rec = _worker()._time_placement(boom, "graph", entry)
    assert rec == {"failure": ("error", "RuntimeError: launch failed")}
    assert "calls_per_sample" not in entry


def test_timing_unit_keeps_every_placement_or_records_the_failure():
    place = {"times_ms": [1.0, 2.0], "timing": {"calls_per_sample": 3}, "elapsed_s": 0.5,
             "gpu_state_start": {"a": 1}, "gpu_state_end": {"b": 2},
             "calls_per_sample_sized": True}
    entry = {"placements": [place, dict(place, times_ms=[3.0], gpu_state_end={"c": 3})],
             "started_utc": "t", "failure": None}
    unit = unit_records.timing_unit("B1-H2-S32-D64-fp16", "sdpa", "graph", 1, {"x": (1, 2)},
                                    entry, protocol=2)
    assert unit["status"] == "ok" and unit["times_ms"] == [1.0, 2.0, 3.0]
    assert unit["info"] == {"x": [1, 2]} and unit["timing"] == {"calls_per_sample": 3}
    assert unit["gpu_state_start"] == {"a": 1} and unit["gpu_state_end"] == {"c": 3}
    assert unit["elapsed_s"] == 1.0 and unit["protocol"] == 2
    failed = unit_records.timing_unit("B1-H2-S32-D64-fp16", "sdpa", "graph", 1, {},
                                      dict(entry, failure=("oom", "no memory")), protocol=2)
    assert (failed["status"], failed["reason"], failed["times_ms"]) == ("oom", "no memory", [])
    empty = unit_records.timing_unit("B1-H2-S32-D64-fp16", "sdpa", "graph", 1, {},
                                     dict(entry, placements=[]), protocol=2)
    assert empty["status"] == "error" and empty["gpu_state_start"] is None


def test_a_one_call_graph_told_its_calls_still_replays_three_times_before_its_samples(
        monkeypatch):
    # a long call: one call a replay, told (a unit's later placement)
    cuda = _FakeCuda(host_ms=5.0, device_ms=5.0)
    monkeypatch.setattr(timing, "_torch", lambda: types.SimpleNamespace(cuda=cuda))
    r = timing.measure(cuda.call, "graph", device="cuda", n_samples=5, warmup_ms=0.0,
                       calls_per_sample=1)
    assert cuda.captures == [1] and r.calls_per_sample == 1
    assert [g.replays for g in cuda.graphs] == [1 + 3 + 5]
