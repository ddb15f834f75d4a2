"""Tests for attn_analysis.analyse.peer_rates: TFLOP/s and the fraction of the dense peak,
checked against closed forms written out here (not calling the module's formula)."""

import math

import pandas as pd
import pytest

from attn_analysis.analyse import peer_rates as pr


def _times(rows):
    return pd.DataFrame(rows, columns=["gpu", "config", "candidate", "ms"])


def test_target_rate_and_fraction_on_an_h100():
    # 4 * 32 * 8 * 512**2 * 64 FLOPs in 0.1 ms; H100 SXM5 dense fp16 peak 989.4 TFLOP/s
    flop = 4 * 32 * 8 * 512 * 512 * 64
    out = pr.rate_table(_times([("NVIDIA H100 80GB HBM3", "B32-H8-S512-D64-fp16", "fa3", 0.1)]))
    row = out.iloc[0]
    assert row["flops"] == flop
    assert row["tflops"] == pytest.approx(flop / 1e-4 / 1e12)
    assert row["peak_tflops"] == 989.4
    assert row["fraction_of_peak"] == pytest.approx(flop / 1e-4 / 1e12 / 989.4)


def test_causal_halves_the_work_and_bf16_uses_its_own_peak():
    out = pr.rate_table(_times([
        ("NVIDIA H200", "B2-H32-S8192-D64-fp16", "fa4", 2.0),
        ("NVIDIA H200", "B2-H32-S8192-D64-fp16-causal", "fa4", 1.0),
        ("NVIDIA L4", "B32-H8-S512-D64-bf16", "sdpa", 1.0)]))
    assert out["flops"][1] == out["flops"][0] / 2
    assert out["tflops"][1] == pytest.approx(out["tflops"][0])  # half the work, half the time
    assert out["peak_tflops"][2] == 121.0


def test_an_unknown_gpu_keeps_its_rate_but_has_no_fraction():
    out = pr.rate_table(_times([("NVIDIA H100 PCIe", "B32-H8-S512-D64-fp16", "sdpa", 1.0),
                                ("NVIDIA H100 80GB HBM3", "B32-H8-S512-D64-fp16", "sdpa", 1.0)]))
    assert out["tflops"][0] == pytest.approx(17.179869184)
    assert math.isnan(out["peak_tflops"][0]) and math.isnan(out["fraction_of_peak"][0])
    assert out["fraction_of_peak"][1] == pytest.approx(17.179869184 / 989.4)


def test_other_columns_and_row_order_are_kept_and_the_input_is_not_changed():
    times = _times([("NVIDIA H200", "B32-H8-S2048-D64-fp16", "fa3", 1.0),
                    ("NVIDIA H200", "B32-H8-S512-D64-fp16", "fa3", 1.0)]).assign(mode="graph")
    out = pr.rate_table(times)
    assert list(out["config"]) == list(times["config"]) and (out["mode"] == "graph").all()
    assert out["tflops"][0] == pytest.approx(16 * out["tflops"][1])  # S**2 scaling
    assert list(times.columns) == ["gpu", "config", "candidate", "ms", "mode"]


@pytest.mark.parametrize("bad,match", [
    ([[1, 2]], "must be a pandas DataFrame"),
    (pd.DataFrame({"gpu": ["NVIDIA H200"], "config": ["B32-H8-S512-D64-fp16"]}),
     "missing \\['candidate', 'ms'\\]"),
    (_times([("NVIDIA H200", "B32-H8-S512-D64-fp16", "fa3", 0.0)]), "`ms` must be positive"),
    (_times([("NVIDIA H200", "B32-H8-S512-D64-fp16", "fa3", float("nan"))]), "`ms`"),
    (_times([("NVIDIA H200", "B32-H8-S512", "fa3", 1.0)]), "`config` must look like"),
])
def test_invalid_times_are_refused_naming_the_parameter(bad, match):
    with pytest.raises(ValueError, match=match):
        pr.rate_table(bad)
