"""Bootstrap intervals: of one sample's statistic, of a speedup (hierarchical: processes,
then placements, then samples) and of a pooled median over trials. Pure, no I/O.

The package judges speedups by the t-interval over processes
(:func:`attn_analysis.analyse.intervals.ratio_t_ci`); the hierarchical bootstrap here is
kept for comparison (``method="bootstrap"`` of ``stats.compare``), for the latency
intervals of the tables (:func:`median_ci_trials`) and for the reports' own per-sample
interval (:func:`bootstrap_ci`, their defaults). Its percentile ends carry their Monte
Carlo standard errors (``intervals.quantile_mc_se``), so a verdict a reseed could flip is
called undecided.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
from scipy import stats as _st

from .. import _validate
from .intervals import ConfidenceInterval, RatioCI, quantile_mc_se

__all__ = ["BOOTSTRAP_METHODS", "bootstrap_ci", "ratio_replicates", "ratio_ci_from", "ratio_ci",
           "median_ci_trials"]

BOOTSTRAP_METHODS = ("percentile", "basic", "BCa")
_CHUNK_ELEMENTS = 1 << 22  # resampled values held at once (about 32 MiB of float64)


def _statistic_iv(statistic):
    """Check that ``statistic`` is callable."""
    if not callable(statistic):
        raise ValueError(f"`statistic` must be a callable such as np.median; got {statistic!r}.")
    return statistic


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
    x = _validate.array_1d("x", x)
    statistic = _statistic_iv(statistic)
    confidence = _validate.confidence(confidence)
    n_resamples = _validate.positive_integer("n_resamples", n_resamples)
    rng = _validate.rng(seed)
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


def pooled_median_ratio(base, cand) -> float:
    """``median(base) / median(cand)`` over every sample of each arm pooled: the point
    estimate of :func:`ratio_ci` (its resamples move only the interval). ``base`` and
    ``cand`` are lists of processes, each a list of placements (1-D arrays)."""
    def pooled(groups):
        return np.median(np.concatenate([pl for proc in groups for pl in proc]))
    return float(pooled(base) / pooled(cand))


def ratio_replicates(base, cand, n_resamples: int,
                      rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """Point ratio of pooled medians (:func:`pooled_median_ratio`) and its bootstrap
    replicates.

    ``base`` and ``cand`` are lists of processes, each a list of placements (1-D arrays).
    """
    ratio = pooled_median_ratio(base, cand)
    reps = (_nested_median_replicates(base, n_resamples, rng)
            / _nested_median_replicates(cand, n_resamples, rng))
    return ratio, reps


def ratio_ci_from(ratio, reps, confidence, base, cand) -> RatioCI:
    """Percentile interval of the replicates at ``confidence``, with the Monte Carlo
    standard error of each end (:func:`intervals.quantile_mc_se`)."""
    alpha = 1.0 - confidence
    probs = [alpha / 2, 1 - alpha / 2]
    low, high = np.quantile(reps, probs)
    se_low, se_high = quantile_mc_se(reps, probs)
    return RatioCI(ratio, float(low), float(high), confidence, len(base), len(cand),
                   max(len(base), len(cand)) > 1, "bootstrap", _top_unit(base, cand),
                   math.nan, float(se_low), float(se_high))


def _top_unit(base, cand) -> str:
    """The top level a bootstrap resamples: processes, else one process's placements."""
    if max(len(base), len(cand)) > 1:
        return "process"
    return "placement" if max(len(base[0]), len(cand[0])) > 1 else "sample"


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
    base, cand, n_resamples, rng = _validate.ratio_arms(baseline, candidate, n_resamples, seed)
    confidence = _validate.confidence(confidence)
    ratio, reps = ratio_replicates(base, cand, n_resamples, rng)
    return ratio_ci_from(ratio, reps, confidence, base, cand)


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
    groups, _, n_resamples, rng = _validate.ratio_arms(trials, trials, n_resamples, seed)
    confidence = _validate.confidence(confidence)
    reps = _nested_median_replicates(groups, n_resamples, rng)
    alpha = 1.0 - confidence
    low, high = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    pooled = np.concatenate([pl for proc in groups for pl in proc])
    return ConfidenceInterval(float(np.median(pooled)), float(low), float(high),
                              confidence, "hierarchical percentile")
