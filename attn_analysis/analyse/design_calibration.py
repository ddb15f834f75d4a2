"""The comparison design calibrated over its number of processes: false positives, power
and coverage at k = 2, 3, 4, ... processes per replication, at the call and the kernel
level, from calibration runs of many processes; and the number of processes the paper
uses, chosen from them. Pure, no I/O.

One run of N processes holds N // k disjoint replications of a k-process design
(:func:`protocols.replication_groups`), so one run answers every k at once, with fewer
replications as k grows. :func:`rates_by_processes` stacks
:func:`calibration.design_calibration` over k and levels; :func:`choose_processes` applies
the rule stated in the calibration chapter: the fewest processes whose power to call
"slower" a positive control of at least ``min_size`` margins reaches ``power_goal`` on
every device measured.
"""

from __future__ import annotations

import pandas as pd

from .. import _validate
from .calibration import LEVELS, ROLES, design_calibration
from .protocols import PROTOCOL_B
from .stats import DEFAULT_MARGIN

__all__ = ["POWER_GOAL", "MIN_CONTROL_MARGINS", "RATE_COLUMNS", "rates_by_processes",
           "choose_processes", "design_table"]

POWER_GOAL = 0.8          # the power the issue asks of the design at 1.5 margins
MIN_CONTROL_MARGINS = 1.5  # the smallest control size (in margins) the power goal is held to
RATE_COLUMNS = ("device", "level", "k", "candidate", "role", "slowdown", "size_margins",
                "outcome", "events", "n", "rate", "ci_low", "ci_high")


def rates_by_processes(frames: dict, device: str, ks=(2, 3, 4, 6),
                       margin: float = DEFAULT_MARGIN, n_resamples: int = 300,
                       seed: int = 42) -> pd.DataFrame:
    """Our protocol's calibration rows (:func:`calibration.design_calibration`, protocol
    (b) only) for each ``k`` in ``ks`` and each level of ``frames``.

    ``frames`` maps a level (:data:`calibration.LEVELS`) to ``(samples, kernels)`` pooled by
    :func:`protocols.pool_runs` (for the kernel level, :func:`protocols.kernel_samples` of
    the placements). ``device`` labels every row (runs of one GPU model). A ``k`` larger
    than the processes of the runs raises ValueError. ``n_resamples`` only sets the
    bootstrap of the controls' pooled sizes; the verdicts use the analytic process-t
    interval. Returns the rows with ``device``, ``level`` and ``k`` (:data:`RATE_COLUMNS`).
    """
    if not isinstance(frames, dict) or not frames or not set(frames) <= set(LEVELS):
        raise ValueError(f"`frames` must map levels from {LEVELS} to (samples, kernels); "
                         f"got {type(frames).__name__} with keys "
                         f"{sorted(frames) if isinstance(frames, dict) else None}.")
    ks = sorted({_validate.integer("ks", k, 1) for k in ks})
    if not ks:
        raise ValueError("`ks` must hold at least one number of processes; got none.")
    out = []
    for level, (samples, kernels) in frames.items():
        for k in ks:
            rows = design_calibration(samples, kernels, k=k, margin=margin,
                                      n_resamples=n_resamples, seed=seed)
            rows = rows[rows["protocol"] == PROTOCOL_B].assign(device=device, level=level, k=k)
            out.append(rows)
    return pd.concat(out, ignore_index=True)[list(RATE_COLUMNS)]


def choose_processes(rates: pd.DataFrame, level: str = "call",
                     min_size: float = MIN_CONTROL_MARGINS,
                     power_goal: float = POWER_GOAL) -> int | None:
    """The fewest processes k whose power (verdict "slower", beyond the margin) reaches
    ``power_goal`` for every positive control of at least ``min_size`` margins at
    ``level``, on every device of ``rates`` (:func:`rates_by_processes`); None when a
    device has no such control or no k reaches the goal (the rule cannot choose)."""
    df = _validate.frame("rates", rates, RATE_COLUMNS)
    level = _validate.choice("level", level, LEVELS)
    power_goal = _validate.number_in("power_goal", power_goal)
    df = df[(df["level"] == level) & (df["role"] == ROLES["positive"])
            & (df["outcome"] == "slower")]
    if df.empty:
        return None
    passing = None
    for device, d in df.groupby("device"):
        big = d[d["size_margins"] >= min_size]
        if big.empty:
            return None
        ok = big.groupby("k")["rate"].min() >= power_goal
        ks = set(ok[ok].index)
        passing = ks if passing is None else passing & ks
    return int(min(passing)) if passing else None


def design_table(rates: pd.DataFrame, k: int) -> pd.DataFrame:
    """The short table of :func:`rates_by_processes` at ``k`` processes: per device and
    level, the A/A control's claimed differences and each positive control's power (verdict
    "slower"), smallest control first (the A/A control's size is about 0), with its
    measured size in margins, the events over the replications, the rate and its
    Clopper-Pearson 95 % interval."""
    df = _validate.frame("rates", rates, RATE_COLUMNS)
    k = _validate.integer("k", k, 1)
    df = df[(df["k"] == k) & (((df["role"] == ROLES["aa"])
                               & (df["outcome"] == "claimed difference"))
                              | ((df["role"] == ROLES["positive"]) & (df["outcome"] == "slower")))]
    if df.empty:
        raise ValueError(f"`k` must be one of the processes in `rates` "
                         f"({sorted(set(rates['k']))}); got {k}.")
    df = df.sort_values(["device", "level", "size_margins"])
    return pd.DataFrame({
        "device": df["device"], "level": df["level"], "control": df["candidate"],
        "size (margins)": df["size_margins"],
        "events / replications": [f"{int(e)}/{int(n)}" for e, n in zip(df["events"], df["n"])],
        "rate": df["rate"],
        "95 % interval": [f"{lo:.0%}–{hi:.0%}" for lo, hi in zip(df["ci_low"], df["ci_high"])],
    }).reset_index(drop=True)
