"""Call-level and kernel-level speedups of every candidate over a baseline, with verdicts.

What a user of the function gets is the call (the timed mode's samples, all placements of
all processes); what a kernel engineer means by "a faster kernel" is the sum of the
profiler's kernel times per call, measured at every placement (protocol 2). The two can
disagree: a graph replay of SDPA's default dispatch holds a memset and a wait between two
kernels that a one-kernel candidate does not pay. ``speedup_table`` puts both side by side
and judges each with the same rule (:func:`stats.compare`), the whole table being one
family whose family-wise error rate Bonferroni controls.

Pure: it takes the frames of a loaded run (``records.Run``), never files or a GPU.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import _validate, stats
from .configs import BASELINE
from .summaries import process_groups

LEVELS = ("call", "kernel", "attention")
COLUMNS = ("config", "candidate", "level", "mode", "speedup", "ci_low", "ci_high",
           "verdict", "reason", "n_processes", "n_placements", "n_comparisons",
           "baseline_ms", "candidate_ms")
# The documented JSON layout of ``python -m attn_analysis compare --json`` (a test pins it).
JSON_SCHEMA = "attn_analysis.compare/1"
# The attention level needs a fused call: one kernel holding at least this share of the
# call's kernel time, the rest auxiliary (memsets, fills). An unfused call (eager, math:
# two products and a softmax) has no single attention kernel to compare.
FUSED_SHARE = 0.8


def _iv(run_samples, placements, baseline, mode, margin, confidence, n_resamples):
    _validate.frame("samples", run_samples, ("config", "candidate", "mode", "trial",
                                             "placement", "ms"))
    _validate.frame("placements", placements, ("config", "candidate", "mode", "trial",
                                               "placement", "kernel_ms"))
    modes = sorted(set(run_samples["mode"]))
    if mode not in modes:
        raise ValueError(f"`mode` must be one of {modes}; got {mode!r}.")
    present = sorted(set(run_samples.loc[run_samples["mode"] == mode, "candidate"]))
    if not isinstance(baseline, str) or baseline not in present:
        raise ValueError(f"`baseline` must be one of {present}; got {baseline!r}.")
    _validate.number_in("margin", margin)
    _validate.number_in("confidence", confidence)
    _validate.integer("n_resamples", n_resamples, 100)


def call_groups(samples: pd.DataFrame, config: str, candidate: str, mode: str
                ) -> list[list[np.ndarray]]:
    """Samples of one unit kind as processes -> placements -> 1-D arrays (ms)."""
    return process_groups(samples[(samples["config"] == config)
                                  & (samples["candidate"] == candidate)
                                  & (samples["mode"] == mode)])


def kernel_groups(placements: pd.DataFrame, config: str, candidate: str, mode: str
                  ) -> list[np.ndarray]:
    """The profiler's kernel ms per call, one array per process (one value per placement);
    empty when the run recorded none (protocol 1, or kernel times off)."""
    sel = placements[(placements["config"] == config) & (placements["candidate"] == candidate)
                     & (placements["mode"] == mode) & placements["kernel_ms"].notna()]
    sel = sel[sel["kernel_ms"] > 0]
    return [g.sort_values("placement")["kernel_ms"].to_numpy(dtype=float)
            for _, g in sel.groupby("trial", sort=True)]


def speedup_table(samples: pd.DataFrame, placements: pd.DataFrame, baseline: str = BASELINE,
                  mode: str = "graph", configs=None, candidates=None, margin: float = 0.02,
                  confidence: float = 0.95, n_resamples: int = 20_000, seed: int = 42,
                  kernels: pd.DataFrame | None = None) -> pd.DataFrame:
    """Speedup ``median(baseline) / median(candidate)`` at call and kernel level.

    Parameters
    ----------
    samples, placements : DataFrame
        A loaded run's ``samples`` and ``placements`` (``records.Run``).
    baseline : str
        Reference candidate; default "sdpa" (the default dispatch).
    mode : str
        Timing mode of the call level; default "graph". The kernel level uses the
        profiler's kernel times recorded at the same placements.
    configs, candidates : sequence of str, optional
        Restrict the table; default every configuration and every other candidate.
    margin, confidence
        Equivalence margin and family-wise confidence of :func:`stats.compare`.
    n_resamples, seed
        Bootstrap resamples and seed of every comparison.
    kernels : DataFrame, optional
        The run's profiler evidence (``records.Run.kernels``). Given, a third level,
        "attention", compares the longest kernel of each side: each placement's kernel time
        less the side's other kernels (:func:`kernel_split`; for the default dispatch its
        memset), so a candidate is not credited with the baseline's auxiliary kernels. Only
        between fused calls (longest kernel at least ``FUSED_SHARE`` of the call's kernels).

    Returns
    -------
    DataFrame
        One row per (configuration, candidate, level) with columns ``COLUMNS``. Above 1
        the candidate is faster. ``n_comparisons`` is the family size m (every row of the
        table); each interval is at ``1 - (1 - confidence) / m``.
    """
    _iv(samples, placements, baseline, mode, margin, confidence, n_resamples)
    timed = samples[samples["mode"] == mode]
    all_configs = sorted(set(timed["config"]))
    configs = all_configs if configs is None else list(configs)
    bad = [c for c in configs if c not in all_configs]
    if bad:
        raise ValueError(f"`configs` must be drawn from {all_configs}; got {bad}.")
    split = (pd.DataFrame(columns=["config", "candidate", "other_ms", "main_share"])
             if kernels is None else kernel_split(kernels))
    fused = split[split["main_share"] >= FUSED_SHARE]
    other = dict(zip(zip(fused["config"], fused["candidate"]), fused["other_ms"]))
    plan = []  # (config, candidate, level, baseline groups, candidate groups)
    for config in configs:
        present = sorted(set(timed.loc[timed["config"] == config, "candidate"]))
        if baseline not in present:
            continue
        wanted = [c for c in present if c != baseline] if candidates is None else \
            [c for c in candidates if c in present and c != baseline]
        base_call = call_groups(timed, config, baseline, mode)
        base_k = kernel_groups(placements, config, baseline, mode)
        base_att = _less_other(base_k, other.get((config, baseline)))
        for cand in wanted:
            plan.append((config, cand, "call", base_call,
                         call_groups(timed, config, cand, mode)))
            arm_k = kernel_groups(placements, config, cand, mode)
            if base_k and arm_k:
                plan.append((config, cand, "kernel", base_k, arm_k))
                arm_att = _less_other(arm_k, other.get((config, cand)))
                if base_att and arm_att:
                    plan.append((config, cand, "attention", base_att, arm_att))
    m = max(len(plan), 1)
    rows = []
    for i, (config, cand, level, base, arm) in enumerate(plan):
        flat = [np.concatenate([pl for proc in g for pl in proc]) if level == "call"
                else np.concatenate(g) for g in (base, arm)]
        cmp = stats.compare(base, arm, margin=margin, confidence=confidence,
                            n_resamples=n_resamples, seed=seed + i, n_comparisons=m)
        rows.append({"config": config, "candidate": cand, "level": level, "mode": mode,
                     "speedup": cmp.ratio_ci.ratio, "ci_low": cmp.ratio_ci.low,
                     "ci_high": cmp.ratio_ci.high, "verdict": cmp.verdict.value,
                     "reason": cmp.reason, "n_processes": min(len(base), len(arm)),
                     "n_placements": int(min(sum(len(p) if isinstance(p, list) else p.size
                                                 for p in g) for g in (base, arm))),
                     "n_comparisons": m, "baseline_ms": float(np.median(flat[0])),
                     "candidate_ms": float(np.median(flat[1]))})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def as_json(table: pd.DataFrame, *, run_id: str, device: str, protocol: int, baseline: str,
            mode: str, margin: float, confidence: float) -> dict:
    """The ``compare --json`` document: header fields, then one object per row.

    Layout (``schema`` = ``JSON_SCHEMA``): ``run``, ``device``, ``protocol``, ``baseline``,
    ``mode``, ``margin``, ``confidence`` (family-wise), ``correction`` ("bonferroni"),
    ``n_comparisons``, ``rows``: [{``config``, ``candidate``, ``level`` ("call", "kernel",
    or with ``--attention`` "attention"), ``speedup``, ``ci_low``, ``ci_high``, ``verdict``, ``n_processes``,
    ``n_placements``, ``baseline_ms``, ``candidate_ms``}]. Speedups above 1: faster.
    """
    keys = ("config", "candidate", "level", "speedup", "ci_low", "ci_high", "verdict",
            "n_processes", "n_placements", "baseline_ms", "candidate_ms")

    def plain(v):
        if isinstance(v, (np.integer,)):
            return int(v)
        if isinstance(v, (np.floating, float)):
            return None if math.isnan(float(v)) else float(v)
        return v
    return {"schema": JSON_SCHEMA, "run": run_id, "device": device, "protocol": int(protocol),
            "baseline": baseline, "mode": mode, "margin": float(margin),
            "confidence": float(confidence), "correction": "bonferroni",
            "n_comparisons": int(table["n_comparisons"].iloc[0]) if len(table) else 0,
            "rows": [{k: plain(r[k]) for k in keys} for _, r in table.iterrows()]}


def format_table(table: pd.DataFrame) -> str:
    """A plain-text table for the terminal: one line per candidate and level."""
    if table.empty:
        return "no comparison: the baseline or the candidates are missing"
    lines = [f"{'config':24} {'candidate':16} {'level':6} {'speedup':>8} "
             f"{'interval':>19}  verdict"]
    for _, r in table.iterrows():
        lines.append(f"{r['config']:24} {r['candidate']:16} {r['level']:6} "
                     f"{r['speedup']:8.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}]  {r['verdict']}")
    m = int(table["n_comparisons"].iloc[0])
    lines.append(f"{m} comparisons; Bonferroni-adjusted intervals; speedup > 1: faster than "
                 f"the baseline")
    return "\n".join(lines)


def _less_other(groups: list[np.ndarray], other_ms: float | None) -> list[np.ndarray]:
    """Kernel-time groups less a call's other kernels (the attention kernel alone); empty
    when the call is not fused (``other_ms`` None) or a value would not stay positive."""
    if other_ms is None or not groups or min(g.min() for g in groups) <= other_ms:
        return []
    return [g - other_ms for g in groups]


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
    cols = ("config", "candidate", "kernel", "device_ms_per_call")
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
