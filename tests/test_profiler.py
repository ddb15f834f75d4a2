"""The profiler's kernel rows (``profiler.kernels_per_call``): a pure function of the
device events a session recorded, so it is tested here without a GPU. On GPUs the rows
were checked against ``key_averages`` of the same sessions (``scripts/sweep_cost_probe.py
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
