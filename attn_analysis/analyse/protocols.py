"""The two comparison protocols, replicated on controls of known truth. Pure, no I/O.

A protocol that says "no difference" or "faster" must first be shown to say so at the
rate it claims. A calibration run holds an A/A control (``sdpa_twin``: the same call as
``sdpa``) and positive controls of small known slowdown (``sdpa_spin<N>``). Here:

- :func:`pool_runs`: several calibration runs as one table, trials renumbered per run;
- :func:`protocol_a_decisions`: the original reports' protocol, one process, N samples of
  each arm, two-sided Mann-Whitney U at ``alpha``; one decision per process (trial);
- :func:`protocol_b_decisions`: this project's protocol, :func:`stats.compare` on disjoint
  groups of ``k`` consecutive processes; one verdict per group.

:mod:`attn_analysis.analyse.calibration` turns these decisions into rates with intervals.
Inputs are the tables of :class:`attn_analysis.record.Run`; outputs are DataFrames.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import _validate
from .sample_groups import process_groups_by_trial
from ..configs import BASELINE
from . import reports_statistics, stats
from .stats import DEFAULT_MARGIN, margin_iv
from .kernel_evidence import KERNEL_KEYS

__all__ = ["AA_CONTROLS", "LEVELS", "POSITIVE_PREFIX", "PROTOCOL_A", "PROTOCOL_B", "RUN_TRIAL_STRIDE",
           "pool_runs", "max_processes", "missing_controls",
           "level_samples", "kernel_samples", "replication_groups", "protocol_a_decisions",
           "protocol_b_decisions"]

AA_CONTROLS = ("sdpa_twin",)
LEVELS = ("call", "kernel")  # what a comparison times: the call, or the profiler's kernels
POSITIVE_PREFIX = "sdpa_spin"  # positive controls: sdpa_spin<N> (controls.spin_name)
PROTOCOL_A = "reports: Mann-Whitney U, one process"
PROTOCOL_B = "ours: compare() over k processes"


# --------------------------------------------------------------------------- validation

def _select_iv(df: pd.DataFrame, baseline, candidates, mode, config):
    """Resolve the configuration, check the mode, baseline and candidates are present."""
    configs = sorted(map(str, df["config"].unique()))  # unique(): no per-row iteration
    if config is None:
        if len(configs) != 1:
            raise ValueError(f"`config` must be given when `samples` holds several "
                             f"configurations ({configs}); got None.")
        config = configs[0]
    elif config not in configs:
        raise ValueError(f"`config` must be one of {configs}; got {config!r}.")
    df = df[df["config"] == config]
    modes = sorted(map(str, df["mode"].unique()))
    if mode not in modes:
        raise ValueError(f"`mode` must be one of {modes} for {config}; got {mode!r}.")
    df = df[df["mode"] == mode]
    present = sorted(map(str, df["candidate"].unique()))
    if not isinstance(baseline, str) or baseline not in present:
        raise ValueError(f"`baseline` must be one of {present}; got {baseline!r}.")
    if candidates is None:
        candidates = [c for c in present if c != baseline]
    else:
        candidates = [candidates] if isinstance(candidates, str) else list(candidates)
        bad = [c for c in candidates if c not in present or c == baseline]
        if not candidates or bad:
            raise ValueError(f"`candidates` must be drawn from {present} without the "
                             f"baseline; got {candidates!r}.")
    return df, config, candidates


def _by_trial(df: pd.DataFrame, candidate: str) -> dict[int, np.ndarray]:
    """Samples of one candidate keyed by trial, in sample order where given."""
    sel = df[df["candidate"] == candidate]
    if "sample" in sel.columns:
        sel = sel.sort_values(["trial", "sample"])
    return {int(t): g["ms"].to_numpy(dtype=float) for t, g in sel.groupby("trial", sort=True)}


def _by_process(df: pd.DataFrame, candidate: str) -> dict[int, list[np.ndarray]]:
    """Samples of one candidate keyed by trial (process), split by memory placement
    (:func:`sample_groups.process_groups_by_trial`; before protocol 2 each process is one
    placement)."""
    return process_groups_by_trial(df[df["candidate"] == candidate])


# --------------------------------------------------------------------------- protocols

RUN_TRIAL_STRIDE = 1_000_000  # trial ids of pooled run i become i * stride + trial


def pool_runs(runs, devices: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Several calibration runs as one: samples with a ``run`` column and renumbered trials,
    and each profiled kernel's time averaged over the runs.

    ``runs`` maps a run id to ``(samples, kernels)``. Trial ``t`` of the ``i``-th run becomes
    ``i * RUN_TRIAL_STRIDE + t``, so no two runs share a trial id; the ``run`` column lets
    :func:`protocol_b_decisions` form its groups of processes within one run (runs on other
    machines or days are never mixed inside a replication). Kernel rows are averaged per
    (config, candidate, kernel), so sums over a candidate's kernels stay per call.
    ``devices`` maps each run id to its GPU model (``records.Run.device``); runs of
    different models are refused, since a false-positive rate or a power pooled over two
    models describes neither (calibrate each model on its own).
    """
    if not isinstance(runs, dict) or not runs:
        raise ValueError("`runs` must be a non-empty dict: run id -> (samples, kernels).")
    if devices is not None:
        models = {}
        for run_id in runs:
            if run_id not in devices:
                raise ValueError(f"`devices` must name the GPU model of every run; "
                                 f"{run_id!r} has none.")
            models.setdefault(str(devices[run_id]), []).append(str(run_id))
        if len(models) > 1:
            raise ValueError(f"`runs` must come from one GPU model to be pooled; got "
                             f"{'; '.join(f'{m}: {ids}' for m, ids in models.items())} "
                             f"(calibrate each model separately).")
    samples, kernels = [], []
    for i, (run_id, (s, k)) in enumerate(runs.items()):
        s = _validate.samples(s).copy()
        if int(s["trial"].max()) >= RUN_TRIAL_STRIDE:
            raise ValueError(f"`runs`: {run_id!r} has trial ids >= {RUN_TRIAL_STRIDE}.")
        s["trial"] = s["trial"].astype(int) + i * RUN_TRIAL_STRIDE
        s["run"] = str(run_id)
        samples.append(s)
        if k is not None and len(k):
            kernels.append(_validate.frame("kernels", k, KERNEL_KEYS).assign(run=str(run_id)))
    keys = ["config", "candidate", "kernel"]
    pooled_k = (pd.concat(kernels, ignore_index=True)
                .groupby(keys, as_index=False, sort=True)
                .mean(numeric_only=True) if kernels else
                pd.DataFrame(columns=list(KERNEL_KEYS)))
    return pd.concat(samples, ignore_index=True), pooled_k


