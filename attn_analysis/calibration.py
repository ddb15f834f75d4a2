"""Calibration of comparison protocols, timing fidelity, cache and cost. Pure, no I/O.

A protocol that says "no difference" or "faster" must first be shown to say so at the
rate it claims. The calibration run holds an A/A control (``sdpa_twin``: the same call as
``sdpa``) and positive controls of small known slowdown (``sdpa_spin<N>``). Here:

- :func:`protocol_a_decisions`: the original reports' protocol, one process, N samples of
  each arm, two-sided Mann-Whitney U at ``alpha``; one decision per process (trial).
- :func:`protocol_b_decisions`: this project's protocol, :func:`stats.compare` on disjoint
  groups of ``k`` consecutive processes; one verdict per group.
- :func:`outcome_rates` and :func:`headline_rates`: false-positive rate (A/A) and power
  (positive controls) with Clopper-Pearson intervals.
- :func:`true_effects`: what each control really costs (pooled median ratio over every
  process, and the profiler's extra kernel time).
- :func:`design_calibration`: all of it for one design, at the call level (timed samples)
  or the kernel level (:func:`kernel_samples`: the profiler's time per placement), with
  each control's size in margins, and the coverage of the design's interval.
- :func:`timing_fidelity`, :func:`cache_table`, :func:`unit_costs`, :func:`protocol_cost`:
  what each timing mode reads, what "effective bandwidth" means hot and cold, and the GPU
  time a calibrated comparison costs.

Inputs are the tables of :class:`attn_analysis.record.Run`; outputs are DataFrames or
frozen dataclasses.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from . import _validate, stats, summaries, workload
from .configs import BASELINE, MODES, Config

AA_CONTROLS = ("sdpa_twin",)
POSITIVE_PREFIX = "sdpa_spin"  # positive controls: sdpa_spin<N> (controls.spin_name)
CLAIM_VERDICTS = ("holds", "fails", "cannot be tested here")
PROTOCOL_A = "reports: Mann-Whitney U, one process"
PROTOCOL_B = "ours: compare() over k processes"
COVERAGE = "interval holds the true effect"
_V = stats.Verdict
# Outcomes of protocol (b) that pool verdicts. A "claimed difference" is any verdict that
# says the two arms differ (a false positive for an A/A pair); "beyond margin" the
# verdicts that say they differ by more than the margin (the claim the paper tests).
DERIVED_OUTCOMES = {
    "claimed difference": tuple(v.value for v in (_V.FASTER, _V.SLOWER,
                                                  _V.FASTER_WITHIN_MARGIN,
                                                  _V.SLOWER_WITHIN_MARGIN)),
    "beyond margin": (_V.FASTER.value, _V.SLOWER.value),
    "any slowdown": (_V.SLOWER.value, _V.SLOWER_WITHIN_MARGIN.value),
}
LEVELS = ("call", "kernel")
KERNEL_KEYS = ("config", "candidate", "kernel", "device_ms_per_call")


# --------------------------------------------------------------------------- validation

def _select_iv(df: pd.DataFrame, baseline, candidates, mode, config):
    """Resolve the configuration, check the mode, baseline and candidates are present."""
    configs = sorted(set(df["config"]))
    if config is None:
        if len(configs) != 1:
            raise ValueError(f"`config` must be given when `samples` holds several "
                             f"configurations ({configs}); got None.")
        config = configs[0]
    elif config not in configs:
        raise ValueError(f"`config` must be one of {configs}; got {config!r}.")
    df = df[df["config"] == config]
    modes = sorted(set(df["mode"]))
    if mode not in modes:
        raise ValueError(f"`mode` must be one of {modes} for {config}; got {mode!r}.")
    df = df[df["mode"] == mode]
    present = sorted(set(df["candidate"]))
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
    (:func:`summaries.process_groups`; before protocol 2 each process is one placement)."""
    sel = df[df["candidate"] == candidate]
    return {int(t): summaries.process_groups(g)[0] for t, g in sel.groupby("trial", sort=True)}


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
            p = stats.mann_whitney(b, c)
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
                         mode: str = "graph", k: int = 3, margin: float = 0.02,
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
    margin = _validate.number_in("margin", margin)
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


# --------------------------------------------------------------------------- rates

def _rate_row(events: int, n: int, confidence: float) -> dict:
    ci = stats.binomial_rate_ci(int(events), int(n), confidence)
    return {"events": int(events), "n": int(n), "rate": ci.estimate, "ci_low": ci.low,
            "ci_high": ci.high}


