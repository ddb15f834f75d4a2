"""The paper's tables, computed from a loaded run's tables. Pure functions, no I/O.

Each function takes DataFrames shaped like :class:`attn_analysis.record.Run`'s tables
(or the output of another function here) and returns a new DataFrame: latency medians with
hierarchical-bootstrap intervals over trials (:func:`latency_table`), speedups against the
default SDPA dispatch come from :func:`comparisons.speedup_table`; here the fastest
candidate per configuration (:func:`fastest_table`), throughput against datasheet and
measured ceilings (:func:`throughput_table`), the kernels a candidate ran
(:func:`kernel_table`), fingerprints (:func:`fingerprint_table`) and the original reports'
L4 figures beside our devices (:func:`reported_latency`, :func:`cross_device_table`).
The notebooks glue what these return into the book.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import _validate, catalog, stats, workload
from .configs import BASELINE, CONFIG_FIELDS, MODES, TARGET, Config
from .configs import parse_shapes  # noqa: F401 (notebook_support calls summaries.parse_shapes)

SWEEP_AXES = ("seq_len", "batch", "heads")

# --------------------------------------------------------------------------- helpers

def config_fields(key: str) -> dict:
    """The shape fields of a configuration key such as ``B32-H8-S512-D64-fp16``."""
    return Config.from_key(key).as_dict()


def _with_fields(df: pd.DataFrame) -> pd.DataFrame:
    """Add the shape columns parsed from ``config`` and sort rows by configuration."""
    fields = pd.DataFrame([config_fields(k) for k in df["config"]], index=df.index)
    out = pd.concat([df.drop(columns=[c for c in CONFIG_FIELDS if c in df.columns]), fields],
                    axis=1)
    order = out["config"].map(lambda k: Config.from_key(k))
    return out.iloc[sorted(range(len(out)), key=lambda i: order.iloc[i])].reset_index(drop=True)


def trial_arrays(samples: pd.DataFrame, config: str, candidate: str, mode: str
                 ) -> list[np.ndarray]:
    """The samples of one (config, candidate, mode), one array per trial, in trial order."""
    df = _validate.samples(samples)
    sel = df[(df["config"] == config) & (df["candidate"] == candidate) & (df["mode"] == mode)]
    return [g["ms"].to_numpy(dtype=float) for _, g in sel.groupby("trial", sort=True)]


def process_groups(frame: pd.DataFrame) -> list:
    """One unit kind's samples as processes, each a list of placements (1-D arrays).

    Runs before protocol 2 have no ``placement`` column; each process is then one
    placement, and :func:`stats.compare` reduces to its two-stage bootstrap.
    """
    order = [c for c in ("trial", "placement", "sample") if c in frame.columns]
    frame = frame.sort_values(order, kind="stable")
    if "placement" not in frame.columns:
        return [[t["ms"].to_numpy(dtype=float)] for _, t in frame.groupby("trial", sort=True)]
    return [[p["ms"].to_numpy(dtype=float) for _, p in t.groupby("placement", sort=True)]
            for _, t in frame.groupby("trial", sort=True)]


def paired_groups(base: pd.DataFrame, cand: pd.DataFrame) -> tuple[list, list]:
    """Both arms' :func:`process_groups` over the trials both were measured in, so that the
    ``i``-th process of each is the same process (``stats.compare`` pairs them)."""
    common = set(base["trial"]) & set(cand["trial"])
    return (process_groups(base[base["trial"].isin(common)]),
            process_groups(cand[cand["trial"].isin(common)]))


def trial_medians(samples: pd.DataFrame) -> pd.DataFrame:
    """Median of each trial (process) per configuration, candidate and mode."""
    df = _validate.samples(samples)
    out = (df.groupby(["config", "candidate", "mode", "trial"])["ms"]
           .agg(median_ms="median", n_samples="size").reset_index())
    return _with_fields(out)


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
            ci = stats.median_ci_trials(process_groups(g), confidence=confidence,
                                        n_resamples=n_resamples, seed=seed)
            low, high = ci.low, ci.high
        rows.append({"config": config, "candidate": cand, "mode": mode,
                     "n_trials": len(trials), "n_samples": int(sum(t.size for t in trials)),
                     "median_ms": float(np.median(np.concatenate(trials))),
                     "ci_low_ms": low, "ci_high_ms": high,
                     "trial_spread": max(tmed) / min(tmed) - 1.0})
    cols = ["config", "candidate", "mode", "n_trials", "n_samples", "median_ms", "ci_low_ms",
            "ci_high_ms", "trial_spread"]
    return _with_fields(pd.DataFrame(rows, columns=cols))


# --------------------------------------------------------------------------- speedups

def verdict_counts(speedups: pd.DataFrame, baseline: str = BASELINE,
                   exclude_baseline: bool = True) -> pd.DataFrame:
    """How many comparisons of a :func:`comparisons.speedup_table` per mode ended in each
    verdict (``baseline`` against itself left out)."""
    df = _validate.frame("speedups", speedups, ("mode", "candidate", "verdict"))
    if exclude_baseline:
        df = df[df["candidate"] != baseline]
    out = df.groupby(["mode", "verdict"]).size().unstack("verdict", fill_value=0)
    for v in (x.value for x in stats.Verdict):
        if v not in out.columns:
            out[v] = 0
    return out[[v.value for v in stats.Verdict]]


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
        faster = s[(s["verdict"] == "faster") & (s["candidate"] != baseline)]
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
    return _with_fields(pd.DataFrame(rows, columns=cols))


LIBRARY_BACKENDS = ("sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn")


def kernel_vs_library(samples: pd.DataFrame, kernel: str = "triton",
                      libraries=LIBRARY_BACKENDS, mode: str = "graph", margin: float = 0.02,
                      n_resamples: int = 2000, seed: int = 42,
                      n_comparisons: int | None = None) -> pd.DataFrame:
    """Per configuration: ``kernel`` against the fastest of ``libraries`` (lowest median).

    ``speedup = median(library) / median(kernel)`` (above 1: the kernel is faster) with
    :func:`stats.compare`'s interval and verdict; ``ratio`` is its inverse, kernel time
    over library time. Configurations lacking the kernel or every library are skipped.
    The table is one family: its intervals are Bonferroni-adjusted over its rows, or over
    ``n_comparisons`` when a chapter reports them within a larger family (column
    ``n_comparisons``).
    """
    df = _validate.samples(samples)
    (mode,) = _validate.drawn_from("modes", mode, MODES)
    libraries = (libraries,) if isinstance(libraries, str) else tuple(libraries)
    if not libraries:
        raise ValueError("`libraries` must name at least one candidate.")
    n_resamples = _validate.positive_integer("n_resamples", n_resamples)
    df = df[df["mode"] == mode]
    pairs = []
    for config, g in df.groupby("config", sort=True):
        med = g.groupby("candidate")["ms"].median()
        libs = med[med.index.isin(libraries)]
        if kernel in med.index and not libs.empty:
            pairs.append((config, g, med, libs))
    m = len(pairs) if n_comparisons is None else _validate.positive_integer(
        "n_comparisons", n_comparisons)
    rows = []
    for config, g, med, libs in pairs:
        lib = str(libs.idxmin())
        sel = g[g["config"] == config]
        cmp = stats.compare(*paired_groups(sel[sel["candidate"] == lib],
                                           sel[sel["candidate"] == kernel]), margin=margin,
                            n_resamples=n_resamples, seed=seed, n_comparisons=m)
        r = cmp.ratio_ci
        rows.append({"config": config, "mode": mode, "kernel": kernel, "library": lib,
                     "kernel_ms": float(med[kernel]), "library_ms": float(libs.min()),
                     "speedup": r.ratio, "ci_low": r.low, "ci_high": r.high,
                     "ratio": 1.0 / r.ratio, "verdict": cmp.verdict.value,
                     "n_comparisons": m})
    cols = ["config", "mode", "kernel", "library", "kernel_ms", "library_ms", "speedup",
            "ci_low", "ci_high", "ratio", "verdict", "n_comparisons"]
    return _with_fields(pd.DataFrame(rows, columns=cols))


def tuning_table(units: pd.DataFrame, candidate: str = "triton") -> pd.DataFrame:
    """Per configuration: the tuning a candidate recorded in its timing units' ``info``
    (the first trial that has one), one column per tuning key."""
    import json
    df = _validate.frame("units", units, ("config", "candidate", "trial", "info"))
    df = df[df["candidate"] == candidate].sort_values("trial")
    rows = {}
    for config, info in zip(df["config"], df["info"]):
        tuning = (json.loads(info or "{}") or {}).get("tuning")
        if tuning and config not in rows:
            rows[config] = {"config": config, **tuning}
    out = pd.DataFrame(list(rows.values()))
    if out.empty:
        return pd.DataFrame(columns=["config"])
    return _with_fields(out)


# Bookkeeping a tuner records beside its configuration: not part of the kernel it picked.
TUNING_BOOKKEEPING = ("tuned_ms", "n_tried", "n_failed", "reused", "fast_launch")


def tuning_by_run(units_by_run: dict, candidate: str = "triton") -> pd.DataFrame:
    """Which tuning each process of each run used, per configuration.

    ``units_by_run`` maps a run id to its ``units`` table. An autotuned candidate records
    its pick in each timing unit's ``info["tuning"]``; the sweep tunes in the first
    process that builds the candidate and hands the pick to every later process
    (``reused: true``), so the tuning is fixed within a run. One row per (run,
    configuration): ``n_processes``, ``n_reused`` (processes that took the pick over),
    ``same_everywhere`` (every process ran the same configuration keys), ``tuning`` (the
    keys, bookkeeping left out: ``TUNING_BOOKKEEPING``) and, as columns, ``BLOCK_M``,
    ``BLOCK_N``, ``num_warps`` and ``num_stages``.
    """
    import json
    if not isinstance(units_by_run, dict):
        raise ValueError(f"`units_by_run` must be a dict of run id -> units; "
                         f"got {type(units_by_run).__name__}.")
    rows = []
    for run_id, units in units_by_run.items():
        df = _validate.frame("units", units, ("config", "candidate", "trial", "info"))
        df = df[df["candidate"] == candidate]
        for config, g in df.groupby("config", sort=True):
            picks = {}
            for trial, info in zip(g["trial"], g["info"]):
                tuning = (json.loads(info or "{}") or {}).get("tuning")
                if tuning:
                    picks.setdefault(int(trial), tuning)
            if not picks:
                continue
            keys = {t: {k: v for k, v in p.items() if k not in TUNING_BOOKKEEPING}
                    for t, p in picks.items()}
            first = keys[min(keys)]
            rows.append({"run": run_id, "config": config, "n_processes": len(picks),
                         "n_reused": sum(bool(p.get("reused")) for p in picks.values()),
                         "same_everywhere": all(k == first for k in keys.values()),
                         "tuning": ", ".join(f"{k}={v}" for k, v in sorted(first.items())),
                         **{k: first.get(k) for k in ("BLOCK_M", "BLOCK_N", "num_warps",
                                                      "num_stages")}})
    cols = ["run", "config", "n_processes", "n_reused", "same_everywhere", "tuning",
            "BLOCK_M", "BLOCK_N", "num_warps", "num_stages"]
    out = pd.DataFrame(rows, columns=cols)
    return _with_fields(out) if len(out) else out


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


# --------------------------------------------------------------------------- kernels

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
    return _with_fields(pd.DataFrame(rows, columns=cols))


# --------------------------------------------------------------------------- runs

def run_label(run) -> str:
    """Device and software of a run for titles: 'NVIDIA H100 80GB HBM3, torch 2.11.0+cu130'.

    CPU runs say so: their times are host wall-clock, never GPU time.
    """
    trials = (run.fingerprint or {}).get("trials") or {}
    fp = next(iter(trials.values()), {})
    torch_version = fp.get("torch_version", "?")
    if fp.get("device_kind") == "cpu":
        return f"CPU ({fp.get('cpu_name') or 'unknown'}, wall-clock), torch {torch_version}"
    return f"{fp.get('gpu_name') or run.device}, torch {torch_version}"


def fingerprint_table(runs) -> pd.DataFrame:
    """One row per run and trial: device, software versions, lock state, fingerprint hash."""
    rows = []
    for run in runs:
        plan = (run.info or {}).get("plan", {})
        for trial, fp in sorted(((run.fingerprint or {}).get("trials") or {}).items(),
                                key=lambda kv: int(kv[0])):
            lock = fp.get("lock_state") or {}
            rows.append({
                "run": run.run_id, "trial": int(trial), "device_kind": fp.get("device_kind"),
                "device": fp.get("gpu_name") or fp.get("cpu_name"),
                "torch": fp.get("torch_version"), "cuda": fp.get("cuda_version"),
                "cudnn": fp.get("cudnn_version"), "triton": fp.get("triton_version"),
                "driver": fp.get("driver_version"), "python": fp.get("python_version"),
                "tf32_matmul": lock.get("cuda_matmul_allow_tf32"),
                "fp32_precision": lock.get("float32_matmul_precision"),
                "deterministic": lock.get("deterministic_algorithms"),
                "plan_deterministic": plan.get("deterministic"),
                "locked": fp.get("locked"), "hash": fp.get("fingerprint_hash")})
    return pd.DataFrame(rows, columns=[
        "run", "trial", "device_kind", "device", "torch", "cuda", "cudnn", "triton", "driver",
        "python", "tf32_matmul", "fp32_precision", "deterministic", "plan_deterministic",
        "locked", "hash"])


# --------------------------------------------------------------------------- reports

def reported_latency(reported: pd.DataFrame, device: str = "NVIDIA L4",
                     exclude_backends=("memory_efficient",)) -> pd.DataFrame:
    """The reports' median latencies on ``device``: one row per distinct value per report.

    The same figure restated in several sections of one report counts once
    (``n_mentions`` says how often it was stated); different reports' values stay apart.
    Rows for a backend in ``exclude_backends`` are left out (by default the forced
    memory-efficient backend, which is not the default dispatch). Every row is a claim
    "as reported", never our measurement.
    """
    df = _validate.frame("reported", reported, ("quantity", "value", "batch", "heads", "seq_len",
                                                 "head_dim", "dtype", "source_file", "device",
                                                 "backend", "status"))
    df = df[(df["quantity"] == "median_latency_ms") & (df["device"] == device)
            & ~df["backend"].isin(list(exclude_backends))]
    df = df.dropna(subset=["batch", "heads", "seq_len", "head_dim"])
    if df.empty:
        return pd.DataFrame(columns=["config", "source_file", "value_ms", "n_mentions",
                                     "status", "device"])
    keys = [Config(int(b), int(h), int(s), int(d), dt).key for b, h, s, d, dt in
            zip(df["batch"], df["heads"], df["seq_len"], df["head_dim"], df["dtype"])]
    df = df.assign(config=keys)
    out = (df.groupby(["config", "source_file", "value"]).size().rename("n_mentions")
           .reset_index().rename(columns={"value": "value_ms"}))
    out["status"] = "as reported"
    out["device"] = device
    return _with_fields(out)


def cross_device_table(latency_by_run: pd.DataFrame, reported: pd.DataFrame,
                       candidate: str = BASELINE) -> pd.DataFrame:
    """Every run's ``candidate`` median per configuration and mode beside the L4 values
    the reports give for the same shape (their minimum, maximum and count, as reported).

    ``latency_by_run`` is :func:`latency_table` output with ``run`` and ``device`` columns.
    ``l4_over_ours`` is the reports' smallest L4 median over ours: how many times slower
    the L4 figure is (not a like-for-like timing: the reports used one process and a
    synchronise after every call, closest to our ``per_call``).
    """
    lat = _validate.frame("latency_by_run", latency_by_run,
                          ("run", "device", "config", "candidate", "mode", "median_ms"))
    rep = reported_latency(reported)
    agg = (rep.groupby("config")["value_ms"].agg(l4_min_ms="min", l4_max_ms="max",
                                                 l4_n_values="size").reset_index())
    wide = lat[lat["candidate"] == candidate][["run", "device", "config", "mode", "median_ms"]]
    out = wide.merge(agg, on="config", how="left")
    out["l4_over_ours"] = out["l4_min_ms"] / out["median_ms"]
    return _with_fields(out)


def reports_protocol_table(results: dict) -> pd.DataFrame:
    """One row per comparison from :func:`stats.reports_protocol` results keyed by label."""
    rows = []
    for label, r in results.items():
        if not isinstance(r, stats.ReportsProtocol):
            raise ValueError(f"`results` values must be stats.ReportsProtocol; got "
                             f"{type(r).__name__} for {label!r}.")
        rows.append({"comparison": label, "baseline_median_ms": r.baseline_ci.estimate,
                     "baseline_ci_low": r.baseline_ci.low, "baseline_ci_high": r.baseline_ci.high,
                     "candidate_median_ms": r.candidate_ci.estimate,
                     "candidate_ci_low": r.candidate_ci.low,
                     "candidate_ci_high": r.candidate_ci.high, "speedup": r.speedup,
                     "hedges_g": r.hedges_g, "cliffs_delta": r.cliffs_delta,
                     "p_value": r.p_value, "cis_overlap": r.cis_overlap})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- notebooks

def choose_lead(runs: pd.DataFrame, requested: str = "") -> str:
    """The run a notebook leads with: ``requested`` if given, else the GPU run with the
    most timing units (ties: first by name), else the largest CPU run.

    ``runs`` has columns ``run``, ``device_kind`` and ``n_units``.
    """
    df = _validate.frame("runs", runs, ("run", "device_kind", "n_units"))
    if df.empty:
        raise ValueError("`runs` is empty: no recorded run was found (run a sweep, or set "
                         "measure=True).")
    if requested:
        if requested not in set(df["run"]):
            raise ValueError(f"`run` must be one of {sorted(df['run'])}; got {requested!r}.")
        return requested
    ranked = df.assign(gpu=df["device_kind"] == "cuda").sort_values(
        ["gpu", "n_units", "run"], ascending=[False, False, True])
    return str(ranked["run"].iloc[0])
