"""The machine as a level: the same candidates at the same configuration on two or more
GPUs of one model (their UUIDs differ), so a reader can set the spread between GPUs beside
the interval within one run. Pure functions of :func:`state_of_the_art.comparison_table`
outputs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import _validate
from ..configs import BASELINE, TARGET
from . import comparisons
from .provenance import machine_model

__all__ = ["machine_spread", "spread_sentence"]


def machine_spread(tables: list, config: str = TARGET.key, level: str = "call") -> pd.DataFrame:
    """The machine as a level: for each GPU model and candidate measured at ``config`` on at
    least two GPUs of that model (machine labels differ in the UUID block), the speedup
    and family-wise interval on each GPU (``per_gpu``), the ratio of the largest speedup
    to the smallest (``between_gpus``, 1 when they agree exactly), the largest half-width
    of the within-run intervals on the ratio scale (``within_run``), and whether the GPUs
    gave the same verdict (``same_verdict``)."""
    if not tables:
        raise ValueError("`tables` must hold at least one comparison table.")
    _validate.choice("level", level, comparisons.LEVELS)
    df = pd.concat(tables, ignore_index=True)
    df = df[(df["config"] == config) & (df["level"] == level)
            & (df["candidate"] != BASELINE)]
    df = df.assign(model=[machine_model(m) for m in df["machine"]])
    rows = []
    for (model, label), g in df.groupby(["model", "label"], sort=True):
        if g["machine"].nunique() < 2:
            continue
        half = np.sqrt(g["ci_high"] / g["ci_low"])
        rows.append({"model": model, "candidate": label,
                     "per_gpu": "; ".join(
                         f"{m.split()[-1]}: {s:.3f} ({lo:.3f}–{hi:.3f})" for m, s, lo, hi in
                         zip(g["machine"], g["speedup"], g["ci_low"], g["ci_high"])),
                     "n_gpus": int(g["machine"].nunique()),
                     "runs": " and ".join(sorted(g["run"].unique())) if "run" in g else "",
                     "between_gpus": float(g["speedup"].max() / g["speedup"].min()),
                     "within_run": float(half.max()),
                     "same_verdict": bool(g["verdict"].nunique() == 1)})
    cols = ["model", "candidate", "per_gpu", "n_gpus", "runs", "between_gpus", "within_run",
            "same_verdict"]
    return pd.DataFrame(rows, columns=cols)


def spread_sentence(spread: pd.DataFrame) -> str:
    """One sentence from :func:`machine_spread`: per GPU model, how far the speedups of the
    same candidates moved between its GPUs against the within-run intervals, and whether
    every verdict agreed. Each sentence names its runs: the spread holds for those runs,
    not for every run of the model."""
    df = _validate.frame("spread", spread, ("model", "between_gpus", "within_run",
                                            "same_verdict", "n_gpus"))
    if df.empty:
        return "No candidate was measured on two GPUs of one model."
    parts = []
    for model, g in df.groupby("model", sort=True):
        differ = int((~g["same_verdict"]).sum())
        runs = g["runs"].iloc[0] if "runs" in g and g["runs"].iloc[0] else "these runs"
        parts.append(f"In runs {runs}, the {len(g)} candidates measured on both {model}s "
                     f"differ in speedup by at most {(g['between_gpus'].max() - 1):.1%}. "
                     f"Within-run half-widths reach {(g['within_run'].max() - 1):.1%}; "
                     + ("every verdict agrees." if not differ else
                        f"{differ} verdict(s) differ."))
    return " ".join(parts)
