"""Which kernels a call ran, from the profiler's evidence of a run (``record.Run.kernels``).

A kernel-level speedup sums every kernel of a call, so a table must also say which kernel
did the work (:func:`kernel_table`, named by family through the catalog), split the
attention kernel from the rest of the call (:func:`kernel_split`) and notice candidates
that run exactly the baseline's kernels (:func:`same_kernels`), whose speedup then lies
outside the kernels. Pure, no I/O.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import _validate
from ..configs import BASELINE
from . import catalog
from .sample_groups import with_config_fields

__all__ = ["KERNEL_KEYS", "kernel_table", "kernel_split", "same_kernels"]

# The columns of a run's kernels table (record.KERNEL_COLUMNS) that every computation on
# the profiler's evidence needs.
KERNEL_KEYS = ("config", "candidate", "kernel", "device_ms_per_call")


def kernel_table(kernels: pd.DataFrame, candidate: str = BASELINE) -> pd.DataFrame:
    """Per configuration: the kernel that takes most of ``candidate``'s device time.

    Columns: ``main_kernel`` (the name, as the profiler gives it), ``family``
    (:func:`catalog.kernel_family`), ``main_ms`` and ``total_ms`` (device ms per call of that
    kernel and of all the call's kernels), ``share`` and ``n_kernels``.
    """
    df = _validate.frame("kernels", kernels, ("config", "candidate", "kernel", "calls_per_call",
                                               "device_ms_per_call"))
    df = df[df["candidate"] == candidate]
    rows = []
    for config, g in df.groupby("config", sort=True):
        main = g.loc[g["device_ms_per_call"].idxmax()]
        total = float(g["device_ms_per_call"].sum())
        rows.append({"config": config, "candidate": candidate, "main_kernel": main["kernel"],
                     "family": catalog.kernel_family(main["kernel"]),
                     "main_ms": float(main["device_ms_per_call"]), "total_ms": total,
                     "share": float(main["device_ms_per_call"]) / total if total else math.nan,
                     "n_kernels": len(g)})
    cols = ["config", "candidate", "main_kernel", "family", "main_ms", "total_ms", "share",
            "n_kernels"]
    return with_config_fields(pd.DataFrame(rows, columns=cols))


def kernel_split(kernels: pd.DataFrame) -> pd.DataFrame:
    """Each (config, candidate)'s kernel time per call split into its longest kernel (the
    attention kernel itself) and all the others (for SDPA's default dispatch a memset).

    A kernel-level speedup sums every kernel of a call, so a one-kernel candidate can come
    out "faster" than a baseline whose attention kernel is faster but which also runs a
    memset. This split, from the run's profiler evidence (``records.Run.kernels``: one
    profile per configuration and candidate, no interval), says which it is. Columns:
    ``config``, ``candidate``, ``main_kernel``, ``main_ms``, ``other_ms``, ``total_ms``,
    ``n_kernels``, ``main_share`` (``main_ms / total_ms``; times are device ms per call).
    """
    cols = KERNEL_KEYS
    if not isinstance(kernels, pd.DataFrame):
        raise ValueError(f"`kernels` must be a DataFrame; got {type(kernels).__name__}.")
    missing = [c for c in cols if c not in kernels.columns]
    if missing:
        raise ValueError(f"`kernels` must have columns {list(cols)}; missing {missing}.")
    rows = []
    for (config, candidate), g in kernels.groupby(["config", "candidate"], sort=True):
        ms = g["device_ms_per_call"].astype(float)
        top = int(np.argmax(ms.to_numpy()))
        rows.append({"config": config, "candidate": candidate,
                     "main_kernel": str(g["kernel"].iloc[top]),
                     "main_ms": float(ms.iloc[top]), "other_ms": float(ms.sum() - ms.iloc[top]),
                     "total_ms": float(ms.sum()), "n_kernels": int(len(g)),
                     "main_share": float(ms.iloc[top] / ms.sum()) if ms.sum() > 0 else 0.0})
    return pd.DataFrame(rows, columns=["config", "candidate", "main_kernel", "main_ms",
                                       "other_ms", "total_ms", "n_kernels", "main_share"])


def same_kernels(kernels: pd.DataFrame, config: str, baseline: str = BASELINE) -> list[str]:
    """Candidates whose profiled kernels at ``config`` have the same names as ``baseline``'s.

    Such candidates differ from the baseline only outside the kernels (launch, allocation,
    gaps between kernels), which is worth knowing before reading their speedup.
    """
    if not isinstance(kernels, pd.DataFrame) or not {"config", "candidate", "kernel"} <= set(
            kernels.columns):
        raise ValueError("`kernels` must be a DataFrame with columns config, candidate, kernel.")
    df = kernels[kernels["config"] == config]
    sets = {c: frozenset(g["kernel"]) for c, g in df.groupby("candidate")}
    if baseline not in sets:
        return []
    return sorted(c for c, s in sets.items() if c != baseline and s == sets[baseline])
