"""Tests of attn_analysis.calibration: hand-built frames, closed forms, every ValueError."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from attn_analysis.analyse import calibration, gpu_time, protocols, timing_fidelity
from attn_analysis.chapters import claim_table
from attn_analysis.analyse import workload
from attn_analysis.configs import Config

CFG = "B32-H8-S512-D64-fp16"


def make_samples(arms: dict, n_trials: int, n: int, mode: str = "graph", config: str = CFG,
                 trial_sd: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Tidy samples: ``arms`` maps candidate -> (median ms, within-trial relative sd).

    Lognormal times; ``trial_sd`` adds a per-(trial, candidate) lognormal offset, the
    between-process spread."""
    rng = np.random.default_rng(seed)
    rows = []
    for cand, (med, sd) in arms.items():
        for t in range(n_trials):
            shift = rng.normal(0, trial_sd) if trial_sd else 0.0
            ms = med * np.exp(shift + rng.normal(0, sd, n))
            rows += [{"config": config, "candidate": cand, "mode": mode, "trial": t,
                      "sample": i, "ms": float(x)} for i, x in enumerate(ms)]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- groups

def test_replication_groups_disjoint_and_drop_rest():
    assert protocols.replication_groups(range(90), 3)[-1] == (87, 88, 89)
    assert len(protocols.replication_groups(range(90), 3)) == 30
    assert len(protocols.replication_groups(range(90), 4)) == 22  # 88 trials used, 2 dropped
    assert protocols.replication_groups([5, 1, 3, 2], 2) == [(1, 2), (3, 5)]
    with pytest.raises(ValueError, match="`k` must be an integer >= 1"):
        protocols.replication_groups(range(4), 0)


