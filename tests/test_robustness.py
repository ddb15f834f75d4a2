"""Robustness of the headline verdicts (analyse.robustness): counts under the alternative
analyses, on synthetic comparisons whose verdicts are known; the SM clock's slope, on
synthetic placements with a known clock effect; dropping low-clock placements."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attn_analysis.analyse import comparisons, robustness as rb

CFG = "B32-H8-S512-D64-fp16"


def _groups(rng, shift, processes=8, placements=4, samples=10, process_sd=0.002):
    """Per process, placements of samples of log time ``shift`` + noise."""
    return [[np.exp(shift + rng.normal(0, process_sd) + rng.normal(0, 0.001)
                    + rng.normal(0, 0.0005, samples)) for _ in range(placements)]
            for _ in range(processes)]


def _plan(seed=3):
    """Three clear comparisons (10 % faster, 10 % slower, identical) and one 0.5 % faster
    within a 2 % margin, at the call level, plus one kernel-level twin."""
    rng = np.random.default_rng(seed)
    base = _groups(rng, 0.0)
    out = []
    for cand, shift, level in (("fast", -np.log(1.10), "call"), ("slow", np.log(1.10), "call"),
                               ("twin", 0.0, "call"), ("near", -np.log(1.005), "call"),
                               ("twin", 0.0, "kernel")):
        arm = _groups(np.random.default_rng(rng.integers(1 << 30)), shift)
        out.append((CFG, cand, level, "graph", base, arm))
    return out


@pytest.fixture(scope="module")
def verdicts():
    return rb.alternative_verdicts(_plan(), n_resamples=400)


def test_every_analysis_gives_the_known_verdicts_of_clear_comparisons(verdicts):
    assert set(verdicts["analysis"]) == set(rb.ANALYSES)
    by = verdicts.set_index(["analysis", "candidate", "level"])["category"]
    for a in rb.ANALYSES:
        assert by[(a, "fast", "call")] == "faster", a
        assert by[(a, "slow", "call")] == "slower", a
        assert by[(a, "twin", "call")] == "equivalent", a
    counts = rb.verdict_counts(verdicts)
    assert list(counts.index) == list(rb.ANALYSES)
    assert (counts["total"] == 5).all() and (counts["faster"] >= 1).all()
    lo, hi = rb.count_ranges(counts)["slower"]
    assert lo == hi == 1


def test_the_book_analysis_is_the_chapters_compare():
    plan = _plan()
    v = rb.alternative_verdicts(plan, analyses=(rb.BOOK,))
    from attn_analysis.analyse import stats
    want = [stats.compare(b, a, n_comparisons=len(plan)).verdict.value for *_, b, a in plan]
    assert v["verdict"].tolist() == want


def test_a_larger_family_and_keep_change_what_is_judged():
    plan = _plan()
    small = rb.alternative_verdicts(plan, analyses=(rb.BOOK,))
    huge = rb.alternative_verdicts(plan, family=10 ** 7, analyses=(rb.BOOK,))
    # a family of ten million widens every interval: the 0.5 % lead can no longer be
    # told from none, and the calls that were decided stay decided or become inconclusive
    assert (huge["category"] == "inconclusive").sum() > (small["category"] == "inconclusive").sum()
    kept = rb.alternative_verdicts(plan, analyses=(rb.BOOK,),
                                   keep=lambda c, k, lv, m: lv == "kernel")
    assert kept["level"].tolist() == ["kernel"]


def test_category_and_invalid_input():
    assert rb.category("faster within margin") == "equivalent"
    assert rb.category("undecided at this precision") == "inconclusive"
    with pytest.raises(ValueError, match="`verdict`"):
        rb.category("better")
    with pytest.raises(ValueError, match="`plan`"):
        rb.alternative_verdicts([])
    with pytest.raises(ValueError, match="`analyses`"):
        rb.alternative_verdicts(_plan(), analyses=("magic",))
    with pytest.raises(ValueError, match="`family`"):
        rb.alternative_verdicts(_plan(), family=0)


def _placements(slope_per_mhz=0.0, processes=12, placements=8, seed=1):
    """sdpa and a candidate whose log time falls by ``slope_per_mhz`` per MHz of clock
    more than sdpa's (a speedup that grows with the clock), clocks 1600-1980 MHz."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(processes):
        for p in range(placements):
            clock = float(rng.choice(np.arange(1600, 1981, 15)))
            for cand, k in (("sdpa", 0.0), ("cand", slope_per_mhz)):
                y = -0.05 * (cand == "cand") - k * (clock - 1800) + rng.normal(0, 0.002)
                rows.append({"config": CFG, "candidate": cand, "mode": "graph", "trial": t,
                             "placement": p, "median_ms": float(np.exp(y)),
                             "kernel_ms": float(np.exp(y)) * 0.9,
                             "sm_clock_start_mhz": clock, "sm_clock_end_mhz": clock})
    return pd.DataFrame(rows)


def test_the_clock_slope_recovers_a_known_effect_and_none_where_there_is_none():
    per_mhz = 1e-4  # +1 % speedup per 100 MHz
    pairs = rb.clock_pairs(_placements(per_mhz))
    assert list(pairs.columns) == list(rb.CLOCK_COLUMNS) and len(pairs) == 12 * 8
    s = rb.clock_slope(pairs)
    assert s.low < 100 * np.expm1(100 * per_mhz) < s.high and s.low > 0
    assert (s.processes, s.clock_min >= 1600, s.clock_max <= 1980) == (12, True, True)
    flat = rb.clock_slope(rb.clock_pairs(_placements(0.0)))
    assert flat.low < 0 < flat.high
    kernel = rb.clock_slope(rb.clock_pairs(_placements(per_mhz), level="kernel"))
    assert kernel.low > 0
    fixed = _placements().assign(sm_clock_start_mhz=1980.0, sm_clock_end_mhz=1980.0)
    assert rb.clock_slope(rb.clock_pairs(fixed)) is None


