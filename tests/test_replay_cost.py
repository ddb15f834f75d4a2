"""replay_cost: tables from the graph-anatomy check, and the calls per replay of recorded units."""

import math

import pandas as pd
import pytest
from matplotlib.figure import Figure

from attn_analysis.present import audit_plots
from attn_analysis.analyse import replay_cost as rc

KEY = "B32-H8-S128-D64-fp16"


def _doc(cost_ms=0.004, call_ms=0.008, ks=(1, 4, 16, 64)):
    """A synthetic anatomy check: a replay costs ``cost_ms`` plus ``k`` calls."""
    by_k = {str(k): {"kernels_per_replay": 2 * k, "busy_ms_per_call": call_ms * 0.9,
                     "span_ms_per_call": call_ms, "replay_median_ms": cost_ms + k * call_ms,
                     "per_call_ms": (cost_ms + k * call_ms) / k} for k in ks}
    return {"results": {KEY: {
        "sdpa": {"eager_profiler_ms": call_ms * 0.9, "by_k": by_k,
                 "auto": {"calls_per_sample": 100, "median_ms": (cost_ms + 100 * call_ms) / 100}},
        "broken": {"error": "RuntimeError: no kernel"}}}}


def test_anatomy_table_excess_follows_a_fixed_cost_per_replay():
    t = rc.anatomy_table(_doc())
    assert list(t.columns) == list(rc.ANATOMY_COLUMNS)
    assert set(t["candidate"]) == {"sdpa"}  # the candidate with an error is left out
    ref = (0.004 + 64 * 0.008) / 64
    for row in t.itertuples():
        assert row.per_call_ms == pytest.approx(0.008 + 0.004 / row.k)
        assert row.excess == pytest.approx((0.008 + 0.004 / row.k) / ref - 1)
        assert row.kernels_per_call == 2
    assert t.loc[t["k"] == 64, "excess"].item() == 0.0
    assert t["excess"].is_monotonic_decreasing


def test_excess_range_and_auto_table():
    t = rc.anatomy_table(_doc())
    lo, hi = rc.excess_range(t, KEY, 4)
    assert lo == hi == pytest.approx((0.008 + 0.001) / (0.008 + 0.004 / 64) - 1)
    with pytest.raises(ValueError, match="`k` must be one of"):
        rc.excess_range(t, KEY, 5)
    a = rc.auto_table(_doc())
    assert a["k"].tolist() == [100]
    assert a["excess"].item() < 0  # 100 calls spread the cost thinner than 64


@pytest.mark.parametrize("bad", [None, [], {"results": []}, {"other": {}}])
def test_anatomy_table_rejects_other_json(bad):
    with pytest.raises(ValueError, match="`doc` must be the JSON object"):
        rc.anatomy_table(bad)


def test_graph_calls_reads_only_successful_graph_units():
    units = pd.DataFrame({
        "config": [KEY] * 5, "candidate": ["sdpa", "sdpa", "sdpa", "triton", "triton"],
        "mode": ["graph", "graph", "per_call", "graph", "graph"],
        "status": ["ok", "ok", "ok", "ok", "oom"], "calls_per_sample": [3, 4, 1, 9, 0]})
    g = rc.graph_calls(units).set_index("candidate")
    assert (g.loc["sdpa", "k_min"], g.loc["sdpa", "k_max"]) == (3, 4)
    assert (g.loc["triton", "k_min"], g.loc["triton", "k_max"]) == (9, 9)
    with pytest.raises(ValueError, match="lacks columns"):
        rc.graph_calls(units.drop(columns="calls_per_sample"))


def test_replay_curves_figure_names_device_and_units():
    fig = audit_plots.replay_curves(rc.anatomy_table(_doc()), "H100 test label")
    assert isinstance(fig, Figure)
    assert "H100 test label" in fig._suptitle.get_text()
    ax = fig.axes[0]
    assert "µs" in ax.get_ylabel() and "k" in ax.get_xlabel()
    assert not math.isnan(ax.get_ylim()[0])
    with pytest.raises(ValueError, match="device_label"):
        audit_plots.replay_curves(rc.anatomy_table(_doc()), "")
