"""What a protocol costs in GPU time: the wall time of the recorded timing units, each
process's overhead outside them, and the cost of a comparison over ``k`` processes and of
calibrating it. Pure, no I/O: a run's ``units`` table in.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from .. import _validate

__all__ = ["unit_costs", "process_overhead_s", "ProtocolCost", "protocol_cost"]


# --------------------------------------------------------------------------- cost

def unit_costs(units: pd.DataFrame) -> pd.DataFrame:
    """Wall time of the recorded timing units per (candidate, mode), status "ok" only.

    Columns: ``n_units``, ``median_unit_s``, ``total_s`` and ``ms_per_sample`` (total
    elapsed over total samples, warm-up included in the elapsed time).
    """
    df = _validate.frame("units", units, ("candidate", "mode", "status", "n_samples", "elapsed_s"))
    df = df[df["status"] == "ok"]
    out = (df.groupby(["candidate", "mode"])
           .agg(n_units=("elapsed_s", "size"), median_unit_s=("elapsed_s", "median"),
                total_s=("elapsed_s", "sum"), n_samples=("n_samples", "sum")).reset_index())
    out["ms_per_sample"] = out["total_s"] * 1e3 / out["n_samples"]
    return out


def process_overhead_s(units: pd.DataFrame) -> float:
    """Median per-process time outside the timing units, from the units' own clocks.

    A trial ends when its last timing unit ends (``started_utc + elapsed_s``). For each
    trial after the first, ``end - previous end - sum(elapsed_s of its units)`` is the time
    its process spent on everything else: start-up, CUDA context, building and checking
    candidates, profiling, teardown. The median over trials ignores the long pauses of a
    run recorded over several invocations. Needs at least two trials; the clock has
    one-second resolution, so the median is good to about a second divided by the spread
    of trial counts, not better.
    """
    df = _validate.frame("units", units, ("trial", "started_utc", "elapsed_s"))
    df = df.dropna(subset=["started_utc", "elapsed_s"])
    start = pd.to_datetime(df["started_utc"], utc=True)
    df = df.assign(end=start + pd.to_timedelta(df["elapsed_s"], unit="s"))
    per = df.groupby("trial").agg(end=("end", "max"), busy=("elapsed_s", "sum")).sort_values("end")
    if len(per) < 2:
        raise ValueError(f"`units` must cover at least 2 trials; got {len(per)}.")
    gaps = per["end"].diff().dt.total_seconds().iloc[1:] - per["busy"].iloc[1:]
    return float(max(0.0, gaps.median()))


@dataclasses.dataclass(frozen=True)
class ProtocolCost:
    """GPU wall time of one comparison: ``k`` processes each timing ``arms`` arms."""

    k: int
    arms: int
    unit_s: float
    process_overhead_s: float
    comparison_s: float
    calibration_s: float
    replications: int


def protocol_cost(unit_s: float, k: int, arms: int = 2, process_overhead_s: float = 0.0,
                  replications: int = 30) -> ProtocolCost:
    """Cost of a comparison, and of calibrating it with ``replications`` of each control.

    ``comparison_s = k * (arms * unit_s + process_overhead_s)``; ``calibration_s`` is
    ``replications`` comparisons. ``unit_s`` is a typical timing unit's wall time
    (:func:`unit_costs`), ``process_overhead_s`` the per-process rest
    (:func:`process_overhead_s`, 0 to count timing only).
    """
    unit_s = _validate.positive("unit_s", unit_s)
    k = _validate.integer("k", k, 1)
    arms = _validate.integer("arms", arms, 1)
    process_overhead_s = _validate.finite("process_overhead_s", process_overhead_s)
    replications = _validate.integer("replications", replications, 1)
    comparison = k * (arms * unit_s + process_overhead_s)
    return ProtocolCost(k, arms, unit_s, process_overhead_s, comparison,
                        comparison * replications, replications)
