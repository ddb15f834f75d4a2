"""Tests for attn_analysis.analyse.stats: each statistic against scipy or a closed form."""

from __future__ import annotations

import inspect
import math
import time

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from attn_analysis.analyse import bootstrap, intervals, reports_statistics, stats


def lognormal_trials(rng, n_trials=5, n=300, scale=1.0, between=0.0, within=0.02):
    """One list of trials: per-trial level exp(N(0, between)), samples lognormal(within)."""
    return [scale * math.exp(rng.normal(0.0, between)) * rng.lognormal(0.0, within, n)
            if between else scale * rng.lognormal(0.0, within, n) for _ in range(n_trials)]


# ------------------------------------------------------------------------ median_ci

def test_median_ci_matches_scipy_quantile_test():
    rng = np.random.default_rng(0)
    for n in (10, 31, 100, 1001):
        x = rng.lognormal(size=n)
        ref = sps.quantile_test(x, q=np.median(x), p=0.5).confidence_interval(0.95)
        assert intervals.median_ci(x) == (ref.low, ref.high)


def test_median_ci_coverage_not_below_nominal():
    # 400 samples of n=41 from an exponential (true median ln 2): the count of intervals
    # covering it must not be significantly below 95 % (one-sided binomial test).
    rng = np.random.default_rng(1)
    covered = sum(lo <= math.log(2) <= hi
                  for lo, hi in (intervals.median_ci(rng.exponential(size=41)) for _ in range(400)))
    assert sps.binomtest(covered, 400, 0.95, alternative="less").pvalue > 0.01


def test_median_ci_tiny_sample_is_whole_range():
    assert intervals.median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)


# ----------------------------------------------------------------------- bootstrap_ci

def test_bootstrap_ci_documented_defaults():
    p = inspect.signature(bootstrap.bootstrap_ci).parameters
    assert p["statistic"].default is np.median
    assert (p["confidence"].default, p["n_resamples"].default, p["seed"].default,
            p["method"].default) == (0.95, 10_000, 42, "percentile")


@pytest.mark.parametrize("method", ["percentile", "basic", "BCa"])
@pytest.mark.parametrize("n", [60, 701])  # 701 needs more than one resample chunk
def test_bootstrap_ci_matches_scipy(method, n):
    x = np.random.default_rng(2).lognormal(-1.1, 0.05, n)
    ci = bootstrap.bootstrap_ci(x, confidence=0.9, n_resamples=6000, seed=7, method=method)
    ref = sps.bootstrap((x,), np.median, n_resamples=6000, confidence_level=0.9,
                          method=method, **bootstrap._bootstrap_rng_kw(np.random.default_rng(7)))
    np.testing.assert_allclose([ci.low, ci.high], [ref.confidence_interval.low,
                                                   ref.confidence_interval.high], rtol=1e-12)
    assert (ci.estimate, ci.confidence, ci.method) == (np.median(x), 0.9, method)


def test_bootstrap_ci_statistic_without_axis_and_mean():
    x = np.random.default_rng(3).normal(size=50)
    a = bootstrap.bootstrap_ci(x, statistic=lambda s: float(np.median(s)), n_resamples=500)
    b = bootstrap.bootstrap_ci(x, n_resamples=500)
    assert (a.low, a.high) == (b.low, b.high)
    m = bootstrap.bootstrap_ci(x, statistic=np.mean, n_resamples=2000)
    assert m.estimate == pytest.approx(x.mean()) and m.low < x.mean() < m.high


# --------------------------------------------------------------------------- ratio_ci

def _naive_pooled_medians(trials, n_resamples, rng):
    # Independent reference: draw in the same order as the implementation, then loop.
    lengths = np.array([t.size for t in trials])
    n_max, out = lengths.max(), []
    equal = (lengths == n_max).all()
    for _ in range(n_resamples):
        pick = rng.integers(0, len(trials), (1, len(trials)))
        if equal:
            j = rng.integers(0, n_max, (1, len(trials), n_max), dtype=np.uint16)
        else:
            j = rng.integers(0, lengths[pick][..., None], (1, len(trials), n_max))
        out.append(np.median(np.concatenate(
            [trials[t][j[0, k, :lengths[t]]] for k, t in enumerate(pick[0])])))
    return np.array(out)


