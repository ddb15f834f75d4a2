"""Statistics for latency samples: intervals, effect sizes, tests. Pure functions, no I/O.

Two families live here. The honest comparison (``compare``) judges a speedup by one
interval against a margin: by default a t-interval over independent processes
(``ratio_t_ci``, :mod:`attn_analysis.intervals`), or, for comparison, the hierarchical
bootstrap (``ratio_ci``) with the Monte Carlo error of its ends; it claims "no difference"
only when that interval lies inside the margin, and calls a result whose verdict a small
move of an interval end would change "undecided at this precision". ``reports_protocol``
recomputes the original reports' statistics exactly as they did, so the book can show what
they measure.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import numbers

import numpy as np
from scipy import special as _sp
from scipy import stats as _st

from . import _validate, intervals

BOOTSTRAP_METHODS = ("percentile", "basic", "BCa")
# The intervals ``compare`` can judge by: the t-interval over processes (the default, chosen
# by ``simulation.interval_study``) and the hierarchical percentile bootstrap it replaced.
INTERVAL_METHODS = ("process-t", "bootstrap")
DEFAULT_INTERVAL = "process-t"
# Half a unit in the third decimal: the book prints speedups and their intervals to three
# decimals, so a verdict must survive a move of an interval end by this much.
PRINT_PRECISION = 5e-4
# A bootstrap interval end within this many Monte Carlo standard errors of a boundary
# could fall on the other side of it with another seed: the verdict is left undecided.
MC_Z = 3.0
_CHUNK_ELEMENTS = 1 << 22  # resampled values held at once (about 32 MiB of float64)


# ----------------------------------------------------------------------------- results

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


@dataclasses.dataclass(frozen=True)
class TOSTResult:
    """Equivalence verdict: the (1 - 2 alpha) interval of the ratio inside the bounds."""

    equivalent: bool
    ratio: float
    low: float
    high: float
    confidence: float
    alpha: float
    margin: float
    lower_bound: float
    upper_bound: float
    hierarchical: bool


class Verdict(enum.Enum):
    """Outcome of :func:`compare` (the rule is in its Notes)."""

    FASTER = "faster"
    FASTER_WITHIN_MARGIN = "faster within margin"
    EQUIVALENT = "equivalent"
    SLOWER_WITHIN_MARGIN = "slower within margin"
    SLOWER = "slower"
    INCONCLUSIVE = "inconclusive"
    UNDECIDED = "undecided at this precision"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Verdict on a candidate against a baseline, with the evidence behind it."""

    verdict: Verdict
    reason: str
    ratio_ci: RatioCI
    tost: TOSTResult


@dataclasses.dataclass(frozen=True)
class ReportsProtocol:
    """The original reports' statistics, recomputed their way (see :func:`reports_protocol`)."""

    baseline_ci: ConfidenceInterval
    candidate_ci: ConfidenceInterval
    speedup: float
    hedges_g: float
    cliffs_delta: float
    p_value: float
    cis_overlap: bool


# -------------------------------------------------------------------------- validation

def _confidence_iv(confidence) -> float:
    """Check that ``confidence`` lies strictly between 0 and 1."""
    return _validate.number_in("confidence", confidence, 0.0, 1.0)


def _seed_iv(seed) -> np.random.Generator:
    """Turn ``seed`` (a non-negative integer or None) into a Generator."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or seed < 0):
        raise ValueError(f"`seed` must be a non-negative integer or None; got {seed!r}.")
    return np.random.default_rng(seed)


def _sample_iv(name: str, x, min_size: int = 1, positive: bool = False) -> np.ndarray:
    """Return ``x`` as a 1-D float array of finite (optionally positive) values."""
    what = "positive finite" if positive else "finite"
    rule = f"`{name}` must be a 1-D array of at least {min_size} {what} value(s)"
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{rule}; got {type(x).__name__} that is not numeric.") from None
    if arr.ndim != 1:
        raise ValueError(f"{rule}; got an array of shape {arr.shape}.")
    if arr.size < min_size:
        raise ValueError(f"{rule}; got {arr.size} value(s).")
    bad = ~np.isfinite(arr) | ((arr <= 0) if positive else False)
    if bad.any():
        raise ValueError(f"{rule}; got {int(bad.sum())} value(s) that are not {what}.")
    return arr


def _trials_iv(name: str, x) -> list[np.ndarray]:
    """Return ``x`` (one 1-D sample, or one 1-D sample per trial) as a list of trials."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):  # ragged: trials of different lengths
        arr = None
    if arr is not None and arr.ndim == 1:
        return [_sample_iv(name, arr, positive=True)]
    if arr is not None and arr.ndim != 2:
        raise ValueError(f"`{name}` must be a 1-D array of times or a sequence of 1-D arrays "
                         f"(one per trial); got an array of shape {arr.shape}.")
    parts = list(x) if arr is None else list(arr)
    if not parts:
        raise ValueError(f"`{name}` must hold at least one trial; got none.")
    return [_sample_iv(f"{name}[{i}]", p, positive=True) for i, p in enumerate(parts)]


