"""The interval behind the verdicts: the t-interval over processes against scipy, its
coverage on synthetic runs with known process variance, the Monte Carlo error of a
bootstrap's ends, and the verdict rule (one interval decides, near-margin results are
undecided)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from attn_analysis.analyse import bootstrap, intervals, stats

COVERAGE_ALPHA = 0.001  # one-sided binomial tests: coverage significantly below nominal?


def run(rng, processes=3, placements=4, samples=5, sd_process=0.006, sd_placement=0.003,
        sd_replay=0.004, shift=0.0):
    """One arm: processes -> placements -> samples, lognormal effects at each level."""
    out = []
    for _ in range(processes):
        p = rng.normal(0, sd_process)
        out.append([np.exp(shift + p + rng.normal(0, sd_placement)
                           + rng.normal(0, sd_replay, samples)) for _ in range(placements)])
    return out


def _logs(arm):
    # Independent of the implementation: per process, per placement, by loops.
    return np.array([sum(math.log(sorted(pl)[len(pl) // 2]) if len(pl) % 2 else
                         math.log((sorted(pl)[len(pl) // 2 - 1] + sorted(pl)[len(pl) // 2]) / 2)
                         for pl in proc) / len(proc) for proc in arm])


# ------------------------------------------------------------------ against scipy

def test_paired_t_interval_matches_scipy_ttest_rel():
    rng = np.random.default_rng(1)
    b, c = run(rng, processes=5), run(rng, processes=5, shift=-0.01)
    ci = intervals.ratio_t_ci(b, c, confidence=0.9)
    ref = sps.ttest_rel(_logs(b), _logs(c)).confidence_interval(0.9)
    assert (math.log(ci.low), math.log(ci.high)) == pytest.approx((ref.low, ref.high),
                                                                  rel=1e-10)
    assert ci.ratio == pytest.approx(math.exp(np.mean(_logs(b) - _logs(c))), rel=1e-12)
    assert (ci.method, ci.unit, ci.df, ci.mc_se_low) == ("process-t", "process", 4.0, 0.0)


def test_unpaired_t_interval_is_welch_as_scipy_gives_it():
    rng = np.random.default_rng(2)
    b, c = run(rng, processes=4), run(rng, processes=6)  # unequal: cannot be paired
    ci = intervals.ratio_t_ci(b, c)
    ref = sps.ttest_ind(_logs(b), _logs(c), equal_var=False)
    lo, hi = ref.confidence_interval(0.95)
    assert (math.log(ci.low), math.log(ci.high)) == pytest.approx((lo, hi), rel=1e-10)
    assert ci.df == pytest.approx(ref.df)
    same = intervals.ratio_t_ci(b, b, paired=False)  # a side against itself, as two samples
    assert same.ratio == 1.0 and same.low < 1.0 < same.high


def test_with_one_process_the_unit_falls_to_placements_then_samples():
    rng = np.random.default_rng(3)
    one = run(rng, processes=1)
    ci = intervals.ratio_t_ci(one, run(rng, processes=1))
    assert (ci.unit, ci.df) == ("placement", pytest.approx(ci.df)) and ci.df <= 6
    flat = intervals.ratio_t_ci(rng.lognormal(0, 0.01, 50), rng.lognormal(0, 0.01, 60))
    assert flat.unit == "sample" and not flat.hierarchical


def test_identical_paired_sides_give_a_zero_width_interval_at_one():
    rng = np.random.default_rng(4)
    b = run(rng)
    ci = intervals.ratio_t_ci(b, b)
    assert (ci.ratio, ci.low, ci.high) == (1.0, 1.0, 1.0)

def test_placement_medians_are_the_bits_of_one_median_call_per_array():
    """The batched medians (one ``np.median`` per length and dtype) equal one call per array
    bit for bit: odd and even lengths, one sample, float32 beside float64 of one length, a
    list, and a 2-D array (flattened, as ``np.median`` does)."""
    rng = np.random.default_rng(7)
    arrays = [rng.lognormal(0, 0.1, int(n)) for n in rng.integers(1, 9, 300)]
    # float32's median is its own rounding of the middle mean: 0.25, not float64's 0.2500000075
    arrays += [np.float32([0.4, 0.1, 0.3, 0.2]), [4.0, 1.0, 2.0], rng.lognormal(0, 1, (3, 2))]
    got = intervals.placement_medians(arrays)
    assert got == [float(np.median(a)) for a in arrays]
    assert all(type(m) is float for m in got) and intervals.placement_medians([]) == []
    arm = run(rng)
    assert intervals.process_logs(arm).tolist() == [
        np.mean([math.log(float(np.median(pl))) for pl in proc]) for proc in arm]



# ------------------------------------------------------------------ coverage

def test_t_interval_covers_at_the_nominal_rate_with_few_processes_where_the_bootstrap_fails():
    """Known process variance (0.6 % per arm, independent between arms) and three
    processes: the t-interval's 95 % coverage of the true speedup must not be
    significantly below 95 %, the hierarchical bootstrap's is (it treats three processes
    as the population). 400 runs for the t-interval, 150 for the bootstrap; a few
    seconds."""
    rng = np.random.default_rng(5)
    truth = 1 / 1.02
    hit_t = hit_b = 0
    for i in range(400):
        b, c = run(rng), run(rng, shift=math.log(1.02))
        ci = intervals.ratio_t_ci(b, c)
        hit_t += ci.low <= truth <= ci.high
        if i < 150:
            bs = bootstrap.ratio_ci(b, c, n_resamples=400, seed=i)
            hit_b += bs.low <= truth <= bs.high
    assert sps.binomtest(hit_t, 400, 0.95, alternative="less").pvalue > COVERAGE_ALPHA
    assert sps.binomtest(hit_b, 150, 0.95, alternative="less").pvalue < COVERAGE_ALPHA


@pytest.mark.slow  # several seconds of simulation
def test_t_interval_holds_the_family_wise_rate_under_bonferroni():
    """Ten A/A comparisons per family at family-wise 95 %: at most 5 % of families may
    have any interval excluding 1 (two processes each, so df = 1)."""
    rng = np.random.default_rng(6)
    bad = 0
    for _ in range(300):
        bad += any(not (lambda ci: ci.low <= 1.0 <= ci.high)(
            stats.compare(run(rng, processes=2), run(rng, processes=2),
                          n_comparisons=10).ratio_ci) for _ in range(10))
    assert sps.binomtest(bad, 300, 0.05, alternative="greater").pvalue > COVERAGE_ALPHA


# ------------------------------------------------------------------ Monte Carlo error

def test_monte_carlo_error_of_the_bootstrap_ends_matches_their_spread_over_seeds():
    rng = np.random.default_rng(7)
    b, c = run(rng, processes=2, placements=8, samples=20), run(rng, processes=2,
                                                                 placements=8, samples=20)
    cis = [stats.compare(b, c, method="bootstrap", n_resamples=2000, seed=s,
                         n_comparisons=20).ratio_ci for s in range(40)]
    sd = np.std([ci.low for ci in cis], ddof=1), np.std([ci.high for ci in cis], ddof=1)
    se = np.mean([ci.mc_se_low for ci in cis]), np.mean([ci.mc_se_high for ci in cis])
    for got, want in zip(se, sd):
        assert 0.6 < got / want < 1.6


def test_quantile_mc_se_of_a_normal_sample_is_the_textbook_value():
    # SE of the p-quantile of B normal draws: sqrt(p (1 - p) / B) / phi(z_p). One estimate
    # rests on about 2 sqrt(B p (1 - p)) spacings (noise near 8 % here): average 8 draws.
    rng = np.random.default_rng(8)
    draws = [rng.standard_normal(200_000) for _ in range(8)]
    for p in (0.025, 0.5, 0.975):
        want = math.sqrt(p * (1 - p) / 200_000) / sps.norm.pdf(sps.norm.ppf(p))
        got = np.mean([intervals.quantile_mc_se(x, [p])[0] for x in draws])
        assert got == pytest.approx(want, rel=0.08)


# ------------------------------------------------------------------ the verdict rule

def ci(low, high, se=0.0, ratio=None):
    ratio = (low + high) / 2 if ratio is None else ratio
    return intervals.RatioCI(ratio, low, high, 0.95, 2, 2, True, "bootstrap" if se else "process-t",
                             "process", 1.0, se, se)


@pytest.mark.parametrize("low, high, verdict", [
    (1.03, 1.05, stats.Verdict.FASTER), (0.95, 0.97, stats.Verdict.SLOWER),
    (1.002, 1.015, stats.Verdict.FASTER_WITHIN_MARGIN),
    (0.985, 0.998, stats.Verdict.SLOWER_WITHIN_MARGIN),
    (0.99, 1.01, stats.Verdict.EQUIVALENT), (0.99, 1.03, stats.Verdict.INCONCLUSIVE),
    # an end within half a unit of the third decimal of a boundary: undecided
    (1.0202, 1.05, stats.Verdict.UNDECIDED), (0.99, 1.0199, stats.Verdict.UNDECIDED),
    (0.97, 0.9799, stats.Verdict.UNDECIDED),
    # inside the margin either way, only its side of 1 in doubt: the weaker claim holds
    (1.0003, 1.01, stats.Verdict.EQUIVALENT), (0.9998, 1.0004, stats.Verdict.EQUIVALENT),
])
def test_decide_applies_the_rule_to_one_interval(low, high, verdict):
    res = stats.decide(ci(low, high), margin=0.02)
    assert res.verdict is verdict and res.reason


def test_an_interval_reaching_past_the_margin_is_never_equivalent():
    # The cells: intervals reaching 1.020 and 1.026 were called equivalent (their
    # TOST interval, narrower, lay inside). The printed interval now decides.
    for high in (1.0200, 1.026):
        res = stats.decide(ci(0.995, high), margin=0.02)
        assert res.verdict is not stats.Verdict.EQUIVALENT
    rng = np.random.default_rng(9)
    shift = None
    for s in np.linspace(0.0, 0.02, 81):  # find data whose TOST says equivalent, 95 % not
        b, c = run(rng, processes=4, sd_process=0.004), run(rng, processes=4, sd_process=0.004,
                                                             shift=-s)
        res = stats.compare(b, c, margin=0.02)
        if res.tost.equivalent and res.ratio_ci.high >= 1.02:
            shift = s
            break
    assert shift is not None and res.verdict is not stats.Verdict.EQUIVALENT


def test_a_bootstrap_end_within_its_monte_carlo_error_of_a_boundary_is_undecided():
    res = stats.decide(ci(1.0215, 1.06, se=0.001), margin=0.02)  # 1.5 SE above 1.02
    assert res.verdict is stats.Verdict.UNDECIDED
    assert "faster or inconclusive" in res.reason and "Monte Carlo" in res.reason
    assert stats.decide(ci(1.0215, 1.06, se=0.0001), margin=0.02).verdict is stats.Verdict.FASTER


def test_no_bootstrap_verdict_depends_on_the_seed():
    """A comparison built to sit near 1 + margin: over 30 seeds at 1000 resamples the
    verdicts that are not "undecided" all agree."""
    rng = np.random.default_rng(10)
    b = run(rng, processes=4, placements=4, samples=10, sd_process=0.002)
    c = run(rng, processes=4, placements=4, samples=10, sd_process=0.002,
            shift=-math.log(1.032))
    seen = {stats.compare(b, c, method="bootstrap", n_resamples=1000, seed=s).verdict
            for s in range(30)}
    assert len(seen - {stats.Verdict.UNDECIDED}) <= 1


def test_the_process_t_verdict_does_not_depend_on_the_seed():
    rng = np.random.default_rng(11)
    b, c = run(rng), run(rng, shift=-0.02)
    assert len({stats.compare(b, c, seed=s) for s in range(5)}) == 1


@pytest.mark.parametrize("call, match", [
    (lambda: stats.compare([1.0, 2.0], [1.0, 2.0], method="t"),
     r"`method` must be one of \('process-t', 'bootstrap'\)"),
    (lambda: stats.compare([1.0, 2.0], [1.0, 2.0], precision=-1),
     r"`precision` must be a finite number >= 0"),
    (lambda: stats.compare([1.0, 2.0], [1.0, 2.0], paired=1), r"`paired` must be True or False"),
    (lambda: stats.decide((0.9, 1.1)), r"`ci` must be an intervals.RatioCI"),
    (lambda: intervals.ratio_t_ci([1.0], [1.0], confidence=1.0), r"`confidence` must be a number"),
])
def test_invalid_arguments_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_verdict_words_come_from_the_enum_only():
    from attn_analysis.analyse import calibration, findings
    words = {v.value for v in stats.Verdict}
    assert set(findings.VERDICT_ORDER) == words
    assert all(set(v) <= words for v in calibration.DERIVED_OUTCOMES.values())
    assert stats.Verdict.UNDECIDED.value == "undecided at this precision"


def test_an_interval_beyond_any_float_is_unbounded_not_an_error():
    # two processes (one degree of freedom) in a family of hundreds: q is in the thousands
    t = intervals.LogRatioT(estimate=0.5, se=0.4, df=1.0, unit="process", n_baseline=2,
                            n_candidate=2, paired=True)
    low, high = t.bounds(1 - 0.05 / 660)
    assert high == math.inf and 0.0 <= low < 1e-300
    low, high = t.bounds(0.95)  # an ordinary interval is unchanged
    q = sps.t.ppf(0.975, 1.0)
    assert (low, high) == (math.exp(0.5 - q * 0.4), math.exp(0.5 + q * 0.4))
