"""The figure of the decisive runs at the target (present.target_plots) on rows of known
truth: one row per run and kernel, one panel per level, colour by verdict, hollow markers
outside the family, the margin band, GPU labels on the axis."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from attn_analysis.present import target_plots as tp
from attn_analysis.present.figure_style import PAGE_WIDTH_IN, VERDICT_COLORS


def rows():
    """Two runs: H200-g (m = 144, every level a member) with two kernels, H200-ae (m = 2,
    attention outside) with one; speedups at the three levels."""
    out = []
    for machine, run, m, cand, label, sps, verdicts, att_in in (
            ("H200-g", "g-confirm", 144, "fa4", "FlashAttention-4 (CuTe DSL)",
             (0.86, 0.84, 0.82), ("slower",) * 3, True),
            ("H200-g", "g-confirm", 144, "triton", "our Triton kernel",
             (0.97, 0.94, 0.92), ("slower",) * 3, True),
            ("H200-ae", "ae-gluon", 2, "gluon", "our Gluon kernel (FA3-style)",
             (1.044, 1.016, 0.999), ("faster", "faster within margin", "equivalent"),
             False)):
        for level, sp, v in zip(("call", "kernel", "attention"), sps, verdicts):
            out.append(dict(machine=machine, run=run, m=m, candidate=cand, label=label,
                            level=level, speedup=sp, ci_low=sp - 0.003, ci_high=sp + 0.003,
                            verdict=v, in_family=level != "attention" or att_in))
    return pd.DataFrame(out)


def test_one_row_per_run_and_kernel_one_panel_per_level_in_inventory_order():
    fig = tp.confirmatory_target(rows(), 0.02, "Confirmatory runs at the target")
    axes = fig.axes
    assert [a.get_title() for a in axes] == list(tp.LEVEL_TITLES.values())
    ticks = [t.get_text() for t in axes[0].get_yticklabels()]
    # top to bottom: H200-g (shorter letters first) by kernel label, then H200-ae
    assert ticks == ["H200-g · FlashAttention-4", "H200-g · our Triton kernel",
                           "H200-ae · our Gluon kernel"]
    assert fig.get_figwidth() <= PAGE_WIDTH_IN
    lo, hi = axes[0].get_xlim()
    assert lo < 0.82 and hi > 1.044 and lo <= 0.97 and hi >= 1.03  # every point, the band
    # the margin band on every panel, at 1 ± margin
    for ax in axes:
        (band,) = ax.patches  # axvspan: one rectangle in data x
        assert band.get_x() == pytest.approx(0.98)
        assert band.get_x() + band.get_width() == pytest.approx(1.02)


def _markers(ax):
    """(x, facecolor, edgecolor) of every marker drawn on ``ax``."""
    out = []
    for line in ax.lines:
        x = line.get_xdata()
        if line.get_marker() == "o" and len(x) == 1:
            out.append((float(x[0]), to_hex(line.get_markerfacecolor()),
                        to_hex(line.get_markeredgecolor())))
    return out


def test_verdict_colour_and_hollow_markers_outside_the_family():
    fig = tp.confirmatory_target(rows(), 0.02, "Confirmatory runs at the target")
    call, _, attention = fig.axes
    gluon_call = [m for m in _markers(call) if m[0] == pytest.approx(1.044)]
    assert gluon_call == [(pytest.approx(1.044), VERDICT_COLORS["faster"],
                           VERDICT_COLORS["faster"])]
    gluon_att = [m for m in _markers(attention) if m[0] == pytest.approx(0.999)]
    assert gluon_att[0][1] == "#ffffff" and gluon_att[0][2] == VERDICT_COLORS["equivalent"]
    triton_att = [m for m in _markers(attention) if m[0] == pytest.approx(0.92)]
    assert triton_att[0][1] == VERDICT_COLORS["slower"]  # a member: filled
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "outside the run's family (judged at its m)" in legend and "±2% margin" in legend
    # every member: no hollow legend entry
    full = rows().assign(in_family=True)
    legend = [t.get_text() for t in tp.confirmatory_target(full, 0.02, "x").legends[0].get_texts()]
    assert not any("outside" in t for t in legend)


def test_refuses_bad_input():
    with pytest.raises(ValueError, match="`rows`"):
        tp.confirmatory_target(rows().drop(columns="in_family"), 0.02, "x")
    with pytest.raises(ValueError, match="`rows`"):
        tp.confirmatory_target(rows().iloc[:0], 0.02, "x")
    with pytest.raises(ValueError, match="`title`"):
        tp.confirmatory_target(rows(), 0.02, "")
    with pytest.raises(ValueError, match="margin"):
        tp.confirmatory_target(rows(), 2.0, "x")
    assert np.isfinite(rows()["speedup"]).all()