def _per_run(df: pd.DataFrame) -> str:
    """'run: n processes, ...' for a message."""
    runs = df["run"] if "run" in df.columns else pd.Series("this run", index=df.index)
    counts = df.assign(_run=runs).groupby("_run")["trial"].nunique()
    return ", ".join(f"{r}: {n}" for r, n in counts.items())


def max_processes(samples: pd.DataFrame) -> int:
    """The most processes (trials) any one run of ``samples`` holds (runs pooled by
    :func:`pool_runs` carry a ``run`` column): the largest ``k`` a replication can have."""
    df = _validate.frame("samples", samples, ("trial",), rows=True)
    if "run" not in df.columns:
        return int(df["trial"].nunique())
    return int(df.groupby("run")["trial"].nunique().max())


def missing_controls(samples: pd.DataFrame, baseline: str = BASELINE) -> list[str]:
    """What a calibration needs and ``samples`` lacks: the baseline, the A/A control
    (``AA_CONTROLS``) and at least one positive control (``POSITIVE_PREFIX<N>``)."""
    present = set(_validate.frame("samples", samples, ("candidate",))["candidate"])
    out = [c for c in (baseline, *AA_CONTROLS) if c not in present]
    if not any(str(c).startswith(POSITIVE_PREFIX) for c in present):
        out.append(f"a positive control ({POSITIVE_PREFIX}<N>)")
    return out


