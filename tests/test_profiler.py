"""The profiler's kernel rows (``profiler.kernels_per_call``): a pure function of the
device events a session recorded, so it is tested here without a GPU. On GPUs the rows
were checked against ``key_averages`` of the same sessions
(``benchmarks/readme-command/probes/sweep_cost_probe.py
--parts kinetoeq``; ``benchmarks/readme-command/``)."""

import pytest

from attn_analysis.measure import profiler


def test_rows_group_by_name_per_call_longest_first():
    events = [("gemm", 30.0), ("softmax", 5.0), ("gemm", 50.0), ("Memset (Device)", 1.0),
              ("softmax", 7.0)]
    rows = profiler.kernels_per_call(events, n_calls=2)
    assert [r["name"] for r in rows] == ["gemm", "softmax", "Memset (Device)"]
    gemm = rows[0]
    assert gemm["ms_per_call"] == pytest.approx(0.040)  # (30 + 50) us / 2 calls
    assert gemm["count_per_call"] == 1.0
    assert rows[2]["count_per_call"] == 0.5  # memsets are kept, counted per call


def test_profiler_overhead_is_left_out():
    rows = profiler.kernels_per_call([("Activity Buffer Request", 900.0), ("k", 10.0)], 1)
    assert [r["name"] for r in rows] == ["k"]
    assert sum(r["ms_per_call"] for r in rows) == pytest.approx(0.010)


def test_no_events_no_rows():
    assert profiler.kernels_per_call(iter(()), 10) == []


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10"])
def test_n_calls_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="n_calls"):
        profiler.kernels_per_call([("k", 1.0)], bad)


class _Event:
    """Just enough of a kineto event for ``profiler.device_activities``."""

    def __init__(self, name, device, start, end, *, is_async=False, threads=(1, 1),
                 hidden=False):
        self._name, self._device, self._start, self._end = name, device, start, end
        self._async, self._threads, self._hidden = is_async, threads, hidden

    def name(self):
        return self._name

    def device_type(self):
        return self._device

    def is_async(self):
        return self._async

    def start_thread_id(self):
        return self._threads[0]

    def end_thread_id(self):
        return self._threads[1]

    def is_hidden_event(self):
        return self._hidden

    def start_ns(self):
        return self._start

    def end_ns(self):
        return self._end


def test_device_activities_keep_what_key_averages_sums_and_events_give_durations():
    from types import SimpleNamespace

    from torch.autograd import DeviceType
    cuda, cpu = DeviceType.CUDA, DeviceType.CPU
    events = [_Event("gemm", cuda, 1_000, 31_000), _Event("aten::mm", cpu, 0, 40_000),
              _Event("async", cuda, 0, 5_000, is_async=True),
              _Event("crossing", cuda, 0, 5_000, threads=(1, 2)),
              _Event("hidden", cuda, 0, 5_000, hidden=True),
              _Event("Activity Buffer Request", cuda, 0, 2_000)]
    prof = SimpleNamespace(profiler=SimpleNamespace(
        kineto_results=SimpleNamespace(events=lambda: events)))
    kept = [e.name() for e in profiler.device_activities(prof)]
    assert kept == ["gemm", "Activity Buffer Request"]  # the overhead is dropped later
    assert list(profiler._device_events(prof)) == [("gemm", 30.0),
                                                   ("Activity Buffer Request", 2.0)]