@pytest.mark.parametrize("lengths", [(40, 40, 40), (40, 25, 7, 33), (15,)])
def test_pooled_median_replicates_match_naive_loop(lengths, monkeypatch):
    rng = np.random.default_rng(4)
    trials = [np.round(rng.lognormal(0, 0.1, n), 2) for n in lengths]  # with ties
    monkeypatch.setattr(bootstrap, "_CHUNK_ELEMENTS", 1)  # one resample per chunk, as the loop
    got = bootstrap._pooled_median_replicates(trials, 50, np.random.default_rng(5))
    np.testing.assert_array_equal(got, _naive_pooled_medians(trials, 50,
                                                             np.random.default_rng(5)))


def test_ratio_ci_identical_distributions_contains_one():
    rng = np.random.default_rng(6)
    ci = bootstrap.ratio_ci(rng.lognormal(0, 0.05, 3000), rng.lognormal(0, 0.05, 3000),
                            n_resamples=2000)
    assert ci.low < 1 < ci.high and not ci.hierarchical
    assert (ci.n_trials_baseline, ci.n_trials_candidate) == (1, 1)


def test_ratio_ci_ten_percent_faster():
    rng = np.random.default_rng(7)
    base = lognormal_trials(rng, scale=1.1)
    cand = lognormal_trials(rng)
    ci = bootstrap.ratio_ci(base, cand, n_resamples=2000)
    assert 1 < ci.low < 1.1 < ci.high and ci.hierarchical
    assert ci.ratio == np.median(np.concatenate(base)) / np.median(np.concatenate(cand))


def test_hierarchical_ci_wider_than_flat_when_trials_differ():
    rng = np.random.default_rng(8)
    base = lognormal_trials(rng, between=0.03)
    cand = lognormal_trials(rng, between=0.03)
    hier = bootstrap.ratio_ci(base, cand, n_resamples=2000)
    flat = bootstrap.ratio_ci(np.concatenate(base), np.concatenate(cand), n_resamples=2000)
    assert hier.high - hier.low > 2 * (flat.high - flat.low)


COVERAGE_ALPHA = 0.001  # one-sided binomial test: coverage significantly below nominal?


def _ratio_coverage(rng, n_reps, n_trials, n, flat_reps=0, n_resamples=500):
    """Coverage of 1 by hierarchical (and, for the first ``flat_reps``, flat) 95 % ratio CIs.

    True ratio 1 with between-process variance (level exp(N(0, 0.03)) per trial).
    """
    hits_h = hits_f = 0
    for i in range(n_reps):
        b = lognormal_trials(rng, n_trials=n_trials, n=n, between=0.03)
        c = lognormal_trials(rng, n_trials=n_trials, n=n, between=0.03)
        h = bootstrap.ratio_ci(b, c, n_resamples=n_resamples, seed=i)
        hits_h += h.low <= 1 <= h.high
        if i < flat_reps:
            f = bootstrap.ratio_ci(np.concatenate(b), np.concatenate(c), n_resamples=n_resamples,
                                   seed=i)
            hits_f += f.low <= 1 <= f.high
    return hits_h, hits_f


@pytest.mark.slow  # several seconds of simulation
def test_hierarchical_ci_coverage_not_below_nominal_where_flat_fails():
    # 300 runs of 30 trials x 20 samples per side (as many processes as the target-shape
    # campaign). The count of hierarchical intervals covering the true ratio 1 must not be
    # significantly below 95 % (one-sided binomial test at COVERAGE_ALPHA); with 300 runs
    # this rejects a true coverage of about 0.90 or less. 2000 runs of this design gave
    # 0.9535. The flat interval treats one run's processes as the population: the same
    # test rejects it by a wide margin (power check). Here 288/300 and 45/100. About 6 s.
    n_reps, flat_reps = 300, 100
    hits_h, hits_f = _ratio_coverage(np.random.default_rng(9), n_reps, 30, 20, flat_reps)
    assert sps.binomtest(hits_h, n_reps, 0.95, alternative="less").pvalue > COVERAGE_ALPHA
    assert sps.binomtest(hits_f, flat_reps, 0.95, alternative="less").pvalue < 1e-6


