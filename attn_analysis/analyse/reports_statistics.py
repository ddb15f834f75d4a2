"""The original reports' statistics, recomputed exactly as they computed them: per-sample
bootstrap intervals of the median, Hedges' g, Cliff's delta and a Mann-Whitney U test, for
one pair of arrays (:func:`reports_protocol`). Pure, no I/O.

Kept so the book can show what these numbers can and cannot say (the same array twice
gives speedup 1, g 0, delta 0 and p 1 whatever the data); the verdicts of the paper come
from ``stats.compare``. The calibration chapter replicates the reports' test once per
process (``protocols.protocol_a_decisions``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from scipy import special as _sp
from scipy import stats as _st

from .. import _validate
from .bootstrap import bootstrap_ci
from .intervals import ConfidenceInterval

__all__ = ["ReportsProtocol", "hedges_g", "cliffs_delta", "mann_whitney", "reports_protocol",
           "reports_protocol_table"]


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
    a, b = _validate.array_1d("a", a, min_size=2), _validate.array_1d("b", b, min_size=2)
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
    a, b = _validate.array_1d("a", a), np.sort(_validate.array_1d("b", b))
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
    a, b = _validate.array_1d("a", a), _validate.array_1d("b", b)
    return float(_st.mannwhitneyu(a, b, alternative="two-sided").pvalue)


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
    base = _validate.array_1d("baseline", baseline, min_size=2, positive=True)
    cand = _validate.array_1d("candidate", candidate, min_size=2, positive=True)
    b_ci = bootstrap_ci(base, np.median, 0.95, 10_000, 42, "percentile")
    c_ci = bootstrap_ci(cand, np.median, 0.95, 10_000, 42, "percentile")
    return ReportsProtocol(
        baseline_ci=b_ci, candidate_ci=c_ci, speedup=b_ci.estimate / c_ci.estimate,
        hedges_g=hedges_g(base, cand, correction="approx"), cliffs_delta=cliffs_delta(base, cand),
        p_value=mann_whitney(base, cand),
        cis_overlap=bool(b_ci.low <= c_ci.high and c_ci.low <= b_ci.high))


def reports_protocol_table(results: dict) -> pd.DataFrame:
    """One row per comparison from :func:`stats.reports_protocol` results keyed by label."""
    rows = []
    for label, r in results.items():
        if not isinstance(r, ReportsProtocol):
            raise ValueError(f"`results` values must be reports_statistics.ReportsProtocol; got "
                             f"{type(r).__name__} for {label!r}.")
        rows.append({"comparison": label, "baseline_median_ms": r.baseline_ci.estimate,
                     "baseline_ci_low": r.baseline_ci.low, "baseline_ci_high": r.baseline_ci.high,
                     "candidate_median_ms": r.candidate_ci.estimate,
                     "candidate_ci_low": r.candidate_ci.low,
                     "candidate_ci_high": r.candidate_ci.high, "speedup": r.speedup,
                     "hedges_g": r.hedges_g, "cliffs_delta": r.cliffs_delta,
                     "p_value": r.p_value, "cis_overlap": r.cis_overlap})
    return pd.DataFrame(rows)
