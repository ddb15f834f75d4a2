"""The powered page (notebooks/08_powered.py): the pre-registered powered campaigns'
verdicts at their own family, when their plans were committed, and the neighbours control
that licenses spreading processes over a host's GPUs. Pure: tables and text from
comparison tables, the run inventory and the neighbours table.

Runs are chosen by campaign (``configs.POWERED_PLANS``), never by GPU, so runs of the same
campaigns on another GPU model join the page when recorded.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["LEVELS", "verdict_counts", "counts_sentence", "inconclusive_share",
           "plan_sentence", "speedup_display", "neighbours_sentence"]

LEVELS = ("call", "kernel")


def _levels(table: pd.DataFrame) -> pd.DataFrame:
    t = table[table["level"].isin(LEVELS)]
    if t.empty:
        raise ValueError(f"`table` must hold comparisons at the levels {LEVELS}.")
    return t


def verdict_counts(table: pd.DataFrame) -> dict:
    """Comparisons per verdict at the call and kernel levels (the family judged), most
    frequent first, and their total under 'total'."""
    t = _levels(table)
    counts = t["verdict"].value_counts()
    out = {str(k): int(v) for k, v in counts.items()}
    out["total"] = int(len(t))
    return out


def counts_sentence(counts: dict) -> str:
    """'Of N comparisons, a are slower, b equivalent, ...' in the order of ``counts``."""
    total = counts.get("total", 0)
    if total <= 0:
        raise ValueError("`counts` must hold a positive 'total'.")
    parts = [f"{n} {v}" for v, n in counts.items() if v != "total"]
    return f"Of {total} comparisons, " + ", ".join(parts) + "."


def inconclusive_share(counts: dict) -> float:
    """The share of comparisons left inconclusive (or undecided at the precision)."""
    undecided = sum(n for v, n in counts.items()
                    if v != "total" and (v.startswith("inconclusive") or v.startswith("undecided")))
    return undecided / counts["total"]


def plan_sentence(inventory_row) -> str:
    """When the plan was committed beside the run's first journal entry (inventory row)."""
    committed, first = inventory_row["plan_committed_utc"], inventory_row["first_entry_utc"]
    if committed is None or pd.isna(committed):
        return (f"Git holds no commit time of the plan of {inventory_row['run']}, so this "
                f"page does not claim it came first.")
    c, f = pd.Timestamp(committed), pd.Timestamp(first)
    order = "before" if c < f else "after"
    return (f"The plan of {inventory_row['run']} was committed at {c:%Y-%m-%d %H:%M} UTC, "
            f"{order} its first process started ({f:%H:%M} UTC).")


def speedup_display(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (shape, candidate): the kernel- and call-level speedup over SDPA with
    its family-wise interval and verdict, compact."""
    t = _levels(table)
    t = t.assign(cell=[f"{s:.3f} [{lo:.3f}, {hi:.3f}] {v}" for s, lo, hi, v in
                       zip(t["speedup"], t["ci_low"], t["ci_high"], t["verdict"])])
    out = t.pivot_table(index=["config", "candidate"], columns="level", values="cell",
                        aggfunc="first").reset_index()
    out.columns.name = None
    return out.rename(columns={"config": "shape"})


def neighbours_sentence(effect: pd.DataFrame, margin: float) -> str:
    """The neighbours control in one sentence: each control's ratio (a process on every
    GPU over one at a time) with its interval and verdict against ``margin``."""
    if effect.empty:
        raise ValueError("`effect` must hold at least one control.")
    parts = [f"{r.candidate} at the {r.level} level {r.ratio:.4f} [{r.ci_low:.4f}, "
             f"{r.ci_high:.4f}], {r.verdict}" for r in effect.itertuples()]
    verdicts = set(effect["verdict"])
    lead = ("Neighbours do not move the controls beyond the margin"
            if verdicts == {"equivalent"} else
            "Neighbours are not shown to leave the controls within the margin")
    return (f"{lead} (±{100 * margin:g}%; speedup with a process on every GPU over one at "
            f"a time, {effect['processes_concurrent'].min()} and "
            f"{effect['processes_serial'].min()} processes): " + "; ".join(parts) + ".")
