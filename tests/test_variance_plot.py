"""Test of the variance-components figure: label, units, one bar per estimable component."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attn_analysis.present import audit_plots

LABEL = "NVIDIA H200, torch 2.11.0+cu130"


def components():
    rows = []
    for cfg in ("B32-H8-S2048-D64-fp16", "B32-H8-S512-D64-fp16"):
        for cand in ("sdpa", "eager_compiled"):
            rows.append(dict(config=cfg, candidate=cand, mode="graph", level="call",
                             sd_machine=0.002, sd_process=0.001, sd_placement=0.004,
                             sd_replay=0.005))
            rows.append(dict(config=cfg, candidate=cand, mode="", level="kernel",
                             sd_machine=np.nan, sd_process=0.0, sd_placement=0.003,
                             sd_replay=np.nan))
    return pd.DataFrame(rows)


def test_variance_components_figure():
    fig = audit_plots.variance_components(components(), LABEL, runs="r1, r2")
    title = fig._suptitle.get_text()
    assert LABEL in title and "r1, r2" in title
    call, kernel = fig.axes[:2]
    assert "call level" in call.get_title() and "kernel level" in kernel.get_title()
    assert all("(%)" in ax.get_xlabel() for ax in (call, kernel))
    widths = sorted(round(p.get_width(), 6) for p in call.patches)
    assert widths[-1] == pytest.approx(0.5)  # SDs drawn in percent: 0.005 -> 0.5 %
    assert len(call.patches) == 4 * 4  # four rows, four components
    # the kernel level has no replay term and no machine estimate: zero-width bars
    assert sum(p.get_width() > 0 for p in kernel.patches) == 4
    # rows ordered by configuration (S512 before S2048), labelled candidate first
    labels = [t.get_text() for t in call.get_yticklabels()]
    assert labels[0].endswith("S512") and labels[-1].endswith("S2048")
    assert fig.legends and not call.get_legend()  # legend outside the axes


def test_variance_components_refuses_bad_input():
    with pytest.raises(ValueError, match="`device_label` must be a non-empty string"):
        audit_plots.variance_components(components(), "")
    with pytest.raises(ValueError, match="`components` must hold call-level rows in `mode`"):
        audit_plots.variance_components(components()[lambda d: d["level"] == "call"], LABEL,
                              mode="per_call")
    with pytest.raises(ValueError, match="`components` must have columns"):
        audit_plots.variance_components(components().drop(columns="sd_replay"), LABEL)


def test_a_far_off_component_is_cut_and_labelled():
    c = components()
    c.loc[0, "sd_machine"] = 0.05  # 5 %, ten times the rest
    call = audit_plots.variance_components(c, LABEL).axes[0]
    assert call.get_xlim()[1] < 5.0
    assert any(t.get_text().startswith("5.0 % (cut)") for t in call.texts)