@pytest.mark.xfail(strict=True, reason=(
    "known limitation: the percentile two-stage bootstrap undercovers with few trials, "
    "since resampling n trials underestimates their spread by (n - 1) / n and its "
    "distribution is coarse. Measured coverage of the nominal 95 % interval, 100 samples "
    "per trial: 0.807 with 3 trials, 0.895 with 5, 0.943 with 20; "
    "0.953 with 30 trials of 20 samples (1000-2000 runs each). Here: 164/200."))
def test_hierarchical_ci_coverage_with_three_trials():
    n_reps = 200
    hits_h, _ = _ratio_coverage(np.random.default_rng(10), n_reps, 3, 100)
    assert sps.binomtest(hits_h, n_reps, 0.95, alternative="less").pvalue > COVERAGE_ALPHA


def test_ratio_ci_accepts_2d_and_ragged_trials():
    rng = np.random.default_rng(10)
    arr = rng.lognormal(0, 0.02, (4, 50))
    a = bootstrap.ratio_ci(arr, list(arr), n_resamples=200)
    assert a.n_trials_baseline == 4 and a.ratio == 1.0
    b = bootstrap.ratio_ci([arr[0], arr[1][:20]], arr[2], n_resamples=200)
    assert (b.n_trials_baseline, b.n_trials_candidate, b.hierarchical) == (2, 1, True)


def test_ratio_ci_fast_enough():
    # 10k resamples of 5 trials x 300 samples per side; about 0.5 s of CPU on one core.
    # The bound is on this process's CPU time, not the wall clock, so a loaded machine
    # (other processes on the cores) cannot fail it; a per-resample Python loop would.
    rng = np.random.default_rng(11)
    t0 = time.process_time()
    bootstrap.ratio_ci(lognormal_trials(rng), lognormal_trials(rng))
    assert time.process_time() - t0 < 3.0


# ------------------------------------------------------------------- effects and tests

def test_hedges_g_matches_hand_formula():
    rng = np.random.default_rng(12)
    a, b = rng.normal(1.0, 1.0, 7), rng.normal(0.0, 2.0, 5)
    sp = math.sqrt((6 * a.var(ddof=1) + 4 * b.var(ddof=1)) / 10)
    d = (a.mean() - b.mean()) / sp
    j_exact = math.gamma(5) / (math.sqrt(5) * math.gamma(4.5))  # df = 10
    assert reports_statistics.hedges_g(a, b) == pytest.approx(j_exact * d, rel=1e-12)
    assert reports_statistics.hedges_g(a, b, correction="approx") == pytest.approx(
        (1 - 3 / 39) * d, rel=1e-12)
    assert reports_statistics.hedges_g(b, a) == pytest.approx(-reports_statistics.hedges_g(a, b))


def test_hedges_g_degenerate_cases():
    assert reports_statistics.hedges_g([1.0, 1.0], [1.0, 1.0]) == 0.0
    assert reports_statistics.hedges_g([2.0, 2.0], [1.0, 1.0]) == math.inf


def test_cliffs_delta_matches_brute_force_and_mann_whitney_u():
    rng = np.random.default_rng(13)
    a, b = rng.integers(0, 10, 37).astype(float), rng.integers(0, 12, 23).astype(float)
    brute = np.sign(a[:, None] - b[None, :]).mean()
    u = sps.mannwhitneyu(a, b).statistic  # U of `a`, ties counted one half
    assert reports_statistics.cliffs_delta(a, b) == pytest.approx(brute, abs=1e-15)
    assert reports_statistics.cliffs_delta(a, b) == pytest.approx(
        2 * u / (a.size * b.size) - 1, abs=1e-15)
    # 3 of 4 pairs above, 1 tie
    assert reports_statistics.cliffs_delta([2.0, 3.0], [1.0, 2.0]) == 0.75


def test_mann_whitney_matches_scipy():
    rng = np.random.default_rng(14)
    a, b = rng.normal(0, 1, 40), rng.normal(0.5, 1, 30)
    assert reports_statistics.mann_whitney(a, b) == sps.mannwhitneyu(
        a, b, alternative="two-sided").pvalue
    assert reports_statistics.mann_whitney(a, a) == 1.0


