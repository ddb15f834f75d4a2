"""The calibration judged at the family a design is used in
(design_calibration.family_rates, needed_processes), on synthetic runs whose variance
components are known, so the measured rates can be held to the analytic ones of
analyse.power."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from attn_analysis.analyse import design_calibration as dc, power, protocols

CFG = "B32-H8-S512-D64-fp16"
PROCESS_SD = 0.006  # each arm's process component: per-process difference SD 0.85 %
SPIN = 0.04         # the positive control, 2 margins slower


def _frames(n_trials=480, seed=11):
    """sdpa, its A/A twin and a spin control 4 % slower: each arm of each process shifted
    by an independent N(0, PROCESS_SD), 2 placements of 3 samples with tiny noise."""
    rng = np.random.default_rng(seed)
    arms = (("sdpa", 0.0), ("sdpa_twin", 0.0), ("sdpa_spin4", SPIN))
    t, c, p, i = np.meshgrid(np.arange(n_trials), np.arange(len(arms)), np.arange(2),
                             np.arange(3), indexing="ij")
    proc = rng.normal(0, PROCESS_SD, (n_trials, len(arms)))
    logt = (np.log1p(np.array([s for _, s in arms]))[c] + proc[t, c]
            + rng.normal(0, 1e-5, t.shape))
    df = pd.DataFrame({"config": CFG, "candidate": np.array([a for a, _ in arms])[c.ravel()],
                       "mode": "graph", "trial": t.ravel(), "placement": p.ravel(),
                       "sample": i.ravel(), "ms": np.exp(logt.ravel())})
    return {"call": protocols.pool_runs({"r": (df, None)})}


@pytest.fixture(scope="module")
def rates():
    return dc.family_rates(_frames(), "GPU A", [(1, 6), (60, 6), (60, 8), (60, 1000)])


def _rate(rates, measure, m, k):
    r = rates[(rates["measure"] == measure) & (rates["m"] == m) & (rates["k"] == k)]
    return r.iloc[0]


def test_rows_replications_and_control_sizes(rates):
    assert list(rates.columns) == list(dc.FAMILY_COLUMNS)
    assert set(rates["measure"]) == set(dc.FAMILY_MEASURES)
    assert _rate(rates, "power", 60, 6)["n"] == 480 // 6
    assert _rate(rates, "A/A equivalent", 60, 8)["n"] == 480 // 8
    assert _rate(rates, "power", 1, 6)["candidate"] == "sdpa_spin4"
    assert _rate(rates, "power", 1, 6)["size_margins"] == pytest.approx(2.0, abs=0.1)
    # more processes than any run holds: nothing replicated, no rate
    big = _rate(rates, "power", 60, 1000)
    assert big["n"] == 0 and math.isnan(big["rate"])


def test_a_larger_family_lowers_power_and_the_aa_equivalent_rate(rates):
    for measure in ("power", "A/A equivalent"):
        assert _rate(rates, measure, 60, 6)["rate"] < _rate(rates, measure, 1, 6)["rate"]
    assert _rate(rates, "false positive", 60, 6)["rate"] <= _rate(rates, "false positive", 1, 6)["rate"]


@pytest.mark.parametrize("m,k", [(1, 6), (60, 6), (60, 8)])
def test_measured_rates_agree_with_the_analytic_ones_of_the_known_components(rates, m, k):
    sigma = PROCESS_SD * math.sqrt(2)
    expect = {"power": power.verdict_rates(-math.log1p(SPIN), sigma, k, m)["slower"],
              "A/A equivalent": power.verdict_rates(0.0, sigma, k, m)["equivalent"]}
    for measure, p in expect.items():
        r = _rate(rates, measure, m, k)
        # two-sided binomial test at 0.001: a rate computed at another m or k fails it
        assert st.binomtest(int(r["events"]), int(r["n"]), p).pvalue > 1e-3, (measure, r, p)


def test_needed_processes_follow_plan_power_and_grow_with_the_family():
    sig = {"call": 0.01, "kernel": 0.02}
    one, big = dc.needed_processes(sig, 1), dc.needed_processes(sig, 180)
    assert one == {lv: power.processes_needed(s, 1) for lv, s in sig.items()}
    assert big["call"] > one["call"] and big["kernel"] > big["call"]
    assert dc.needed_processes({"call": 5.0}, 10) == {"call": None}


def test_invalid_input_is_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="`designs`"):
        dc.family_rates(_frames(12), "GPU A", [])
    with pytest.raises(ValueError, match="`designs`"):
        dc.family_rates(_frames(12), "GPU A", [(0, 4)])
    with pytest.raises(ValueError, match="`frames`"):
        dc.family_rates({"wall": None}, "GPU A", [(1, 2)])
    with pytest.raises(ValueError, match="`family`"):
        dc.needed_processes({"call": 0.01}, 0)


def test_the_appendix_table_and_texts_read_each_design_at_its_own_m_and_processes(rates):
    from attn_analysis.chapters import design_calibration as ch
    both = pd.concat([rates, rates.assign(level="kernel")], ignore_index=True)
    designs = pd.DataFrame([{"run": "r1", "device": "GPU A", "model": "A", "m": 60,
                             "processes": 6, "need_call": 8, "need_kernel": None}])
    table = ch.family_table(both, designs)
    row = table.iloc[0]
    p6 = f"{100 * _rate(rates, 'power', 60, 6)['rate']:.0f}"
    p8 = f"{100 * _rate(rates, 'power', 60, 8)['rate']:.0f}"
    assert (row["m"], row["P"]) == (60, 6)
    assert row["power %"] == f"{p6}/{p6}"
    assert row["P needed"] == "8/–" and row["power % at need"] == f"{p8}/–"
    texts = ch.family_texts(both, designs)
    assert texts["fam_power_call_m"] == f"{p6} %"
    assert texts["fam_runs"] == "r1"
    assert texts["fam_fp_m"].endswith("%")


def test_used_designs_take_each_runs_family_as_its_chapter_forms_it():
    from pathlib import Path
    from attn_analysis import record
    from attn_analysis.analyse import comparisons
    from attn_analysis.chapters import design_calibration as ch
    from attn_analysis.configs import TARGET
    runs_dir = Path(__file__).resolve().parents[1] / "data" / "runs"
    rid = "h200-target-p2-m2"
    if not (runs_dir / rid).is_dir():
        pytest.skip(f"recorded run {rid} absent")
    run = record.load(runs_dir / rid)
    as_target = ch.used_designs([run], target_runs=(rid,)).iloc[0]
    whole = ch.used_designs([run]).iloc[0]
    assert as_target["m"] == comparisons.target_family(run, TARGET.key)["n_comparisons"].iloc[0]
    assert whole["m"] == len(comparisons.plan_comparisons(
        run.samples, run.placements, kernels=run.kernels)[0])
    assert as_target["processes"] == run.samples["trial"].nunique()
    sig = power.load_design_sigmas(device=run.device, configs=run.samples["config"].unique(),
                                   candidates=sorted(run.samples["candidate"].unique()))
    if sig:
        assert as_target["need_call"] == power.processes_needed(sig["call"], as_target["m"])


def test_used_designs_judge_a_pre_registered_run_at_its_registered_family():
    """Appendix B judges the powered run at the family 3.7 judges it in (its plan's
    family_size, 120), not at every level's comparisons (180 with the attention level)."""
    from pathlib import Path
    from attn_analysis import record
    from attn_analysis.chapters import design_calibration as ch
    runs_dir = Path(__file__).resolve().parents[1] / "data" / "runs"
    rid = "h200-powered-v1-reports"
    if not (runs_dir / rid).is_dir():
        pytest.skip(f"recorded run {rid} absent")
    run = record.load(runs_dir / rid)
    m = power.registered_family(run.info)
    assert m is not None
    assert ch.used_designs([run]).iloc[0]["m"] == m
    assert m != len(comparisons_plan(run))


