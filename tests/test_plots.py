"""Tests of the figures: they carry the device label, units, log scales and intervals."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.figure import Figure

from attn_analysis import plots as P
from attn_analysis import summaries as S

LABEL = "NVIDIA H100 80GB HBM3, torch 2.11.0+cu130"
TARGET = "B32-H8-S512-D64-fp16"


def speedups(configs=(TARGET,), modes=("graph",)):
    rows = []
    for c in configs:
        for m in modes:
            for cand, sp, v in (("sdpa", 1.0, "inconclusive"), ("fast", 1.2, "faster"),
                                ("slow", 0.5, "slower")):
                rows.append({"config": c, "mode": m, "candidate": cand, "speedup": sp,
                             "ci_low": sp * 0.95, "ci_high": sp * 1.05, "verdict": v,
                             "margin": 0.02, "confidence": 0.95})
    return pd.DataFrame(rows)


def latency(axis_values=(128, 256, 512)):
    keys = [f"B32-H8-S{s}-D64-fp16" for s in axis_values]
    df = pd.DataFrame({"config": keys * 2, "candidate": ["a"] * 3 + ["b"] * 3,
                       "mode": "graph", "median_ms": [0.01, 0.02, 0.05, 0.02, 0.04, 0.1]})
    df["ci_low_ms"], df["ci_high_ms"] = df["median_ms"] * 0.9, df["median_ms"] * 1.1
    return S._with_fields(df)


def titles(fig: Figure) -> str:
    text = fig._suptitle.get_text() if fig._suptitle else ""
    return text + " ".join(ax.get_title() for ax in fig.axes)


def test_speedup_forest_log_axis_band_and_label():
    fig = P.speedup_forest(speedups(modes=("graph", "per_call")), LABEL)
    assert LABEL in titles(fig)
    main = [ax for ax in fig.axes if ax.get_xscale() == "log"]
    assert len(main) == 2
    assert "log scale" in main[0].get_xlabel()
    assert len(main[0].lines) + len(main[0].collections) >= 3  # error bars drawn
    with pytest.raises(ValueError, match="`config` must be given"):
        P.speedup_forest(speedups(configs=(TARGET, "B8-H8-S512-D64-fp16")), LABEL)


def test_latency_sweep_log_log_units():
    fig = P.latency_sweep(latency(), "seq_len", LABEL)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "(ms" in ax.get_ylabel() and "tokens" in ax.get_xlabel()
    assert LABEL in ax.get_title()
    with pytest.raises(ValueError, match="`axis` must be one of"):
        P.latency_sweep(latency(), "head_dim", LABEL)


def test_heatmap_and_kernel_vs_library():
    fig = P.speedup_heatmap(speedups(configs=(TARGET, "B8-H8-S512-D64-fp16")), LABEL)
    assert LABEL in titles(fig)
    table = pd.DataFrame({"config": [TARGET], "kernel": ["triton"], "library": ["sdpa_cudnn"],
                          "speedup": [0.9], "ci_low": [0.85], "ci_high": [0.95],
                          "verdict": ["slower"]})
    fig = P.kernel_vs_library(table, LABEL)
    assert fig.axes[0].get_xscale() == "log" and LABEL in titles(fig)


def test_roofline_draws_both_roofs():
    pts = pd.DataFrame({"config": [TARGET], "candidate": ["sdpa"], "intensity": [128.0],
                        "tflops": [300.0], "tflops_low": [290.0], "tflops_high": [310.0]})
    fig = P.roofline(pts, LABEL, datasheet=(989.0, 3350.0), measured=(759.0, 3012.0))
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.lines]
    assert any(lbl.startswith("datasheet roof") for lbl in labels)
    assert any(lbl.startswith("measured roof") for lbl in labels)
    assert ax.get_xscale() == "log" and "FLOP/s" in ax.get_ylabel()
    fig = P.roofline(pts, LABEL, datasheet=None, measured=(759.0, 3012.0))
    assert not any(lbl.startswith("datasheet") for lbl in
                   [line.get_label() for line in fig.axes[0].lines])


def test_cross_device_marks_l4_as_reported():
    table = pd.DataFrame({"run": ["r"], "device": ["H100"], "config": [TARGET],
                          "mode": ["graph"], "median_ms": [0.05]})
    rep = pd.DataFrame({"config": [TARGET, TARGET], "value_ms": [0.32, 0.33]})
    fig = P.cross_device(table, rep)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("as reported" in t for t in legend)
    with pytest.raises(ValueError, match="`reported` must be a DataFrame"):
        P.cross_device(table, pd.DataFrame({"x": [1]}))


def test_trial_spread_and_mode_overhead():
    trials = pd.DataFrame({"config": [TARGET] * 4, "candidate": ["a", "a", "b", "b"],
                           "mode": "graph", "trial": [0, 1, 0, 1],
                           "median_ms": [1.0, 1.1, 2.0, 2.0]})
    assert LABEL in titles(P.trial_spread(trials, LABEL))
    modes = pd.DataFrame({"config": [TARGET], "device_ms": [0.05], "graph_over_device": [1.02],
                          "per_call_over_device": [1.8]})
    fig = P.mode_overhead(modes, LABEL)
    assert len(fig.axes[0].patches) == 2
    with pytest.raises(ValueError, match="at least one '<mode>_over_device' column"):
        P.mode_overhead(modes[["config", "device_ms"]], LABEL)


def test_validation_messages():
    with pytest.raises(ValueError, match="`device_label` must be a non-empty string"):
        P.speedup_forest(speedups(), " ")
    with pytest.raises(ValueError, match="`speedups` must be a pandas DataFrame"):
        P.speedup_forest([1], LABEL)
    with pytest.raises(ValueError, match=r"`speedups` must have columns .*missing"):
        P.speedup_forest(speedups().drop(columns="verdict"), LABEL)
    with pytest.raises(ValueError, match="`points` must hold at least one row"):
        P.roofline(pd.DataFrame(columns=["config", "candidate", "intensity", "tflops",
                                         "tflops_low", "tflops_high"]), LABEL)
    with pytest.raises(ValueError, match=r"`latency \(in `mode`\)` must hold at least one row"):
        P.latency_sweep(latency(), "seq_len", LABEL, mode="per_call")