def test_binomial_rate_ci_is_clopper_pearson():
    # Closed form: low = Beta.ppf(a/2; k, n-k+1), high = Beta.ppf(1-a/2; k+1, n-k).
    for k, n in [(3, 40), (0, 20), (20, 20)]:
        ci = intervals.binomial_rate_ci(k, n, confidence=0.9)
        low = sps.beta.ppf(0.05, k, n - k + 1) if k else 0.0
        high = sps.beta.ppf(0.95, k + 1, n - k) if k < n else 1.0
        assert (ci.low, ci.high) == (pytest.approx(low), pytest.approx(high))
        assert ci.estimate == k / n and ci.method == "clopper-pearson"


# ------------------------------------------------------------------- TOST and compare

def test_tost_equivalent_for_identical_large_samples():
    rng = np.random.default_rng(17)
    x = rng.lognormal(0, 0.03, 5000)
    res = stats.tost_ratio(x, rng.permutation(x), margin=0.02, n_resamples=2000)
    assert res.equivalent and res.confidence == pytest.approx(0.9)
    assert (res.lower_bound, res.upper_bound, res.margin) == (0.98, 1.02, 0.02)


def test_tost_not_equivalent_for_five_percent_difference():
    rng = np.random.default_rng(18)
    res = stats.tost_ratio(1.05 * rng.lognormal(0, 0.03, 5000), rng.lognormal(0, 0.03, 5000),
                           margin=0.02, n_resamples=2000)
    assert not res.equivalent and res.low > 1.02


def test_tost_needs_the_interval_not_the_point_estimate():
    # Ratio exactly 1, but 30 noisy samples cannot show it is within 2 %.
    x = np.random.default_rng(23).lognormal(0, 0.3, 30)
    res = stats.tost_ratio(x, x[::-1], margin=0.02, n_resamples=1000)
    assert res.ratio == 1.0 and not res.equivalent and res.high - res.low > 0.04


def test_tost_interval_is_the_one_minus_two_alpha_ratio_ci():
    rng = np.random.default_rng(19)
    b, c = lognormal_trials(rng, n=60), lognormal_trials(rng, n=60)
    res = stats.tost_ratio(b, c, margin=0.05, alpha=0.1, n_resamples=500, seed=3)
    ci = bootstrap.ratio_ci(b, c, confidence=0.8, n_resamples=500, seed=3)
    assert (res.low, res.high, res.hierarchical) == (ci.low, ci.high, True)


@pytest.mark.slow  # several seconds of simulation
@pytest.mark.parametrize("true_ratio, n_trials", [(1.02, 1), (0.98, 1), (1.02, 30)])
def test_tost_rarely_declares_equivalence_at_the_margin(true_ratio, n_trials):
    # True ratio of medians exactly 1 +- margin (lognormal(0, sigma) has median 1): each
    # one-sided null holds with equality, so equivalence may be declared in at most
    # alpha = 5 % of runs. The count must not be significantly above 5 % (one-sided
    # binomial test at COVERAGE_ALPHA; with 300 runs it rejects about 9 % or more). The
    # data are precise enough (90 % interval about 0.8-1.2 % wide) that the verdict turns
    # on the interval's placement, not on its width: at ratio 1 it is nearly always
    # equivalent (power check below). 1000 flat runs gave 4.9 % (1.02) and 4.7 % (0.98);
    # 500 runs of 30 trials 3.6 %. About 5 s on one core each.
    margin, alpha, n_reps = 0.02, 0.05, 300
    rng = np.random.default_rng(24)

    def sides(ratio):
        if n_trials == 1:
            return ratio * rng.lognormal(0, 0.03, 500), rng.lognormal(0, 0.03, 500)
        return (lognormal_trials(rng, n_trials, 30, scale=ratio, between=0.01, within=0.03),
                lognormal_trials(rng, n_trials, 30, between=0.01, within=0.03))

    declared = sum(stats.tost_ratio(*sides(true_ratio), margin=margin, alpha=alpha,
                                    n_resamples=500, seed=i).equivalent for i in range(n_reps))
    assert sps.binomtest(declared, n_reps, alpha, alternative="greater").pvalue > COVERAGE_ALPHA
    power = sum(stats.tost_ratio(*sides(1.0), margin=margin, alpha=alpha, n_resamples=500,
                                 seed=i).equivalent for i in range(30))
    assert power >= 27