def outcome_rates(a_decisions: pd.DataFrame | None = None,
                  b_decisions: pd.DataFrame | None = None, confidence: float = 0.95
                  ) -> pd.DataFrame:
    """Rate of every outcome per protocol, ``k`` and candidate, with Clopper-Pearson CIs.

    Outcomes of protocol (a): "significant" (p < alpha, either direction), "significant,
    slower" and "significant, faster". Of protocol (b): each verdict, and "claimed
    difference" (faster or slower). Columns: ``protocol``, ``k`` (1 for protocol (a): one
    process), ``candidate``, ``outcome``, ``events``, ``n``, ``rate``, ``ci_low``,
    ``ci_high``.
    """
    confidence = _validate.number_in("confidence", confidence)
    if a_decisions is None and b_decisions is None:
        raise ValueError("`a_decisions` and `b_decisions` must not both be None.")
    rows = []
    if a_decisions is not None:
        a = _validate.frame("a_decisions", a_decisions, ("candidate", "significant", "slower",
                                                         "faster"))
        for cand, g in a.groupby("candidate", sort=True):
            for outcome, col in (("significant", "significant"),
                                 ("significant, slower", "slower"),
                                 ("significant, faster", "faster")):
                rows.append({"protocol": PROTOCOL_A, "k": 1, "candidate": cand,
                             "outcome": outcome,
                             **_rate_row(g[col].astype(bool).sum(), len(g), confidence)})
    if b_decisions is not None:
        b = _validate.frame("b_decisions", b_decisions, ("candidate", "k", "verdict"))
        bad = sorted(set(b["verdict"]) - {v.value for v in stats.Verdict})
        if bad:
            raise ValueError(f"`b_decisions` column `verdict` must hold "
                             f"{[v.value for v in stats.Verdict]}; got {bad}.")
        for (k, cand), g in b.groupby(["k", "candidate"], sort=True):
            v = g["verdict"]
            for outcome in [x.value for x in stats.Verdict] + list(DERIVED_OUTCOMES):
                hit = (v.isin(DERIVED_OUTCOMES[outcome]) if outcome in DERIVED_OUTCOMES
                       else v == outcome)
                rows.append({"protocol": PROTOCOL_B, "k": int(k), "candidate": cand,
                             "outcome": outcome,
                             **_rate_row(hit.sum(), len(g), confidence)})
    cols = ["protocol", "k", "candidate", "outcome", "events", "n", "rate", "ci_low",
            "ci_high"]
    return pd.DataFrame(rows, columns=cols)


def headline_rates(rates: pd.DataFrame, aa_controls=AA_CONTROLS) -> pd.DataFrame:
    """False-positive rate of the A/A controls and power of the others, one row each.

    For a candidate in ``aa_controls`` the event is a claimed difference ("significant"
    under protocol (a), "faster" or "slower" under (b)): any is false. For the others
    (positive controls, truly slower) it is a detected slowdown ("significant, slower",
    or the verdict "slower").
    """
    df = _validate.frame("rates", rates, ("protocol", "k", "candidate", "outcome", "rate",
                                          "ci_low", "ci_high"))
    aa = (aa_controls,) if isinstance(aa_controls, str) else tuple(aa_controls)
    event = {(PROTOCOL_A, True): "significant", (PROTOCOL_A, False): "significant, slower",
             (PROTOCOL_B, True): "claimed difference", (PROTOCOL_B, False): "slower"}
    keep = [event.get((p, c in aa)) == o
            for p, c, o in zip(df["protocol"], df["candidate"], df["outcome"])]
    out = df[keep].copy()
    out.insert(3, "role", ["A/A (false positive)" if c in aa else "positive control (power)"
                           for c in out["candidate"]])
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- effects

def extra_kernel_ms(kernels: pd.DataFrame, candidate: str, baseline: str = BASELINE,
                    config=None) -> float:
    """Device ms per call of ``candidate``'s kernels whose names ``baseline`` does not run
    (for a spin control: the spin kernel's own time, from the profiler)."""
    df = _validate.frame("kernels", kernels, KERNEL_KEYS)
    if config is not None:
        df = df[df["config"] == config]
    names = set(df.loc[df["candidate"] == baseline, "kernel"])
    if not names:
        raise ValueError(f"`baseline` must have profiled kernels; {baseline!r} has none.")
    mine = df[df["candidate"] == candidate]
    if mine.empty:
        raise ValueError(f"`candidate` must have profiled kernels; {candidate!r} has none.")
    return float(mine.loc[~mine["kernel"].isin(names), "device_ms_per_call"].sum())


