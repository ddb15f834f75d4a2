"""How much the headline verdicts depend on choices of analysis and on the GPU's SM clock.
Pure, no I/O.

Two questions of issue 45 (item 4):

* **Alternative analyses.** :func:`alternative_verdicts` judges every comparison of a
  family (the entries :func:`.comparisons.plan_comparisons` builds) under each analysis
  of :data:`ANALYSES`, all already implemented in this package: the book's process-t
  interval at Bonferroni over the run's family; the same with each level its own family;
  one median per process (a process's samples pooled, placements ignored); Welch's
  unpaired t, the hybrid interval and the cluster bootstrap of :mod:`.simulation`; and
  the hierarchical bootstrap of :func:`.stats.compare`. Every interval is judged by
  :func:`.stats.decide`, so only the interval changes. :func:`verdict_counts` counts the
  outcomes per analysis in :data:`CATEGORIES`; :func:`count_ranges` gives each count's
  range over the analyses.
* **The SM clock.** Each placement records the SM clock at its start and end
  (``sm_clock_start_mhz``, ``sm_clock_end_mhz``). :func:`clock_pairs` pairs each
  candidate's placement with the baseline's placement of the same process and round, and
  :func:`clock_slope` regresses the log speedup on the pair's clock within each
  comparison, with a t interval clustered by process. :func:`drop_low_clock` removes the
  placements below a run's median clock, so a caller can ask whether a verdict changes;
  :func:`verdict_changes` lists those that do.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from .. import _validate
from ..configs import BASELINE
from . import comparisons, simulation, stats
from .intervals import RatioCI
from .margin import DEFAULT_MARGIN, margin_iv

__all__ = ["ANALYSES", "BOOK", "CATEGORIES", "category", "alternative_verdicts",
           "verdict_counts", "count_ranges", "CLOCK_COLUMNS", "clock_pairs", "ClockSlope",
           "clock_slope", "clock_profile", "drop_low_clock", "drop_random", "verdict_changes",
           "ClockSensitivity", "clock_sensitivity"]

BOOK = "process-t, Bonferroni over the run"
ANALYSES = (BOOK, "each level its own family", "one median per process", "Welch (unpaired)",
            "hybrid", "cluster bootstrap", "hierarchical bootstrap")
CATEGORIES = ("equivalent", "faster", "slower", "inconclusive")
_V = stats.Verdict
_CATEGORY = {_V.EQUIVALENT.value: "equivalent", _V.FASTER_WITHIN_MARGIN.value: "equivalent",
             _V.SLOWER_WITHIN_MARGIN.value: "equivalent", _V.FASTER.value: "faster",
             _V.SLOWER.value: "slower", _V.INCONCLUSIVE.value: "inconclusive",
             _V.UNDECIDED.value: "inconclusive"}
_TAIL_RESAMPLES = 25  # cluster bootstrap: resamples expected beyond each family-wise tail


def category(verdict: str) -> str:
    """The headline category of a :class:`.stats.Verdict` value: within the margin either
    way counts as "equivalent" (the claim of no difference beyond it), "undecided at this
    precision" as "inconclusive"."""
    if verdict not in _CATEGORY:
        raise ValueError(f"`verdict` must be one of {list(_CATEGORY)}; got {verdict!r}.")
    return _CATEGORY[verdict]


def _pooled(groups) -> list:
    """One placement per process: each process's samples pooled (its median is the one
    number the process gives)."""
    return [[np.concatenate([np.asarray(p, dtype=float) for p in proc])] for proc in groups]


def _decide(lo: float, hi: float, confidence: float, n: int, margin: float) -> str:
    ci = RatioCI(math.sqrt(lo * hi), lo, hi, confidence, n, n, True, method="process-t")
    return stats.decide(ci, margin).verdict.value


def _one(analysis, base, arm, m, m_level, margin, n_resamples, seed):
    conf = 1.0 - 0.05 / m
    if analysis == BOOK:
        return stats.compare(base, arm, margin, n_comparisons=m).verdict.value
    if analysis == "each level its own family":
        return stats.compare(base, arm, margin, n_comparisons=m_level).verdict.value
    if analysis == "one median per process":
        return stats.compare(_pooled(base), _pooled(arm), margin, n_comparisons=m).verdict.value
    if analysis == "hierarchical bootstrap":
        return stats.compare(base, arm, margin, n_comparisons=m, method="bootstrap",
                             n_resamples=n_resamples, seed=seed).verdict.value
    method = {"Welch (unpaired)": "welch", "hybrid": "hybrid",
              "cluster bootstrap": "cluster-bootstrap"}[analysis]
    reps = max(n_resamples, int(math.ceil(_TAIL_RESAMPLES * 2 * m / 0.05)))
    lo, hi = simulation.interval(method, base, arm, conf, reps, seed)
    return _decide(lo, hi, conf, min(len(base), len(arm)), margin)