def comparisons_plan(run):
    from attn_analysis.analyse import comparisons
    return comparisons.plan_comparisons(run.samples, run.placements, kernels=run.kernels)[0]


def test_short_runs_power_gives_each_short_runs_power_at_its_own_family(rates):
    from attn_analysis.chapters import design_calibration as ch
    both = pd.concat([rates, rates.assign(level="kernel")], ignore_index=True)
    designs = pd.DataFrame([
        {"run": "short", "device": "GPU A", "model": "A", "m": 60, "processes": 6,
         "need_call": 8, "need_kernel": None},
        {"run": "enough", "device": "GPU A", "model": "A", "m": 60, "processes": 8,
         "need_call": 8, "need_kernel": 8},
        {"run": "other", "device": "GPU A", "model": "A", "m": 1, "processes": 6,
         "need_call": 8, "need_kernel": 8}])
    p6 = f"{100 * _rate(rates, 'power', 60, 6)['rate']:.0f}"
    # only the asked runs that fall short; each at its own m and P, call/kernel
    assert ch.short_runs_power(both, designs, ["short", "enough"]) == (
        f"{p6}/{p6} % on short (m = 60)")
    assert ch.short_runs_power(both, designs, ["enough"]) == "none"
    assert p6 != f"{100 * _rate(rates, 'power', 60, 8)['rate']:.0f}"  # P, not the need
    with pytest.raises(ValueError, match="`runs`"):
        ch.short_runs_power(both, designs, ["missing"])
    with pytest.raises(ValueError, match="`runs`"):
        ch.short_runs_power(both, designs, "short")
