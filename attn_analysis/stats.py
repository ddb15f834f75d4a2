"""Statistics for latency samples: intervals, effect sizes, tests. Pure functions, no I/O."""

from __future__ import annotations

import numpy as np
from scipy import stats as _st


def _confidence_iv(confidence) -> float:
    """Check that ``confidence`` lies strictly between 0 and 1."""
    if not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ValueError(f"`confidence` must be a number in (0, 1); got {confidence!r}.")
    return float(confidence)


def median_ci(x, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    Parameters
    ----------
    x : array_like
        One-dimensional sample, at least one value.
    confidence : float
        Coverage in (0, 1); default 0.95.

    Returns
    -------
    (low, high) : tuple of float
        Order statistics ``x_(l)`` and ``x_(u)`` with ``P(l <= rank(median) < u) >= confidence``
        under the binomial(n, 1/2) law of the count below the median. Cheap enough to use
        inside a stopping rule.
    """
    confidence = _confidence_iv(confidence)
    x = np.sort(np.asarray(x, dtype=float).ravel())
    n = x.size
    if n == 0:
        raise ValueError("`x` must hold at least one value.")
    alpha = 1.0 - confidence
    lo = int(_st.binom.ppf(alpha / 2, n, 0.5))  # number of values below the interval
    hi = n - lo - 1
    lo = max(lo - 1, 0)
    hi = min(hi + 1, n - 1)
    return float(x[lo]), float(x[hi])