def test_dropping_low_clock_placements_and_the_verdicts_that_change():
    pl = _placements()
    samples = pl.assign(sample=0, ms=pl["median_ms"])[
        ["config", "candidate", "mode", "trial", "placement", "sample", "ms"]]
    s2, p2 = rb.drop_low_clock(samples, pl)
    clock = (p2["sm_clock_start_mhz"] + p2["sm_clock_end_mhz"]) / 2
    assert clock.min() >= pl["sm_clock_start_mhz"].median() and len(p2) < len(pl)
    assert set(map(tuple, s2[["trial", "placement", "candidate"]].values)) == \
        set(map(tuple, p2[["trial", "placement", "candidate"]].values))
    before = comparisons.speedup_table(samples, pl)
    assert rb.verdict_changes(before, before).empty
    after = before.assign(verdict="inconclusive")
    assert len(rb.verdict_changes(before, after)) == len(before)
    gone = rb.verdict_changes(before, after.iloc[:0])
    assert gone["verdict_after"].isna().all() and len(gone) == len(before)
    with pytest.raises(ValueError, match="`placements`"):
        rb.drop_low_clock(samples, pl.drop(columns="sm_clock_end_mhz"))


def test_the_clock_profile_bins_the_centred_speedups():
    prof = rb.clock_profile(rb.clock_pairs(_placements(1e-4)), bin_mhz=60)
    assert prof["pairs"].sum() == 12 * 8
    assert (prof["clock_mhz"] % 60 == 0).all()
    assert prof["speedup_pct"].iloc[-1] > prof["speedup_pct"].iloc[0]  # rises with the clock
    with pytest.raises(ValueError, match="`bin_mhz`"):
        rb.clock_profile(rb.clock_pairs(_placements()), bin_mhz=0)


def test_dropping_placements_at_random_drops_as_many():
    pl = _placements()
    samples = pl.assign(sample=0, ms=pl["median_ms"])[
        ["config", "candidate", "mode", "trial", "placement", "sample", "ms"]]
    _, low = rb.drop_low_clock(samples, pl)
    s2, p2 = rb.drop_random(samples, pl, len(pl) - len(low), seed=3)
    assert len(p2) == len(low) and len(s2) == len(p2)
    again = rb.drop_random(samples, pl, len(pl) - len(low), seed=3)[1]
    assert again.equals(p2)
    with pytest.raises(ValueError, match="`n_drop`"):
        rb.drop_random(samples, pl, len(pl) + 1)


def test_clock_sensitivity_counts_the_verdicts_a_clock_cut_changes():
    """A candidate 5 % faster at every clock keeps its verdict when the low-clock half is
    dropped (nothing changes, nothing is lost); one whose lead exists only at low clocks
    (log-time gap 0.04 below the median clock, none above) turns from faster to equivalent."""
    import types

    def run(pl):
        samples = pl.assign(sample=0, ms=pl["median_ms"])[
            ["config", "candidate", "mode", "trial", "placement", "sample", "ms"]]
        return types.SimpleNamespace(samples=samples, placements=pl)
    steady = run(_placements())
    pl = _placements()
    low = (pl["sm_clock_start_mhz"] < pl["sm_clock_start_mhz"].median())
    only_low = pl["candidate"].eq("cand")
    pl.loc[only_low, "median_ms"] *= np.where(low[only_low], np.exp(0.01), np.exp(0.05))
    clocked = run(pl)
    cs = rb.clock_sensitivity([("steady", "H100", steady, ("graph",), None, None),
                               ("clocked", "H200", clocked, ("graph",), None, None)])
    assert isinstance(cs, rb.ClockSensitivity)
    # call and kernel level (the placements' kernel_ms) of two runs; only the clocked
    # run's call level moves (its kernel_ms keep the steady 5 % lead)
    assert (cs.judged, cs.lost, cs.changed, cs.to_inconclusive) == (4, 0, 1, 0)
    assert set(cs.pairs["model"]) == {"H100", "H200"}
    assert set(cs.pairs["level"]) == {"call", "kernel"}


def test_the_book_row_of_the_powered_run_reproduces_the_powered_chapter():
    """Appendix A judges the powered run as 3.7 does: call and kernel level, at its
    registered family (not with the attention level, m = 180), so the book's analysis row
    gives 3.7's counts, candidates and A/A twin together, in the headline categories."""
    from pathlib import Path

    from attn_analysis import configs, record
    from attn_analysis.analyse import comparisons, power
    from attn_analysis.chapters import powered as pw

    run_dir = Path(__file__).resolve().parents[1] / "data" / "runs" / "h200-powered-v1-reports"
    if not run_dir.is_dir():
        pytest.skip("the powered run is not recorded in this checkout")
    run = record.load(run_dir)
    m = power.registered_family(run.info)
    plan = comparisons.plan_comparisons(run.samples, run.placements, modes=("graph",))[0]
    got = rb.verdict_counts(rb.alternative_verdicts(plan, family=m, margin=0.02,
                                                    analyses=(rb.BOOK,))).iloc[0]
    page = pw.family_table(run, configs.POWERED_PLANS["powered-v1-reports"], margin=0.02,
                           n_resamples=2000)
    want = pw.headline_counts(pw.verdict_counts(page))
    assert m == int(page["n_comparisons"].iloc[0])
    assert {c: int(got[c]) for c in rb.CATEGORIES} == want