def alternative_verdicts(plan, family: int | None = None, margin: float = DEFAULT_MARGIN,
                         analyses=ANALYSES, keep=None, n_resamples: int = 2000,
                         seed: int = 42) -> pd.DataFrame:
    """Every entry of ``plan`` judged under each analysis of ``analyses``.

    Parameters
    ----------
    plan : list
        Entries ``(config, candidate, level, mode, baseline groups, candidate groups)``
        (:func:`.comparisons.plan_comparisons`): the run's whole family.
    family : int, optional
        The family m the book judges the run in; default ``len(plan)``.
    keep : callable, optional
        ``keep(config, candidate, level, mode)`` True for the entries to judge (the
        headline's rows); default all. The family stays ``family`` whatever is kept.
    n_resamples, seed
        Of the hierarchical bootstrap (the cluster bootstrap takes at least enough
        resamples to put :data:`_TAIL_RESAMPLES` beyond each family-wise tail).

    Returns
    -------
    DataFrame
        ``analysis``, ``config``, ``candidate``, ``level``, ``mode``, ``verdict``,
        ``category`` (:func:`category`).
    """
    plan = list(plan)
    if not plan:
        raise ValueError("`plan` must hold at least one comparison; got none.")
    m = len(plan) if family is None else _validate.integer("family", family, 1)
    margin = margin_iv(margin)
    bad = [a for a in analyses if a not in ANALYSES]
    if bad or not analyses:
        raise ValueError(f"`analyses` must be drawn from {ANALYSES}; got {list(analyses)}.")
    per_level = pd.Series([e[2] for e in plan]).value_counts().to_dict()
    rows = []
    for i, (config, cand, level, mode, base, arm) in enumerate(plan):
        if keep is not None and not keep(config, cand, level, mode):
            continue
        for analysis in analyses:
            v = _one(analysis, base, arm, m, per_level[level], margin, n_resamples, seed + i)
            rows.append({"analysis": analysis, "config": config, "candidate": cand,
                         "level": level, "mode": mode, "verdict": v, "category": category(v)})
    return pd.DataFrame(rows, columns=["analysis", "config", "candidate", "level", "mode",
                                       "verdict", "category"])


