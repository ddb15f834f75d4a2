"""Whether running neighbours move the results: the same controls measured with a process
on every GPU of a host at a time and one process at a time (``configs.POWERED_PLANS
["neighbours-v1"]``: ``--gpus all`` against ``--one-at-a-time``). Pure, no I/O.

For each control (the A/A twin, a spin control) and level, the per-process log speedup
over SDPA (baseline over control, paired by trial, as :mod:`.power` models it) is taken in
each run; the two runs' processes are independent, so the ratio of their speedups
(concurrent over one at a time) gets Welch's t-interval, at family-wise ``confidence``
over every (control, level) judged, and :func:`.stats.decide` judges it against the
margin: "equivalent" says neighbours move the control's speedup by less than the margin.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import _validate
from .margin import DEFAULT_MARGIN
from .power import _process_values

__all__ = ["NEIGHBOUR_COLUMNS", "control_pairs", "process_speedups", "neighbour_effect"]

NEIGHBOUR_COLUMNS = ("candidate", "level", "speedup_concurrent", "speedup_serial",
                     "ratio", "ci_low", "ci_high", "processes_concurrent",
                     "processes_serial", "verdict")


def control_pairs(runs) -> list[tuple[str, str]]:
    """The (concurrent, one-at-a-time) run pairs among the run ids ``runs``: a run
    ``STEM-concurrent`` pairs with ``STEM-serial`` of the same stem (one host's control, as
    ``scripts/powered_campaign.sh`` names them); a run without its partner is left out.
    Sorted by stem, so every host of a GPU model gets its own pair."""
    runs = set(runs)
    return [(c, c[:-len("-concurrent")] + "-serial") for c in sorted(runs)
            if c.endswith("-concurrent") and c[:-len("-concurrent")] + "-serial" in runs]


def process_speedups(placements: pd.DataFrame, candidate: str, baseline: str = "sdpa",
                     level: str = "call", mode: str = "graph") -> np.ndarray:
    """Per process (trial holding both arms): mean log time of ``baseline`` less that of
    ``candidate``, over the process's placements (its log speedup)."""
    v = _process_values(placements, level, mode)
    means = v.groupby(["candidate", "trial"])["y"].mean()
    if baseline not in means.index.get_level_values(0) or \
            candidate not in means.index.get_level_values(0):
        raise ValueError(f"`placements` must hold {baseline!r} and {candidate!r}.")
    d = (means.loc[baseline] - means.loc[candidate]).dropna()
    return d.to_numpy(dtype=float)


def neighbour_effect(concurrent: pd.DataFrame, serial: pd.DataFrame,
                     controls=("sdpa_twin", "sdpa_spin1000"), baseline: str = "sdpa",
                     levels=("call", "kernel"), margin: float = DEFAULT_MARGIN,
                     confidence: float = 0.95) -> pd.DataFrame:
    """One row per (control, level): the control's speedup over ``baseline`` (geometric
    mean over processes) with neighbours (``concurrent``: a run's placements table) and
    without (``serial``), their ratio with its Welch interval at family-wise
    ``confidence`` over the rows, and the verdict of that ratio against ``margin``."""
    from scipy import stats as st
    from .intervals import RatioCI
    from .stats import decide
    confidence = _validate.confidence(confidence)
    controls, levels = tuple(controls), tuple(levels)
    if not controls or not levels:
        raise ValueError("`controls` and `levels` must each name at least one.")
    m = len(controls) * len(levels)
    rows = []
    for cand in controls:
        for level in levels:
            a = process_speedups(concurrent, cand, baseline, level)
            b = process_speedups(serial, cand, baseline, level)
            if a.size < 2 or b.size < 2:
                raise ValueError(f"`concurrent` and `serial` must hold at least 2 processes "
                                 f"of {cand!r}; got {a.size} and {b.size}.")
            va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
            est, se = float(a.mean() - b.mean()), math.sqrt(va + vb)
            df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1)) \
                if se > 0 else float(a.size + b.size - 2)
            level_conf = 1 - (1 - confidence) / m
            q = float(st.t.ppf(1 - (1 - level_conf) / 2, df))
            ci = RatioCI(math.exp(est), math.exp(est - q * se), math.exp(est + q * se),
                         level_conf, a.size, b.size, True, "process-t", "process", df)
            rows.append({"candidate": cand, "level": level,
                         "speedup_concurrent": math.exp(a.mean()),
                         "speedup_serial": math.exp(b.mean()), "ratio": ci.ratio,
                         "ci_low": ci.low, "ci_high": ci.high,
                         "processes_concurrent": int(a.size), "processes_serial": int(b.size),
                         "verdict": decide(ci, margin).verdict.value})
    return pd.DataFrame(rows, columns=list(NEIGHBOUR_COLUMNS))
