"""The intervals behind every verdict that are not bootstraps: a t-interval over
independent processes, the order-statistic interval of a median, the Clopper-Pearson
interval of a rate, and the Monte Carlo error of a percentile bootstrap's ends. Pure
functions, no I/O.

A process is the independent unit of a run: what it fixes (clocks, compiled code, the
autotuner's pick, the allocator's state) is shared by every placement and sample inside
it. :func:`log_ratio_t` therefore reduces each process of each arm to one number, the mean
over its placements of the log of the placement's median, and builds the interval of the
log speedup from the spread of those numbers alone: a paired t-interval on the
per-process log ratios when both arms were measured in the same processes (the protocol's
design: candidates interleaved in one process), Welch's otherwise. Placements and samples
enter only through the per-process values, so their number buys precision but never
degrees of freedom: with two processes the interval has one, and is as wide as that
honestly makes it. ``simulation.interval_study`` compares it with the hierarchical
bootstrap, a bootstrap of processes and a pooled hybrid against the variance components
measured in the recorded runs (the methods chapter reports the figures). :func:`ratio_t_ci`
is that interval as the :class:`RatioCI` every verdict is judged by (``stats.compare``).

:func:`quantile_mc_se` gives the Monte Carlo standard error of a bootstrap percentile
interval's ends, which ``stats.compare`` uses to call a verdict that could flip with the
resampling seed "undecided at this precision". The result types of every interval of the
package live here too (:class:`ConfidenceInterval`, :class:`RatioCI`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import sys

import numpy as np
from scipy import stats as _st

from .. import _validate

__all__ = ["UNITS", "ConfidenceInterval", "RatioCI", "LogRatioT", "placement_medians",
           "process_logs", "log_ratio_t", "quantile_mc_se", "as_ratio_ci", "ratio_t_ci",
           "median_ci", "binomial_rate_ci"]

UNITS = ("process", "placement", "sample")


@dataclasses.dataclass(frozen=True)
class ConfidenceInterval:
    """A point estimate with a two-sided interval: ``low <= estimate <= high`` in general."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str


@dataclasses.dataclass(frozen=True)
class RatioCI:
    """A speedup (above 1: the candidate is faster) with its two-sided interval.

    ``method`` is "bootstrap" (ratio of pooled medians, percentile interval; ``mc_se_low``
    and ``mc_se_high`` are the Monte Carlo standard errors of its ends) or "process-t"
    (geometric mean of per-process median ratios, t-interval over ``unit`` with ``df``
    degrees of freedom; no Monte Carlo error).
    """

    ratio: float
    low: float
    high: float
    confidence: float
    n_trials_baseline: int
    n_trials_candidate: int
    hierarchical: bool
    method: str = "bootstrap"
    unit: str = "process"
    df: float = math.nan
    mc_se_low: float = 0.0
    mc_se_high: float = 0.0


# log of the largest float: math.exp of more overflows
_LOG_FLOAT_MAX = math.log(sys.float_info.max)


@dataclasses.dataclass(frozen=True)
class LogRatioT:
    """A t-interval's ingredients for ``log(median(baseline) / median(candidate))``.

    ``unit`` is the level whose values were treated as independent (``UNITS``), ``n_*``
    how many each arm had, ``paired`` whether the per-unit differences were used
    (``df = n - 1``) rather than Welch's two samples (Satterthwaite ``df``).
    """

    estimate: float
    se: float
    df: float
    unit: str
    n_baseline: int
    n_candidate: int
    paired: bool

    def bounds(self, confidence: float) -> tuple[float, float]:
        """Two-sided ``confidence`` interval of the speedup (ratio scale)."""
        if self.se == 0.0:
            return math.exp(self.estimate), math.exp(self.estimate)
        q = float(_st.t.ppf(1.0 - (1.0 - confidence) / 2.0, self.df))
        # with one degree of freedom and a large Bonferroni family, q is in the thousands:
        # the upper end is then beyond any float (the interval says nothing), not an error
        high = self.estimate + q * self.se
        return math.exp(self.estimate - q * self.se), \
            math.exp(high) if high < _LOG_FLOAT_MAX else math.inf


