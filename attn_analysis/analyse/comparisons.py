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

from .. import _validate
from ..configs import BASELINE, MODES
from . import catalog, stats
from .stats import DEFAULT_MARGIN, margin_iv
from .kernel_evidence import kernel_split
from .sample_groups import paired_groups, process_groups, with_config_fields

__all__ = ["LEVELS", "COLUMNS", "JSON_SCHEMA", "FUSED_SHARE", "call_groups",
           "kernel_groups", "plan_comparisons", "speedup_table", "target_family", "as_json",
           "format_table", "verdict_counts", "kernel_vs_library", "call_anatomy"]

LEVELS = ("call", "kernel", "attention")
COLUMNS = ("config", "candidate", "level", "mode", "speedup", "ci_low", "ci_high",
           "verdict", "reason", "n_processes", "n_placements", "n_comparisons",
           "baseline_ms", "candidate_ms", "confidence", "margin", "method", "tost_low",
           "tost_high", "resolvable_margin")
# The documented JSON layout of ``python -m attn_analysis compare --json`` (a test pins it).
# /2: adds ``interval`` (the interval's method) and ``not_compared`` (levels left out, why).
JSON_SCHEMA = "attn_analysis.compare/2"
# The attention level needs a fused call: one kernel holding at least this share of the
# call's kernel time, the rest auxiliary (memsets, fills). An unfused call (eager, math:
# two products and a softmax) has no single attention kernel to compare.
FUSED_SHARE = 0.8


def _iv(run_samples, placements, baseline, modes, configs, margin, confidence, alpha,
        n_resamples, n_comparisons, method):
    """Check :func:`speedup_table`'s arguments; return its modes and configurations."""
    _validate.samples(run_samples)
    if placements is not None:
        _validate.frame("placements", placements, ("config", "candidate", "mode", "trial",
                                                   "placement", "kernel_ms"))
    recorded = sorted(set(run_samples["mode"].unique()))
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    bad = [m for m in modes if m not in recorded]
    if not modes or bad:
        raise ValueError(f"`mode` must be one of {recorded}; got {bad or list(modes)}.")
    present = sorted(set(run_samples.loc[run_samples["mode"] == modes[0], "candidate"].unique()))
    if not isinstance(baseline, str) or baseline not in present:
        raise ValueError(f"`baseline` must be one of {present}; got {baseline!r}.")
    configs = [configs] if isinstance(configs, str) else configs
    margin_iv(margin)
    _validate.number_in("confidence", confidence)
    _validate.number_in("alpha", alpha, 0.0, 0.5)
    _validate.integer("n_resamples", n_resamples, 100)
    _validate.integer("n_comparisons", n_comparisons, 1, allow_none=True)
    _validate.choice("method", method, stats.INTERVAL_METHODS)
    return modes, configs


def call_groups(samples: pd.DataFrame, config: str, candidate: str, mode: str,
                trials=None) -> list[list[np.ndarray]]:
    """Samples of one unit kind as processes -> placements -> 1-D arrays (ms), in trial
    order; only the ``trials`` given, if any."""
    sel = samples[(samples["config"] == config) & (samples["candidate"] == candidate)
                  & (samples["mode"] == mode)]
    return _call_arrays(sel, trials)


def kernel_groups(placements: pd.DataFrame, config: str, candidate: str, mode: str,
                  trials=None) -> list[list[np.ndarray]]:
    """The profiler's kernel ms per call as processes -> placements -> one value each, in
    trial order (only the ``trials`` given, if any); empty when the run recorded none
    (protocol 1, or kernel times off)."""
    sel = _with_kernel_times(placements)
    sel = sel[(sel["config"] == config) & (sel["candidate"] == candidate)
              & (sel["mode"] == mode)]
    return _kernel_arrays(sel, trials)


def _call_arrays(sel: pd.DataFrame, trials=None) -> list[list[np.ndarray]]:
    """:func:`call_groups` of one unit kind's rows ``sel``."""
    return process_groups(sel if trials is None else sel[sel["trial"].isin(trials)])