def _nested_iv(name: str, x) -> list[list[np.ndarray]]:
    """Return ``x`` as processes -> placements -> samples.

    Accepts one 1-D sample (one process, one placement), a sequence of 1-D samples (one per
    process, one placement each: the layout of runs before protocol 2) or a sequence of
    sequences of 1-D samples (processes, then placements).
    """
    if isinstance(x, (list, tuple)) and x and all(isinstance(p, (list, tuple)) for p in x) \
            and all(len(p) and not np.isscalar(p[0]) for p in x):
        return [[_sample_iv(f"{name}[{i}][{j}]", pl, positive=True) for j, pl in enumerate(proc)]
                for i, proc in enumerate(x)]
    return [[t] for t in _trials_iv(name, x)]


def _statistic_iv(statistic):
    """Check that ``statistic`` is callable."""
    if not callable(statistic):
        raise ValueError(f"`statistic` must be a callable such as np.median; got {statistic!r}.")
    return statistic


def _counts_iv(successes, trials) -> tuple[int, int]:
    """Check 0 <= ``successes`` <= ``trials`` and ``trials`` >= 1, both integers."""
    trials = _validate.positive_integer("trials", trials)
    if (isinstance(successes, bool) or not isinstance(successes, numbers.Integral)
            or not 0 <= successes <= trials):
        raise ValueError(f"`successes` must be an integer in [0, trials={trials}]; "
                         f"got {successes!r}.")
    return int(successes), int(trials)


def _ratio_iv(baseline, candidate, n_resamples, seed):
    """Validate the arguments shared by the ratio functions (processes -> placements)."""
    return (_nested_iv("baseline", baseline), _nested_iv("candidate", candidate),
            _validate.positive_integer("n_resamples", n_resamples), _seed_iv(seed))


# --------------------------------------------------------------------------- intervals

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
    confidence = _confidence_iv(confidence)
    x = np.sort(_sample_iv("x", x))
    n = x.size
    k = int(_st.binom.ppf((1.0 - confidence) / 2, n, 0.5))  # l = k (1-based)
    lo, hi = max(k - 1, 0), min(n - k, n - 1)
    return float(x[lo]), float(x[hi])


def _bootstrap_rng_kw(rng) -> dict:
    """Pass ``rng`` to scipy.stats.bootstrap under the name this scipy version uses."""
    params = inspect.signature(_st.bootstrap).parameters
    return {"rng": rng} if "rng" in params else {"random_state": rng}


