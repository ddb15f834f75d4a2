"""The comparison design calibrated over its number of processes: false positives, power
and coverage at k = 2, 3, 4, ... processes per replication, at the call and the kernel
level, from calibration runs of many processes; and the number of processes the paper
uses, chosen from them. Pure, no I/O.

One run of N processes holds N // k disjoint replications of a k-process design
(:func:`protocols.replication_groups`), so one run answers every k at once, with fewer
replications as k grows. :func:`rates_by_processes` stacks
:func:`calibration.design_calibration` over k and levels; :func:`choose_processes` applies
the rule stated in the calibration chapter: the fewest processes whose power to call
"slower" a positive control of at least ``min_size`` margins reaches ``power_goal`` on
every device measured.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import _validate
from ..configs import BASELINE
from . import power as _power
from .calibration import DERIVED_OUTCOMES, LEVELS, ROLES, design_calibration, true_effects
from .intervals import binomial_rate_ci
from .protocols import (AA_CONTROLS, POSITIVE_PREFIX, PROTOCOL_B, level_samples,
                        max_processes, pool_runs, protocol_b_decisions)
from .stats import DEFAULT_MARGIN

__all__ = ["POWER_GOAL", "MIN_CONTROL_MARGINS", "RATE_COLUMNS", "SPREAD_COLUMNS",
           "runs_by_model", "pooled_levels", "rates_by_processes", "choose_processes",
           "choose_design", "design_table", "process_spread", "repeated_draws",
           "FAMILY_MEASURES", "FAMILY_COLUMNS", "family_rates", "needed_processes"]

POWER_GOAL = 0.8          # the power the issue asks of the design at 1.5 margins
MIN_CONTROL_MARGINS = 1.5  # the smallest control size (in margins) the power goal is held to
RATE_COLUMNS = ("device", "level", "k", "candidate", "role", "slowdown", "size_margins",
                "outcome", "events", "n", "rate", "ci_low", "ci_high")


SPREAD_COLUMNS = ("run", "device", "start_method", "processes", "baseline_ms",
                  "sd_process_pct", "sd_twin_ratio_pct", "twin_ratio_pct")


def runs_by_model(runs) -> dict[str, list]:
    """Loaded runs (``record.load``) grouped by GPU model (``run.device``), in the order
    the models first appear: a calibration pools the runs of one model and never two models
    (:func:`protocols.pool_runs` refuses)."""
    groups: dict[str, list] = {}
    for run in runs:
        groups.setdefault(str(run.device), []).append(run)
    if not groups:
        raise ValueError("`runs` must hold at least one loaded run; got none.")
    return groups


def repeated_draws(runs) -> dict[str, tuple[int, int]]:
    """For each GPU model (as :func:`runs_by_model`), ``(repeated, processes)``: how many
    processes of its runs share their plan seed and trial number with a process of another
    of its runs, and how many processes there are. A trial's random draws (the lock's
    seed, its input values, pads and the order of candidates in each round) all derive from
    the pair, so such processes repeat each other's draws, on another GPU or in another
    session; a run given a seed past the others' trials repeats none."""
    out = {}
    for model, group in runs_by_model(runs).items():
        keys = pd.Series([(int((r.info.get("plan") or {}).get("seed", 0)), int(t))
                          for r in group for t in r.samples["trial"].unique()], dtype=object)
        out[model] = (int(keys.duplicated(keep=False).sum()), int(len(keys)))
    return out


def pooled_levels(runs) -> dict:
    """For runs of one GPU model, each level of :data:`calibration.LEVELS` mapped to the
    runs pooled at that level (:func:`protocols.pool_runs` of
    :func:`protocols.level_samples`): the ``frames`` :func:`rates_by_processes` takes.
    Replications never span runs; runs of two models raise ValueError."""
    runs = list(runs)
    devices = {r.run_id: r.device for r in runs}
    return {level: pool_runs({r.run_id: (level_samples(r, level), r.kernels) for r in runs},
                             devices=devices) for level in LEVELS}