def true_effects(samples: pd.DataFrame, kernels: pd.DataFrame | None = None,
                 baseline: str = BASELINE, candidates=None, mode: str = "graph",
                 confidence: float = 0.95, n_resamples: int = 2000, seed: int = 42,
                 config=None) -> pd.DataFrame:
    """Each control's effect from every process pooled: the truth the protocols chase.

    ``slowdown = median(candidate) / median(baseline)`` over all trials (above 1: slower)
    with its hierarchical-bootstrap interval (:func:`stats.ratio_ci`, inverted);
    ``slowdown_pct`` is ``slowdown - 1``. With ``kernels``: ``baseline_device_ms`` (sum
    of the baseline's kernels per call), ``extra_device_ms`` (:func:`extra_kernel_ms`)
    and ``extra_share`` (their ratio: the slowdown the profiler predicts if nothing
    overlaps).
    """
    df = _validate.samples(samples)
    confidence = _validate.number_in("confidence", confidence)
    n_resamples = _validate.integer("n_resamples", n_resamples, 1)
    seed = _validate.integer("seed", seed, 0)
    df, config, candidates = _select_iv(df, baseline, candidates, mode, config)
    base = _by_process(df, baseline)
    base_dev = math.nan
    if kernels is not None:
        k = _validate.frame("kernels", kernels, KERNEL_KEYS)
        k = k[k["config"] == config]
        base_dev = float(k.loc[k["candidate"] == baseline, "device_ms_per_call"].sum())
    rows = []
    for cand in candidates:
        arm = _by_process(df, cand)
        r = stats.ratio_ci(list(base.values()), list(arm.values()), confidence=confidence,
                           n_resamples=n_resamples, seed=seed)
        extra = (extra_kernel_ms(kernels, cand, baseline, config) if kernels is not None
                 else math.nan)
        rows.append({"config": config, "mode": mode, "candidate": cand,
                     "n_trials": len(arm), "slowdown": 1.0 / r.ratio,
                     "slowdown_low": 1.0 / r.high, "slowdown_high": 1.0 / r.low,
                     "slowdown_pct": 1.0 / r.ratio - 1.0, "baseline_device_ms": base_dev,
                     "extra_device_ms": extra,
                     "extra_share": extra / base_dev if base_dev > 0 else math.nan})
    cols = ["config", "mode", "candidate", "n_trials", "slowdown", "slowdown_low",
            "slowdown_high", "slowdown_pct", "baseline_device_ms", "extra_device_ms",
            "extra_share"]
    return pd.DataFrame(rows, columns=cols)


def within_process_coverage(trials, confidence: float = 0.95) -> stats.ConfidenceInterval:
    """How often one process's CI of the median contains the median of all processes.

    ``trials`` is a sequence of 1-D samples, one per process (at least 2). Each process's
    distribution-free interval (:func:`stats.median_ci`) is the interval a one-process
    protocol reports; the target is the median of the per-process medians. Returns the
    covered fraction with its Clopper-Pearson interval; far below ``confidence`` means
    the per-process interval ignores the spread between processes.
    """
    confidence = _validate.number_in("confidence", confidence)
    trials = list(trials)
    if len(trials) < 2:
        raise ValueError(f"`trials` must hold at least 2 samples (processes); "
                         f"got {len(trials)}.")
    arrays = [np.asarray(t, dtype=float) for t in trials]
    target = float(np.median([np.median(a) for a in arrays]))
    hits = 0
    for a in arrays:
        lo, hi = stats.median_ci(a, confidence)
        hits += lo <= target <= hi
    return stats.binomial_rate_ci(hits, len(arrays), confidence)


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


# --------------------------------------------------------------------------- cost

def unit_costs(units: pd.DataFrame) -> pd.DataFrame:
    """Wall time of the recorded timing units per (candidate, mode), status "ok" only.

    Columns: ``n_units``, ``median_unit_s``, ``total_s`` and ``ms_per_sample`` (total
    elapsed over total samples, warm-up included in the elapsed time).
    """
    df = _validate.frame("units", units, ("candidate", "mode", "status", "n_samples", "elapsed_s"))
    df = df[df["status"] == "ok"]
    out = (df.groupby(["candidate", "mode"])
           .agg(n_units=("elapsed_s", "size"), median_unit_s=("elapsed_s", "median"),
                total_s=("elapsed_s", "sum"), n_samples=("n_samples", "sum")).reset_index())
    out["ms_per_sample"] = out["total_s"] * 1e3 / out["n_samples"]
    return out