@pytest.mark.parametrize("scale, n, within, verdict", [
    (1.0, 3000, 0.03, stats.Verdict.EQUIVALENT),
    (1.1, 300, 0.03, stats.Verdict.FASTER),
    (1 / 1.1, 300, 0.03, stats.Verdict.SLOWER),
    (1.0, 15, 0.3, stats.Verdict.INCONCLUSIVE),
    (1.01, 20000, 0.01, stats.Verdict.FASTER_WITHIN_MARGIN),
    (1 / 1.01, 20000, 0.01, stats.Verdict.SLOWER_WITHIN_MARGIN),
])
def test_compare_gives_each_verdict(scale, n, within, verdict):
    rng = np.random.default_rng(20)
    base, cand = scale * rng.lognormal(0, within, n), rng.lognormal(0, within, n)
    if verdict is stats.Verdict.EQUIVALENT:  # the same data twice: no difference to find
        base = cand
    res = stats.compare(base, cand, n_resamples=2000)
    assert res.verdict is verdict and res.reason
    assert res.ratio_ci.confidence == 0.95 and res.tost.confidence == pytest.approx(0.9)


def test_reports_protocol_same_array_twice():
    x = np.random.default_rng(21).lognormal(math.log(0.3195), 0.01, 100)
    r = reports_statistics.reports_protocol(x, x)
    assert (r.speedup, r.hedges_g, r.cliffs_delta, r.p_value, r.cis_overlap) == (
        1.0, 0.0, 0.0, 1.0, True)
    assert r.baseline_ci == r.candidate_ci
    assert r.baseline_ci == bootstrap.bootstrap_ci(x, np.median, 0.95, 10_000, 42, "percentile")


def test_reports_protocol_components():
    rng = np.random.default_rng(22)
    b, c = rng.lognormal(0.1, 0.05, 80), rng.lognormal(0.0, 0.05, 90)
    r = reports_statistics.reports_protocol(b, c)
    assert r.speedup == np.median(b) / np.median(c)
    assert r.p_value == sps.mannwhitneyu(b, c, alternative="two-sided").pvalue
    assert r.hedges_g == reports_statistics.hedges_g(b, c, correction="approx") > 0
    assert r.cliffs_delta > 0 and not r.cis_overlap


# ------------------------------------------------------------------------- validation

X = np.array([1.0, 2.0, 3.0])