def bootstrap_ci(x, statistic=np.median, confidence: float = 0.95, n_resamples: int = 10_000,
                 seed: int | None = 42, method: str = "percentile") -> ConfidenceInterval:
    """Bootstrap confidence interval of one sample's statistic (default: the median).

    Parameters
    ----------
    x : array_like
        One-dimensional sample of finite values, at least one.
    statistic : callable
        ``statistic(sample, axis=-1)`` reduces the last axis; default ``np.median``.
        Callables without an ``axis`` argument are applied one resample at a time.
    confidence : float
        Two-sided coverage in (0, 1); default 0.95.
    n_resamples : int
        Bootstrap resamples, at least 1; default 10 000.
    seed : int or None
        Seed of ``np.random.default_rng``; default 42. None draws fresh entropy.
    method : {"percentile", "basic", "BCa"}
        Interval construction; default "percentile".

    Returns
    -------
    ConfidenceInterval
        ``estimate = statistic(x)`` and the interval.

    Notes
    -----
    The defaults are the original reports' protocol: percentile bootstrap of the median,
    10 000 resamples, seed 42. "percentile" is computed here (resample rows drawn with
    ``rng.integers(0, n, (n_resamples, n))``, linear quantiles), which gives the same numbers
    as ``scipy.stats.bootstrap`` with the same generator; "basic" and "BCa" call scipy.
    The reports' own random stream is unknown, so their last digit may differ.

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman &
       Hall, 1993, ch. 13-14.

    Examples
    --------
    >>> ci = bootstrap_ci(np.random.default_rng(0).normal(size=100), n_resamples=1000)
    >>> ci.low < ci.estimate < ci.high
    True
    """
    x = _sample_iv("x", x)
    statistic = _statistic_iv(statistic)
    confidence = _confidence_iv(confidence)
    n_resamples = _validate.positive_integer("n_resamples", n_resamples)
    rng = _seed_iv(seed)
    method = _validate.choice("method", method, BOOTSTRAP_METHODS)

    try:
        vectorised = "axis" in inspect.signature(statistic).parameters
    except (TypeError, ValueError):  # builtins without a signature
        vectorised = False
    stat = statistic if vectorised else (
        lambda a, axis=-1: np.apply_along_axis(statistic, axis, a))
    estimate = float(statistic(x))
    if method != "percentile":
        res = _st.bootstrap((x,), stat, n_resamples=n_resamples, confidence_level=confidence,
                            method=method, vectorized=True, **_bootstrap_rng_kw(rng))
        ci = res.confidence_interval
        return ConfidenceInterval(estimate, float(ci.low), float(ci.high), confidence, method)
    n = x.size
    rows = max(1, _CHUNK_ELEMENTS // n)
    theta = np.concatenate([stat(x[rng.integers(0, n, (min(rows, n_resamples - s), n))],
                                 axis=-1) for s in range(0, n_resamples, rows)])
    alpha = 1.0 - confidence
    low, high = np.quantile(theta, [alpha / 2, 1 - alpha / 2])
    return ConfidenceInterval(estimate, float(low), float(high), confidence, method)


def _pooled_median_replicates(trials: list[np.ndarray], n_resamples: int,
                              rng: np.random.Generator) -> np.ndarray:
    """Medians of ``n_resamples`` two-stage resamples (trials, then samples within them)."""
    pooled = np.sort(np.concatenate(trials))
    n_pooled = pooled.size
    lengths = np.array([t.size for t in trials])
    n_trials, n_max = lengths.size, int(lengths.max())
    # Work on ranks: order statistics of ranks map to those of values, and ints sort fast.
    # Column n_max (and any past a shorter trial's end) holds n_pooled: padding that sorts last.
    ranks = np.full((n_trials, n_max + 1), n_pooled, dtype=np.int32)
    order = np.argsort(np.concatenate(trials), kind="stable")
    flat_rank = np.empty(n_pooled, dtype=np.int32)
    flat_rank[order] = np.arange(n_pooled, dtype=np.int32)
    for t, start in enumerate(np.concatenate([[0], np.cumsum(lengths)[:-1]])):
        ranks[t, :lengths[t]] = flat_rank[start:start + lengths[t]]
    equal = bool((lengths == n_max).all())
    idx_dtype = np.uint16 if n_max < 2 ** 16 else np.int64
    out = np.empty(n_resamples)
    rows = max(1, _CHUNK_ELEMENTS // (n_trials * n_max))
    for s in range(0, n_resamples, rows):
        r = min(rows, n_resamples - s)
        pick = rng.integers(0, n_trials, (r, n_trials))  # trials, with replacement
        if equal:
            j = rng.integers(0, n_max, (r, n_trials, n_max), dtype=idx_dtype)
            size = np.full(r, n_trials * n_max)
        else:
            j = rng.integers(0, lengths[pick][..., None], (r, n_trials, n_max))
            j[np.arange(n_max) >= lengths[pick][..., None]] = n_max  # past a trial's end
            size = lengths[pick].sum(axis=1)
        res = ranks[pick[..., None], j].reshape(r, -1)
        lo_k, hi_k = (size - 1) // 2, size // 2
        if equal:
            res = np.partition(res, [int(lo_k[0]), int(hi_k[0])], axis=1)
        else:
            res = np.sort(res, axis=1)
        rows_ix = np.arange(r)
        out[s:s + r] = 0.5 * (pooled[res[rows_ix, lo_k]] + pooled[res[rows_ix, hi_k]])
    return out


def _nested_median_replicates(groups: list[list[np.ndarray]], n_resamples: int,
                              rng: np.random.Generator) -> np.ndarray:
    """Medians of three-stage resamples: processes, then placements within each chosen
    process, then samples within each chosen placement (all with replacement)."""
    if all(len(proc) == 1 for proc in groups):  # one placement each: the two-stage case
        return _pooled_median_replicates([proc[0] for proc in groups], n_resamples, rng)
    flat = [pl for proc in groups for pl in proc]
    pooled = np.sort(np.concatenate(flat))
    n_pooled = pooled.size
    n_proc = len(groups)
    m_count = np.array([len(proc) for proc in groups])
    m_max = int(m_count.max())
    lengths = np.zeros((n_proc, m_max), dtype=np.int64)
    for i, proc in enumerate(groups):
        lengths[i, :len(proc)] = [pl.size for pl in proc]
    n_max = int(lengths.max())
    order = np.argsort(np.concatenate(flat), kind="stable")
    flat_rank = np.empty(n_pooled, dtype=np.int64)
    flat_rank[order] = np.arange(n_pooled)
    # ranks[p, m, j]; one extra column (n_max) and padding hold n_pooled, which sorts last
    ranks = np.full((n_proc, m_max, n_max + 1), n_pooled, dtype=np.int64)
    start = 0
    for i, proc in enumerate(groups):
        for j, pl in enumerate(proc):
            ranks[i, j, :pl.size] = flat_rank[start:start + pl.size]
            start += pl.size
    out = np.empty(n_resamples)
    rows = max(1, _CHUNK_ELEMENTS // (n_proc * m_max * n_max))
    m_idx, n_idx = np.arange(m_max), np.arange(n_max)
    for s0 in range(0, n_resamples, rows):
        r = min(rows, n_resamples - s0)
        pick_p = rng.integers(0, n_proc, (r, n_proc))
        m_of = m_count[pick_p][..., None]                                   # (r, P, 1)
        pick_m = np.minimum((rng.random((r, n_proc, m_max)) * m_of).astype(np.int64),
                            m_of - 1)
        l_sel = lengths[pick_p[..., None], pick_m]                          # (r, P, M)
        l_sel = np.where(m_idx < m_of, l_sel, 0)
        pick_s = np.minimum((rng.random((r, n_proc, m_max, n_max)) * l_sel[..., None])
                            .astype(np.int64), np.maximum(l_sel[..., None] - 1, 0))
        pick_s = np.where(n_idx < l_sel[..., None], pick_s, n_max)           # padding column
        res = ranks[pick_p[..., None, None], pick_m[..., None], pick_s].reshape(r, -1)
        size = l_sel.sum(axis=(1, 2))
        res = np.sort(res, axis=1)
        lo_k, hi_k = (size - 1) // 2, size // 2
        rows_ix = np.arange(r)
        out[s0:s0 + r] = 0.5 * (pooled[res[rows_ix, lo_k]] + pooled[res[rows_ix, hi_k]])
    return out


def _ratio_replicates(base, cand, n_resamples: int,
                      rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """Point ratio of pooled medians and its bootstrap replicates.

    ``base`` and ``cand`` are lists of processes, each a list of placements (1-D arrays).
    """
    def pooled(groups):
        return np.median(np.concatenate([pl for proc in groups for pl in proc]))
    ratio = float(pooled(base) / pooled(cand))
    reps = (_nested_median_replicates(base, n_resamples, rng)
            / _nested_median_replicates(cand, n_resamples, rng))
    return ratio, reps


def _ratio_ci_from(ratio, reps, confidence, base, cand) -> RatioCI:
    """Percentile interval of the replicates at ``confidence``, with the Monte Carlo
    standard error of each end (:func:`intervals.quantile_mc_se`)."""
    alpha = 1.0 - confidence
    probs = [alpha / 2, 1 - alpha / 2]
    low, high = np.quantile(reps, probs)
    se_low, se_high = intervals.quantile_mc_se(reps, probs)
    return RatioCI(ratio, float(low), float(high), confidence, len(base), len(cand),
                   max(len(base), len(cand)) > 1, "bootstrap", _top_unit(base, cand),
                   math.nan, float(se_low), float(se_high))


def _top_unit(base, cand) -> str:
    """The top level a bootstrap resamples: processes, else one process's placements."""
    if max(len(base), len(cand)) > 1:
        return "process"
    return "placement" if max(len(base[0]), len(cand[0])) > 1 else "sample"


def _t_ratio_ci(t: intervals.LogRatioT, confidence: float, base, cand) -> RatioCI:
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
    base, cand = _nested_iv("baseline", baseline), _nested_iv("candidate", candidate)
    confidence = _confidence_iv(confidence)
    paired = _validate.flag("paired", paired)
    return _t_ratio_ci(intervals.log_ratio_t(base, cand, paired), confidence, base, cand)


def ratio_ci(baseline, candidate, confidence: float = 0.95, n_resamples: int = 10_000,
             seed: int | None = 42) -> RatioCI:
    """Bootstrap CI of the speedup ``median(baseline) / median(candidate)``.

    Parameters
    ----------
    baseline, candidate : array_like or sequence of array_like
        Positive finite times: one 1-D sample, or one 1-D sample per independent trial
        (process), as a sequence or 2-D array (rows are trials; lengths may differ).
    confidence : float
        Two-sided coverage in (0, 1); default 0.95.
    n_resamples : int
        Bootstrap resamples, at least 1; default 10 000.
    seed : int or None
        Seed of ``np.random.default_rng``; default 42.

    Returns
    -------
    RatioCI
        ``ratio > 1`` means the candidate is faster. ``hierarchical`` is True when either
        side has more than one trial.

    Notes
    -----
    Each replicate resamples the trials with replacement, then the samples within each
    chosen trial, and takes the median of the pooled resample; the two sides are resampled
    independently and the percentile interval of the ratio is returned. With one trial this
    is the plain bootstrap. Resampling trials carries the between-process variance (clock
    state, placement, ...) into the interval; resampling samples alone treats one process
    as the population and is too narrow when processes differ.

    References
    ----------
    .. [1] A. C. Davison and D. V. Hinkley, *Bootstrap Methods and their Application*,
       Cambridge University Press, 1997, §3.8 (multi-stage sampling).
    .. [2] V. Saravanan, G. J. Berman and S. J. Sober, "Application of the hierarchical
       bootstrap to multi-level data in neuroscience", *Neurons, Behavior, Data Analysis,
       and Theory* 3(5), 2020.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ci = ratio_ci(rng.normal(1.1, 0.01, 300), rng.normal(1.0, 0.01, 300), n_resamples=1000)
    >>> ci.low > 1
    True
    """
    base, cand, n_resamples, rng = _ratio_iv(baseline, candidate, n_resamples, seed)
    confidence = _confidence_iv(confidence)
    ratio, reps = _ratio_replicates(base, cand, n_resamples, rng)
    return _ratio_ci_from(ratio, reps, confidence, base, cand)


def median_ci_trials(trials, confidence: float = 0.95, n_resamples: int = 10_000,
                     seed: int | None = 42) -> ConfidenceInterval:
    """Hierarchical bootstrap CI of the pooled median of samples grouped in trials.

    Parameters
    ----------
    trials : array_like or sequence of array_like
        Positive finite times, one 1-D sample per independent trial (process).
    confidence, n_resamples, seed
        As in :func:`ratio_ci`.

    Returns
    -------
    ConfidenceInterval
        Percentile interval (``method='hierarchical percentile'``) around the pooled median.

    Notes
    -----
    The same two-stage resampling as :func:`ratio_ci` (trials with replacement, then
    samples within each chosen trial), for one side only: the interval carries the
    between-process spread, which a bootstrap of pooled samples would hide.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ci = median_ci_trials([rng.normal(1.0, 0.01, 200) for _ in range(4)], n_resamples=500)
    >>> ci.low < 1.0 < ci.high
    True
    """
    groups, _, n_resamples, rng = _ratio_iv(trials, trials, n_resamples, seed)
    confidence = _confidence_iv(confidence)
    reps = _nested_median_replicates(groups, n_resamples, rng)
    alpha = 1.0 - confidence
    low, high = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    pooled = np.concatenate([pl for proc in groups for pl in proc])
    return ConfidenceInterval(float(np.median(pooled)), float(low), float(high),
                              confidence, "hierarchical percentile")


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
    confidence = _confidence_iv(confidence)
    ci = _st.binomtest(successes, trials).proportion_ci(confidence, method="exact")
    return ConfidenceInterval(successes / trials, float(ci.low), float(ci.high), confidence,
                              "clopper-pearson")


# ------------------------------------------------------------------ effects and tests

def hedges_g(a, b, correction: str = "exact") -> float:
    """Hedges' g: bias-corrected standardised mean difference ``(mean(a) - mean(b)) / s``.

    Parameters
    ----------
    a, b : array_like
        One-dimensional samples of finite values, at least 2 each.
    correction : {"exact", "approx"}
        Small-sample factor ``J``: the exact gamma form (default) or Hedges' approximation
        ``1 - 3 / (4 (n_a + n_b) - 9)``.

    Returns
    -------
    float
        ``J * (mean(a) - mean(b)) / s_pooled``; 0 when the means are equal, +-inf when the
        pooled standard deviation is 0 and the means differ.

    Notes
    -----
    ``s_pooled**2 = ((n_a - 1) var_a + (n_b - 1) var_b) / df`` with ``df = n_a + n_b - 2``,
    and the exact ``J = Gamma(df / 2) / (sqrt(df / 2) Gamma((df - 1) / 2))``. The two forms
    differ by less than 1e-4 once ``n_a + n_b >= 20``.

    References
    ----------
    .. [1] L. V. Hedges, "Distribution theory for Glass's estimator of effect size and
       related estimators", *J. Educational Statistics* 6(2), 1981.

    Examples
    --------
    >>> round(hedges_g([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), 3)
    0.0
    """
    a, b = _sample_iv("a", a, min_size=2), _sample_iv("b", b, min_size=2)
    correction = _validate.choice("correction", correction, ("exact", "approx"))
    df = a.size + b.size - 2
    if correction == "exact":
        j = float(np.exp(_sp.gammaln(df / 2) - _sp.gammaln((df - 1) / 2)) / np.sqrt(df / 2))
    else:
        j = 1.0 - 3.0 / (4.0 * (a.size + b.size) - 9.0)
    diff = float(a.mean() - b.mean())
    s = np.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / df)
    if diff == 0.0:
        return 0.0
    return float(np.copysign(np.inf, diff)) if s == 0 else j * diff / float(s)


def cliffs_delta(a, b) -> float:
    """Cliff's delta ``P(A > B) - P(A < B)`` over all pairs, in [-1, 1].

    Parameters
    ----------
    a, b : array_like
        One-dimensional samples of finite values, at least 1 each.

    Returns
    -------
    float
        ``(#{a_i > b_j} - #{a_i < b_j}) / (n_a n_b)``.

    Notes
    -----
    Equals ``2 U / (n_a n_b) - 1`` with ``U`` the Mann-Whitney statistic of ``a`` (ties
    counted one half). Computed by binary search in sorted ``b``, O((n_a + n_b) log n_b).

    References
    ----------
    .. [1] N. Cliff, "Dominance statistics: ordinal analyses to answer ordinal questions",
       *Psychological Bulletin* 114(3), 1993.

    Examples
    --------
    >>> cliffs_delta([2.0, 3.0], [1.0, 2.0])  # 3 pairs above, 1 tie
    0.75
    """
    a, b = _sample_iv("a", a), np.sort(_sample_iv("b", b))
    below = np.searchsorted(b, a, side="left").sum()  # pairs with b_j < a_i
    above = (b.size - np.searchsorted(b, a, side="right")).sum()  # pairs with b_j > a_i
    return float((below - above) / (a.size * b.size))


def mann_whitney(a, b) -> float:
    """Two-sided Mann-Whitney U p-value (``scipy.stats.mannwhitneyu``, its defaults).

    Parameters
    ----------
    a, b : array_like
        The two samples: one-dimensional, finite, one value each at the least.

    Returns
    -------
    float
        p-value in [0, 1]; exactly 1.0 for a sample against itself.

    Notes
    -----
    A test of stochastic ordering, not of equal medians; a large p-value is absence of
    evidence, never evidence of equality (use :func:`tost_ratio` for that).

    References
    ----------
    .. [1] H. B. Mann and D. R. Whitney, "On a test of whether one of two random variables
       is stochastically larger than the other", *Ann. Math. Statist.* 18(1), 1947.

    Examples
    --------
    >>> mann_whitney([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    1.0
    """
    a, b = _sample_iv("a", a), _sample_iv("b", b)
    return float(_st.mannwhitneyu(a, b, alternative="two-sided").pvalue)


# ------------------------------------------------------------------ equivalence, verdict

def _tost_of(ci: RatioCI, alpha: float, margin: float) -> TOSTResult:
    """TOST verdict from the ``1 - 2 alpha`` interval ``ci``."""
    lower, upper = 1.0 - margin, 1.0 + margin
    return TOSTResult(bool(lower < ci.low and ci.high < upper), ci.ratio, ci.low, ci.high,
                      ci.confidence, alpha, margin, lower, upper, ci.hierarchical)


def _tost_from(ratio, reps, alpha, margin, base, cand) -> TOSTResult:
    """TOST verdict from bootstrap replicates of the ratio."""
    return _tost_of(_ratio_ci_from(ratio, reps, 1.0 - 2.0 * alpha, base, cand), alpha, margin)


def tost_ratio(baseline, candidate, margin: float, alpha: float = 0.05,
               n_resamples: int = 10_000, seed: int | None = 42) -> TOSTResult:
    """Equivalence (two one-sided tests) of the speedup to 1 within ``margin``.

    Parameters
    ----------
    baseline, candidate : array_like or sequence of array_like
        As in :func:`ratio_ci`: one sample, or one sample per trial.
    margin : float
        In (0, 1); the equivalence interval is ``[1 - margin, 1 + margin]`` on
        ``median(baseline) / median(candidate)``; 0.02 means +-2 %.
    alpha : float
        Level of each one-sided test, in (0, 0.5); default 0.05.
    n_resamples, seed
        As in :func:`ratio_ci`.

    Returns
    -------
    TOSTResult
        ``equivalent`` is True when the ``1 - 2 alpha`` interval lies strictly inside the
        equivalence interval.

    Notes
    -----
    Both one-sided nulls (ratio <= 1 - margin, ratio >= 1 + margin) are rejected at level
    ``alpha`` exactly when the ``1 - 2 alpha`` two-sided interval lies inside the bounds.
    This is how a "no speedup" claim is supported; a large p-value is not. The bootstrap
    interval of :func:`ratio_ci` is used here; :func:`compare` judges equivalence by its
    own (stricter) interval.

    References
    ----------
    .. [1] D. J. Schuirmann, "A comparison of the two one-sided tests procedure and the
       power approach for assessing the equivalence of average bioavailability",
       *J. Pharmacokinetics and Biopharmaceutics* 15(6), 1987.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(1.0, 0.01, 1000)
    >>> tost_ratio(x, x, margin=0.02, n_resamples=1000).equivalent
    True
    """
    base, cand, n_resamples, rng = _ratio_iv(baseline, candidate, n_resamples, seed)
    margin = _validate.number_in("margin", margin, 0.0, 1.0)
    alpha = _validate.number_in("alpha", alpha, 0.0, 0.5)
    ratio, reps = _ratio_replicates(base, cand, n_resamples, rng)
    return _tost_from(ratio, reps, alpha, margin, base, cand)


def _rule(low: float, high: float, lower: float, upper: float) -> Verdict:
    """The verdict of an interval ``[low, high]`` against the margin ``[lower, upper]``."""
    if low > upper:
        return Verdict.FASTER
    if high < lower:
        return Verdict.SLOWER
    if 1.0 < low and high < upper:
        return Verdict.FASTER_WITHIN_MARGIN
    if lower < low and high < 1.0:
        return Verdict.SLOWER_WITHIN_MARGIN
    if lower < low and high < upper:
        return Verdict.EQUIVALENT
    return Verdict.INCONCLUSIVE


def _reason(verdict: Verdict, span: str, lower: float, upper: float) -> str:
    """The one-line reason of a decided verdict."""
    return {Verdict.FASTER: f"{span} above 1 + margin",
            Verdict.SLOWER: f"{span} below 1 - margin",
            Verdict.FASTER_WITHIN_MARGIN: f"{span} above 1 but inside the margin",
            Verdict.SLOWER_WITHIN_MARGIN: f"{span} below 1 but inside the margin",
            Verdict.EQUIVALENT: f"{span} inside [{lower:.4f}, {upper:.4f}]",
            Verdict.INCONCLUSIVE: f"could not tell: {span} reaches past the margin and is "
                                  f"not beyond it"}[verdict]


def decide(ci: RatioCI, margin: float = 0.02, precision: float = PRINT_PRECISION,
           tost: TOSTResult | None = None) -> Comparison:
    """The verdict rule of :func:`compare`, applied to an interval already computed.

    Kept apart so that intervals computed elsewhere (the call, kernel and attention
    levels; the calibration's replications) are judged by one rule. ``precision`` is the
    smallest move of either interval end the verdict must survive; for a bootstrap
    interval each end's tolerance is at least ``MC_Z`` times its Monte Carlo standard
    error. See :func:`compare` for the rule.
    """
    margin = _validate.number_in("margin", margin, 0.0, 1.0)
    precision = _validate.finite("precision", precision)
    if not isinstance(ci, RatioCI):
        raise ValueError(f"`ci` must be a stats.RatioCI; got {type(ci).__name__}.")
    lower, upper = 1.0 - margin, 1.0 + margin
    tol_lo = max(precision, MC_Z * ci.mc_se_low)
    tol_hi = max(precision, MC_Z * ci.mc_se_high)
    span = f"{ci.confidence:.2%} CI of the speedup [{ci.low:.4f}, {ci.high:.4f}]"
    verdict = _rule(ci.low, ci.high, lower, upper)
    corners = set()
    for lo in (ci.low - tol_lo, ci.low + tol_lo):
        for hi in (ci.high - tol_hi, ci.high + tol_hi):
            lo_, hi_ = (lo, hi) if lo <= hi else ((lo + hi) / 2,) * 2
            corners.add(_rule(lo_, hi_, lower, upper))
    within = {Verdict.EQUIVALENT, Verdict.FASTER_WITHIN_MARGIN, Verdict.SLOWER_WITHIN_MARGIN}
    if corners != {verdict} and corners | {verdict} <= within:
        # Inside the margin whichever way the ends move; only whether the interval
        # excludes 1 is below the precision: the weaker claim, equivalence, holds.
        verdict = Verdict.EQUIVALENT
        reason = (f"{span} inside [{lower:.4f}, {upper:.4f}]; whether it excludes 1 is "
                  f"below the precision")
    elif corners != {verdict}:
        order = list(Verdict)
        names = " or ".join(v.value for v in sorted(corners | {verdict}, key=order.index))
        why = (f"Monte Carlo error x {MC_Z:g} ({tol_lo:.4f}, {tol_hi:.4f})"
               if max(tol_lo, tol_hi) > precision else f"precision {precision:g}")
        reason = (f"{names}: {span} has an end within the {why} of 1 or 1 +- "
                  f"{margin:g}")
        verdict = Verdict.UNDECIDED
    else:
        reason = _reason(verdict, span, lower, upper)
    if tost is None:
        tost = _tost_of(ci, (1.0 - ci.confidence) / 2.0, margin)
    return Comparison(verdict, reason, ci, tost)


def compare(baseline, candidate, margin: float = 0.02, confidence: float = 0.95,
            alpha: float = 0.05, n_resamples: int = 10_000, seed: int | None = 42,
            n_comparisons: int = 1, method: str = DEFAULT_INTERVAL,
            precision: float = PRINT_PRECISION, paired: bool = True) -> Comparison:
    """Verdict on a candidate against a baseline, judged against an equivalence margin.

    Parameters
    ----------
    baseline, candidate : array_like or sequence of array_like
        Positive times: one 1-D sample; one 1-D sample per process; or per process a
        sequence of 1-D samples, one per memory placement (protocol 2). With the same
        number of processes on both sides, the ``i``-th of each is the same process.
    margin : float
        Equivalence margin on the speedup ``median(baseline) / median(candidate)``, in
        (0, 1); default 0.02.
    confidence : float
        Family-wise coverage of the two-sided interval behind every verdict, in (0, 1);
        default 0.95.
    alpha : float
        Family-wise level of the two one-sided tests reported beside the verdict
        (``Comparison.tost``), in (0, 0.5); default 0.05.
    n_resamples, seed
        Bootstrap resamples and seed, as in :func:`ratio_ci`; used only by
        ``method="bootstrap"``.
    n_comparisons : int
        Size of the family of comparisons this one belongs to (Bonferroni: the interval is
        taken at ``1 - (1 - confidence) / n_comparisons`` and the TOST at
        ``alpha / n_comparisons``); default 1.
    method : {"process-t", "bootstrap"}
        The interval: the t-interval over processes (:func:`ratio_t_ci`, the default) or
        the hierarchical percentile bootstrap (:func:`ratio_ci`).
    precision : float
        The smallest move of an interval end the verdict must survive, >= 0; default
        ``PRINT_PRECISION`` (the book prints intervals to three decimals). A bootstrap end
        must also lie ``MC_Z`` Monte Carlo standard errors from every boundary.
    paired : bool
        For ``method="process-t"``: as in :func:`ratio_t_ci`; default True.

    Returns
    -------
    Comparison
        ``verdict``, a one-line ``reason``, the (adjusted) interval and the TOST.

    Notes
    -----
    The rule matches the claim under test ("no implementation is faster by more than the
    margin"). With ``CI`` the adjusted two-sided interval of the speedup:

    - FASTER: ``CI`` entirely above ``1 + margin``; SLOWER: entirely below ``1 - margin``.
    - FASTER WITHIN MARGIN: ``CI`` inside ``(1, 1 + margin)``, a real difference too small
      to matter by the margin; SLOWER WITHIN MARGIN likewise below 1.
    - EQUIVALENT: ``CI`` holds 1 and lies inside ``(1 - margin, 1 + margin)``. The one
      interval printed beside the verdict decides it, so no interval reaching past the
      margin is ever called equivalent (the TOST's ``1 - 2 alpha`` interval, narrower,
      is reported in ``tost`` only).
    - INCONCLUSIVE: anything else (the interval reaches past the margin but not beyond it).
    - UNDECIDED AT THIS PRECISION: the verdict would change if an interval end moved by
      ``precision`` (or, for the bootstrap, by ``MC_Z`` Monte Carlo standard errors); the
      reason names the verdicts it lies between. Where every such move keeps the interval
      inside the margin and only its side of 1 is in doubt, the verdict is EQUIVALENT.

    The default interval treats the process as the independent unit (:func:`ratio_t_ci`):
    exact under a normal model of the per-process log ratios whatever the variance of
    each level, and analytic, so no verdict depends on a seed. The hierarchical bootstrap
    (processes, then placements, then samples) undercovers when processes are few and
    differ (``simulation.interval_study``); it is kept for comparison, and Bonferroni's
    far tails need many resamples (its Monte Carlo error is in the interval).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> b, c = rng.normal(1.1, 0.01, 500), rng.normal(1.0, 0.01, 500)
    >>> compare(b, c).verdict
    <Verdict.FASTER: 'faster'>
    """
    base, cand, n_resamples, rng = _ratio_iv(baseline, candidate, n_resamples, seed)
    confidence = _confidence_iv(confidence)
    margin = _validate.number_in("margin", margin, 0.0, 1.0)
    alpha = _validate.number_in("alpha", alpha, 0.0, 0.5)
    m = _validate.positive_integer("n_comparisons", n_comparisons)
    method = _validate.choice("method", method, INTERVAL_METHODS)
    paired = _validate.flag("paired", paired)
    level, tost_level = 1.0 - (1.0 - confidence) / m, 1.0 - 2.0 * alpha / m
    if method == "process-t":
        t = intervals.log_ratio_t(base, cand, paired)
        ci, tci = (_t_ratio_ci(t, c, base, cand) for c in (level, tost_level))
    else:
        ratio, reps = _ratio_replicates(base, cand, n_resamples, rng)
        ci, tci = (_ratio_ci_from(ratio, reps, c, base, cand) for c in (level, tost_level))
    return decide(ci, margin, precision, _tost_of(tci, alpha / m, margin))


def reports_protocol(baseline, candidate) -> ReportsProtocol:
    """The original reports' statistics, recomputed the way they computed them.

    Parameters
    ----------
    baseline, candidate : array_like
        One-dimensional samples of positive finite times, at least 2 each.

    Returns
    -------
    ReportsProtocol
        Per-sample percentile-bootstrap CIs of the median (10 000 resamples, seed 42 for
        each), ``speedup = median(baseline) / median(candidate)``, Hedges' g with the
        approximate correction (positive when the baseline is slower), Cliff's delta of
        baseline against candidate, the two-sided Mann-Whitney p-value, and whether the two
        CIs overlap.

    Notes
    -----
    Kept to show what these numbers can and cannot say. Given the same array twice, as
    the reports' headline comparison was, it returns speedup 1, g 0, delta 0, p 1 and
    identical CIs whatever the data: no evidence about any kernel. Overlapping CIs and a
    large p-value are not evidence of equivalence; see :func:`compare`.

    Examples
    --------
    >>> x = np.random.default_rng(0).lognormal(-1.1, 0.01, 100)
    >>> r = reports_protocol(x, x)
    >>> (r.speedup, r.hedges_g, r.cliffs_delta, r.p_value, r.cis_overlap)
    (1.0, 0.0, 0.0, 1.0, True)
    """
    base = _sample_iv("baseline", baseline, min_size=2, positive=True)
    cand = _sample_iv("candidate", candidate, min_size=2, positive=True)
    b_ci = bootstrap_ci(base, np.median, 0.95, 10_000, 42, "percentile")
    c_ci = bootstrap_ci(cand, np.median, 0.95, 10_000, 42, "percentile")
    return ReportsProtocol(
        baseline_ci=b_ci, candidate_ci=c_ci, speedup=b_ci.estimate / c_ci.estimate,
        hedges_g=hedges_g(base, cand, correction="approx"), cliffs_delta=cliffs_delta(base, cand),
        p_value=mann_whitney(base, cand),
        cis_overlap=bool(b_ci.low <= c_ci.high and c_ci.low <= b_ci.high))