def placement_medians(placements) -> list[float]:
    """``float(np.median(p))`` of each 1-D array of ``placements``, in their order.

    The arrays of one length and dtype are stacked and reduced in one ``np.median(...,
    axis=1)`` call: per row the same partition and the same mean of the middle value(s) as
    one call per array, so the same bits, without numpy's overhead per call (about 30 us),
    which a design calibration over thousands of comparisons paid some 350 000 times.
    """
    arrays = [np.asarray(p) for p in placements]
    out = [0.0] * len(arrays)
    by_kind: dict[tuple, list[int]] = {}
    for i, a in enumerate(arrays):
        if a.ndim == 1:
            by_kind.setdefault((a.size, a.dtype.str), []).append(i)
        else:  # np.median of the flattened array, as one call gives
            out[i] = float(np.median(a))
    for index in by_kind.values():
        medians = np.median(np.stack([arrays[i] for i in index]), axis=1).tolist()
        for i, m in zip(index, medians):
            out[i] = float(m)
    return out


def process_logs(groups) -> np.ndarray:
    """One value per process: the mean over its placements of log(placement median).

    ``groups`` is processes -> placements -> 1-D arrays of positive times.
    """
    medians = iter(placement_medians([pl for proc in groups for pl in proc]))
    return np.array([np.mean([math.log(next(medians)) for _ in proc]) for proc in groups])


def _unit_values(base, cand) -> tuple[str, np.ndarray, np.ndarray]:
    """The coarsest level at which both arms have at least two units, and its log values."""
    if len(base) >= 2 and len(cand) >= 2:
        return "process", process_logs(base), process_logs(cand)
    pb = [pl for proc in base for pl in proc]
    pc = [pl for proc in cand for pl in proc]
    if len(pb) >= 2 and len(pc) >= 2:
        return "placement", np.log(placement_medians(pb)), np.log(placement_medians(pc))
    return "sample", np.log(np.concatenate(pb)), np.log(np.concatenate(pc))


def log_ratio_t(base, cand, paired: bool = True) -> LogRatioT:
    """The t-interval of the log speedup from per-unit log times of both arms.

    Parameters
    ----------
    base, cand : list of list of 1-D arrays
        Processes -> placements -> positive samples of each arm (validated by the caller,
        ``stats.compare``).
    paired : bool
        Pair the ``i``-th process of each side when both have the same number (callers
        align them by trial); default True.

    Returns
    -------
    LogRatioT
        Estimate, standard error and degrees of freedom of the log speedup, the unit
        treated as independent and whether it was paired; ``bounds(confidence)`` gives the
        interval of the speedup.

    Notes
    -----
    Paired: the one-sample t-interval of the per-process differences, ``df = P - 1``.
    Otherwise each side's per-unit values are a sample and Welch's interval is used
    (Satterthwaite's ``df``). With fewer than two processes on a side the unit falls to
    placements, then to samples: the interval then covers only the variance inside one
    process, and says so through ``unit``. Exact under normal per-unit values whatever the
    variance of each level; ``simulation.interval_study`` checks it on the measured
    components.

    References
    ----------
    .. [1] B. L. Welch, "The generalization of 'Student's' problem when several different
       population variances are involved", *Biometrika* 34(1-2), 1947.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> arm = lambda c: [[rng.lognormal(c, 0.01, 5) for _ in range(3)] for _ in range(4)]
    >>> t = log_ratio_t(arm(0.1), arm(0.0))
    >>> (t.unit, t.df, t.paired, round(t.estimate, 1))
    ('process', 3.0, True, 0.1)
    """
    unit, ub, uc = _unit_values(base, cand)
    nb, nc = ub.size, uc.size
    if paired and unit == "process" and nb == nc:
        d = ub - uc
        se = float(d.std(ddof=1) / math.sqrt(nb))
        return LogRatioT(float(d.mean()), se, float(nb - 1), unit, nb, nc, True)
    if nb < 2 or nc < 2:  # one sample value on a side: nothing to estimate a spread from
        return LogRatioT(float(ub.mean() - uc.mean()), math.inf, 1.0, unit, nb, nc, False)
    vb, vc = float(ub.var(ddof=1)) / nb, float(uc.var(ddof=1)) / nc
    se = math.sqrt(vb + vc)
    df = ((vb + vc) ** 2 / (vb ** 2 / (nb - 1) + vc ** 2 / (nc - 1))) if se > 0 else \
        float(nb + nc - 2)
    return LogRatioT(float(ub.mean() - uc.mean()), se, float(df), unit, nb, nc, False)