def level_samples(run, level: str) -> pd.DataFrame:
    """``run``'s samples at ``level`` (:data:`LEVELS`): its timed samples ("call") or the
    profiler's kernel time per placement (:func:`kernel_samples`, "kernel"); ``run`` is
    a loaded run (``record.load``: ``samples`` and ``placements``)."""
    level = _validate.choice("level", level, LEVELS)
    return kernel_samples(run.placements) if level == "kernel" else run.samples


def kernel_samples(placements: pd.DataFrame) -> pd.DataFrame:
    """The profiler's kernel time per placement as a samples table (one ``ms`` per
    placement, ``sample`` 0), so that every protocol here runs at the kernel level.
    Placements without a kernel time (profiling off) are left out."""
    df = _validate.frame("placements", placements, ("config", "candidate", "mode", "trial",
                                                    "placement", "kernel_ms"))
    df = df[df["kernel_ms"].notna() & (df["kernel_ms"] > 0)]
    return pd.DataFrame({"config": df["config"], "candidate": df["candidate"],
                         "mode": df["mode"], "trial": df["trial"],
                         "placement": df["placement"], "sample": 0,
                         "ms": df["kernel_ms"].astype(float)}).reset_index(drop=True)


def replication_groups(trials, k: int) -> list[tuple[int, ...]]:
    """Disjoint groups of ``k`` consecutive trials, in order; an incomplete rest is dropped.

    >>> replication_groups(range(7), 3)
    [(0, 1, 2), (3, 4, 5)]
    """
    k = _validate.integer("k", k, 1)
    ordered = sorted(int(t) for t in trials)
    return [tuple(ordered[i:i + k]) for i in range(0, len(ordered) - k + 1, k)]


def protocol_a_decisions(samples: pd.DataFrame, baseline: str = BASELINE, candidates=None,
                         mode: str = "per_call", alpha: float = 0.05, config=None
                         ) -> pd.DataFrame:
    """The reports' protocol, replicated once per process: Mann-Whitney U within a trial.

    Parameters
    ----------
    samples : DataFrame
        Tidy samples (``config, candidate, mode, trial, ms``).
    baseline : str
        Reference arm; default "sdpa".
    candidates : str or sequence of str, optional
        Arms compared with the baseline; default every other candidate of ``mode``.
    mode : str
        Timing mode; default "per_call" (the reports synchronised after every call).
    alpha : float
        Level of the two-sided test, in (0, 1); default 0.05.
    config : str, optional
        Configuration key; needed when ``samples`` holds more than one.

    Returns
    -------
    DataFrame
        One row per (candidate, trial) where both arms were measured in the same process:
        ``n_baseline``, ``n_candidate``, both medians, ``p_value``, ``significant``
        (p < alpha), ``slower`` (significant and the candidate's median above the
        baseline's) and ``faster`` (significant, below).

    Notes
    -----
    Each trial is an independent replication of what the reports did once: N samples of
    each arm from one process, one test. For an A/A pair ``significant`` is a false
    positive; for a positive control ``slower`` is a detection.
    """
    df = _validate.samples(samples)
    alpha = _validate.number_in("alpha", alpha)
    df, config, candidates = _select_iv(df, baseline, candidates, mode, config)
    base = _by_trial(df, baseline)
    rows = []
    for cand in candidates:
        for trial, c in _by_trial(df, cand).items():
            if trial not in base:
                continue
            b = base[trial]
            p = reports_statistics.mann_whitney(b, c)
            mb, mc = float(np.median(b)), float(np.median(c))
            rows.append({"config": config, "mode": mode, "candidate": cand, "trial": trial,
                         "n_baseline": b.size, "n_candidate": c.size,
                         "baseline_median_ms": mb, "candidate_median_ms": mc,
                         "p_value": p, "significant": p < alpha,
                         "slower": bool(p < alpha and mc > mb),
                         "faster": bool(p < alpha and mc < mb)})
    cols = ["config", "mode", "candidate", "trial", "n_baseline", "n_candidate",
            "baseline_median_ms", "candidate_median_ms", "p_value", "significant", "slower",
            "faster"]
    return pd.DataFrame(rows, columns=cols)