def process_overhead_s(units: pd.DataFrame) -> float:
    """Median per-process time outside the timing units, from the units' own clocks.

    A trial ends when its last timing unit ends (``started_utc + elapsed_s``). For each
    trial after the first, ``end - previous end - sum(elapsed_s of its units)`` is the time
    its process spent on everything else: start-up, CUDA context, building and checking
    candidates, profiling, teardown. The median over trials ignores the long pauses of a
    run recorded over several invocations. Needs at least two trials; the clock has
    one-second resolution, so the median is good to about a second divided by the spread
    of trial counts, not better.
    """
    df = _validate.frame("units", units, ("trial", "started_utc", "elapsed_s"))
    df = df.dropna(subset=["started_utc", "elapsed_s"])
    start = pd.to_datetime(df["started_utc"], utc=True)
    df = df.assign(end=start + pd.to_timedelta(df["elapsed_s"], unit="s"))
    per = df.groupby("trial").agg(end=("end", "max"), busy=("elapsed_s", "sum")).sort_values("end")
    if len(per) < 2:
        raise ValueError(f"`units` must cover at least 2 trials; got {len(per)}.")
    gaps = per["end"].diff().dt.total_seconds().iloc[1:] - per["busy"].iloc[1:]
    return float(max(0.0, gaps.median()))


@dataclasses.dataclass(frozen=True)
class ProtocolCost:
    """GPU wall time of one comparison: ``k`` processes each timing ``arms`` arms."""

    k: int
    arms: int
    unit_s: float
    process_overhead_s: float
    comparison_s: float
    calibration_s: float
    replications: int


def protocol_cost(unit_s: float, k: int, arms: int = 2, process_overhead_s: float = 0.0,
                  replications: int = 30) -> ProtocolCost:
    """Cost of a comparison, and of calibrating it with ``replications`` of each control.

    ``comparison_s = k * (arms * unit_s + process_overhead_s)``; ``calibration_s`` is
    ``replications`` comparisons. ``unit_s`` is a typical timing unit's wall time
    (:func:`unit_costs`), ``process_overhead_s`` the per-process rest
    (:func:`process_overhead_s`, 0 to count timing only).
    """
    unit_s = _validate.positive("unit_s", unit_s)
    k = _validate.integer("k", k, 1)
    arms = _validate.integer("arms", arms, 1)
    process_overhead_s = _validate.finite("process_overhead_s", process_overhead_s)
    replications = _validate.integer("replications", replications, 1)
    comparison = k * (arms * unit_s + process_overhead_s)
    return ProtocolCost(k, arms, unit_s, process_overhead_s, comparison,
                        comparison * replications, replications)


# --------------------------------------------------------------------------- claims

@dataclasses.dataclass(frozen=True)
class Claim:
    """One audited claim: what was said, where, what we found, the verdict and evidence.

    ``verdict`` is one of :data:`CLAIM_VERDICTS`; ``evidence`` is a label of a section or
    figure of the book. Every field is a non-empty string (checked when built).
    """

    claim: str
    source: str
    measured: str
    verdict: str
    why: str
    evidence: str

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"`{f.name}` must be a non-empty string; got {value!r}.")
        if self.verdict not in CLAIM_VERDICTS:
            raise ValueError(f"`verdict` must be one of {CLAIM_VERDICTS}; "
                             f"got {self.verdict!r}.")


def claims_markdown(claims) -> str:
    """A MyST table of ``claims`` (:class:`Claim`), the evidence column as ``{ref}`` links."""
    claims = list(claims)
    if not claims or not all(isinstance(c, Claim) for c in claims):
        raise ValueError("`claims` must be a non-empty sequence of Claim.")

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")
    lines = ["| # | claim | source | what we measured or computed | verdict | evidence |",
             "| --- | --- | --- | --- | --- | --- |"]
    for i, c in enumerate(claims, 1):
        lines.append(f"| {i} | {cell(c.claim)} | {cell(c.source)} | {cell(c.measured)} | "
                     f"**{c.verdict}**: {cell(c.why)} | {{ref}}`{c.evidence}` |")
    return "\n".join(lines)