def verdict_counts(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Comparisons per :data:`CATEGORIES` for each analysis (rows in the order of
    :data:`ANALYSES`), with ``total``."""
    df = _validate.frame("verdicts", verdicts, ("analysis", "category"))
    counts = (df.groupby(["analysis", "category"]).size().unstack(fill_value=0)
              .reindex(columns=list(CATEGORIES), fill_value=0))
    counts = counts.reindex([a for a in ANALYSES if a in counts.index])
    counts["total"] = counts.sum(axis=1)
    return counts.astype(int)


def count_ranges(counts: pd.DataFrame) -> dict:
    """``{category: (fewest, most)}`` over the analyses of :func:`verdict_counts`."""
    _validate.frame("counts", counts, CATEGORIES)
    return {c: (int(counts[c].min()), int(counts[c].max())) for c in CATEGORIES}


# ------------------------------------------------------------------ the SM clock

CLOCK_COLUMNS = ("config", "candidate", "trial", "placement", "log_speedup", "clock_mhz")


def clock_pairs(placements: pd.DataFrame, baseline: str = BASELINE, level: str = "call",
                mode: str = "graph") -> pd.DataFrame:
    """One row per candidate placement paired with the baseline's placement of the same
    process and index (the same round): ``log_speedup`` (log baseline minus log
    candidate: the call's median in ``mode``, or the profiler's kernel time) and
    ``clock_mhz``, the mean of both placements' SM clocks at start and end. Pairs with a
    clock or time missing are left out."""
    col = {"call": "median_ms", "kernel": "kernel_ms"}[_validate.choice(
        "level", level, ("call", "kernel"))]
    need = ("config", "candidate", "mode", "trial", "placement", col,
            "sm_clock_start_mhz", "sm_clock_end_mhz")
    df = _validate.frame("placements", placements, need)
    df = df[df["mode"] == mode] if level == "call" else \
        df.drop_duplicates(["config", "candidate", "trial", "placement"])
    df = df.assign(clock=(df["sm_clock_start_mhz"] + df["sm_clock_end_mhz"]) / 2)
    df = df[(df[col] > 0) & df["clock"].notna()]
    df = df.assign(y=np.log(df[col].astype(float)))
    key = ["config", "trial", "placement"]
    base = df[df["candidate"] == baseline][key + ["y", "clock"]]
    arms = df[df["candidate"] != baseline][key + ["candidate", "y", "clock"]]
    both = arms.merge(base, on=key, suffixes=("", "_base"))
    out = pd.DataFrame({"config": both["config"], "candidate": both["candidate"],
                        "trial": both["trial"], "placement": both["placement"],
                        "log_speedup": both["y_base"] - both["y"],
                        "clock_mhz": (both["clock"] + both["clock_base"]) / 2})
    return out.reset_index(drop=True)[list(CLOCK_COLUMNS)]


@dataclasses.dataclass(frozen=True)
class ClockSlope:
    """Change of the speedup per 100 MHz of SM clock, in percent, with its interval;
    ``pairs``, ``processes`` (the clusters) and the clocks' range (MHz)."""

    pct_per_100mhz: float
    low: float
    high: float
    pairs: int
    processes: int
    clock_min: float
    clock_max: float


def clock_slope(pairs: pd.DataFrame, confidence: float = 0.95) -> ClockSlope | None:
    """The within-comparison slope of the log speedup on the SM clock.

    ``pairs`` (:func:`clock_pairs`, rows of several runs allowed when a ``run`` column
    tells them apart) is centred within each comparison (run, configuration, candidate),
    so the slope compares placements of one comparison at different clocks, never
    candidates. Least squares; the standard error is clustered by process (run, trial),
    with a t quantile on ``processes - 1`` degrees of freedom. None when the clock never
    moves within a comparison or fewer than 3 processes hold pairs.
    """
    df = _validate.frame("pairs", pairs, ("config", "candidate", "trial", "log_speedup",
                                          "clock_mhz"))
    confidence = _validate.number_in("confidence", confidence)
    x, y, run = _centred(df)
    sxx = float((x ** 2).sum())
    clusters = pd.Series(list(zip(run, df["trial"])), index=df.index)
    g = clusters.nunique()
    if sxx <= 0 or g < 3:
        return None
    b = float((x * y).sum()) / sxx
    score = (x * (y - b * x)).groupby(clusters).sum()
    se = math.sqrt(float((score ** 2).sum()) * g / (g - 1)) / sxx
    from scipy import stats as st
    q = float(st.t.ppf(0.5 + confidence / 2, g - 1))

    def pct(v):
        return 100.0 * math.expm1(100.0 * v)
    return ClockSlope(pct(b), pct(b - q * se), pct(b + q * se), int(len(df)), int(g),
                      float(df["clock_mhz"].min()), float(df["clock_mhz"].max()))


def _centred(df: pd.DataFrame):
    run = df["run"] if "run" in df.columns else pd.Series("", index=df.index)
    grp = [run, df["config"], df["candidate"]]
    return (df["clock_mhz"] - df.groupby(grp)["clock_mhz"].transform("mean"),
            df["log_speedup"] - df.groupby(grp)["log_speedup"].transform("mean"), run)


def clock_profile(pairs: pd.DataFrame, bin_mhz: float = 30.0) -> pd.DataFrame:
    """What :func:`clock_slope` fits, to draw: the pairs' log speedups centred within
    each comparison, averaged in bins of ``bin_mhz`` of the clock (lower edge
    ``clock_mhz``), in percent (``speedup_pct``), with the ``pairs`` in each bin."""
    df = _validate.frame("pairs", pairs, ("config", "candidate", "log_speedup", "clock_mhz"))
    width = _validate.finite("bin_mhz", bin_mhz, strict=True)
    _, y, _ = _centred(df)
    edge = np.floor(df["clock_mhz"] / width) * width
    g = (100 * np.expm1(y)).groupby(edge)
    return pd.DataFrame({"clock_mhz": g.mean().index.astype(float),
                         "speedup_pct": g.mean().to_numpy(),
                         "pairs": g.size().to_numpy()})


def drop_low_clock(samples: pd.DataFrame, placements: pd.DataFrame,
                   threshold: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's samples and placements without the placements whose mean SM clock (start
    and end) is below ``threshold`` (default: the run's median placement clock).
    Placements with no clock recorded are kept."""
    p = _validate.frame("placements", placements, ("config", "candidate", "mode", "trial",
                                                   "placement", "sm_clock_start_mhz",
                                                   "sm_clock_end_mhz"))
    s = _validate.frame("samples", samples, ("config", "candidate", "mode", "trial",
                                             "placement"))
    clock = (p["sm_clock_start_mhz"] + p["sm_clock_end_mhz"]) / 2
    cut = float(clock.median()) if threshold is None else _validate.finite("threshold",
                                                                           threshold)
    low = p[clock < cut]
    key = ["config", "candidate", "mode", "trial", "placement"]
    gone = s.set_index(key).index.isin(low.set_index(key).index)
    return s[~gone], p[~(clock < cut)]


def drop_random(samples: pd.DataFrame, placements: pd.DataFrame, n_drop: int,
                seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's samples and placements without ``n_drop`` placements drawn at random (the
    control of :func:`drop_low_clock`: as much data lost, the clock ignored)."""
    p = _validate.frame("placements", placements, ("config", "candidate", "mode", "trial",
                                                   "placement"))
    s = _validate.frame("samples", samples, ("config", "candidate", "mode", "trial",
                                             "placement"))
    n = _validate.integer("n_drop", n_drop, 0)
    if n > len(p):
        raise ValueError(f"`n_drop` must be at most the {len(p)} placements; got {n}.")
    rng = np.random.default_rng(_validate.integer("seed", seed, 0))
    gone_p = np.zeros(len(p), dtype=bool)
    gone_p[rng.choice(len(p), size=n, replace=False)] = True
    key = ["config", "candidate", "mode", "trial", "placement"]
    gone = s.set_index(key).index.isin(p[gone_p].set_index(key).index)
    return s[~gone], p[~gone_p]


def verdict_changes(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """The comparisons (config, candidate, level, mode) of ``before`` whose headline
    :func:`category` differs in ``after``, with both verdicts; a comparison ``after``
    cannot judge any more (missing: every placement of a side dropped) is listed with
    ``verdict_after`` None."""
    key = ["config", "candidate", "level", "mode"]
    for name, t in (("before", before), ("after", after)):
        _validate.frame(name, t, (*key, "verdict"))
    both = before[key + ["verdict"]].merge(after[key + ["verdict"]], on=key, how="left",
                                           suffixes=("_before", "_after"))
    both["verdict_after"] = both["verdict_after"].astype(object).where(
        both["verdict_after"].notna(), None)
    cat = both["verdict_after"].map(lambda v: category(v) if isinstance(v, str) else None)
    changed = both["verdict_before"].map(category) != cat
    return both[changed].reset_index(drop=True)


@dataclasses.dataclass(frozen=True)
class ClockSensitivity:
    """How the verdicts of some runs depend on the SM clock of their placements.

    ``pairs``: :func:`clock_pairs` of every run at the call and kernel level (with run,
    level and model); ``judged``: call- and kernel-level verdicts of the runs as recorded;
    ``changed``: those whose category differs once each run's placements below its median
    clock are dropped, ``to_inconclusive`` of them now inconclusive and ``lost`` no longer
    judgeable; ``random``: verdicts changed (or lost) when as many placements are dropped at
    random instead, the control that says what dropping alone does."""

    pairs: pd.DataFrame
    judged: int
    changed: int
    to_inconclusive: int
    lost: int
    random: int


def clock_sensitivity(runs, margin: float = DEFAULT_MARGIN, seed: int = 0) -> ClockSensitivity:
    """:class:`ClockSensitivity` of ``runs``: an iterable of ``(run_id, model, run, modes,
    configs, kernels)``, where ``run`` has ``samples`` and ``placements``, ``modes`` the
    modes judged, ``configs`` the configurations (None: all) and ``kernels`` the kernel
    table for the kernel level (None: call level only). Each run keeps its own family size
    when placements are dropped, so only the data change, not the correction."""
    pairs, judged, changed, to_inc, lost, rnd = [], 0, 0, 0, 0, 0
    for rid, model, r, modes, configs, kernels in runs:
        for lv in ("call", "kernel"):
            pairs.append(clock_pairs(r.placements, level=lv).assign(run=rid, level=lv,
                                                                      model=model))
        kw = {} if kernels is None else {"kernels": kernels}

        def table(s, p, m=None):
            return comparisons.speedup_table(s, p, mode=tuple(modes), configs=configs,
                                             margin=margin, n_comparisons=m, **kw)
        full = table(r.samples, r.placements)
        m = int(full["n_comparisons"].iloc[0])
        full = full[full["level"].isin(["call", "kernel"])]
        s2, p2 = drop_low_clock(r.samples, r.placements)
        ch = verdict_changes(full, table(s2, p2, m))
        s3, p3 = drop_random(r.samples, r.placements, len(r.placements) - len(p2), seed=seed)
        rnd += len(verdict_changes(full, table(s3, p3, m)))
        judged += len(full)
        changed += int(ch["verdict_after"].notna().sum())
        to_inc += int(ch["verdict_after"].map(
            lambda v: isinstance(v, str) and category(v) == "inconclusive").sum())
        lost += int(ch["verdict_after"].isna().sum())
    return ClockSensitivity(pd.concat(pairs, ignore_index=True), judged, changed, to_inc,
                            lost, rnd)