def protocol_b_decisions(samples: pd.DataFrame, baseline: str = BASELINE, candidates=None,
                         mode: str = "graph", k: int = 3, margin: float = DEFAULT_MARGIN,
                         n_resamples: int = 2000, seed: int = 42, config=None,
                         n_comparisons: int = 1, method: str = stats.DEFAULT_INTERVAL
                         ) -> pd.DataFrame:
    """This project's protocol, replicated on disjoint groups of ``k`` processes.

    Parameters
    ----------
    samples, baseline, candidates, config
        As in :func:`protocol_a_decisions`.
    mode : str
        Timing mode; default "graph".
    k : int
        Processes (trials) per replication, at least 1; default 3.
    margin : float
        Equivalence margin of :func:`stats.compare`, in (0, 1); default 0.02.
    n_resamples, seed
        Bootstrap resamples (at least 1) and seed of each comparison.
    n_comparisons : int
        Family size whose Bonferroni adjustment each comparison carries (1: the
        per-comparison rate; the paper's family size: the rate at the level it decides at).
    method : str
        :func:`stats.compare`'s interval; default its default ("process-t").

    Returns
    -------
    DataFrame
        One row per (candidate, replication): the ``trials`` used, ``speedup``
        (below 1 the candidate is slower), its 95 % interval (family-wise when
        ``n_comparisons`` > 1), the TOST's ``1 - 2 alpha`` interval and the ``verdict``
        (a :class:`stats.Verdict` value).

    Notes
    -----
    Groups are consecutive trials ``(0..k-1), (k..2k-1), ...``, using only trials where
    both arms were measured; a final incomplete group is dropped, so the replications
    share no process and are independent. Samples pooled from several runs
    (:func:`pool_runs`, a ``run`` column) are grouped within each run. ``k`` larger than
    the processes of every run is refused (:func:`max_processes`): it would give no
    replication at all.
    """
    df = _validate.samples(samples)
    k = _validate.integer("k", k, 1)
    margin = margin_iv(margin)
    n_resamples = _validate.integer("n_resamples", n_resamples, 1)
    seed = _validate.integer("seed", seed, 0)
    df, config, candidates = _select_iv(df, baseline, candidates, mode, config)
    n_comparisons = _validate.integer("n_comparisons", n_comparisons, 1)
    method = _validate.choice("method", method, stats.INTERVAL_METHODS)
    most = max_processes(df)
    if k > most:
        raise ValueError(f"`k` (processes per replication) must be at most {most}, the most "
                         f"processes one run holds ({_per_run(df)}); got {k}.")
    base = _by_process(df, baseline)
    run_of = (df.groupby("trial")["run"].first().to_dict() if "run" in df.columns
              else {t: "" for t in base})
    rows = []
    for cand in candidates:
        arm = _by_process(df, cand)
        common = sorted(set(base) & set(arm))
        groups = [g for r in dict.fromkeys(run_of[t] for t in common)
                  for g in replication_groups([t for t in common if run_of[t] == r], k)]
        for rep, group in enumerate(groups):
            cmp = stats.compare([base[t] for t in group], [arm[t] for t in group],
                                margin=margin, n_resamples=n_resamples, seed=seed + rep,
                                n_comparisons=n_comparisons, method=method)
            r, t = cmp.ratio_ci, cmp.tost
            rows.append({"config": config, "mode": mode, "candidate": cand, "k": k,
                         "replication": rep, "trials": ",".join(map(str, group)),
                         "speedup": r.ratio, "ci_low": r.low, "ci_high": r.high,
                         "tost_low": t.low, "tost_high": t.high, "margin": margin,
                         "verdict": cmp.verdict.value})
    cols = ["config", "mode", "candidate", "k", "replication", "trials", "speedup", "ci_low",
            "ci_high", "tost_low", "tost_high", "margin", "verdict"]
    return pd.DataFrame(rows, columns=cols)