def test_pool_runs_renumbers_trials_averages_kernels_and_groups_within_runs():
    a = make_samples({"sdpa": (1.0, 0.01), "twin": (1.0, 0.01)}, n_trials=6, n=5, seed=1)
    b = make_samples({"sdpa": (1.0, 0.01), "twin": (1.0, 0.01)}, n_trials=5, n=5, seed=2)
    ka = pd.DataFrame({"config": CFG, "candidate": ["sdpa", "twin"], "kernel": "k",
                       "calls_per_call": 1.0, "device_ms_per_call": [1.0, 1.0]})
    kb = ka.assign(device_ms_per_call=[3.0, 3.0])
    s, k = protocols.pool_runs({"r1": (a, ka), "r2": (b, kb)})
    assert set(s["run"]) == {"r1", "r2"}
    assert s["trial"].nunique() == 11
    stride = protocols.RUN_TRIAL_STRIDE
    assert set(s.loc[s["run"] == "r2", "trial"]) == {stride + t for t in range(5)}
    assert k.set_index("candidate").loc["sdpa", "device_ms_per_call"] == 2.0
    d = protocols.protocol_b_decisions(s, k=4, n_resamples=50)
    # r1: one group of 4 (2 trials left over), r2: one group of 4; never a mixed group.
    assert len(d) == 2
    for trials in d["trials"]:
        ids = [int(t) for t in trials.split(",")]
        assert len({t // protocols.RUN_TRIAL_STRIDE for t in ids}) == 1
    with pytest.raises(ValueError, match="`runs` must be a non-empty dict"):
        protocols.pool_runs({})


# --------------------------------------------------------------------------- protocol (a)

def test_protocol_a_aa_false_positive_rate_consistent_with_alpha():
    # Identical distributions, independent draws, no between-process spread: the
    # per-process Mann-Whitney test is valid, so the rate of p < 0.05 is near 0.05.
    df = make_samples({"sdpa": (1.0, 0.05), "twin": (1.0, 0.05)}, n_trials=400, n=50,
                      mode="per_call", seed=1)
    a = protocols.protocol_a_decisions(df, mode="per_call")
    assert len(a) == 400 and set(a["candidate"]) == {"twin"}
    k = int(a["significant"].sum())
    # Two-sided binomial test of the rate against alpha (scipy, independent of our code).
    assert st.binomtest(k, 400, 0.05).pvalue > 0.001
    rates = calibration.outcome_rates(a_decisions=a)
    sig = rates[rates["outcome"] == "significant"].iloc[0]
    assert sig["events"] == k and sig["n"] == 400
    assert sig["ci_low"] <= 0.05 <= sig["ci_high"]


def test_protocol_a_detects_shift_and_direction():
    df = make_samples({"sdpa": (1.0, 0.01), "slow": (1.05, 0.01)}, n_trials=20, n=100,
                      mode="per_call", seed=2)
    a = protocols.protocol_a_decisions(df, mode="per_call")
    assert a["slower"].all() and not a["faster"].any()
    assert (a["candidate_median_ms"] > a["baseline_median_ms"]).all()


def test_protocol_a_breaks_under_between_process_spread():
    # Each process has its own offset for each arm: within-process tests flag it.
    df = make_samples({"sdpa": (1.0, 0.01), "twin": (1.0, 0.01)}, n_trials=60, n=100,
                      mode="per_call", trial_sd=0.03, seed=3)
    a = protocols.protocol_a_decisions(df, mode="per_call")
    assert a["significant"].mean() > 0.5


def test_protocol_a_pairs_only_shared_trials():
    df = make_samples({"sdpa": (1.0, 0.01), "twin": (1.0, 0.01)}, n_trials=3, n=10, seed=4)
    df = df[~((df["candidate"] == "sdpa") & (df["trial"] == 2))]
    assert len(protocols.protocol_a_decisions(df, mode="graph")) == 2


# --------------------------------------------------------------------------- protocol (b)

def test_protocol_b_verdicts_equivalent_and_slower():
    df = make_samples({"sdpa": (1.0, 0.002), "twin": (1.0, 0.002), "slow": (1.10, 0.002)},
                      n_trials=9, n=60, seed=5)
    b = protocols.protocol_b_decisions(df, k=3, n_resamples=500)
    assert len(b) == 6 and set(b["replication"]) == {0, 1, 2}
    assert b["trials"].iloc[0] == "0,1,2"
    assert (b.loc[b["candidate"] == "twin", "verdict"] == "equivalent").all()
    slow = b[b["candidate"] == "slow"]
    assert (slow["verdict"] == "slower").all()
    assert np.allclose(slow["speedup"], 1 / 1.10, rtol=0.01)
    rates = calibration.outcome_rates(b_decisions=b)
    head = calibration.headline_rates(rates, aa_controls=("twin",))
    row = head.set_index("candidate")
    assert row.loc["twin", "outcome"] == "claimed difference" and row.loc["twin", "rate"] == 0
    assert row.loc["slow", "outcome"] == "slower" and row.loc["slow", "rate"] == 1
    # Clopper-Pearson for 0 of 3: upper bound 1 - 0.025**(1/3).
    assert row.loc["twin", "ci_high"] == pytest.approx(1 - 0.025 ** (1 / 3))


def test_outcome_rates_every_verdict_sums_to_one():
    b = pd.DataFrame({"candidate": ["x"] * 4, "k": [3] * 4,
                      "verdict": ["equivalent", "faster", "slower", "inconclusive"]})
    r = calibration.outcome_rates(b_decisions=b)
    plain = r[~r["outcome"].isin(calibration.DERIVED_OUTCOMES)]
    assert plain["rate"].sum() == pytest.approx(1.0)
    assert r.set_index("outcome").loc["claimed difference", "events"] == 2
    assert r.set_index("outcome").loc["beyond margin", "events"] == 2


# --------------------------------------------------------------------------- effects

def test_true_effects_and_extra_kernel():
    df = make_samples({"sdpa": (1.0, 0.001), "spin": (1.04, 0.001)}, n_trials=6, n=50, seed=6)
    kernels = pd.DataFrame({"config": [CFG] * 3, "candidate": ["sdpa", "spin", "spin"],
                            "kernel": ["attn", "attn", "spin_kernel"],
                            "device_ms_per_call": [0.05, 0.05, 0.002]})
    te = calibration.true_effects(df, kernels, n_resamples=500).iloc[0]
    assert te["slowdown"] == pytest.approx(1.04, rel=2e-3)
    assert te["slowdown_low"] < 1.04 < te["slowdown_high"]
    assert te["extra_device_ms"] == pytest.approx(0.002)
    assert te["extra_share"] == pytest.approx(0.04)
    with pytest.raises(ValueError, match="`candidate` must have profiled kernels"):
        calibration.extra_kernel_ms(kernels, "nope")


def test_true_effects_without_the_interval_give_the_same_point(monkeypatch):
    df = make_samples({"sdpa": (1.0, 0.001), "spin": (1.04, 0.001)}, n_trials=6, n=50, seed=6)
    full = calibration.true_effects(df, n_resamples=300)
    monkeypatch.setattr(calibration.bootstrap, "ratio_ci",
                        lambda *a, **k: pytest.fail("resampled without an interval"))
    point = calibration.true_effects(df, n_resamples=300, interval=False)
    assert point["slowdown"].tolist() == full["slowdown"].tolist()
    assert point["slowdown_low"].isna().all() and point["slowdown_high"].isna().all()
    with pytest.raises(ValueError, match="`interval` must be True or False"):
        calibration.true_effects(df, interval="no")


def test_within_process_coverage_low_when_processes_differ():
    rng = np.random.default_rng(7)
    same = [rng.normal(1.0, 0.01, 200) for _ in range(100)]
    spread = [rng.normal(1.0 + rng.normal(0, 0.02), 0.01, 200) for _ in range(100)]
    assert calibration.within_process_coverage(same).estimate > 0.85
    assert calibration.within_process_coverage(spread).estimate < 0.3
    with pytest.raises(ValueError, match="`trials` must hold at least 2"):
        calibration.within_process_coverage([np.ones(5)])


# --------------------------------------------------------------------------- fidelity, cache

def _modes_frame():
    rows = []
    for cfg, meds in {"B32-H8-S128-D64-fp16": (0.04, 0.012, 0.008),
                      "B32-H8-S512-D64-fp16": (0.08, 0.06, 0.05)}.items():
        for mode, med in zip(("per_call", "cold_l2", "graph"), meds):
            rows += [{"config": cfg, "candidate": "sdpa", "mode": mode, "trial": 0,
                      "sample": i, "ms": med} for i in range(3)]
    return pd.DataFrame(rows)


def test_timing_fidelity_closed_form():
    kernels = pd.DataFrame({"config": ["B32-H8-S128-D64-fp16", "B32-H8-S128-D64-fp16",
                                       "B32-H8-S512-D64-fp16"],
                            "candidate": ["sdpa"] * 3, "kernel": ["a", "memset", "a"],
                            "device_ms_per_call": [0.007, 0.001, 0.048]})
    f = timing_fidelity.timing_fidelity(_modes_frame(), kernels).set_index("config")
    s128 = f.loc["B32-H8-S128-D64-fp16"]
    assert s128["device_ms"] == pytest.approx(0.008)
    assert s128["host_share"] == pytest.approx(1 - 0.008 / 0.04)
    assert s128["host_share_graph"] == pytest.approx(1 - 0.008 / 0.04)
    assert s128["graph_over_device"] == pytest.approx(1.0)
    assert list(f.index) == ["B32-H8-S128-D64-fp16", "B32-H8-S512-D64-fp16"]


def test_cache_table_closed_form():
    c = timing_fidelity.cache_table(_modes_frame(), copy_gbs=3000.0, l2_bytes=50 * 2**20)
    c = c.set_index("config")
    row = c.loc["B32-H8-S128-D64-fp16"]
    nbytes = workload.min_bytes(Config(32, 8, 128))
    assert row["min_bytes"] == nbytes == 4 * 32 * 8 * 128 * 64 * 2
    assert row["hot_gbs"] == pytest.approx(nbytes / 0.008e-3 / 1e9)
    assert row["cold_over_hot"] == pytest.approx(1.5)
    assert row["hot_over_copy"] == pytest.approx(row["hot_gbs"] / 3000.0)
    assert row["working_set_over_l2"] == pytest.approx(nbytes / (50 * 2**20))
    with pytest.raises(ValueError, match="`copy_gbs` must be a positive finite number"):
        timing_fidelity.cache_table(_modes_frame(), copy_gbs=0, l2_bytes=1.0)
    with pytest.raises(ValueError, match="modes graph and cold_l2"):
        timing_fidelity.cache_table(_modes_frame().query("mode != 'cold_l2'"), 1.0, 1.0)


# --------------------------------------------------------------------------- cost

def test_unit_costs_and_protocol_cost():
    units = pd.DataFrame({"candidate": ["sdpa", "sdpa", "x"], "mode": ["graph"] * 3,
                          "status": ["ok", "ok", "error"], "n_samples": [100, 100, 0],
                          "elapsed_s": [0.06, 0.08, 1.0]})
    u = gpu_time.unit_costs(units)
    assert len(u) == 1 and u["total_s"].iloc[0] == pytest.approx(0.14)
    assert u["ms_per_sample"].iloc[0] == pytest.approx(0.7)
    # Three trials, each 1 s of units after 2 s of other work; a 10-minute pause before
    # the last (a second invocation) does not move the median.
    t0 = pd.Timestamp("2026-11-23T10:00:00Z")
    starts = [t0 + pd.Timedelta(seconds=x) for x in (2, 5, 8, 611)]
    timed = pd.DataFrame({"trial": [0, 1, 2, 3], "elapsed_s": [1.0] * 4,
                          "started_utc": [t.isoformat() for t in starts]})
    assert gpu_time.process_overhead_s(timed) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="at least 2 trials"):
        gpu_time.process_overhead_s(timed[timed["trial"] == 0])
    c = gpu_time.protocol_cost(0.07, k=3, arms=2, process_overhead_s=1.5, replications=30)
    assert c.comparison_s == pytest.approx(3 * (2 * 0.07 + 1.5))
    assert c.calibration_s == pytest.approx(30 * c.comparison_s)
    with pytest.raises(ValueError, match="`process_overhead_s` must be a finite number >= 0"):
        gpu_time.protocol_cost(0.07, k=3, process_overhead_s=-1)


# --------------------------------------------------------------------------- claims

def test_claims_markdown_and_validation():
    c = claim_table.Claim("a | b", "000.txt, Summary", "x", "fails", "because", "audit-tf32",
                          needs=(), ground="arithmetic")
    md = claim_table.claims_markdown([c])
    assert "{ref}`audit-tf32`" in md and "a \\| b" in md and "**fails**" in md
    with pytest.raises(ValueError, match="`verdict` must be one of"):
        claim_table.Claim("a", "b", "c", "maybe", "d", "e", needs=(), ground="arithmetic")
    with pytest.raises(ValueError, match="`why` must be a non-empty string"):
        claim_table.Claim("a", "b", "c", "holds", " ", "e", needs=(), ground="arithmetic")
    with pytest.raises(ValueError, match="`claims` must be a non-empty sequence"):
        claim_table.claims_markdown([])


# --------------------------------------------------------------------------- validation

@pytest.mark.parametrize("kwargs, message", [
    ({"alpha": 0}, r"`alpha` must be a number in \(0, 1\)"),
    ({"mode": "cold_l2"}, "`mode` must be one of"),
    ({"baseline": "nope"}, "`baseline` must be one of"),
    ({"candidates": ["sdpa"]}, "`candidates` must be drawn from"),
    ({"config": "B1-H1-S16-D64-fp16"}, "`config` must be one of"),
])
def test_protocol_a_validation(kwargs, message):
    df = make_samples({"sdpa": (1.0, 0.01), "twin": (1.0, 0.01)}, n_trials=2, n=5)
    with pytest.raises(ValueError, match=message):
        protocols.protocol_a_decisions(df, **{"mode": "graph", **kwargs})


@pytest.mark.parametrize("kwargs, message", [
    ({"k": 0}, "`k` must be an integer >= 1"),
    ({"margin": 1.5}, r"`margin` must be a number in \(0, 1\)"),
    ({"n_resamples": 0}, "`n_resamples` must be an integer >= 1"),
    ({"seed": -1}, "`seed` must be an integer >= 0"),
])
def test_protocol_b_validation(kwargs, message):
    df = make_samples({"sdpa": (1.0, 0.01), "twin": (1.0, 0.01)}, n_trials=2, n=5)
    with pytest.raises(ValueError, match=message):
        protocols.protocol_b_decisions(df, **kwargs)


def test_samples_and_config_validation():
    df = make_samples({"sdpa": (1.0, 0.01), "twin": (1.0, 0.01)}, n_trials=2, n=5)
    with pytest.raises(ValueError, match="`samples` must be a pandas DataFrame"):
        protocols.protocol_a_decisions([1, 2])
    with pytest.raises(ValueError, match=r"`samples` must have columns .* missing \['ms'\]"):
        protocols.protocol_a_decisions(df.drop(columns="ms"))
    bad = df.copy()
    bad.loc[0, "ms"] = -1.0
    with pytest.raises(ValueError, match="`samples` column `ms` must hold positive"):
        protocols.protocol_a_decisions(bad, mode="graph")
    two = pd.concat([df, df.assign(config="B32-H8-S128-D64-fp16")])
    with pytest.raises(ValueError, match="`config` must be given"):
        protocols.protocol_a_decisions(two, mode="graph")
    with pytest.raises(ValueError, match="must not both be None"):
        calibration.outcome_rates()
    with pytest.raises(ValueError, match="`b_decisions` column `verdict` must hold"):
        calibration.outcome_rates(b_decisions=pd.DataFrame({"candidate": ["x"], "k": [3],
                                                            "verdict": ["maybe"]}))
    with pytest.raises(ValueError, match=r"`confidence` must be a number in \(0, 1\)"):
        calibration.outcome_rates(b_decisions=pd.DataFrame({"candidate": ["x"], "k": [3],
                                                            "verdict": ["faster"]}), confidence=1)


# --------------------------------------------------------------------------- the design, ready for GPU runs

def _controls(n_trials=24, n_place=4, n=5, process_sd=0.0, seed=11):
    """A synthetic calibration run: sdpa, its A/A twin and spin controls at 0.5, 1 and 1.5
    margins (0.01, 0.02, 0.03 slower), processes x placements x samples."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_trials):
        for cand, slow in (("sdpa", 0.0), ("sdpa_twin", 0.0), ("sdpa_spin1", 0.01),
                           ("sdpa_spin2", 0.02), ("sdpa_spin3", 0.03)):
            proc = rng.normal(0, process_sd)
            for p in range(n_place):
                ms = np.exp(np.log1p(slow) + proc + rng.normal(0, 0.002)
                            + rng.normal(0, 0.002, n))
                rows += [{"config": CFG, "candidate": cand, "mode": "graph", "trial": t,
                          "placement": p, "sample": i, "ms": float(x)}
                         for i, x in enumerate(ms)]
    return pd.DataFrame(rows)


def test_design_calibration_gives_fpr_power_by_size_and_coverage_with_cp_intervals():
    df = _controls()
    table = calibration.design_calibration(df, k=3, n_resamples=200)
    ours = table[table["protocol"] == protocols.PROTOCOL_B].set_index(["candidate", "outcome"])
    fp = ours.loc[("sdpa_twin", "claimed difference")]
    assert fp["role"] == calibration.ROLES["aa"] and fp["n"] == 8
    assert fp["ci_high"] == pytest.approx(st.binomtest(int(fp["events"]), 8)
                                          .proportion_ci(0.95, method="exact").high)
    sizes = ours.xs("slower", level="outcome")["size_margins"]
    assert list(sizes.round(1)) == [0.5, 1.0, 1.5]  # controls at 0.5, 1 and 1.5 margins
    power = ours.xs("slower", level="outcome")["rate"]
    assert power.is_monotonic_increasing and power["sdpa_spin3"] >= 0.75
    cov = ours.xs(calibration.COVERAGE, level="outcome")
    assert set(cov.index) == {"sdpa_twin", "sdpa_spin1", "sdpa_spin2", "sdpa_spin3"}
    assert (cov["role"] == calibration.ROLES["coverage"]).all() and (cov["n"] == 8).all()
    assert cov["events"].sum() >= 28  # 32 intervals at 95 %: too few covered would fail


def test_coverage_of_the_design_on_synthetic_runs_with_known_process_variance():
    """72 replications of 2 processes, 0.5 % process spread per arm: the design's interval
    (the t-interval) holds each control's truth in about 95 % of replications; binomial
    test on all of them."""
    df = _controls(n_trials=144, n_place=2, n=3, process_sd=0.005, seed=12)
    table = calibration.design_calibration(df, k=2, n_resamples=100)
    cov = table[table["outcome"] == calibration.COVERAGE]
    held, n = int(cov["events"].sum()), int(cov["n"].sum())
    assert n == 4 * 72
    assert st.binomtest(held, n, 0.95, alternative="less").pvalue > 0.001


def test_kernel_samples_turn_placements_into_one_value_per_placement():
    places = pd.DataFrame({"config": CFG, "candidate": ["sdpa", "sdpa", "x"], "mode": "graph",
                           "trial": [0, 0, 0], "placement": [0, 1, 0],
                           "kernel_ms": [0.05, np.nan, 0.04]})
    ks = protocols.kernel_samples(places)
    assert list(ks["ms"]) == [0.05, 0.04] and set(ks["sample"]) == {0}


def test_calibration_refuses_what_it_cannot_calibrate():
    df = _controls(n_trials=4)
    with pytest.raises(ValueError, match=r"`samples` must hold the calibration controls; "
                                         r"missing \['sdpa_twin'\]"):
        calibration.design_calibration(df[df["candidate"] != "sdpa_twin"], k=2)
    no_spin = df[~df["candidate"].str.startswith("sdpa_spin")]
    with pytest.raises(ValueError, match=r"missing \['a positive control \(sdpa_spin<N>\)'\]"):
        calibration.design_calibration(no_spin, k=2)
    with pytest.raises(ValueError, match=r"`k` \(processes per replication\) must be at most 4"):
        protocols.protocol_b_decisions(df, k=5, n_resamples=100)
    a, b = df.assign(trial=df["trial"]), df
    with pytest.raises(ValueError, match=r"`runs` must come from one GPU model to be pooled; "
                                         r"got NVIDIA H100.*NVIDIA H200"):
        protocols.pool_runs({"a": (a, None), "b": (b, None)},
                            devices={"a": "NVIDIA H100 80GB HBM3", "b": "NVIDIA H200"})
    with pytest.raises(ValueError, match="`devices` must name the GPU model of every run"):
        protocols.pool_runs({"a": (a, None)}, devices={})
    s, _ = protocols.pool_runs({"a": (a, None), "b": (b, None)},
                               devices={"a": "NVIDIA H200", "b": "NVIDIA H200"})
    assert protocols.max_processes(s) == 4 and protocols.missing_controls(s) == []


def test_the_reports_protocol_can_be_left_out_and_ours_is_unchanged(monkeypatch):
    """``rates_by_processes`` reads our protocol's rows alone; leaving the reports'
    Mann-Whitney replication out changes none of them."""
    df = make_samples({"sdpa": (1.0, 0.004), "sdpa_twin": (1.0, 0.004),
                       "sdpa_spin": (1.05, 0.004)}, n_trials=8, n=30, seed=3)
    both = calibration.design_calibration(df, k=2, n_resamples=200)
    monkeypatch.setattr(calibration, "protocol_a_decisions",
                        lambda *a, **k: pytest.fail("replicated the reports' protocol"))
    ours = calibration.design_calibration(df, k=2, n_resamples=200, reports_protocol=False)
    assert set(ours["protocol"]) == {calibration.PROTOCOL_B}
    pd.testing.assert_frame_equal(
        ours, both[both["protocol"] == calibration.PROTOCOL_B].reset_index(drop=True))
    with pytest.raises(ValueError, match="`reports_protocol` must be True or False"):
        calibration.design_calibration(df, k=2, reports_protocol=1)


def test_several_k_give_each_ones_rows_from_one_call():
    df = make_samples({"sdpa": (1.0, 0.004), "sdpa_twin": (1.0, 0.004),
                       "sdpa_spin": (1.05, 0.004)}, n_trials=8, n=30, seed=3)
    both = calibration.design_calibration(df, k=(2, 4), n_resamples=200)
    for k in (2, 4):
        one = calibration.design_calibration(df, k=k, n_resamples=200)
        ours = one[one["protocol"] == calibration.PROTOCOL_B].reset_index(drop=True)
        got = both[(both["protocol"] == calibration.PROTOCOL_B) & (both["k"] == k)]
        pd.testing.assert_frame_equal(got.reset_index(drop=True), ours)
    reports = both[both["protocol"] == calibration.PROTOCOL_A].reset_index(drop=True)
    one = calibration.design_calibration(df, k=2, n_resamples=200)
    pd.testing.assert_frame_equal(
        reports, one[one["protocol"] == calibration.PROTOCOL_A].reset_index(drop=True))
    with pytest.raises(ValueError, match="`k` must be a number of processes"):
        calibration.design_calibration(df, k=())