@pytest.mark.parametrize("call, match", [
    (lambda: bootstrap.bootstrap_ci(X, confidence=1.0),
     r"`confidence` must be a number in \(0, 1\)"),
    (lambda: bootstrap.bootstrap_ci(X, confidence=True),
     r"`confidence` must be a number in \(0, 1\)"),
    (lambda: intervals.median_ci(X, confidence=0), r"`confidence` must be a number in \(0, 1\)"),
    (lambda: bootstrap.bootstrap_ci(X, n_resamples=0), r"`n_resamples` must be a positive integer"),
    (lambda: bootstrap.bootstrap_ci(X, n_resamples=2.5),
     r"`n_resamples` must be a positive integer"),
    (lambda: bootstrap.bootstrap_ci(X, seed=-1), r"`seed` must be a non-negative integer or None"),
    (lambda: bootstrap.bootstrap_ci(X, method="bca"), r"`method` must be one of \('percentile'"),
    (lambda: bootstrap.bootstrap_ci(X, statistic="median"), r"`statistic` must be a callable"),
    (lambda: bootstrap.bootstrap_ci([]), r"`x` must be a 1-D array of at least 1 finite"),
    (lambda: intervals.median_ci([1.0, np.nan]),
     r"`x` must be .* 1 value\(s\) that are not finite"),
    (lambda: bootstrap.bootstrap_ci([[1.0, 2.0]]), r"`x` must be a 1-D array .* shape \(1, 2\)"),
    (lambda: bootstrap.bootstrap_ci(["a"]), r"`x` must be a 1-D array .* not numeric"),
    (lambda: bootstrap.ratio_ci([], X), r"`baseline` must be a 1-D array of at least 1 positive"),
    (lambda: bootstrap.ratio_ci(X, [1.0, -1.0]), r"`candidate` must be .* not positive finite"),
    (lambda: bootstrap.ratio_ci([X, [1.0, np.inf]], X), r"`baseline\[1\]` must be .* not positive"),
    (lambda: bootstrap.ratio_ci(np.ones((2, 2, 2)), X), r"`baseline` must be .* shape \(2, 2, 2\)"),
    (lambda: bootstrap.ratio_ci(X, X, confidence=1.5),
     r"`confidence` must be a number in \(0, 1\)"),
    (lambda: bootstrap.ratio_ci(X, X, n_resamples=0), r"`n_resamples` must be a positive integer"),
    (lambda: stats.tost_ratio(X, X, margin=0), r"`margin` must be a number in \(0, 1\)"),
    (lambda: stats.tost_ratio(X, X, margin=1.0), r"`margin` must be a number in \(0, 1\)"),
    (lambda: stats.tost_ratio(X, X, 0.02, alpha=0.5), r"`alpha` must be a number in \(0, 0.5\)"),
    (lambda: stats.compare(X, X, margin=-0.1), r"`margin` must be a number in \(0, 1\)"),
    (lambda: stats.compare(X, X, alpha=0), r"`alpha` must be a number in \(0, 0.5\)"),
    (lambda: stats.compare(X, X, confidence=0), r"`confidence` must be a number in \(0, 1\)"),
    (lambda: reports_statistics.hedges_g([1.0], X),
     r"`a` must be a 1-D array of at least 2 finite"),
    (lambda: reports_statistics.hedges_g(X, X, correction="x"),
     r"`correction` must be one of \('exact'"),
    (lambda: reports_statistics.cliffs_delta(X, []),
     r"`b` must be a 1-D array of at least 1 finite"),
    (lambda: reports_statistics.mann_whitney([np.nan], X), r"`a` must be .* not finite"),
    (lambda: intervals.binomial_rate_ci(1, 0), r"`trials` must be a positive integer"),
    (lambda: intervals.binomial_rate_ci(5, 4),
     r"`successes` must be an integer in \[0, trials=4\]"),
    (lambda: intervals.binomial_rate_ci(1, 4, 1.0), r"`confidence` must be a number in \(0, 1\)"),
    (lambda: reports_statistics.reports_protocol([1.0], X),
     r"`baseline` must be a 1-D array of at least 2"),
])
def test_invalid_arguments_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_results_are_frozen():
    ci = bootstrap.bootstrap_ci(X, n_resamples=10)
    with pytest.raises(AttributeError):
        ci.low = 0.0  # type: ignore[misc]


def test_exact_j_matches_gammaln():
    # J(df) via scipy.special.gamma directly, larger df than the hand test.
    a, b = np.arange(30.0), np.arange(30.0) + 3
    df = 58
    j = special.gamma(df / 2) / (math.sqrt(df / 2) * special.gamma((df - 1) / 2))
    sp = math.sqrt((29 * a.var(ddof=1) + 29 * b.var(ddof=1)) / df)
    assert reports_statistics.hedges_g(a, b) == pytest.approx(j * -3 / sp, rel=1e-12)


def test_median_ci_trials_widens_with_between_process_spread():
    rng = np.random.default_rng(7)
    same = [rng.normal(1.0, 0.01, 300) for _ in range(5)]
    shifted = [rng.normal(1.0 + 0.05 * t, 0.01, 300) for t in range(5)]
    a = bootstrap.median_ci_trials(same, n_resamples=2000)
    b = bootstrap.median_ci_trials(shifted, n_resamples=2000)
    assert a.low < np.median(np.concatenate(same)) < a.high
    assert (b.high - b.low) > 5 * (a.high - a.low)
    assert a.method == "hierarchical percentile"
    with pytest.raises(ValueError, match="`confidence`"):
        bootstrap.median_ci_trials(same, confidence=1.5)