# ----------------------------------------------------------------------- the design, calibrated

# ``calibrate --json`` (a test pins it). /2: adds ``level``, ``interval``, per row
# ``size_margins`` (a control's true slowdown in margins) and the coverage rows.
CALIBRATE_SCHEMA = "attn_analysis.calibrate/2"
ROLES = {"aa": "A/A (false positive)", "positive": "positive control (power)",
         "coverage": "coverage (interval holds the truth)"}


def _truth(samples: pd.DataFrame, baseline: str, candidates, mode: str, config) -> dict:
    """Each candidate's true speedup for coverage: :func:`stats.ratio_t_ci`'s estimate
    over every process of every pooled run (the estimand the design's interval aims at)."""
    df, config, candidates = _select_iv(samples, baseline, candidates, mode, config)
    base = _by_process(df, baseline)
    out = {}
    for cand in candidates:
        arm = _by_process(df, cand)
        common = sorted(set(base) & set(arm))
        out[cand] = stats.ratio_t_ci([base[t] for t in common], [arm[t] for t in common]).ratio
    return out


def design_calibration(samples: pd.DataFrame, kernels: pd.DataFrame | None = None,
                       baseline: str = BASELINE, mode: str = "graph", k: int = 2,
                       margin: float = 0.02, n_comparisons: int = 1, alpha: float = 0.05,
                       n_resamples: int = 2000, seed: int = 42, confidence: float = 0.95,
                       config=None, method: str = stats.DEFAULT_INTERVAL) -> pd.DataFrame:
    """False-positive rate, power and coverage of the comparison design, from measured
    replications.

    Parameters
    ----------
    samples : DataFrame
        Tidy samples of one or more calibration runs (:func:`pool_runs`); for the kernel
        level, :func:`kernel_samples` of their placements. Must hold the baseline, the A/A
        control and at least one positive control (:func:`missing_controls`).
    kernels : DataFrame, optional
        The runs' profiler evidence, for each control's extra kernel time.
    baseline, mode, config
        As in :func:`protocol_b_decisions`.
    k : int
        Processes per replication (the design), at most :func:`max_processes`.
    margin, n_comparisons, n_resamples, seed, method
        As in :func:`protocol_b_decisions`.
    alpha : float
        Level of the reports' Mann-Whitney test.
    confidence : float
        Coverage of the Clopper-Pearson intervals of the rates, and the confidence at
        which coverage is checked (the design's interval at ``n_comparisons``).

    Returns
    -------
    DataFrame
        One row per (protocol, candidate, outcome): ``role`` (``ROLES``), the control's
        true call-level ``slowdown`` (every process pooled) and ``size_margins``
        (``(slowdown - 1) / margin``), the profiler's ``extra_share`` (with ``kernels``),
        ``events``, ``n`` (replications), ``rate``, ``ci_low``, ``ci_high``. For an A/A
        control the event is a claimed difference (:data:`DERIVED_OUTCOMES`); for a
        positive control the verdict "slower" (beyond the margin) and, beside it, any
        slowdown; for every control under our protocol, ``COVERAGE``: the replication's
        interval holds the control's true speedup (:func:`stats.ratio_t_ci` over every
        process). The reports' protocol (Mann-Whitney U at ``alpha`` on one process's
        samples) is replicated per process for comparison.

    Notes
    -----
    Power at several control sizes comes from several positive controls; a run with
    controls at about 0.5, 1 and 1.5 margins gives the power curve the methods chapter
    asks for. With no false positive in ``n`` replications the Clopper-Pearson upper
    bound is ``1 - 0.025**(1/n)``: 72 replications bound the rate below 5 %.
    """
    gaps = missing_controls(samples, baseline)
    if gaps:
        raise ValueError(f"`samples` must hold the calibration controls; missing "
                         f"{gaps} (present: {sorted(set(samples['candidate']))}).")
    if kernels is not None and (kernels.empty or baseline not in set(kernels["candidate"])):
        kernels = None  # no profiler evidence (profiling off): extra_share stays NaN
    confidence = _validate.number_in("confidence", confidence)
    b = protocol_b_decisions(samples, baseline, None, mode, k, margin, n_resamples, seed,
                             config, n_comparisons, method)
    a = protocol_a_decisions(samples, baseline, None, mode, alpha, config)
    effects = true_effects(samples, kernels, baseline, None, mode, confidence, n_resamples,
                           seed, config).set_index("candidate")
    truth = _truth(samples, baseline, None, mode, config)
    rows = []

    def add(protocol, cand, role, outcome, events, n, k_):
        eff = effects.loc[cand]
        rows.append({"protocol": protocol, "k": int(k_), "candidate": cand, "role": role,
                     "slowdown": float(eff["slowdown"]),
                     "size_margins": (float(eff["slowdown"]) - 1.0) / margin,
                     "extra_share": float(eff["extra_share"]), "outcome": outcome,
                     **_rate_row(events, n, confidence)})
    for protocol, frame in ((PROTOCOL_B, b), (PROTOCOL_A, a)):
        rates = outcome_rates(None, frame, confidence) if protocol == PROTOCOL_B else \
            outcome_rates(frame, None, confidence)
        for _, r in rates.iterrows():
            aa = r["candidate"] in AA_CONTROLS
            wanted = (("claimed difference",) if aa else ("slower", "any slowdown")) \
                if protocol == PROTOCOL_B else \
                (("significant",) if aa else ("significant, slower",))
            if r["outcome"] in wanted:
                add(protocol, r["candidate"], ROLES["aa" if aa else "positive"],
                    r["outcome"], r["events"], r["n"], r["k"])
    for cand, g in b.groupby("candidate", sort=True):
        held = ((g["ci_low"] <= truth[cand]) & (truth[cand] <= g["ci_high"])).sum()
        add(PROTOCOL_B, cand, ROLES["coverage"], COVERAGE, held, len(g), k)
    cols = ["protocol", "k", "candidate", "role", "slowdown", "size_margins", "extra_share",
            "outcome", "events", "n", "rate", "ci_low", "ci_high"]
    return pd.DataFrame(rows, columns=cols)


