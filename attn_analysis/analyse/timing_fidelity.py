"""What each timing mode reads: per call, cold L2 and graph replay against the profiler's
kernel time (:func:`timing_fidelity`), and hot against cold cache with the effective rates
they imply (:func:`cache_table`). Pure, no I/O: the tables of a loaded run in, a
DataFrame out.
"""

from __future__ import annotations

import math

import pandas as pd

from .. import _validate
from ..configs import BASELINE, MODES, Config
from . import workload
from .kernel_evidence import KERNEL_KEYS

__all__ = ["timing_fidelity", "cache_table"]


# --------------------------------------------------------------------------- fidelity

def _pooled_medians(df: pd.DataFrame, candidate: str) -> pd.DataFrame:
    sel = df[df["candidate"] == candidate]
    return (sel.groupby(["config", "mode"])["ms"].median().unstack("mode")
            if len(sel) else pd.DataFrame())


def timing_fidelity(samples: pd.DataFrame, kernels: pd.DataFrame,
                    baseline: str = BASELINE) -> pd.DataFrame:
    """Per configuration: ``baseline``'s pooled median per timing mode beside the
    profiler's device time per call (``device_ms``, the sum over its kernels).

    ``<mode>_over_device`` is the ratio; ``host_share`` is ``1 - device_ms / per_call``,
    the part of a per-call figure that is not kernel time (launch and synchronisation on
    the host), and ``host_share_graph`` is ``1 - graph / per_call``, the same read against
    graph replay instead of the profiler.
    """
    df = _validate.samples(samples)
    ker = _validate.frame("kernels", kernels, KERNEL_KEYS)
    wide = _pooled_medians(df, baseline)
    if wide.empty:
        raise ValueError(f"`baseline` must have samples; {baseline!r} has none.")
    dev = ker[ker["candidate"] == baseline].groupby("config")["device_ms_per_call"].sum()
    out = wide.reset_index()
    out.columns.name = None
    out["device_ms"] = out["config"].map(dev).astype(float)
    for m in MODES:
        if m not in out.columns:
            out[m] = math.nan
        out[f"{m}_over_device"] = out[m] / out["device_ms"]
    out["host_share"] = 1.0 - out["device_ms"] / out["per_call"]
    out["host_share_graph"] = 1.0 - out["graph"] / out["per_call"]
    out["flops"] = [workload.flops(Config.from_key(c)) for c in out["config"]]
    out = out.sort_values("config", key=lambda s: s.map(Config.from_key))
    return out.reset_index(drop=True)


def cache_table(samples: pd.DataFrame, copy_gbs: float, l2_bytes: float,
                baseline: str = BASELINE) -> pd.DataFrame:
    """Hot (graph replay, inputs left in L2) against cold (L2 flushed) per configuration.

    Columns: ``hot_ms``, ``cold_ms``, ``cold_over_hot``, ``min_bytes``
    (:func:`workload.min_bytes`), ``working_set_over_l2`` (min_bytes / ``l2_bytes``),
    ``hot_gbs`` and ``cold_gbs`` (min_bytes over each time: an effective rate, not a
    measured DRAM bandwidth) and each over ``copy_gbs``, the measured copy ceiling.
    """
    df = _validate.samples(samples)
    copy_gbs = _validate.positive("copy_gbs", copy_gbs)
    l2_bytes = _validate.positive("l2_bytes", l2_bytes)
    wide = _pooled_medians(df, baseline)
    missing = [m for m in ("graph", "cold_l2") if m not in wide.columns]
    if wide.empty or missing:
        raise ValueError(f"`samples` must hold {baseline!r} in modes graph and cold_l2; "
                         f"missing {missing or ['all']}.")
    out = wide[["graph", "cold_l2"]].rename(columns={"graph": "hot_ms", "cold_l2": "cold_ms"})
    out = out.reset_index()
    out.columns.name = None
    out["cold_over_hot"] = out["cold_ms"] / out["hot_ms"]
    out["min_bytes"] = [workload.min_bytes(Config.from_key(c)) for c in out["config"]]
    out["working_set_over_l2"] = out["min_bytes"] / l2_bytes
    out["hot_gbs"] = workload.gbs_rate(out["min_bytes"], out["hot_ms"])
    out["cold_gbs"] = workload.gbs_rate(out["min_bytes"], out["cold_ms"])
    out["hot_over_copy"] = out["hot_gbs"] / copy_gbs
    out["cold_over_copy"] = out["cold_gbs"] / copy_gbs
    out = out.sort_values("config", key=lambda s: s.map(Config.from_key))
    return out.reset_index(drop=True)
