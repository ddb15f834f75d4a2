"""Where a sweep's processes spend their time, from the budgets their trial units record
(:mod:`attn_analysis.measure.budget`). Pure, no I/O: the caller reads the units.

:func:`budget_table` turns the budgets of a run's processes into one row per phase (its
median, mean and largest seconds per process and its share of the process's wall time),
the time budget of one process that ``benchmarks/`` records for each campaign.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import _validate

__all__ = ["BUDGET_COLUMNS", "budget_table"]

BUDGET_COLUMNS = ("phase", "processes", "median_s", "mean_s", "max_s", "share")


def budget_table(budgets) -> pd.DataFrame:
    """One row per phase over the processes' ``budgets`` (dicts ``{"wall_s", "phases_s",
    "other_s"}``), phases in the order they first appear, then ``other`` (what no phase
    covers) and ``wall`` (the whole process). ``share`` is the phase's summed seconds over
    the summed wall seconds; ``processes`` how many processes recorded the phase (a
    phase a process never entered, such as the ceilings outside trial 0, counts 0 s).
    """
    budgets = list(budgets)
    if not budgets:
        raise ValueError("`budgets` must hold at least one process's budget; got none.")
    for i, b in enumerate(budgets):
        if not isinstance(b, dict) or not {"wall_s", "phases_s", "other_s"} <= set(b):
            raise ValueError(f"`budgets[{i}]` must be a dict with wall_s, phases_s and "
                             f"other_s (measure.budget.PhaseClock.as_record); got {b!r:.80}.")
        _validate.number_in("wall_s", b["wall_s"], 0, float("inf"))
    phases = list(dict.fromkeys(p for b in budgets for p in b["phases_s"]))
    wall = np.array([float(b["wall_s"]) for b in budgets])
    rows = []
    columns = [(p, [float(b["phases_s"].get(p, 0.0)) for b in budgets]) for p in phases]
    columns += [("other", [float(b["other_s"]) for b in budgets]), ("wall", list(wall))]
    for name, values in columns:
        v = np.asarray(values)
        rows.append({"phase": name,
                     "processes": int(sum(name in b["phases_s"] for b in budgets))
                     if name in phases else len(budgets),
                     "median_s": float(np.median(v)), "mean_s": float(v.mean()),
                     "max_s": float(v.max()),
                     "share": float(v.sum() / wall.sum())})  # every wall_s > 0
    return pd.DataFrame(rows, columns=list(BUDGET_COLUMNS))