def _with_kernel_times(placements: pd.DataFrame) -> pd.DataFrame:
    """The placements that recorded a kernel time."""
    return placements[placements["kernel_ms"].notna() & (placements["kernel_ms"] > 0)]


def _kernel_arrays(sel: pd.DataFrame, trials=None) -> list[list[np.ndarray]]:
    """:func:`kernel_groups` of one unit kind's placements ``sel`` (with kernel times)."""
    if trials is not None:
        sel = sel[sel["trial"].isin(trials)]
    return [[np.array([v]) for v in g.sort_values("placement")["kernel_ms"].to_numpy(float)]
            for _, g in sel.groupby("trial", sort=True)]


_UNIT_KIND = ["config", "candidate", "mode"]


def _by_unit_kind(frame: pd.DataFrame) -> dict:
    """``frame``'s rows split once by (config, candidate, mode): what the comparisons
    select again and again (a selection each was most of a chapter's table time)."""
    return {key: g for key, g in frame.groupby(_UNIT_KIND, sort=False, observed=True)}


def _trials_of(groups: dict, key) -> set:
    """The trials of the rows of one (config, candidate, mode) of :func:`_by_unit_kind`."""
    g = groups.get(key)
    return set() if g is None else set(g["trial"])


def plan_comparisons(samples: pd.DataFrame, placements: pd.DataFrame | None,
                     baseline: str = BASELINE, modes=("graph",), configs=None, candidates=None,
                     kernels: pd.DataFrame | None = None) -> tuple[list, list[str]]:
    """What :func:`speedup_table` compares, and what it cannot.

    Returns ``(plan, not_compared)``: ``plan`` holds ``(config, candidate, level, mode,
    baseline groups, candidate groups)`` with both sides over the trials both were
    measured in; ``not_compared`` one sentence per (configuration, candidate, level)
    asked for but left out, saying why (no kernel times recorded; not a fused call; the
    other kernels take the whole kernel time). The kernel level is asked for only when
    ``placements`` is given, the attention level only when ``kernels`` is given too.
    Arguments as in :func:`speedup_table`.
    """
    timed = samples[samples["mode"].isin(modes)]
    all_configs = sorted(set(timed["config"].unique()))
    configs = (all_configs if configs is None
               else [configs] if isinstance(configs, str) else list(configs))
    bad = [c for c in configs if c not in all_configs]
    if bad:
        raise ValueError(f"`configs` must be drawn from {all_configs}; got {bad}.")
    split = (pd.DataFrame(columns=["config", "candidate", "other_ms", "main_share"])
             if kernels is None else kernel_split(kernels))
    fused = split[split["main_share"] >= FUSED_SHARE]
    other = dict(zip(zip(fused["config"], fused["candidate"]), fused["other_ms"]))
    k_mode = modes[0]  # the profiler's time of a placement does not depend on the mode
    calls = _by_unit_kind(timed)
    kernel_rows = {} if placements is None else _by_unit_kind(_with_kernel_times(placements))
    plan, missing = [], []
    for config in configs:
        present = sorted(set(timed.loc[timed["config"] == config, "candidate"].unique()))
        if baseline not in present:
            continue
        wanted = [c for c in present if c != baseline] if candidates is None else \
            [c for c in candidates if c in present and c != baseline]
        for cand in wanted:
            for mode in modes:
                b_key, c_key = (config, baseline, mode), (config, cand, mode)
                both = _trials_of(calls, b_key) & _trials_of(calls, c_key)
                if both:
                    plan.append((config, cand, "call", mode,
                                 _call_arrays(calls[b_key], both),
                                 _call_arrays(calls[c_key], both)))
            if placements is None:
                continue
            b_key, c_key = (config, baseline, k_mode), (config, cand, k_mode)
            both = _trials_of(kernel_rows, b_key) & _trials_of(kernel_rows, c_key)
            if not both:
                missing.append(f"{config} {cand}: kernel and attention levels: "
                               f"the run recorded no kernel times of {cand} and {baseline} "
                               f"in a common process (kernel times off, or protocol 1)")
                continue
            base_k = _kernel_arrays(kernel_rows[b_key], both)
            arm_k = _kernel_arrays(kernel_rows[c_key], both)
            plan.append((config, cand, "kernel", k_mode, base_k, arm_k))
            if kernels is None:
                continue
            why = [f"{side} is not a fused call (its longest kernel holds less than "
                   f"{FUSED_SHARE:.0%} of its kernel time, or it was not profiled)"
                   for side in (baseline, cand) if (config, side) not in other]
            base_att = _less_other(base_k, other.get((config, baseline)))
            arm_att = _less_other(arm_k, other.get((config, cand)))
            if not why and not (base_att and arm_att):
                why = ["a side's other kernels take as long as some placement's kernel time"]
            if why:
                missing.append(f"{config} {cand}: attention level: "
                               + "; ".join(why))
            else:
                plan.append((config, cand, "attention", k_mode, base_att, arm_att))
    return plan, missing


