"""The design calibrated over its processes (analyse.design_calibration): rates at each k
from one synthetic run with known effects, the rule that chooses the processes, the short
table, the figure; and, on the recorded runs, that the sweep's default is what the rule
chose."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_analysis import audit_plots
from attn_analysis.analyse import calibration, design_calibration as dc, protocols

CFG = "B32-H8-S512-D64-fp16"


def _run(n_trials=24, process_sd=0.004, seed=5):
    """sdpa, its twin and two spin controls 1 % and 4 % slower (0.5 and 2 margins), with a
    process spread that two processes cannot average out."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_trials):
        for cand, slow in (("sdpa", 0.0), ("sdpa_twin", 0.0), ("sdpa_spin1", 0.01),
                           ("sdpa_spin4", 0.04)):
            proc = rng.normal(0, process_sd)
            for p in range(4):
                ms = np.exp(np.log1p(slow) + proc + rng.normal(0, 0.001, 5))
                rows += [{"config": CFG, "candidate": cand, "mode": "graph", "trial": t,
                          "placement": p, "sample": i, "ms": float(x)}
                         for i, x in enumerate(ms)]
    return protocols.pool_runs({"r": (pd.DataFrame(rows), None)})


@pytest.fixture(scope="module")
def rates():
    return dc.rates_by_processes({"call": _run()}, "GPU A", ks=(2, 4, 6), n_resamples=100)


def test_rates_at_each_k_count_disjoint_replications_and_measure_sizes(rates):
    assert list(rates.columns) == list(dc.RATE_COLUMNS)
    aa = rates[rates["outcome"] == "claimed difference"].set_index("k")
    assert aa["n"].to_dict() == {2: 12, 4: 6, 6: 4}  # 24 processes // k
    assert (aa["candidate"] == "sdpa_twin").all() and (rates["device"] == "GPU A").all()
    sizes = rates[rates["outcome"] == "slower"].groupby("candidate")["size_margins"].mean()
    assert sizes["sdpa_spin1"] == pytest.approx(0.5, abs=0.2)  # 1 %, process noise 0.4 %
    assert sizes["sdpa_spin4"] == pytest.approx(2.0, abs=0.2)


def test_power_grows_with_processes_and_the_rule_picks_the_fewest_that_reach_the_goal(rates):
    big = rates[(rates["candidate"] == "sdpa_spin4") & (rates["outcome"] == "slower")]
    power = big.set_index("k")["rate"]
    assert power[2] < dc.POWER_GOAL <= power[4] <= power[6]
    assert dc.choose_processes(rates) == 4
    # no control of 3 margins or more: the rule cannot choose
    assert dc.choose_processes(rates, min_size=3.0) is None
    # a device where no k reaches the goal makes the whole choice None
    other = rates.assign(device="GPU B", rate=0.0)
    assert dc.choose_processes(pd.concat([rates, other])) is None
    assert dc.choose_processes(rates, level="kernel") is None  # no kernel-level rows


def test_design_table_is_short_and_says_events_and_sizes(rates):
    t = dc.design_table(rates, 4)
    assert list(t["control"]) == ["sdpa_twin", "sdpa_spin1", "sdpa_spin4"]  # smallest first
    assert all(x.endswith("/6") for x in t["events / replications"])
    events = [int(x.split("/")[0]) for x in t["events / replications"]]
    assert list(t["rate"]) == pytest.approx([e / 6 for e in events])
    assert all("%–" in x for x in t["95 % interval"])
    assert t["size (margins)"].iloc[2] == pytest.approx(2.0, abs=0.2)
    with pytest.raises(ValueError, match="`k` must be one of"):
        dc.design_table(rates, 5)


@pytest.mark.parametrize("call, message", [
    (lambda: dc.rates_by_processes({}, "d"), "`frames` must map levels"),
    (lambda: dc.rates_by_processes({"wall": _run()}, "d"), "`frames` must map levels"),
    (lambda: dc.rates_by_processes({"call": _run()}, "d", ks=()), "`ks` must hold"),
    (lambda: dc.rates_by_processes({"call": _run()}, "d", ks=(0,)), "`ks`"),
    (lambda: dc.choose_processes(pd.DataFrame({"k": [2]})), "`rates`"),
])
def test_invalid_arguments_are_refused_with_their_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_processes_figure_has_a_panel_per_level_and_device(rates):
    two = pd.concat([rates, rates.assign(level="kernel")])
    fig = audit_plots.power_by_processes(two, dc.POWER_GOAL, "synthetic")
    assert len(fig.axes) == 2
    assert [ax.get_title() for ax in fig.axes] == ["GPU A\ncall level", "GPU A\nkernel level"]


@pytest.mark.slow
def test_the_sweep_default_is_what_the_recorded_calibration_chose():
    """The default processes (measure.plan.DEFAULT_TRIALS) follow the rule applied to the
    recorded calibration runs of both GPU models."""
    from attn_analysis import record
    from attn_analysis.measure.plan import DEFAULT_TRIALS
    runs = [record.load(Path(__file__).parents[1] / "data" / "runs" / f"{gpu}-calibration-v3")
            for gpu in ("h100", "h200")]
    rates = pd.concat([dc.rates_by_processes(
        {"call": protocols.pool_runs({r.run_id: (r.samples, r.kernels)})}, r.run_id,
        ks=(2, 3, 4), n_resamples=100) for r in runs])
    assert dc.choose_processes(rates) == DEFAULT_TRIALS == 4


def test_level_samples_gives_a_runs_timed_samples_or_its_kernel_times():
    import types
    samples = pd.DataFrame({"config": [CFG], "candidate": ["sdpa"], "mode": ["graph"],
                            "trial": [0], "sample": [0], "ms": [0.05]})
    placements = pd.DataFrame({"config": [CFG] * 2, "candidate": ["sdpa"] * 2,
                               "mode": ["graph"] * 2, "trial": [0, 0], "placement": [0, 1],
                               "kernel_ms": [0.047, None]})
    run = types.SimpleNamespace(samples=samples, placements=placements)
    assert protocols.level_samples(run, "call") is samples
    kernel = protocols.level_samples(run, "kernel")
    assert list(kernel["ms"]) == [0.047] and list(kernel["placement"]) == [0]
    with pytest.raises(ValueError, match="`level` must be one of"):
        protocols.level_samples(run, "wall")