def quantile_mc_se(reps: np.ndarray, probs) -> np.ndarray:
    """Monte Carlo standard error of the empirical ``probs`` quantiles of ``reps``.

    Parameters
    ----------
    reps : array_like
        Bootstrap replicates (``B`` values).
    probs : float or sequence of float
        Quantile levels in [0, 1], e.g. the ends of a percentile interval.

    Returns
    -------
    ndarray
        One standard error per level, in the units of ``reps``.

    Notes
    -----
    Distribution-free: for ``B`` replicates the ``p`` quantile is near the order statistic
    of rank ``pB``, whose rank varies by ``j = sqrt(B p (1 - p))`` between resamplings, so
    half the distance between the order statistics ``j`` ranks either side is one
    standard error (the order-statistic interval of a quantile, taken at one standard
    error). With ``B p (1 - p)`` below about 1 the estimate is coarse, which is itself a
    sign that too few resamples reach that tail. For a normal sample it matches the
    textbook ``sqrt(p (1 - p) / B) / phi(z_p)`` (``tests/test_intervals.py``).

    References
    ----------
    .. [1] W. J. Conover, *Practical Nonparametric Statistics*, 3rd ed., Wiley, 1999, §3.2.

    Examples
    --------
    >>> x = np.random.default_rng(0).standard_normal(100_000)
    >>> round(float(quantile_mc_se(x, [0.5])[0]), 3)  # about 1.2533 / sqrt(B)
    0.004
    """
    x = np.sort(np.asarray(reps, dtype=float))
    b = x.size
    out = []
    for p in np.atleast_1d(probs):
        k = p * (b - 1)
        j = max(1.0, math.sqrt(b * p * (1.0 - p)))
        lo = np.interp(max(k - j, 0.0), np.arange(b), x)
        hi = np.interp(min(k + j, b - 1.0), np.arange(b), x)
        out.append((hi - lo) / 2.0)
    return np.array(out)


# ----------------------------------------------------------------- speedup, median, rate

def as_ratio_ci(t: LogRatioT, confidence: float, base, cand) -> RatioCI:
    """The t-interval ``t`` at ``confidence`` as a RatioCI."""
    low, high = t.bounds(confidence)
    return RatioCI(math.exp(t.estimate), low, high, confidence, len(base), len(cand),
                   max(len(base), len(cand)) > 1, "process-t", t.unit, t.df)


def ratio_t_ci(baseline, candidate, confidence: float = 0.95, paired: bool = True) -> RatioCI:
    """t-interval of the speedup over independent processes (the default of :func:`compare`).

    Parameters
    ----------
    baseline, candidate : array_like or sequence of array_like
        Positive finite times, as in :func:`compare`: one 1-D sample; one 1-D sample per
        process; or per process a sequence of 1-D samples, one per memory placement. The
        ``i``-th process of each side must be the same process when both sides have the
        same number (callers align them by trial), as in a run whose candidates are
        interleaved in each process.
    confidence : float
        Two-sided coverage in (0, 1); default 0.95.
    paired : bool
        True (default): the sides' processes are the same processes when their numbers
        match. False: treat the sides as independent samples of processes (Welch), as for
        a side compared with itself.

    Returns
    -------
    RatioCI
        ``ratio = exp(mean_i d_i)`` with ``d_i`` the per-process log speedup (the mean over
        the process's placements of log(median) of the baseline, less the candidate's);
        ``method = "process-t"``, ``unit`` the independent unit and ``df`` its degrees of
        freedom.

    Notes
    -----
    Each process contributes one value per arm, so only the spread between processes
    enters the interval: ``d_bar +- t_{P-1} s_d / sqrt(P)`` for ``P`` paired processes, or
    Welch's interval on the two arms' per-process values when the processes differ. The
    placements and samples inside a process only make each ``d_i`` more precise. With
    fewer than two processes on a side the unit falls to placements, then samples
    (``unit`` says which), and the interval covers the spread inside one process only.
    The interval is analytic: it has no Monte Carlo error and does not depend on a seed.
    Its coverage under the variance components measured in the recorded runs, and under
    larger process effects, is in ``data/simulations`` (``simulation.interval_study``).

    References
    ----------
    .. [1] Student, "The probable error of a mean", *Biometrika* 6(1), 1908.
    .. [2] B. L. Welch, "The generalization of 'Student's' problem when several different
       population variances are involved", *Biometrika* 34(1-2), 1947.
    .. [3] A. C. Cameron and D. L. Miller, "A practitioner's guide to cluster-robust
       inference", *J. Human Resources* 50(2), 2015 (few clusters: use G - 1 degrees of
       freedom).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> base = [[rng.lognormal(0.1, 0.01, 20) for _ in range(8)] for _ in range(4)]
    >>> cand = [[rng.lognormal(0.0, 0.01, 20) for _ in range(8)] for _ in range(4)]
    >>> ci = ratio_t_ci(base, cand)
    >>> (ci.unit, ci.df, ci.low > 1.0)
    ('process', 3.0, True)
    """
    base = _validate.per_process("baseline", baseline)
    cand = _validate.per_process("candidate", candidate)
    confidence = _validate.confidence(confidence)
    paired = _validate.flag("paired", paired)
    return as_ratio_ci(log_ratio_t(base, cand, paired), confidence, base, cand)