def speedup_table(samples: pd.DataFrame, placements: pd.DataFrame | None = None,
                  baseline: str = BASELINE, mode="graph", configs=None, candidates=None,
                  margin: float = DEFAULT_MARGIN, confidence: float = 0.95, alpha: float = 0.05,
                  n_resamples: int = 20_000, seed: int = 42,
                  kernels: pd.DataFrame | None = None, n_comparisons: int | None = None,
                  method: str = stats.DEFAULT_INTERVAL,
                  include_baseline: bool = False) -> pd.DataFrame:
    """Speedup of every candidate over ``baseline``, per call and per kernel: the one
    speedup table of the package.

    Parameters
    ----------
    samples : DataFrame
        A loaded run's ``samples`` (``record.Run``), or any tidy samples table
        (``config, candidate, mode, trial, ms``; ``placement`` where recorded).
    placements : DataFrame, optional
        The run's ``placements``. Given, a second level, "kernel", compares the profiler's
        kernel time per call at every placement; without it the table is call level only.
    baseline : str
        Reference candidate; default "sdpa" (the default dispatch).
    mode : str or sequence of str
        Timing mode(s) of the call level; default "graph". Given several, the call level
        is compared in each; the kernel level (the profiler's kernel times, recorded once
        per placement) uses the first.
    configs, candidates : str or sequence of str, optional
        Restrict the table; default every configuration and every other candidate.
    margin, confidence, alpha
        Equivalence margin, family-wise confidence of the interval behind each verdict and
        family-wise level of the two one-sided tests beside it (:func:`stats.compare`).
    n_resamples, seed
        Bootstrap resamples and seed (``method="bootstrap"`` only); row ``i`` draws from
        ``seed + i``, so no two comparisons share a random stream.
    kernels : DataFrame, optional
        The run's profiler evidence (``record.Run.kernels``). Given, a third level,
        "attention", compares the longest kernel of each side: each placement's kernel time
        less the side's other kernels (:func:`kernel_split`; for the default dispatch its
        memset), so a candidate is not credited with the baseline's auxiliary kernels. Only
        between fused calls (longest kernel at least ``FUSED_SHARE`` of the call's kernels).
    n_comparisons : int, optional
        The family size m; default the number of comparisons in the table (the table is
        the family). A chapter that reports these rows within a larger family passes its
        size.
    method : str
        :func:`stats.compare`'s interval; default its default ("process-t").
    include_baseline : bool
        Also compare the baseline with itself at the call level in each mode, its
        processes taken as two independent samples (unpaired): the resolution of the
        method on identical data. These rows come last and are not counted in m.

    Returns
    -------
    DataFrame
        One row per (configuration, candidate, level, mode) with columns ``COLUMNS``.
        Above 1 the candidate is faster. Both sides use only the processes (trials) both
        were measured in, paired. ``n_comparisons`` is the family size m; each interval is
        at ``1 - (1 - confidence) / m``. ``resolvable_margin`` is the smallest margin the
        interval could have shown equivalence within, ``max(1 - ci_low, ci_high - 1)``.
        :func:`plan_comparisons` says which levels were left out and why.
    """
    modes, configs = _iv(samples, placements, baseline, mode, configs, margin, confidence,
                         alpha, n_resamples, n_comparisons, method)
    plan, _ = plan_comparisons(samples, placements, baseline, modes, configs, candidates,
                               kernels)
    m = n_comparisons or max(len(plan), 1)
    work = [(*row, True) for row in plan]
    if include_baseline:
        work += [(config, baseline, "call", mode_, base, base, False)
                 for config, mode_, base in _self_groups(samples, baseline, modes, configs)]
    rows = []
    for i, (config, cand, level, lmode, base, arm, paired) in enumerate(work):
        flat = [np.concatenate([pl for proc in g for pl in proc]) for g in (base, arm)]
        cmp = stats.compare(base, arm, margin=margin, confidence=confidence, alpha=alpha,
                            n_resamples=n_resamples, seed=seed + i, n_comparisons=m,
                            method=method, paired=paired)
        r = cmp.ratio_ci
        rows.append({"config": config, "candidate": cand, "level": level, "mode": lmode,
                     "speedup": r.ratio, "ci_low": r.low, "ci_high": r.high,
                     "verdict": cmp.verdict.value, "reason": cmp.reason,
                     "n_processes": min(len(base), len(arm)),
                     "n_placements": int(min(sum(len(p) for p in g) for g in (base, arm))),
                     "n_comparisons": m, "baseline_ms": float(np.median(flat[0])),
                     "candidate_ms": float(np.median(flat[1])), "confidence": r.confidence,
                     "margin": margin, "method": r.method, "tost_low": cmp.tost.low,
                     "tost_high": cmp.tost.high,
                     "resolvable_margin": max(1.0 - r.low, r.high - 1.0)})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _self_groups(samples: pd.DataFrame, baseline: str, modes, configs) -> list:
    """(config, mode, groups) of the baseline at every configuration and mode it was timed
    in: the two arms of its comparison with itself."""
    timed = samples[samples["mode"].isin(modes) & (samples["candidate"] == baseline)]
    if configs is not None:
        timed = timed[timed["config"].isin(configs)]
    return [(config, mode_, process_groups(g))
            for config in sorted(set(timed["config"]))
            for mode_ in modes
            for g in [timed[(timed["config"] == config) & (timed["mode"] == mode_)]]
            if len(g)]


