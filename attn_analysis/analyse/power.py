"""Power of the comparison design at the family it is judged in: the processes a campaign
needs so that its verdicts can decide. Pure, no I/O.

A verdict (:func:`.stats.compare`, the default ``process-t`` interval) rests on the
per-process differences ``d_i`` of mean log time (baseline minus candidate, over each
process's placements), paired by trial: the interval is ``mean(d) +- t * sd(d) / sqrt(P)``
at confidence ``1 - 0.05 / m`` (Bonferroni over a family of ``m`` comparisons), judged by
:func:`.stats.decide` against the margin, with ends that must clear every boundary by
``stats.PRINT_PRECISION``. Under the normal model of ``d_i`` (mean ``delta``, SD
``sigma``), which the interval itself assumes, the probability of each verdict is an
integral over the sample SD's chi distribution (:func:`verdict_rates`): no simulation.

``sigma`` comes from the measured variance components (:func:`paired_components`): the
process-by-candidate component (how much the difference moves from process to process)
and each arm's within-process placement component (a placement's log median, or its
kernel time, about its process's mean), so that ``sigma`` is known for any number of
placements (:func:`diff_sd`). :func:`processes_needed` is the fewest processes whose
power against a candidate ``effect`` margins faster reaches ``POWER_GOAL`` and whose A/A
"equivalent" rate reaches ``EQUIVALENCE_GOAL``, at the family ``m``; :func:`design_report`
says the same for a whole plan, per level, and is what ``plan --power``, ``sweep`` and
the notebooks print (:func:`decidability_text`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from .. import _validate
from .margin import DEFAULT_MARGIN, margin_iv

__all__ = ["POWER_GOAL", "EQUIVALENCE_GOAL", "EFFECT_MARGINS", "FAMILY_CONFIDENCE",
           "verdict_rates", "power", "equivalence_rate", "diff_sd", "processes_needed",
           "paired_components", "family_sigma", "LevelDesign", "design_report",
           "decidability_text", "registered_family", "COMPONENT_COLUMNS"]

POWER_GOAL = 0.80  # power against a candidate EFFECT_MARGINS margins faster
EQUIVALENCE_GOAL = 0.90  # the A/A twin called "equivalent"
EFFECT_MARGINS = 1.5  # the effect power is judged at, in margins (1.5 x 2 % = 3 %)
FAMILY_CONFIDENCE = 0.95  # family-wise coverage of the verdicts' intervals (stats.compare)
_GRID = 2048  # quadrature points over the chi distribution of the sample SD


def _precision() -> float:
    from .stats import PRINT_PRECISION  # scipy is imported only when rates are computed
    return PRINT_PRECISION


def _sd_quantiles(df: int) -> np.ndarray:
    """``s / sigma`` at the midpoints of ``_GRID`` equal-probability slices of its
    distribution (``df * s**2 / sigma**2`` is chi-square with ``df``)."""
    from scipy import stats as st
    u = (np.arange(_GRID) + 0.5) / _GRID
    return np.sqrt(st.chi2.ppf(u, df) / df)


def verdict_rates(delta: float, sigma: float, processes: int, family: int = 1,
                  margin: float = DEFAULT_MARGIN, confidence: float = FAMILY_CONFIDENCE,
                  precision: float | None = None) -> dict:
    """Probabilities of the verdicts "faster", "slower" and "equivalent" of one
    comparison: true log speedup ``delta``, per-process difference SD ``sigma``,
    ``processes`` paired processes, Bonferroni over ``family`` comparisons.

    "equivalent" is :func:`.stats.decide`'s: the interval holds 1 and lies inside the
    margin, each end at least ``precision`` (default ``stats.PRINT_PRECISION``) from it;
    "faster" (``slower``): the interval beyond ``1 + margin`` (``1 - margin``) by
    ``precision``. The rest (inconclusive, within-margin, undecided) is ``1 -`` the three.
    Exact under normal per-process differences, to the quadrature's ~1e-4.
    """
    from scipy import stats as st
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not math.isfinite(delta):
        raise ValueError(f"`delta` must be a finite log speedup; got {delta!r}.")
    delta = float(delta)
    sigma = _validate.finite("sigma", sigma, strict=True)
    p = _validate.integer("processes", processes, 2)
    m = _validate.positive_integer("family", family)
    margin = margin_iv(margin)
    confidence = _validate.confidence(confidence)
    tol = _precision() if precision is None else _validate.finite("precision", precision)
    t = st.t.ppf(1 - (1 - confidence) / (2 * m), p - 1)
    se = sigma / math.sqrt(p)
    h = t * se * _sd_quantiles(p - 1)  # half-width at each quadrature point
    lo_eq, hi_eq = math.log(1 - margin + tol), math.log(1 + margin - tol)
    up, down = math.log(1 + margin + tol), math.log(1 - margin - tol)

    def mass(lower, upper):  # P(lower < mean < upper), averaged over the sample SD
        lower, upper = np.broadcast_arrays(lower, upper)
        cdf = st.norm.cdf((upper - delta) / se) - st.norm.cdf((lower - delta) / se)
        return float(np.mean(np.where(upper > lower, cdf, 0.0)))
    eq = mass(np.maximum(lo_eq + h, -h), np.minimum(hi_eq - h, h))
    return {"faster": mass(up + h, np.inf), "slower": mass(-np.inf, down - h),
            "equivalent": eq}


def power(sigma: float, processes: int, family: int = 1, margin: float = DEFAULT_MARGIN,
          effect: float = EFFECT_MARGINS) -> float:
    """Probability that a candidate ``effect`` margins faster (speedup ``1 + effect *
    margin``) is called "faster" (:func:`verdict_rates`)."""
    effect = _validate.finite("effect", effect, strict=True)
    return verdict_rates(math.log(1 + effect * margin_iv(margin)), sigma, processes, family,
                         margin)["faster"]


def equivalence_rate(sigma: float, processes: int, family: int = 1,
                     margin: float = DEFAULT_MARGIN) -> float:
    """Probability that an A/A pair (speedup 1) is called "equivalent"."""
    return verdict_rates(0.0, sigma, processes, family, margin)["equivalent"]


def diff_sd(interaction_sd: float, placement_sds, placements: int) -> float:
    """SD of one process's difference of mean log times with ``placements`` placements per
    arm: ``sqrt(interaction_sd**2 + sum(sd**2 for sd in placement_sds) / placements)``.

    ``interaction_sd``: the process-by-candidate component (what moves the difference
    between processes); ``placement_sds``: each arm's within-process placement SD (at
    call level it holds the sample noise of a placement's median at the recorded
    samples per placement)."""
    inter = _validate.finite("interaction_sd", interaction_sd)
    sds = [_validate.finite("placement_sds", s) for s in placement_sds]
    m = _validate.integer("placements", placements, 1)
    return math.sqrt(inter ** 2 + sum(s ** 2 for s in sds) / m)


def processes_needed(sigma: float, family: int = 1, margin: float = DEFAULT_MARGIN,
                     effect: float = EFFECT_MARGINS, power_goal: float = POWER_GOAL,
                     equivalence_goal: float = EQUIVALENCE_GOAL,
                     max_processes: int = 1024) -> int | None:
    """The fewest processes (>= 2) whose :func:`power` at ``effect`` margins reaches
    ``power_goal`` and whose A/A :func:`equivalence_rate` reaches ``equivalence_goal``, at
    the family ``family``; None when even ``max_processes`` do not (``sigma`` too large
    against the margin: scope the family or the margin, not the processes)."""
    _validate.number_in("power_goal", power_goal, 0.0, 1.0)
    _validate.number_in("equivalence_goal", equivalence_goal, 0.0, 1.0)
    hi = _validate.integer("max_processes", max_processes, 2)

    def ok(p):
        return (power(sigma, p, family, margin, effect) >= power_goal
                and equivalence_rate(sigma, p, family, margin) >= equivalence_goal)
    if not ok(hi):
        return None
    lo = 2
    while lo < hi:  # both rates grow with the processes (checked in the tests)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


# ------------------------------------------------------------------ from recorded runs

def _process_values(placements: pd.DataFrame, level: str, mode: str) -> pd.DataFrame:
    """One log value per placement (call: its median in ``mode``; kernel: its profiler
    time), indexed by config, candidate, trial."""
    col = {"call": "median_ms", "kernel": "kernel_ms"}[_validate.choice(
        "level", level, ("call", "kernel"))]
    p = placements[placements["mode"] == mode] if level == "call" else \
        placements.drop_duplicates(["config", "candidate", "trial", "placement"])
    p = p.dropna(subset=[col])
    p = p[p[col] > 0]
    return p.assign(y=np.log(p[col].to_numpy()))[["config", "candidate", "trial", "y"]]


def paired_components(placements: pd.DataFrame, baseline: str = "sdpa", level: str = "call",
                      mode: str = "graph") -> pd.DataFrame:
    """The variance components of each (configuration, candidate) difference to
    ``baseline`` in one run's ``placements`` table (``record.Run.placements``).

    One row per (``config``, ``candidate``) with ``processes`` (trials holding both arms),
    ``placements`` (per process, the median over them), ``sd_diff`` (SD of the
    per-process differences as recorded), ``sd_placement_base`` and
    ``sd_placement_cand`` (pooled within-process SD of a placement's log value) and
    ``sd_interaction`` (the process-by-candidate component: ``sd_diff**2`` less the
    placements' share, clamped at 0). :func:`diff_sd` of these gives the SD at any
    number of placements. Candidates with fewer than 3 shared processes are left out.
    """
    v = _process_values(placements, level, mode)
    rows = []
    for cfg, frame in v.groupby("config", sort=True):
        base = frame[frame["candidate"] == baseline]
        if base.empty:
            continue
        b_mean, b_w, b_m = _arm(base)
        for cand, arm in frame[frame["candidate"] != baseline].groupby("candidate", sort=True):
            c_mean, c_w, c_m = _arm(arm)
            d = (b_mean - c_mean).dropna()
            if len(d) < 3:
                continue
            m = float(np.median(np.concatenate([b_m.reindex(d.index).to_numpy(),
                                                c_m.reindex(d.index).to_numpy()])))
            sd = float(d.std(ddof=1))
            inter2 = sd ** 2 - (b_w ** 2 + c_w ** 2) / m
            rows.append({"config": cfg, "candidate": cand, "level": level,
                         "processes": int(len(d)), "placements": m,
                         "mean_diff": float(d.mean()), "sd_diff": sd,
                         "sd_placement_base": b_w, "sd_placement_cand": c_w,
                         "sd_interaction": math.sqrt(max(inter2, 0.0))})
    return pd.DataFrame(rows, columns=["config", "candidate", "level", "processes",
                                       "placements", "mean_diff", "sd_diff",
                                       "sd_placement_base", "sd_placement_cand",
                                       "sd_interaction"])


def _arm(frame: pd.DataFrame):
    """Per trial: the mean log value, and the placements; the pooled within-trial SD."""
    g = frame.groupby("trial")["y"]
    dev = frame["y"] - g.transform("mean")
    dof = int(len(frame) - g.ngroups)
    within = math.sqrt(float((dev ** 2).sum()) / dof) if dof > 0 else 0.0
    return g.mean(), within, g.size().astype(float)


def family_sigma(components: pd.DataFrame, placements: int, quantile: float = 0.9) -> float:
    """A design's per-process difference SD for a candidate family: the ``quantile`` of
    :func:`diff_sd` at ``placements`` over the rows of ``components``
    (:func:`paired_components`, one or several runs), so that about that share of the
    family's comparisons are powered at least as planned."""
    if components is None or len(components) == 0:
        raise ValueError("`components` must hold at least one row (paired_components).")
    q = float(quantile)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"`quantile` must be in [0, 1]; got {quantile!r}.")
    sds = [diff_sd(r.sd_interaction, (r.sd_placement_base, r.sd_placement_cand), placements)
           for r in components.itertuples()]
    return float(np.quantile(sds, q))


# ------------------------------------------------------------------ a plan's design

@dataclasses.dataclass(frozen=True)
class LevelDesign:
    """What a design decides at one level: its family, the SD it was sized with, the
    processes asked and needed, and the rates at the processes asked."""

    level: str
    family: int
    sigma: float
    processes: int
    needed: int | None
    power: float
    equivalence: float

    @property
    def decides(self) -> bool:
        return self.needed is not None and self.processes >= self.needed


def design_report(processes: int, family: int, sigmas: dict, margin: float = DEFAULT_MARGIN,
                  effect: float = EFFECT_MARGINS) -> list[LevelDesign]:
    """For each level of ``sigmas`` (``{"call": sd, "kernel": sd}``): the processes
    needed at ``family`` and what ``processes`` give (power, A/A equivalence rate)."""
    p = _validate.integer("processes", processes, 1)
    out = []
    for level, sigma in sigmas.items():
        needed = processes_needed(sigma, family, margin, effect)
        pw = power(sigma, p, family, margin, effect) if p >= 2 else 0.0
        eq = equivalence_rate(sigma, p, family, margin) if p >= 2 else 0.0
        out.append(LevelDesign(level, int(family), float(sigma), p, needed, pw, eq))
    return out


def decidability_text(report: list[LevelDesign], margin: float = DEFAULT_MARGIN,
                      effect: float = EFFECT_MARGINS) -> str:
    """The lines ``plan --power``, ``sweep`` and the notebooks print about a design."""
    lines = []
    for r in report:
        need = ("no number of processes (scope the family)" if r.needed is None
                else f"{r.needed} processes")
        verdict = "decides" if r.decides else "CANNOT DECIDE"
        lines.append(
            f"{r.level} level: family m = {r.family}, per-process SD {r.sigma:.4f}; "
            f"{r.processes} processes give power {r.power:.0%} against a candidate "
            f"{effect:g} margins ({effect * margin:.1%}) faster and an A/A 'equivalent' "
            f"rate of {r.equivalence:.0%}; {POWER_GOAL:.0%} and {EQUIVALENCE_GOAL:.0%} "
            f"need {need}: this design {verdict} at its family.")
    return "\n".join(lines)


# ------------------------------------------------------------------ plans and runs

DESIGN_SIGMAS = "data/reference/design_sigmas.json"  # scripts/design_sigmas.py writes it
SIGMA_QUANTILE = 0.9  # the share of a family's comparisons a design is sized to decide


def family_size(n_configs: int, candidates, baseline: str = "sdpa",
                levels=("call", "kernel")) -> int:
    """m of a plan judged as ``compare`` judges a run: every candidate but ``baseline``
    at every configuration, at each level."""
    n = _validate.integer("n_configs", n_configs, 1)
    others = [c for c in candidates if c != baseline]
    if not levels:
        raise ValueError("`levels` must name at least one level.")
    return n * len(others) * len(tuple(levels))


COMPONENT_COLUMNS = ("sd_interaction", "sd_placement_base", "sd_placement_cand")


def recorded_sds(runs, placements: int, baseline: str = "sdpa", exclude=()) -> pd.DataFrame:
    """One row per comparison with ``baseline`` in ``runs`` (loaded ``record.Run`` objects;
    those with fewer than 3 shared processes give none) and level: ``device``, ``run``,
    ``config``, ``candidate``, ``level``, ``sd`` (the :func:`diff_sd` of its components
    at ``placements`` placements) and the components themselves (``COMPONENT_COLUMNS``),
    so that :func:`sigmas_of` can give the SD at any other number of placements.
    Candidates in ``exclude`` are left out."""
    rows = []
    for run in runs:
        for level in ("call", "kernel"):
            for r in paired_components(run.placements, baseline, level).itertuples():
                if r.candidate in tuple(exclude):
                    continue
                rows.append({"device": run.device, "run": run.run_id, "config": r.config,
                             "candidate": r.candidate, "level": level,
                             "sd": diff_sd(r.sd_interaction,
                                           (r.sd_placement_base, r.sd_placement_cand),
                                           placements),
                             **{c: float(getattr(r, c)) for c in COMPONENT_COLUMNS}})
    return pd.DataFrame(rows, columns=["device", "run", "config", "candidate", "level", "sd",
                                       *COMPONENT_COLUMNS])


def _sds_at(sds: pd.DataFrame, placements: int | None) -> pd.Series:
    """The rows' SDs at ``placements`` placements per arm (None: as recorded, ``sd``),
    from their components; rows recorded without components raise ValueError."""
    if placements is None:
        return sds["sd"]
    p = _validate.integer("placements", placements, 1)
    cols = list(COMPONENT_COLUMNS)
    if not set(cols) <= set(sds.columns) or sds[cols].isna().any().any():
        raise ValueError("`placements` needs the recorded variance components "
                         f"({', '.join(COMPONENT_COLUMNS)}); rerun scripts/design_sigmas.py.")
    return pd.Series([diff_sd(r.sd_interaction, (r.sd_placement_base, r.sd_placement_cand), p)
                      for r in sds.itertuples()], index=sds.index)


def sigmas_of(sds: pd.DataFrame, device: str | None = None, configs=None, candidates=None,
              quantile: float = SIGMA_QUANTILE, placements: int | None = None) -> dict:
    """``{level: SD}``: the ``quantile`` of the rows of ``sds`` (:func:`recorded_sds`) on
    GPU model ``device`` (None or absent: every model), at ``configs`` and of
    ``candidates`` (keys and names; None: all). A filter that leaves no row of a level is
    dropped, widest first (candidates, then configurations, then the model), so a plan of
    shapes or kernels never recorded is judged by every recorded comparison. With
    ``placements``, each row's SD is first recomputed from its components at that many
    placements per arm (:func:`diff_sd`): the design lever where the spread between
    processes is placement noise (benchmarks/long-placements/)."""
    q = float(quantile)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"`quantile` must be in [0, 1]; got {quantile!r}.")
    sds = sds.assign(sd=_sds_at(sds, placements))
    out = {}
    for level, rows in sds.groupby("level", sort=True):
        masks = [rows["device"] == device if device in set(rows["device"]) else None,
                 rows["config"].isin(tuple(configs)) if configs is not None else None,
                 rows["candidate"].isin(tuple(candidates)) if candidates is not None else None]
        for drop in range(len(masks) + 1):
            keep = pd.Series(True, index=rows.index)
            for mask in masks[:len(masks) - drop]:
                if mask is not None:
                    keep &= mask
            chosen = rows.loc[keep, "sd"]
            if len(chosen):
                out[level] = float(np.quantile(chosen, q))
                break
    return out


