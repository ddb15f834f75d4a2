"""Tests of the figures: they carry the device label, units, log scales and intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from attn_analysis.present import plots as P
from attn_analysis.present import audit_plots
from attn_analysis.present import figure_style, latency_plots
from attn_analysis.analyse import sample_groups

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
    return sample_groups.with_config_fields(df)


def titles(fig: Figure) -> str:
    text = fig._suptitle.get_text() if fig._suptitle else ""
    return text + " ".join(ax.get_title() for ax in fig.axes)


def test_speedup_forest_linear_near_one_band_and_label():
    fig = P.speedup_forest(speedups(modes=("graph", "per_call")), LABEL)
    assert LABEL in titles(fig)
    main = fig.axes[:2]
    assert all(ax.get_xscale() == "linear" for ax in main)
    lo, hi = main[0].get_xlim()
    # the ±2 % band takes a readable share of the axis, not a sliver of a log decade
    assert lo < 0.98 and hi > 1.02 and (0.04 / (hi - lo)) > 0.15
    assert any("speedup" in ax.get_xlabel() for ax in main)
    assert len(main[0].lines) + len(main[0].collections) >= 3  # error bars drawn
    # 0.5 lies off the axis: drawn at the edge as an arrow head with its value
    notes = [t.get_text() for t in main[0].texts]
    assert "0.50×" in notes
    with pytest.raises(ValueError, match="`config` must be given"):
        P.speedup_forest(speedups(configs=(TARGET, "B8-H8-S512-D64-fp16")), LABEL)


def test_near_one_window():
    assert figure_style.near_one_window([0.99], [1.01], 0.02) == pytest.approx((0.9352, 1.0648))
    lo, hi = figure_style.near_one_window([0.92, 0.03], [0.95, 0.04], 0.02)  # 0.03 is off the axis
    assert lo == pytest.approx(1 - 0.08 * 1.08) and hi == pytest.approx(1 + 0.08 * 1.08)
    assert figure_style.near_one_window([0.5], [2.0], 0.02, cap=0.12) == pytest.approx((0.9352, 1.0648))


def test_figures_fit_the_page_and_keep_legends_off_the_data():
    figs = [P.speedup_forest(speedups(modes=("graph", "per_call")), LABEL),
            latency_plots.latency_sweep(latency(), "seq_len", LABEL),
            P.speedup_heatmap(speedups(configs=(TARGET, "B8-H8-S512-D64-fp16")), LABEL)]
    for fig in figs:
        assert fig.get_size_inches()[0] <= figure_style.PAGE_WIDTH_IN + 1e-9
        assert all(ax.get_legend() is None for ax in fig.axes)  # legends are figure-level


def test_latency_sweep_log_log_units():
    fig = latency_plots.latency_sweep(latency(), "seq_len", LABEL)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "(ms" in ax.get_ylabel() and "tokens" in ax.get_xlabel()
    assert LABEL in ax.get_title()
    with pytest.raises(ValueError, match="`axis` must be one of"):
        latency_plots.latency_sweep(latency(), "head_dim", LABEL)


def test_heatmap_and_kernel_vs_library():
    fig = P.speedup_heatmap(speedups(configs=(TARGET, "B8-H8-S512-D64-fp16")), LABEL)
    assert LABEL in titles(fig)
    table = pd.DataFrame({"config": [TARGET], "kernel": ["triton"], "library": ["sdpa_cudnn"],
                          "speedup": [0.9], "ci_low": [0.85], "ci_high": [0.95],
                          "verdict": ["slower"]})
    fig = P.kernel_vs_library(table, LABEL)
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear" and LABEL in titles(fig)
    assert ax.get_xlim()[0] < 0.85 and ax.get_xlim()[1] > 1.0  # one is on the axis
    wide = table.assign(ci_low=[1e-11], ci_high=[1e11], verdict=["inconclusive"])
    ax = P.kernel_vs_library(wide, LABEL).axes[0]
    heads = [ln for ln in ax.lines if ln.get_marker() in ("<", ">") and
             ln.get_markerfacecolor() == "white"]
    assert {ln.get_marker() for ln in heads} == {"<", ">"}  # cut at both edges, marked
    assert ax.get_xlim()[1] - ax.get_xlim()[0] < 1.0  # the axis follows the point, not 1e11


def test_roofline_draws_both_roofs():
    pts = pd.DataFrame({"config": [TARGET], "candidate": ["sdpa"], "intensity": [128.0],
                        "tflops": [300.0], "tflops_low": [290.0], "tflops_high": [310.0]})
    fig = latency_plots.roofline(pts, LABEL, datasheet=(989.0, 3350.0), measured=(759.0, 3012.0))
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.lines]
    assert any(lbl.startswith("datasheet roof") for lbl in labels)
    assert any(lbl.startswith("measured roof") for lbl in labels)
    assert ax.get_xscale() == "log" and "FLOP/s" in ax.get_ylabel()
    ridge = 989.0 * 1e3 / 3350.0
    assert ax.get_xlim()[1] <= 1.5 * ridge * 1.001  # no empty decade past data and ridge
    fig = latency_plots.roofline(pts, LABEL, datasheet=None, measured=(759.0, 3012.0))
    assert not any(lbl.startswith("datasheet") for lbl in
                   [line.get_label() for line in fig.axes[0].lines])


def test_cross_device_marks_l4_as_reported_without_lines_between_configurations():
    other = "B32-H8-S512-D128-fp16"
    table = pd.DataFrame({"run": ["r", "r"], "device": ["NVIDIA H100, torch 2.11"] * 2,
                          "config": [TARGET, other], "mode": ["graph", "graph"],
                          "median_ms": [0.05, 0.09]})
    rep = pd.DataFrame({"config": [TARGET, TARGET], "value_ms": [0.32, 0.33]})
    fig = latency_plots.cross_device(table, rep)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("as reported" in t for t in legend)
    ax = fig.axes[0]
    assert all(line.get_linestyle() in ("None", "none", "") for line in ax.lines
               if len(line.get_xdata()) > 1 and line.get_color() != "0.85")
    assert "D128" in [t.get_text() for t in ax.get_xticklabels()][1]
    assert "D=64" not in ax.get_xlabel()
    with pytest.raises(ValueError, match="`reported` must be a DataFrame"):
        latency_plots.cross_device(table, pd.DataFrame({"x": [1]}))


def test_trial_spread():
    trials = pd.DataFrame({"config": [TARGET] * 4, "candidate": ["a", "a", "b", "b"],
                           "mode": "graph", "trial": [0, 1, 0, 1],
                           "median_ms": [1.0, 1.1, 2.0, 2.0]})
    assert LABEL in titles(P.trial_spread(trials, LABEL))
    # the same data draw the same jitter, and numpy's global generator is left as it was
    np.random.seed(7)
    before = np.random.get_state()[1].copy()
    dots = [np.vstack([c.get_offsets() for c in P.trial_spread(trials, LABEL).axes[0].collections
                       if len(c.get_offsets())]) for _ in range(2)]
    assert np.array_equal(dots[0], dots[1])
    assert np.array_equal(np.random.get_state()[1], before)


def test_validation_messages():
    with pytest.raises(ValueError, match="`device_label` must be a non-empty string"):
        P.speedup_forest(speedups(), " ")
    with pytest.raises(ValueError, match="`speedups` must be a pandas DataFrame"):
        P.speedup_forest([1], LABEL)
    with pytest.raises(ValueError, match=r"`speedups` must have columns .*missing"):
        P.speedup_forest(speedups().drop(columns="verdict"), LABEL)
    with pytest.raises(ValueError, match="`points` must hold at least one row"):
        latency_plots.roofline(pd.DataFrame(columns=["config", "candidate", "intensity", "tflops",
                                         "tflops_low", "tflops_high"]), LABEL)
    with pytest.raises(ValueError, match=r"`latency \(in `mode`\)` must hold at least one row"):
        latency_plots.latency_sweep(latency(), "seq_len", LABEL, mode="per_call")


def test_audit_figures():
    head = pd.DataFrame({"protocol": ["a", "a", "b", "b"], "k": [1, 1, 3, 3],
                         "candidate": ["twin", "spin1", "twin", "spin1"],
                         "rate": [0.8, 0.7, 0.2, 0.3], "ci_low": [0.7, 0.6, 0.1, 0.2],
                         "ci_high": [0.9, 0.8, 0.3, 0.4]})
    fig = audit_plots.calibration_rates(head, ["twin"], ["spin1"], [("a", 1, "(a)"), ("b", 3, "(b)")],
                              0.05, LABEL, TARGET, 10)
    left, right = fig.axes[:2]
    # each panel names its own controls (the A/A panel does not carry the spins' labels)
    assert [t.get_text() for t in left.get_yticklabels()] == ["twin"]
    assert [t.get_text() for t in right.get_yticklabels()] == ["spin1"]
    assert LABEL in titles(fig) and fig.legends
    eff = pd.DataFrame({"candidate": ["twin", "spin1"], "slowdown": [1.0, 1.05],
                        "slowdown_low": [0.99, 1.04], "slowdown_high": [1.01, 1.06],
                        "slowdown_pct": [0.0, 0.05], "extra_share": [0.0, 0.05]})
    fig = audit_plots.control_effects(eff, None, ["spin1", "twin"], 0.02, LABEL, TARGET)
    assert "(%)" in fig.axes[0].get_xlabel() and LABEL in titles(fig)
    fig = audit_plots.warmup_traces([[0.2, 0.1, 0.1], [0.3, 0.1, 0.1]], 1, LABEL, TARGET)
    assert "µs" in fig.axes[0].get_ylabel() and LABEL in titles(fig)
    with pytest.raises(ValueError, match="`traces` must hold"):
        audit_plots.warmup_traces([], 1, LABEL, TARGET)


def test_every_verdict_has_one_colour():
    # the colours are keyed by stats.Verdict's words: a new verdict needs a colour here
    from attn_analysis.analyse.stats import VERDICT_ORDER
    assert sorted(figure_style.VERDICT_COLORS) == sorted(VERDICT_ORDER)
    assert len(set(figure_style.VERDICT_COLORS.values())) == len(VERDICT_ORDER)


def test_axis_limits_follow_the_points_not_an_exploding_interval():
    # figure fig-triton-vs-library: with two processes, a family-wide t interval reaches
    # 1e11; the axis once ran to it, with every point squeezed at zero
    table = pd.DataFrame({"config": [TARGET, "B8-H8-S512-D64-fp16"], "kernel": "triton",
                          "library": "sdpa", "speedup": [0.93, 1.09],
                          "ci_low": [1e-9, 0.70], "ci_high": [1.2e11, 1.68],
                          "verdict": "inconclusive"})
    fig = P.kernel_vs_library(table, LABEL)
    low, high = fig.axes[0].get_xlim()
    assert low < 0.93 and high > 1.09  # every point and one are shown
    assert high - low < figure_style.MAX_SPAN_RATIO * figure_style.MIN_NEEDED_SPAN * 2
    figure_style.check_span((low, high), table["speedup"], reference=(1.0,))


def test_check_span_raises_on_an_axis_far_wider_than_its_points():
    with pytest.raises(ValueError, match="`x` axis spans"):
        figure_style.check_span((-6e9, 1.3e11), [0.93, 1.09], reference=(1.0,))
    with pytest.raises(ValueError, match="finite and increasing"):
        figure_style.check_span((1.0, np.inf), [1.0])
    assert figure_style.check_span((0.8, 1.2), [0.9, 1.1]) == (0.8, 1.2)
    # a single point needs MIN_NEEDED_SPAN, not zero
    figure_style.check_span((0.8, 1.2), [1.0])
    with pytest.raises(ValueError):
        figure_style.check_span((0.0, 2.0), [1.0])
    # the helper that draws the points checks the limits it is given
    d = pd.DataFrame({"speedup": [1.0], "ci_low": [0.9], "ci_high": [1e11],
                      "verdict": ["inconclusive"]})
    fig = figure_style._figure(4, 2)
    with pytest.raises(ValueError, match="axis spans"):
        figure_style._speedup_points(fig.subplots(), d, [0], (0.0, 1e11))


def test_interval_window_clips_intervals_beyond_one_more_span():
    lo, hi = figure_style.interval_window([0.9, 1.1], [0.85, 0.0], [1.15, 1e11])
    assert lo < 0.85 and 1.3 < hi < 1.3 + 0.06 * 0.6 + 1e-9  # one span (0.2) beyond, padded
    lo, hi = figure_style.interval_window([1.0], [0.99], [1.01])
    assert lo < 0.99 and hi > 1.01 and hi - lo < 0.1


def test_triton_vs_library_figure_of_the_recorded_run():
    from pathlib import Path
    from attn_analysis import record
    from attn_analysis.analyse import comparisons
    run = Path(__file__).resolve().parents[1] / "data" / "runs" / "h200-triton-p2"
    samples = record.load(run).samples
    vs = comparisons.kernel_vs_library(samples, mode="graph", n_resamples=200, n_comparisons=64)
    assert vs["ci_high"].max() > 100  # the interval that once stretched the axis
    fig = P.kernel_vs_library(vs, LABEL)
    low, high = fig.axes[0].get_xlim()
    assert high < vs["speedup"].max() + 1 and low > vs["speedup"].min() - 1