def calibration_json(table: pd.DataFrame, *, runs, device: str, mode: str, margin: float,
                     family: int, level: str = "call",
                     interval: str = stats.DEFAULT_INTERVAL) -> dict:
    """The ``calibrate --json`` document.

    Layout (``schema`` = ``CALIBRATE_SCHEMA``): ``runs`` (ids), ``device``, ``level``
    ("call" or "kernel"), ``interval`` (the design's interval), ``mode``, ``margin``,
    ``family`` (Bonferroni family size), ``processes_per_replication``, ``rows``:
    [{``protocol``, ``candidate``, ``role``, ``slowdown`` (true slowdown, all processes
    pooled), ``size_margins`` (its excess over 1 in margins), ``extra_share`` (the
    profiler's extra kernel time over the baseline's), ``outcome``, ``events``,
    ``replications``, ``rate``, ``ci_low``, ``ci_high``}] with Clopper-Pearson 95 %
    intervals.
    """
    def num(v):
        v = float(v)
        return None if math.isnan(v) else v
    k = table.loc[table["protocol"] == PROTOCOL_B, "k"]
    return {"schema": CALIBRATE_SCHEMA, "runs": list(runs), "device": device,
            "level": level, "interval": interval, "mode": mode, "margin": float(margin),
            "family": int(family),
            "processes_per_replication": int(k.iloc[0]) if len(k) else None,
            "rows": [{"protocol": r["protocol"], "candidate": r["candidate"], "role": r["role"],
                      "slowdown": num(r["slowdown"]), "size_margins": num(r["size_margins"]),
                      "extra_share": num(r["extra_share"]),
                      "outcome": r["outcome"], "events": int(r["events"]),
                      "replications": int(r["n"]), "rate": num(r["rate"]),
                      "ci_low": num(r["ci_low"]), "ci_high": num(r["ci_high"])}
                     for _, r in table.iterrows()]}


def format_calibration(doc: dict) -> str:
    """Plain-text view of :func:`calibration_json`'s document."""
    lines = [f"runs {', '.join(doc['runs'])} ({doc['device']}), {doc['level']} level, mode "
             f"{doc['mode']}, {doc['interval']} interval, margin +-{doc['margin']:g}, "
             f"{doc['processes_per_replication']} processes per replication, family "
             f"{doc['family']}"]
    for r in doc["rows"]:
        lines.append(f"{r['protocol'][:8]:8} {r['candidate']:14} {r['role'][:26]:26} "
                     f"slowdown {r['slowdown']:.4f} ({r['size_margins']:+.1f} margins)  "
                     f"{r['outcome'][:20]:20} "
                     f"{r['events']:3}/{r['replications']:<3} = {r['rate']:.2f} "
                     f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]")
    return "\n".join(lines)