def load_design_sds(path=None) -> pd.DataFrame | None:
    """The rows ``scripts/design_sigmas.py`` recorded (:func:`recorded_sds` of the
    exploratory runs), or None where the file is absent. ``path`` None:
    ``DESIGN_SIGMAS`` in the checkout this package lives in."""
    import json
    from pathlib import Path
    p = Path(__file__).resolve().parents[2] / DESIGN_SIGMAS if path is None else Path(path)
    if not p.is_file():
        return None
    return pd.DataFrame(json.loads(p.read_text())["comparisons"])


def load_design_sigmas(path=None, device: str | None = None, configs=None,
                       candidates=None, placements: int | None = None) -> dict | None:
    """:func:`sigmas_of` the recorded rows (:func:`load_design_sds`), at ``placements``
    placements per arm (None: the recorded default), or None where the file is absent (a
    checkout without it: the caller says it cannot judge)."""
    sds = load_design_sds(path)
    return None if sds is None else sigmas_of(sds, device, configs, candidates,
                                              placements=placements)


def plan_decidability(n_configs: int, candidates, processes: int, sigmas: dict,
                      baseline: str = "sdpa", levels=("call", "kernel"),
                      family: int | None = None, margin: float = DEFAULT_MARGIN
                      ) -> tuple[int, list[LevelDesign], str]:
    """What a plan can decide before it is measured: its family m (``family`` when the
    plan pre-registers one, else :func:`family_size`), the :func:`design_report` of its
    processes at that m per level of ``sigmas`` (only the ``levels`` judged), and the
    text ``plan --power``, ``sweep`` and the notebooks print."""
    m = family if family is not None else family_size(n_configs, candidates, baseline, levels)
    sig = {lv: s for lv, s in sigmas.items() if lv in tuple(levels)}
    report = design_report(processes, m, sig, margin)
    return m, report, decidability_text(report, margin)