def process_spread(run, twin: str = "sdpa_twin", baseline: str = BASELINE) -> dict:
    """How much the processes of one calibration run differ, at the call level: the SD
    over processes of the baseline's per-process mean log time (``sd_process_pct``) and of
    the per-process log ratio twin/baseline (``sd_twin_ratio_pct``, what the process-t
    interval is built from), in percent, with the mean ratio, the processes, the
    baseline's geometric mean (ms) and how the run's trials started
    (``run.start_method``). Keys: :data:`SPREAD_COLUMNS`. A fork server that made trials
    less independent than spawned ones would show here as a smaller spread."""
    samples = run.samples
    have = set(samples["candidate"].unique())
    if not {twin, baseline} <= have:
        raise ValueError(f"`run` {run.run_id!r} must hold {baseline!r} and {twin!r}; it holds "
                         f"{sorted(have)}.")
    logs = {c: np.log(samples[samples["candidate"] == c].set_index("trial")["ms"])
            .groupby(level=0).mean() for c in (baseline, twin)}
    base, ratio = logs[baseline], (logs[twin] - logs[baseline]).dropna()
    return {"run": run.run_id, "device": str(run.device), "start_method": run.start_method,
            "processes": int(len(ratio)), "baseline_ms": float(np.exp(base.mean())),
            "sd_process_pct": 100 * float(base.std(ddof=1)),
            "sd_twin_ratio_pct": 100 * float(ratio.std(ddof=1)),
            "twin_ratio_pct": 100 * float(np.expm1(ratio.mean()))}


def rates_by_processes(frames: dict, device: str, ks=(2, 3, 4, 6),
                       margin: float = DEFAULT_MARGIN, n_resamples: int = 300,
                       seed: int = 42) -> pd.DataFrame:
    """Our protocol's calibration rows (:func:`calibration.design_calibration`, protocol
    (b) only) for each ``k`` in ``ks`` and each level of ``frames``.

    ``frames`` maps a level (:data:`calibration.LEVELS`) to ``(samples, kernels)`` pooled by
    :func:`protocols.pool_runs` (for the kernel level, :func:`protocols.kernel_samples` of
    the placements). ``device`` labels every row (runs of one GPU model). A ``k`` larger
    than the processes of the runs raises ValueError. ``n_resamples`` only sets the
    bootstrap of the controls' pooled sizes; the verdicts use the analytic process-t
    interval. Returns the rows with ``device``, ``level`` and ``k`` (:data:`RATE_COLUMNS`).
    """
    if not isinstance(frames, dict) or not frames or not set(frames) <= set(LEVELS):
        raise ValueError(f"`frames` must map levels from {LEVELS} to (samples, kernels); "
                         f"got {type(frames).__name__} with keys "
                         f"{sorted(frames) if isinstance(frames, dict) else None}.")
    ks = sorted({_validate.integer("ks", k, 1) for k in ks})
    if not ks:
        raise ValueError("`ks` must hold at least one number of processes; got none.")
    out = []
    for level, (samples, kernels) in frames.items():
        # every k from one call: the controls' sizes and truth are computed once per level
        rows = design_calibration(samples, kernels, k=ks, margin=margin,
                                  n_resamples=n_resamples, seed=seed, reports_protocol=False)
        rows = rows[rows["protocol"] == PROTOCOL_B]
        for k in ks:
            out.append(rows[rows["k"] == k].assign(device=device, level=level))
    return pd.concat(out, ignore_index=True)[list(RATE_COLUMNS)]


def choose_processes(rates: pd.DataFrame, level: str = "call",
                     min_size: float = MIN_CONTROL_MARGINS,
                     power_goal: float = POWER_GOAL) -> int | None:
    """The fewest processes k whose power (verdict "slower", beyond the margin) reaches
    ``power_goal`` for every positive control of at least ``min_size`` margins at
    ``level``, on every device of ``rates`` (:func:`rates_by_processes`); None when a
    device has no such control or no k reaches the goal (the rule cannot choose)."""
    df = _validate.frame("rates", rates, RATE_COLUMNS)
    level = _validate.choice("level", level, LEVELS)
    power_goal = _validate.number_in("power_goal", power_goal)
    df = df[(df["level"] == level) & (df["role"] == ROLES["positive"])
            & (df["outcome"] == "slower")]
    if df.empty:
        return None
    passing = None
    for device, d in df.groupby("device"):
        big = d[d["size_margins"] >= min_size]
        if big.empty:
            return None
        ok = big.groupby("k")["rate"].min() >= power_goal
        ks = set(ok[ok].index)
        passing = ks if passing is None else passing & ks
    return int(min(passing)) if passing else None


