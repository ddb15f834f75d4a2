"""What one CUDA-graph replay costs beyond its kernels, from ``scripts/graph_anatomy.py``.

``timing.measure(mode="graph")`` divides a replay's event time by the ``k`` calls captured
in it, so a fixed cost per replay reaches each call as ``cost / k``. These pure functions
turn the anatomy check (graphs of several ``k`` timed in one process, plus the profiler's
view of the same replays) into tables, and read which ``k`` each recorded unit ran with.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["ANATOMY_COLUMNS", "anatomy_table", "auto_table", "excess_range", "graph_calls"]

ANATOMY_COLUMNS = ("config", "candidate", "k", "per_call_ms", "excess", "busy_ms", "span_ms",
                   "kernels_per_call", "eager_kernel_ms")


def anatomy_table(doc: dict) -> pd.DataFrame:
    """One row per (config, candidate, k) of an anatomy check.

    ``per_call_ms`` is the median replay's event time over ``k``; ``excess`` is it over the
    same candidate's time at the largest ``k`` measured, minus one; ``busy_ms`` and
    ``span_ms`` are the profiler's kernel sum and first-start-to-last-end span per call in
    the same graph; ``eager_kernel_ms`` the profiler's kernel sum of one eager call.
    Candidates recorded with an error are left out.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise ValueError("`doc` must be the JSON object scripts/graph_anatomy.py writes "
                         "(a dict with a 'results' dict).")
    rows = []
    for config, by_candidate in doc["results"].items():
        for candidate, r in by_candidate.items():
            if "error" in r or not r.get("by_k"):
                continue
            by_k = {int(k): v for k, v in r["by_k"].items()}
            ref = by_k[max(by_k)]["per_call_ms"]
            for k in sorted(by_k):
                v = by_k[k]
                rows.append({"config": config, "candidate": candidate, "k": k,
                             "per_call_ms": v["per_call_ms"],
                             "excess": v["per_call_ms"] / ref - 1.0,
                             "busy_ms": v["busy_ms_per_call"], "span_ms": v["span_ms_per_call"],
                             "kernels_per_call": v["kernels_per_replay"] / k,
                             "eager_kernel_ms": r["eager_profiler_ms"]})
    return pd.DataFrame(rows, columns=list(ANATOMY_COLUMNS))


def auto_table(doc: dict) -> pd.DataFrame:
    """The auto-sized ``k`` of ``timing.measure`` in the anatomy check, and its time per call
    over the time at the largest fixed ``k`` (``excess``)."""
    table = anatomy_table(doc)
    rows = []
    for (config, candidate), grp in table.groupby(["config", "candidate"], sort=True):
        auto = doc["results"][config][candidate]["auto"]
        ref = grp.loc[grp["k"].idxmax(), "per_call_ms"]
        rows.append({"config": config, "candidate": candidate,
                     "k": int(auto["calls_per_sample"]), "per_call_ms": auto["median_ms"],
                     "excess": auto["median_ms"] / ref - 1.0})
    return pd.DataFrame(rows, columns=["config", "candidate", "k", "per_call_ms", "excess"])


def excess_range(table: pd.DataFrame, config: str, k: int) -> tuple[float, float]:
    """Smallest and largest ``excess`` over the candidates at one ``config`` and ``k``."""
    sel = table[(table["config"] == config) & (table["k"] == k)]
    if sel.empty:
        raise ValueError(f"`k` must be one of {sorted(table.loc[table['config'] == config, 'k'].unique())} "
                         f"for config {config!r}; got {k!r}.")
    return float(sel["excess"].min()), float(sel["excess"].max())


def graph_calls(units: pd.DataFrame) -> pd.DataFrame:
    """Calls per graph replay of each recorded graph-mode unit: min and max over trials,
    per (config, candidate)."""
    missing = {"config", "candidate", "mode", "status", "calls_per_sample"} - set(units.columns)
    if missing:
        raise ValueError(f"`units` lacks columns {sorted(missing)}.")
    g = units[(units["mode"] == "graph") & (units["status"] == "ok")]
    out = (g.groupby(["config", "candidate"])["calls_per_sample"].agg(["min", "max"])
           .rename(columns={"min": "k_min", "max": "k_max"}).reset_index())
    return out.astype({"k_min": int, "k_max": int})