def target_family(run, config: str, baseline: str = BASELINE, margin: float = DEFAULT_MARGIN,
                  confidence: float = 0.95) -> pd.DataFrame:
    """The family of comparisons a chapter reports from one run at one configuration:
    every candidate against ``baseline`` at the call level in every recorded timing mode
    (graph first) and at the kernel level (:func:`speedup_table`, one family of all
    these rows). ``run`` is a :class:`records.Run`. Chapters that show these comparisons
    take their rows from here, so that one comparison has one interval in the book."""
    recorded = set(run.samples.loc[run.samples["config"] == config, "mode"].unique())
    modes = [m for m in ("graph", "per_call", "cold_l2") if m in recorded]
    modes += sorted(recorded - set(modes))
    return speedup_table(run.samples, run.placements, baseline=baseline, mode=modes,
                         configs=[config], margin=margin, confidence=confidence)


def as_json(table: pd.DataFrame, *, run_id: str, device: str, protocol: int, baseline: str,
            mode: str, margin: float, confidence: float, not_compared=()) -> dict:
    """The ``compare --json`` document: header fields, then one object per row.

    Layout (``schema`` = ``JSON_SCHEMA``): ``run``, ``device``, ``protocol``, ``baseline``,
    ``mode``, ``margin``, ``confidence`` (family-wise), ``correction`` ("bonferroni"),
    ``interval`` (the interval's method, e.g. "process-t"), ``n_comparisons``,
    ``not_compared`` (one sentence per level asked for but left out, saying why),
    ``rows``: [{``config``, ``candidate``, ``level`` ("call", "kernel", or with
    ``--attention`` "attention"), ``speedup``, ``ci_low``, ``ci_high``, ``verdict``,
    ``n_processes``, ``n_placements``, ``baseline_ms``, ``candidate_ms``}]. Speedups
    above 1: faster.
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
            "interval": str(table["method"].iloc[0]) if len(table) else stats.DEFAULT_INTERVAL,
            "n_comparisons": int(table["n_comparisons"].iloc[0]) if len(table) else 0,
            "not_compared": list(not_compared),
            "rows": [{k: plain(r[k]) for k in keys} for _, r in table.iterrows()]}


def format_table(table: pd.DataFrame, not_compared=()) -> str:
    """A plain-text table for the terminal: one line per candidate and level, then a line
    per level left out (``not_compared``, from :func:`plan_comparisons`)."""
    if table.empty:
        return "no comparison: the baseline or the candidates are missing"
    lines = [f"{'config':24} {'candidate':16} {'level':6} {'speedup':>8} "
             f"{'interval':>19}  verdict"]
    for _, r in table.iterrows():
        lines.append(f"{r['config']:24} {r['candidate']:16} {r['level']:6} "
                     f"{r['speedup']:8.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}]  {r['verdict']}")
    m = int(table["n_comparisons"].iloc[0])
    lines.append(f"{m} comparisons; Bonferroni-adjusted {table['method'].iloc[0]} intervals "
                 f"(family-wise {1 - (1 - table['confidence'].iloc[0]) * m:.0%}); speedup > 1: "
                 f"faster than the baseline")
    lines += [f"not compared: {n}" for n in not_compared]
    return "\n".join(lines)


def _less_other(groups: list, other_ms: float | None) -> list:
    """Kernel-time groups (processes -> placements -> values) less a call's other kernels
    (the attention kernel alone); empty when the call is not fused (``other_ms`` None) or a
    value would not stay positive."""
    if other_ms is None or not groups or min(pl.min() for g in groups for pl in g) <= other_ms:
        return []
    return [[pl - other_ms for pl in g] for g in groups]


# ------------------------------------------------------------ counts, library race

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


def kernel_vs_library(samples: pd.DataFrame, kernel: str = "triton",
                      libraries=catalog.SDPA_BACKENDS, mode: str = "graph",
                      margin: float = DEFAULT_MARGIN,
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
    return with_config_fields(pd.DataFrame(rows, columns=cols))


def call_anatomy(table: pd.DataFrame, config: str, candidate: str) -> dict:
    """Where one call's time goes, in microseconds, for SDPA's default dispatch and for
    ``candidate`` at ``config`` (the baseline and candidate medians of the call, kernel and
    attention-kernel rows of a :func:`comparison_table`): ``*_call_us``, ``*_kernels_us``
    (every kernel's time), ``*_attention_us`` (the longest kernel), with ``base_other_us``
    (SDPA's kernels besides its attention kernel) and ``base_gaps_us`` (the call's time
    outside any kernel)."""
    df = _validate.frame("table", table, ("config", "candidate", "level", "baseline_ms",
                                          "candidate_ms"))
    d = df[(df["config"] == config) & (df["candidate"] == candidate)].set_index("level")
    missing = [lv for lv in LEVELS if lv not in d.index]
    if missing:
        raise ValueError(f"`table` has no {missing} row(s) for {candidate!r} at {config!r}.")
    us = {f"{side}_{name}_us": float(d.at[level, f"{col}_ms"]) * 1000
          for side, col in (("base", "baseline"), ("cand", "candidate"))
          for name, level in (("call", "call"), ("kernels", "kernel"),
                              ("attention", "attention"))}
    us["base_other_us"] = us["base_kernels_us"] - us["base_attention_us"]
    us["base_gaps_us"] = us["base_call_us"] - us["base_kernels_us"]
    return us