def choose_design(rates: pd.DataFrame, min_size: float = MIN_CONTROL_MARGINS,
                  power_goal: float = POWER_GOAL) -> tuple[int | None, dict]:
    """The processes of the design over both levels: :func:`choose_processes` at each level
    of ``rates`` that holds a positive control of at least ``min_size`` margins on every
    device, and the largest of those choices (the paper gives verdicts at both levels, so
    the design must meet the goal at each level it can be held to). Returns ``(k, by
    level)``; ``k`` is None when a level that has such controls reaches the goal at no k,
    or when no level has them. ``by level`` maps every level to its choice, None where it
    has no such control or no k reaches the goal."""
    df = _validate.frame("rates", rates, RATE_COLUMNS)
    positive = df[(df["role"] == ROLES["positive"]) & (df["outcome"] == "slower")]
    by_level, held = {}, []
    for level in LEVELS:
        sub = positive[positive["level"] == level]
        sizes = sub.groupby("device")["size_margins"].max()
        testable = (not sub.empty and len(sizes) == df["device"].nunique()
                    and bool((sizes >= min_size).all()))
        by_level[level] = choose_processes(df, level, min_size, power_goal) if testable else None
        if testable:
            held.append(by_level[level])
    if not held or any(k is None for k in held):
        return None, by_level
    return max(held), by_level


def design_table(rates: pd.DataFrame, k: int) -> pd.DataFrame:
    """The short table of :func:`rates_by_processes` at ``k`` processes: per device and
    level, the A/A control's claimed differences and each positive control's power (verdict
    "slower"), smallest control first (the A/A control's size is about 0), with its
    measured size in margins, the events over the replications, the rate and its
    Clopper-Pearson 95 % interval."""
    df = _validate.frame("rates", rates, RATE_COLUMNS)
    k = _validate.integer("k", k, 1)
    df = df[(df["k"] == k) & (((df["role"] == ROLES["aa"])
                               & (df["outcome"] == "claimed difference"))
                              | ((df["role"] == ROLES["positive"]) & (df["outcome"] == "slower")))]
    if df.empty:
        raise ValueError(f"`k` must be one of the processes in `rates` "
                         f"({sorted(set(rates['k']))}); got {k}.")
    df = df.sort_values(["device", "level", "size_margins"])
    return pd.DataFrame({
        "device": df["device"], "level": df["level"], "control": df["candidate"],
        "size (margins)": df["size_margins"],
        "events / replications": [f"{int(e)}/{int(n)}" for e, n in zip(df["events"], df["n"])],
        "rate": df["rate"],
        "95 % interval": [f"{lo:.0%}–{hi:.0%}" for lo, hi in zip(df["ci_low"], df["ci_high"])],
    }).reset_index(drop=True)


# ------------------------------------------------------------------ at the family used

# What the re-analysis at a family reports, per (level, m, k): the A/A twin's claimed
# differences (the false positives), the largest positive control's verdicts "slower"
# (power) and the A/A twin's verdicts "equivalent" (how often a true null is decided).
FAMILY_MEASURES = ("false positive", "power", "A/A equivalent")
FAMILY_COLUMNS = ("device", "level", "m", "k", "measure", "candidate", "size_margins",
                  "events", "n", "rate", "ci_low", "ci_high")


def _family_iv(frames, designs):
    if not isinstance(frames, dict) or not frames or not set(frames) <= set(LEVELS):
        raise ValueError(f"`frames` must map levels from {LEVELS} to (samples, kernels); "
                         f"got {type(frames).__name__}.")
    pairs = []
    for d in designs:
        if not isinstance(d, (tuple, list)) or len(d) != 2:
            raise ValueError(f"`designs` must hold (m, k) pairs; got {d!r}.")
        pairs.append((_validate.integer("designs", d[0], 1),
                      _validate.integer("designs", d[1], 2)))
    if not pairs:
        raise ValueError("`designs` must hold at least one (m, k) pair; got none.")
    return sorted(set(pairs))