def registered_family(info) -> int | None:
    """The family m that the configs plan of a run's ``info`` (its run.json: ``plan``)
    pre-registered (``family_size`` of e.g. ``configs.POWERED_PLANS``), or None."""
    from .inventory import campaign_of  # inventory reads configs' plan tables
    plan = (info or {}).get("plan") or {}
    found = campaign_of(plan) if plan else None
    if found is None:
        return None
    from .. import configs
    size = getattr(configs, found[0])[found[1]].get("family_size")
    return None if size is None else int(size)


def run_decidability(run, sigmas: dict | None = None, baseline: str = "sdpa",
                     levels=("call", "kernel"), family: int | None = None,
                     margin: float = DEFAULT_MARGIN) -> str:
    """Whether a recorded run's design can decide at its own family: the notebooks call
    this beside a run's verdicts. The family is ``family``, else the ``family_size`` that
    the configs plan the run measured pre-registered (:func:`registered_family`: its A/A
    twin is judged at that m but is no member), else every comparison with ``baseline``
    in the run at ``levels``; the SDs are ``sigmas`` or, by default, the recorded design
    SDs for the run's GPU model (:func:`load_design_sigmas`) at the run's placements."""
    if family is None:
        family = registered_family(getattr(run, "info", None))
    s = run.samples
    configs = s["config"].nunique()
    candidates = sorted(s["candidate"].unique())
    processes = int(s.groupby(["config", "candidate"])["trial"].nunique().min())
    if sigmas is None:  # the recorded SDs at the run's own placements per process
        placements = int(s.groupby(["config", "candidate", "trial"])["placement"]
                         .nunique().median())
        sigmas = load_design_sigmas(device=run.device, configs=s["config"].unique(),
                                    candidates=candidates, placements=placements)
    if not sigmas:
        return (f"run {run.run_id}: no recorded design SDs ({DESIGN_SIGMAS}), so whether "
                f"{processes} processes decide at its family cannot be said.")
    m, _, text = plan_decidability(configs, candidates, processes, sigmas, baseline,
                                   levels, family, margin)
    return f"run {run.run_id} ({processes} processes, family m = {m}):\n{text}"
