"""The equivalence margin every verdict is judged by: "no difference" means a speedup's
interval lies inside (1 - margin, 1 + margin) (:mod:`.stats` judges, with this margin by
default).

Its own module, free of scipy, so that the command line can state the default in its help
without importing the statistics: building the parser ran before the sweep started its
trial processes' server, and importing ``scipy.stats`` there took 3.6 s of a fresh H100's
command under the profiler (``benchmarks/readme-command/``, "What the command line did
before the sweep").
"""

from __future__ import annotations

from .. import _validate

__all__ = ["DEFAULT_MARGIN", "MARGIN_RANGE", "margin_iv"]

# Every function that judges by a margin defaults to DEFAULT_MARGIN and accepts a margin in
# the open interval MARGIN_RANGE (checked by :func:`margin_iv`).
DEFAULT_MARGIN = 0.02
MARGIN_RANGE = (0.0, 1.0)


def margin_iv(margin, name: str = "margin") -> float:
    """Check an equivalence margin: a number in the open interval ``MARGIN_RANGE``."""
    return _validate.number_in(name, margin, *MARGIN_RANGE)