def median_ci(x, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    Parameters
    ----------
    x : array_like
        One-dimensional sample of finite values, at least one.
    confidence : float
        Coverage in (0, 1); default 0.95.

    Returns
    -------
    (low, high) : tuple of float
        Order statistics ``x_(l)`` and ``x_(u)`` (1-based) with ``l = k``, ``u = n - k + 1``
        and ``k`` the largest integer with ``P(B <= k - 1) < (1 - confidence) / 2`` for
        ``B ~ Binomial(n, 1/2)``, the count of values below the true median.

    Notes
    -----
    Coverage is at least ``confidence`` for any continuous distribution, except when ``n`` is
    too small to reach it (``n <= 5`` at 95 %): then the whole range is returned and covers
    only ``1 - 2**(1 - n)``. Cheap enough to use inside a stopping rule. It equals
    ``scipy.stats.quantile_test(x, q, p=0.5).confidence_interval(confidence)`` where that
    is defined.

    References
    ----------
    .. [1] W. J. Conover, *Practical Nonparametric Statistics*, 3rd ed., Wiley, 1999, §3.2.

    Examples
    --------
    >>> median_ci(np.arange(1.0, 101.0))
    (40.0, 61.0)
    """
    confidence = _validate.confidence(confidence)
    x = np.sort(_validate.array_1d("x", x))
    n = x.size
    k = int(_st.binom.ppf((1.0 - confidence) / 2, n, 0.5))  # l = k (1-based)
    lo, hi = max(k - 1, 0), min(n - k, n - 1)
    return float(x[lo]), float(x[hi])


def _counts_iv(successes, trials) -> tuple[int, int]:
    """Check 0 <= ``successes`` <= ``trials`` and ``trials`` >= 1, both integers."""
    trials = _validate.positive_integer("trials", trials)
    if (isinstance(successes, bool) or not isinstance(successes, numbers.Integral)
            or not 0 <= successes <= trials):
        raise ValueError(f"`successes` must be an integer in [0, trials={trials}]; "
                         f"got {successes!r}.")
    return int(successes), int(trials)


def binomial_rate_ci(successes: int, trials: int, confidence: float = 0.95
                     ) -> ConfidenceInterval:
    """Clopper-Pearson interval of a rate such as a false-positive rate or a power.

    Parameters
    ----------
    successes : int
        Events counted, in [0, trials].
    trials : int
        Independent attempts, at least 1.
    confidence : float
        Two-sided coverage in (0, 1); default 0.95.

    Returns
    -------
    ConfidenceInterval
        ``estimate = successes / trials``, ``method = "clopper-pearson"``.

    Notes
    -----
    Exact (conservative) interval from ``scipy.stats.binomtest(...).proportion_ci``.

    References
    ----------
    .. [1] C. J. Clopper and E. S. Pearson, "The use of confidence or fiducial limits
       illustrated in the case of the binomial", *Biometrika* 26(4), 1934.

    Examples
    --------
    >>> binomial_rate_ci(0, 20).high  # doctest: +ELLIPSIS
    0.168...
    """
    successes, trials = _counts_iv(successes, trials)
    confidence = _validate.confidence(confidence)
    ci = _st.binomtest(successes, trials).proportion_ci(confidence, method="exact")
    return ConfidenceInterval(successes / trials, float(ci.low), float(ci.high), confidence,
                              "clopper-pearson")
