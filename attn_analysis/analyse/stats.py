"""The verdict rule: a speedup judged by one interval against an equivalence margin.

:func:`compare` takes two arms' times (processes -> placements -> samples), builds one
interval of the speedup ``median(baseline) / median(candidate)``, by default the
t-interval over independent processes (``intervals.ratio_t_ci``), or for comparison the
hierarchical bootstrap (``bootstrap.ratio_ci``) with the Monte Carlo error of its ends,
and judges it by :func:`decide`: it claims "no difference" only when that interval lies
inside the margin, and calls a result whose verdict a small move of an interval end would
change "undecided at this precision". The words of every verdict are :class:`Verdict`'s;
the margin's default and range are ``DEFAULT_MARGIN`` and ``MARGIN_RANGE``. Pure, no I/O.
"""

from __future__ import annotations

import dataclasses
import enum

from .. import _validate
from . import bootstrap
from .intervals import RatioCI, as_ratio_ci, log_ratio_t
from .margin import DEFAULT_MARGIN, MARGIN_RANGE, margin_iv

__all__ = ["INTERVAL_METHODS", "DEFAULT_INTERVAL", "DEFAULT_MARGIN", "MARGIN_RANGE",
           "PRINT_PRECISION", "MC_Z", "TOSTResult", "Verdict", "VERDICT_ORDER", "Comparison",
           "margin_iv", "tost_ratio", "interval_verdict", "decide", "compare"]

# The equivalence margin on a speedup (DEFAULT_MARGIN, MARGIN_RANGE, margin_iv) is
# :mod:`.margin`'s, named here too: every function below that judges by it defaults to it.

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


# The verdicts in reading order (the declaration order above): tables and sentences list
# them so, from the clearest win to the open outcomes.
VERDICT_ORDER = tuple(v.value for v in Verdict)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Verdict on a candidate against a baseline, with the evidence behind it."""

    verdict: Verdict
    reason: str
    ratio_ci: RatioCI
    tost: TOSTResult


def _tost_of(ci: RatioCI, alpha: float, margin: float) -> TOSTResult:
    """TOST verdict from the ``1 - 2 alpha`` interval ``ci``."""
    lower, upper = 1.0 - margin, 1.0 + margin
    return TOSTResult(bool(lower < ci.low and ci.high < upper), ci.ratio, ci.low, ci.high,
                      ci.confidence, alpha, margin, lower, upper, ci.hierarchical)


def _tost_from(ratio, reps, alpha, margin, base, cand) -> TOSTResult:
    """TOST verdict from bootstrap replicates of the ratio."""
    ci = bootstrap.ratio_ci_from(ratio, reps, 1.0 - 2.0 * alpha, base, cand)
    return _tost_of(ci, alpha, margin)


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
    base, cand, n_resamples, rng = _validate.ratio_arms(baseline, candidate, n_resamples, seed)
    margin = margin_iv(margin)
    alpha = _validate.number_in("alpha", alpha, 0.0, 0.5)
    ratio, reps = bootstrap.ratio_replicates(base, cand, n_resamples, rng)
    return _tost_from(ratio, reps, alpha, margin, base, cand)


def interval_verdict(low: float, high: float, lower: float, upper: float) -> Verdict:
    """The verdict of an interval ``[low, high]`` against the margin ``[lower, upper]``:
    the rule of :func:`decide`, without its precision check (for intervals that carry no
    Monte Carlo error, such as a t-interval over processes)."""
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


def decide(ci: RatioCI, margin: float = DEFAULT_MARGIN, precision: float = PRINT_PRECISION,
           tost: TOSTResult | None = None) -> Comparison:
    """The verdict rule of :func:`compare`, applied to an interval already computed.

    Kept apart so that intervals computed elsewhere (the call, kernel and attention
    levels; the calibration's replications) are judged by one rule. ``precision`` is the
    smallest move of either interval end the verdict must survive; for a bootstrap
    interval each end's tolerance is at least ``MC_Z`` times its Monte Carlo standard
    error. See :func:`compare` for the rule.
    """
    margin = margin_iv(margin)
    precision = _validate.finite("precision", precision)
    if not isinstance(ci, RatioCI):
        raise ValueError(f"`ci` must be an intervals.RatioCI; got {type(ci).__name__}.")
    lower, upper = 1.0 - margin, 1.0 + margin
    tol_lo = max(precision, MC_Z * ci.mc_se_low)
    tol_hi = max(precision, MC_Z * ci.mc_se_high)
    span = f"{ci.confidence:.2%} CI of the speedup [{ci.low:.4f}, {ci.high:.4f}]"
    verdict = interval_verdict(ci.low, ci.high, lower, upper)
    corners = set()
    for lo in (ci.low - tol_lo, ci.low + tol_lo):
        for hi in (ci.high - tol_hi, ci.high + tol_hi):
            lo_, hi_ = (lo, hi) if lo <= hi else ((lo + hi) / 2,) * 2
            corners.add(interval_verdict(lo_, hi_, lower, upper))
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


def compare(baseline, candidate, margin: float = DEFAULT_MARGIN, confidence: float = 0.95,
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
    base, cand, n_resamples, rng = _validate.ratio_arms(baseline, candidate, n_resamples, seed)
    confidence = _validate.confidence(confidence)
    margin = margin_iv(margin)
    alpha = _validate.number_in("alpha", alpha, 0.0, 0.5)
    m = _validate.positive_integer("n_comparisons", n_comparisons)
    method = _validate.choice("method", method, INTERVAL_METHODS)
    paired = _validate.flag("paired", paired)
    level, tost_level = 1.0 - (1.0 - confidence) / m, 1.0 - 2.0 * alpha / m
    if method == "process-t":
        t = log_ratio_t(base, cand, paired)
        ci, tci = (as_ratio_ci(t, c, base, cand) for c in (level, tost_level))
    else:
        ratio, reps = bootstrap.ratio_replicates(base, cand, n_resamples, rng)
        ci, tci = (bootstrap.ratio_ci_from(ratio, reps, c, base, cand) for c in (level, tost_level))
    return decide(ci, margin, precision, _tost_of(tci, alpha / m, margin))
