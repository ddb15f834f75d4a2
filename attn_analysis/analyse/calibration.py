"""The comparison design, calibrated: false-positive rate, power and coverage, with
Clopper-Pearson intervals. Pure, no I/O.

From the decisions of :mod:`attn_analysis.analyse.protocols` on the A/A and positive
controls: :func:`outcome_rates` and :func:`headline_rates` (false-positive rate and power
per protocol and ``k``); :func:`true_effects` (what each control really costs: pooled
median ratio over every process, and the profiler's extra kernel time);
:func:`within_process_coverage` (what one process's interval of the median is worth); and
:func:`design_calibration`, all of it for one design at the call level (timed samples) or
the kernel level (``protocols.kernel_samples``), with each control's size in margins and
the coverage of the design's interval, and its ``calibrate --json`` document.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import _validate
from ..configs import BASELINE
from . import bootstrap, stats
from .stats import DEFAULT_MARGIN
from .intervals import ConfidenceInterval, binomial_rate_ci, median_ci, ratio_t_ci
from .kernel_evidence import KERNEL_KEYS
from .protocols import (AA_CONTROLS, LEVELS, PROTOCOL_A, PROTOCOL_B, _by_process,
                        _select_iv, missing_controls, protocol_a_decisions,
                        protocol_b_decisions)

__all__ = ["COVERAGE", "DERIVED_OUTCOMES", "LEVELS", "CALIBRATE_SCHEMA", "ROLES",
           "outcome_rates", "headline_rates", "extra_kernel_ms", "true_effects",
           "within_process_coverage", "design_calibration", "calibration_json",
           "format_calibration"]

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


# --------------------------------------------------------------------------- rates

def _rate_row(events: int, n: int, confidence: float) -> dict:
    ci = binomial_rate_ci(int(events), int(n), confidence)
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
                 config=None, interval: bool = True) -> pd.DataFrame:
    """Each control's effect from every process pooled: the truth the protocols chase.

    ``slowdown = median(candidate) / median(baseline)`` over all trials (above 1: slower)
    with its hierarchical-bootstrap interval (:func:`bootstrap.ratio_ci`, inverted);
    ``slowdown_pct`` is ``slowdown - 1``. With ``kernels``: ``baseline_device_ms`` (sum
    of the baseline's kernels per call), ``extra_device_ms`` (:func:`extra_kernel_ms`)
    and ``extra_share`` (their ratio: the slowdown the profiler predicts if nothing
    overlaps). ``interval`` False leaves ``slowdown_low`` and ``slowdown_high`` NaN and
    resamples nothing (the same ``slowdown``: the bootstrap moves only the interval), for
    callers that read the point alone: most of a pooled calibration's cost was there.
    """
    df = _validate.samples(samples)
    confidence = _validate.number_in("confidence", confidence)
    n_resamples = _validate.integer("n_resamples", n_resamples, 1)
    seed = _validate.integer("seed", seed, 0)
    if not isinstance(interval, bool):
        raise ValueError(f"`interval` must be True or False; got {interval!r}.")
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
        if interval:
            r = bootstrap.ratio_ci(list(base.values()), list(arm.values()),
                                   confidence=confidence, n_resamples=n_resamples, seed=seed)
            ratio, low, high = r.ratio, r.low, r.high
        else:
            b_groups, a_groups, _, _ = _validate.ratio_arms(list(base.values()),
                                                            list(arm.values()), 1, seed)
            ratio = bootstrap.pooled_median_ratio(b_groups, a_groups)
            low = high = math.nan
        extra = (extra_kernel_ms(kernels, cand, baseline, config) if kernels is not None
                 else math.nan)
        rows.append({"config": config, "mode": mode, "candidate": cand,
                     "n_trials": len(arm), "slowdown": 1.0 / ratio,
                     "slowdown_low": 1.0 / high, "slowdown_high": 1.0 / low,
                     "slowdown_pct": 1.0 / ratio - 1.0, "baseline_device_ms": base_dev,
                     "extra_device_ms": extra,
                     "extra_share": extra / base_dev if base_dev > 0 else math.nan})
    cols = ["config", "mode", "candidate", "n_trials", "slowdown", "slowdown_low",
            "slowdown_high", "slowdown_pct", "baseline_device_ms", "extra_device_ms",
            "extra_share"]
    return pd.DataFrame(rows, columns=cols)


def within_process_coverage(trials, confidence: float = 0.95) -> ConfidenceInterval:
    """How often one process's CI of the median contains the median of all processes.

    ``trials`` is a sequence of 1-D samples, one per process (at least 2). Each process's
    distribution-free interval (:func:`intervals.median_ci`) is the interval a one-process
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
        lo, hi = median_ci(a, confidence)
        hits += lo <= target <= hi
    return binomial_rate_ci(hits, len(arrays), confidence)



# ----------------------------------------------------------------------- the design, calibrated

# ``calibrate --json`` (a test pins it). /2: adds ``level``, ``interval``, per row
# ``size_margins`` (a control's true slowdown in margins) and the coverage rows.
CALIBRATE_SCHEMA = "attn_analysis.calibrate/2"
ROLES = {"aa": "A/A (false positive)", "positive": "positive control (power)",
         "coverage": "coverage (interval holds the truth)"}


def _truth(samples: pd.DataFrame, baseline: str, candidates, mode: str, config) -> dict:
    """Each candidate's true speedup for coverage: :func:`intervals.ratio_t_ci`'s estimate
    over every process of every pooled run (the estimand the design's interval aims at)."""
    df, config, candidates = _select_iv(samples, baseline, candidates, mode, config)
    base = _by_process(df, baseline)
    out = {}
    for cand in candidates:
        arm = _by_process(df, cand)
        common = sorted(set(base) & set(arm))
        out[cand] = ratio_t_ci([base[t] for t in common], [arm[t] for t in common]).ratio
    return out


def design_calibration(samples: pd.DataFrame, kernels: pd.DataFrame | None = None,
                       baseline: str = BASELINE, mode: str = "graph", k: int = 2,
                       margin: float = DEFAULT_MARGIN, n_comparisons: int = 1, alpha: float = 0.05,
                       n_resamples: int = 2000, seed: int = 42, confidence: float = 0.95,
                       config=None, method: str = stats.DEFAULT_INTERVAL,
                       reports_protocol: bool = True) -> pd.DataFrame:
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
    k : int or sequence of int
        Processes per replication (the design), at most :func:`max_processes`; several
        give each one's rows, in the order given, from one computation of the controls'
        sizes, their truth and the reports' protocol (none of which depends on ``k``).
    margin, n_comparisons, n_resamples, seed, method
        As in :func:`protocol_b_decisions`.
    alpha : float
        Level of the reports' Mann-Whitney test.
    confidence : float
        Coverage of the Clopper-Pearson intervals of the rates, and the confidence at
        which coverage is checked (the design's interval at ``n_comparisons``).
    reports_protocol : bool
        Also replicate the reports' protocol (its rows, ``PROTOCOL_A``); False leaves them
        out for callers that read our protocol's rows alone (its Mann-Whitney tests, one
        per process and control, do not depend on ``k``).

    Returns
    -------
    DataFrame
        One row per (protocol, candidate, outcome): ``role`` (``ROLES``), the control's
        true call-level ``slowdown`` (every process pooled) and ``size_margins``
        (``(slowdown - 1) / margin``), the profiler's ``extra_share`` (with ``kernels``),
        ``events``, ``n`` (replications), ``rate``, ``ci_low``, ``ci_high``. For an A/A
        control the event is a claimed difference (:data:`DERIVED_OUTCOMES`: an interval
        that excludes no change, which the 95 % interval makes a 5 % event by design) and,
        beside it, a difference beyond the margin (the claim the paper's findings make); for a
        positive control the verdict "slower" (beyond the margin) and, beside it, any
        slowdown; for every control under our protocol, ``COVERAGE``: the replication's
        interval holds the control's true speedup (:func:`intervals.ratio_t_ci` over every
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
    if not isinstance(reports_protocol, bool):
        raise ValueError(f"`reports_protocol` must be True or False; got {reports_protocol!r}.")
    ks = [k] if isinstance(k, (int, np.integer)) else list(k)
    if not ks:
        raise ValueError("`k` must be a number of processes or a non-empty sequence of them; "
                         "got an empty sequence.")
    decisions = {kk: protocol_b_decisions(samples, baseline, None, mode, kk, margin,
                                          n_resamples, seed, config, n_comparisons, method)
                 for kk in ks}
    a = protocol_a_decisions(samples, baseline, None, mode, alpha, config) \
        if reports_protocol else None
    # the rows read each control's point slowdown alone: no interval, no resamples
    effects = true_effects(samples, kernels, baseline, None, mode, confidence, n_resamples,
                           seed, config, interval=False).set_index("candidate")
    truth = _truth(samples, baseline, None, mode, config)
    rows = []

    def add(protocol, cand, role, outcome, events, n, k_):
        eff = effects.loc[cand]
        rows.append({"protocol": protocol, "k": int(k_), "candidate": cand, "role": role,
                     "slowdown": float(eff["slowdown"]),
                     "size_margins": (float(eff["slowdown"]) - 1.0) / margin,
                     "extra_share": float(eff["extra_share"]), "outcome": outcome,
                     **_rate_row(events, n, confidence)})
    # per k: our protocol's outcome rows, the reports' (once, after the first k), coverage
    for i, (kk, b) in enumerate(decisions.items()):
        replicated = [(PROTOCOL_B, b)] + ([(PROTOCOL_A, a)] if reports_protocol and i == 0
                                          else [])
        for protocol, frame in replicated:
            rates = outcome_rates(None, frame, confidence) if protocol == PROTOCOL_B else \
                outcome_rates(frame, None, confidence)
            for _, r in rates.iterrows():
                aa = r["candidate"] in AA_CONTROLS
                wanted = (("claimed difference", "beyond margin") if aa
                          else ("slower", "any slowdown")) \
                    if protocol == PROTOCOL_B else \
                    (("significant",) if aa else ("significant, slower",))
                if r["outcome"] in wanted:
                    add(protocol, r["candidate"], ROLES["aa" if aa else "positive"],
                        r["outcome"], r["events"], r["n"], r["k"])
        for cand, g in b.groupby("candidate", sort=True):
            held = ((g["ci_low"] <= truth[cand]) & (truth[cand] <= g["ci_high"])).sum()
            add(PROTOCOL_B, cand, ROLES["coverage"], COVERAGE, held, len(g), kk)
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
