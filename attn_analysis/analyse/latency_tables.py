"""Latency per configuration, candidate and mode, and what it buys: the fastest candidate
per configuration, throughput against measured and datasheet ceilings, and the
one-dimensional sweeps of the matrix. Pure functions, no I/O.

Each function takes DataFrames shaped like :class:`attn_analysis.record.Run`'s tables (or
the output of another function here) and returns a new DataFrame: latency medians with
hierarchical-bootstrap intervals over trials (:func:`latency_table`), the fastest
candidate per configuration with its verdict from ``comparisons.speedup_table``
(:func:`fastest_table`), work, traffic and rates (:func:`throughput_table`) and the
longest slice along one shape axis (:func:`sweep_table`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import _validate
from ..configs import BASELINE, CONFIG_FIELDS, MODES, TARGET, Config
from . import bootstrap, workload
from .stats import Verdict
from .sample_groups import process_groups, with_config_fields

__all__ = ["SWEEP_AXES", "latency_table", "fastest_table", "throughput_table", "sweep_table"]

SWEEP_AXES = ("seq_len", "batch", "heads")


# --------------------------------------------------------------------------- latency

def latency_table(samples: pd.DataFrame, modes=MODES, ci_modes=None, confidence: float = 0.95,
                  n_resamples: int = 2000, seed: int = 42) -> pd.DataFrame:
    """Median latency per (configuration, candidate, mode) with a CI over trials.

    ``ci_low_ms``/``ci_high_ms`` come from :func:`stats.median_ci_trials` (trials
    resampled, then samples within them) for the modes in ``ci_modes`` (default: all of
    ``modes``) and are NaN for the others, which saves time where thousands of samples
    per trial make the bootstrap slow. ``trial_spread`` is max/min of the trial medians
    minus one: the between-process spread that a pooled bootstrap would hide.
    """
    df = _validate.samples(samples)
    modes = _validate.drawn_from("modes", modes, MODES)
    ci_modes = modes if ci_modes is None else _validate.drawn_from("modes", ci_modes, MODES)
    n_resamples = _validate.positive_integer("n_resamples", n_resamples)
    rows = []
    for (config, cand, mode), g in df[df["mode"].isin(modes)].groupby(
            ["config", "candidate", "mode"], sort=True):
        trials = [t["ms"].to_numpy(dtype=float) for _, t in g.groupby("trial", sort=True)]
        tmed = [float(np.median(t)) for t in trials]
        low = high = math.nan
        if mode in ci_modes:
            ci = bootstrap.median_ci_trials(process_groups(g), confidence=confidence,
                                        n_resamples=n_resamples, seed=seed)
            low, high = ci.low, ci.high
        rows.append({"config": config, "candidate": cand, "mode": mode,
                     "n_trials": len(trials), "n_samples": int(sum(t.size for t in trials)),
                     "median_ms": float(np.median(np.concatenate(trials))),
                     "ci_low_ms": low, "ci_high_ms": high,
                     "trial_spread": max(tmed) / min(tmed) - 1.0})
    cols = ["config", "candidate", "mode", "n_trials", "n_samples", "median_ms", "ci_low_ms",
            "ci_high_ms", "trial_spread"]
    return with_config_fields(pd.DataFrame(rows, columns=cols))


def fastest_table(latency: pd.DataFrame, speedups: pd.DataFrame, mode: str = "graph",
                  baseline: str = BASELINE) -> pd.DataFrame:
    """Per configuration: the candidate with the lowest median in ``mode``, and whether
    that lead over ``baseline`` is established (its verdict from ``speedups``).

    ``established`` lists every candidate whose verdict is "faster"; when it is empty, no
    candidate is shown faster than the baseline at that configuration, whatever the point
    estimates say.
    """
    lat = _validate.frame("latency", latency, ("config", "candidate", "mode", "median_ms",
                                               "ci_low_ms", "ci_high_ms"))
    spd = _validate.frame("speedups", speedups, ("config", "candidate", "mode", "speedup",
                                                 "ci_low", "ci_high", "verdict"))
    (mode,) = _validate.drawn_from("modes", mode, MODES)
    lat, spd = lat[lat["mode"] == mode], spd[spd["mode"] == mode]
    rows = []
    for config, g in lat.groupby("config", sort=False):
        best = g.loc[g["median_ms"].idxmin()]
        base = g[g["candidate"] == baseline]
        s = spd[(spd["config"] == config)]
        hit = s[s["candidate"] == best["candidate"]]
        faster = s[(s["verdict"] == Verdict.FASTER.value) & (s["candidate"] != baseline)]
        rows.append({
            "config": config, "mode": mode, "fastest": best["candidate"],
            "median_ms": best["median_ms"], "ci_low_ms": best["ci_low_ms"],
            "ci_high_ms": best["ci_high_ms"],
            "baseline_median_ms": float(base["median_ms"].iloc[0]) if len(base) else math.nan,
            "speedup": float(hit["speedup"].iloc[0]) if len(hit) else math.nan,
            "speedup_ci_low": float(hit["ci_low"].iloc[0]) if len(hit) else math.nan,
            "speedup_ci_high": float(hit["ci_high"].iloc[0]) if len(hit) else math.nan,
            "verdict": ("is the baseline" if best["candidate"] == baseline
                        else (hit["verdict"].iloc[0] if len(hit) else "not compared")),
            "established": ", ".join(sorted(faster["candidate"])),
        })
    cols = ["config", "mode", "fastest", "median_ms", "ci_low_ms", "ci_high_ms",
            "baseline_median_ms", "speedup", "speedup_ci_low", "speedup_ci_high", "verdict",
            "established"]
    return with_config_fields(pd.DataFrame(rows, columns=cols))


# --------------------------------------------------------------------------- throughput

def throughput_table(latency: pd.DataFrame, ceilings: dict | None = None,
                     device_name: str | None = None) -> pd.DataFrame:
    """Add work, traffic and rates to a latency table, against measured and datasheet ceilings.

    Columns added: ``flops``, ``min_bytes``, ``intensity`` (FLOP/B), ``tflops`` (with
    ``tflops_low``/``tflops_high`` from the latency CI), ``eff_gbs`` (minimum bytes over
    time, an effective rate that can exceed DRAM bandwidth when L2 serves the inputs),
    ``frac_matmul`` and ``frac_copy`` (of the run's measured matrix-product TFLOPS and copy
    GB/s; NaN without ``ceilings``), ``frac_peak_tflops`` and ``frac_peak_bw`` (of
    ``workload.HARDWARE``'s dense tensor-core and memory peaks for ``device_name``; NaN
    for a device not in that table).
    """
    df = _validate.frame("latency", latency, ("config", "median_ms", "ci_low_ms", "ci_high_ms"))
    df = df.copy()
    cfgs = [Config.from_key(k) for k in df["config"]]
    ceilings = ceilings or {}
    mm = (ceilings.get("matmul") or {}).get("tflops", math.nan)
    cp = (ceilings.get("copy") or {}).get("gbs", math.nan)
    spec = workload.device_spec_or_none(device_name) if device_name else None
    df["flops"] = [workload.flops(c) for c in cfgs]
    df["min_bytes"] = [workload.min_bytes(c) for c in cfgs]
    df["intensity"] = df["flops"] / df["min_bytes"]
    df["tflops"] = workload.tflops_rate(df["flops"], df["median_ms"])
    df["tflops_low"] = workload.tflops_rate(df["flops"], df["ci_high_ms"])
    df["tflops_high"] = workload.tflops_rate(df["flops"], df["ci_low_ms"])
    df["eff_gbs"] = workload.gbs_rate(df["min_bytes"], df["median_ms"])
    df["frac_matmul"] = df["tflops"] / mm
    df["frac_copy"] = df["eff_gbs"] / cp
    peak = [spec.peak_tflops(c.dtype) if spec else math.nan for c in cfgs]
    df["frac_peak_tflops"] = df["tflops"] / np.array(peak, dtype=float)
    df["frac_peak_bw"] = df["eff_gbs"] / (spec.mem_bandwidth_gbs if spec else math.nan)
    return df


def sweep_table(df: pd.DataFrame, axis: str) -> pd.DataFrame:
    """Rows of the longest one-dimensional slice of ``df`` along ``axis``.

    The other shape fields are held fixed at the values whose slice has the most distinct
    ``axis`` values; ties go to the slice through the target shape (B=32, H=8, S=512, D=64),
    then to the first in sort order. For the reports' matrix this gives S = 128 ... 2048 at
    B=32, H=8; B = 8 ... 64 at H=8, S=512; H = 4 ... 16 at B=32, S=512.
    """
    if axis not in SWEEP_AXES:
        raise ValueError(f"`axis` must be one of {SWEEP_AXES}; got {axis!r}.")
    df = _validate.frame("df", df, CONFIG_FIELDS)
    if df.empty:
        return df.copy()
    fixed = [f for f in CONFIG_FIELDS if f != axis]
    target = TARGET.as_dict()
    best, best_key = None, None
    for values, g in df.groupby(fixed, sort=True):
        through_target = all(target[f] == v for f, v in zip(fixed, values))
        key = (g[axis].nunique(), through_target)
        if best_key is None or key > best_key:
            best, best_key = g, key
    return best.sort_values(axis).reset_index(drop=True)