def family_rates(frames: dict, device: str, designs, margin: float = DEFAULT_MARGIN,
                 min_size: float = MIN_CONTROL_MARGINS, twin: str = AA_CONTROLS[0],
                 baseline: str = BASELINE) -> pd.DataFrame:
    """The calibration judged at the families a design is used in: for each level of
    ``frames`` (as :func:`rates_by_processes`) and each ``(m, k)`` of ``designs``, the
    rates over replications of ``k`` processes whose intervals carry the Bonferroni
    adjustment of a family of ``m`` comparisons.

    A replication is what :func:`rates_by_processes` uses (:func:`protocols.
    replication_groups`): ``k`` consecutive processes of one run, disjoint from the
    others, judged by :func:`stats.compare`'s process-t interval. Measures
    (:data:`FAMILY_MEASURES`): "false positive" (the A/A ``twin`` given any difference,
    :data:`calibration.DERIVED_OUTCOMES`), "power" (the level's smallest positive control
    of at least ``min_size`` margins by its true slowdown over every process, else its
    largest, called "slower" beyond the margin: the rule :func:`choose_processes` holds
    the design to) and
    "A/A equivalent" (the twin called "equivalent"). A ``k`` beyond the processes of
    every run gives ``n`` 0 and NaN rates (nothing to replicate). Columns:
    :data:`FAMILY_COLUMNS`; ``size_margins`` is the control's true size in margins.
    """
    pairs = _family_iv(frames, designs)
    rows = []
    for level, (samples, _kernels) in frames.items():
        effects = true_effects(samples, None, baseline, interval=False).set_index("candidate")
        spins = [c for c in effects.index if str(c).startswith(POSITIVE_PREFIX)]
        if twin not in effects.index or not spins:
            raise ValueError(f"`frames` at the {level} level must hold {twin!r} and a "
                             f"positive control; it holds {sorted(effects.index)}.")
        size_of = {c: (float(effects.loc[c, "slowdown"]) - 1.0) / margin for c in spins}
        held = [c for c in spins if size_of[c] >= min_size]
        big = (min(held, key=size_of.get) if held else max(spins, key=size_of.get))
        most = max_processes(samples)
        for m, k in pairs:
            wanted = {"false positive": (twin, DERIVED_OUTCOMES["claimed difference"]),
                      "power": (big, ("slower",)), "A/A equivalent": (twin, ("equivalent",))}
            dec = (protocol_b_decisions(samples, baseline, [twin, big], "graph", k, margin,
                                        1, 42, None, m) if k <= most else None)
            for measure, (cand, verdicts) in wanted.items():
                size = (float(effects.loc[cand, "slowdown"]) - 1.0) / margin
                if dec is None:
                    events, n = 0, 0
                    ci = None
                else:
                    v = dec.loc[dec["candidate"] == cand, "verdict"]
                    events, n = int(v.isin(verdicts).sum()), int(len(v))
                    ci = binomial_rate_ci(events, n) if n else None
                rows.append({"device": device, "level": level, "m": m, "k": k,
                             "measure": measure, "candidate": cand, "size_margins": size,
                             "events": events, "n": n,
                             "rate": ci.estimate if ci else np.nan,
                             "ci_low": ci.low if ci else np.nan,
                             "ci_high": ci.high if ci else np.nan})
    return pd.DataFrame(rows, columns=list(FAMILY_COLUMNS))


def needed_processes(sigmas: dict, family: int, margin: float = DEFAULT_MARGIN) -> dict:
    """``{level: processes}`` that ``plan --power`` asks of a design judged in a family of
    ``family`` comparisons (:func:`power.processes_needed` of each level's per-process SD
    in ``sigmas``); None where no number of processes reaches the goals."""
    m = _validate.integer("family", family, 1)
    return {level: _power.processes_needed(float(sd), m, margin)
            for level, sd in sigmas.items()}
