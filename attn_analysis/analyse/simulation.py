"""Which interval to judge speedups by: coverage, A/A false positives and power of the
candidate intervals, simulated against the variance components of the recorded runs.

A run gives each arm P processes x M placements x N samples. The log time of a sample is

    log t = mu_arm + process(arm) + placement + replay

with normal effects whose standard deviations are a :class:`Scenario`'s; the two arms'
process effects have correlation ``rho`` (they run in the same processes). The candidate
arm is slower by a factor ``1 + effect``, so the true speedup is ``1 / (1 + effect)``
whatever the estimator (a shift on the log scale). :func:`interval_study` draws many
such runs and asks of each method:

- *coverage*: how often its 95 % interval holds the true speedup, at a true slowdown of
  ``effect`` (one margin by default);
- *A/A false-positive rate*: how often, with no difference at all, its interval excludes
  1, which every verdict claiming a difference (faster, slower, or either within the
  margin) requires;
- *power*: how often it calls a slowdown of ``power_effect`` (1.5 margins) "slower";
- the median half-width of the interval (relative).

The methods (``METHODS``): the t-interval over processes that ``stats.compare`` uses
(``process-t``, paired), Welch's t on each arm's per-process values (``welch``), the
hierarchical percentile bootstrap it replaced (``bootstrap``), a percentile bootstrap of
the per-process log ratios (``cluster-bootstrap``) and a hybrid that pools the
placements' degrees of freedom when the processes agree better than their placements
predict (``hybrid``). Pure and seeded: every draw comes from
``np.random.default_rng([seed, crc32(scenario name), P, replication])``, so a scenario's
rows do not depend on which others are run beside it.
"""

from __future__ import annotations

import dataclasses
import math
import zlib

import numpy as np
import pandas as pd
from scipy import stats as _st

from .. import _validate
from . import bootstrap, intervals
from .stats import DEFAULT_MARGIN, margin_iv

__all__ = ["METHODS", "COLUMNS", "Scenario", "simulate_pair", "interval", "interval_study",
           "honest", "FIXED_PROCESS_SDS", "NEGATIVE_RHO", "scenarios_from"]

METHODS = ("process-t", "welch", "bootstrap", "cluster-bootstrap", "hybrid")
COLUMNS = ("scenario", "level", "method", "processes", "placements", "samples",
           "sd_process", "sd_placement", "sd_replay", "rho", "n_reps", "effect",
           "covered", "coverage", "coverage_low", "coverage_high", "aa_claims", "fpr",
           "fpr_low", "fpr_high", "power_effect", "slower", "power", "power_low",
           "power_high", "median_half_width")


@dataclasses.dataclass(frozen=True)
class Scenario:
    """Standard deviations of the log time (0.003 is about 0.3 %) and the design inside a
    process: ``placements`` per process, ``samples`` per placement (1 at kernel level,
    one profiler value per placement). ``rho`` correlates the two arms' process effects.
    """

    name: str
    sd_process: float
    sd_placement: float
    sd_replay: float
    level: str = "call"
    placements: int = 8
    samples: int = 20
    rho: float = 0.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"`name` must be a non-empty string; got {self.name!r}.")
        for f in ("sd_process", "sd_placement", "sd_replay"):
            _validate.finite(f, getattr(self, f))
        _validate.choice("level", self.level, ("call", "kernel"))
        _validate.positive_integer("placements", self.placements)
        _validate.positive_integer("samples", self.samples)
        if not (isinstance(self.rho, (int, float)) and -1.0 <= self.rho <= 1.0):
            raise ValueError(f"`rho` must be a number in [-1, 1]; got {self.rho!r}.")


def simulate_pair(rng: np.random.Generator, scenario: Scenario, processes: int,
                  effect: float = 0.0) -> tuple[list, list]:
    """One run's two arms (processes -> placements -> samples), the candidate slower by
    the factor ``1 + effect``; the ``i``-th process of each arm is the same process."""
    s = scenario
    z = rng.standard_normal((2, processes))
    proc = (s.sd_process * z[0],
            s.sd_process * (s.rho * z[0] + math.sqrt(1.0 - s.rho ** 2) * z[1]))
    arms = []
    for a, shift in ((0, 0.0), (1, math.log1p(effect))):
        place = rng.normal(0.0, s.sd_placement, (processes, s.placements))
        replay = rng.normal(0.0, s.sd_replay, (processes, s.placements, s.samples))
        logt = shift + proc[a][:, None, None] + place[..., None] + replay
        arms.append([[np.exp(logt[i, p]) for p in range(s.placements)]
                     for i in range(processes)])
    return arms[0], arms[1]


def _cluster_bootstrap(base, cand, confidence, n_resamples, rng):
    """Percentile interval of the mean per-process log ratio, processes resampled."""
    d = intervals.process_logs(base) - intervals.process_logs(cand)
    means = d[rng.integers(0, d.size, (n_resamples, d.size))].mean(axis=1)
    a = 1.0 - confidence
    lo, hi = np.quantile(means, [a / 2, 1 - a / 2])
    return math.exp(lo), math.exp(hi)


def _hybrid(base, cand, confidence):
    """t-interval on per-process log ratios whose variance is the larger of the spread
    between processes and the spread the placements predict; the placements' degrees of
    freedom are used when the latter is larger."""
    d = intervals.process_logs(base) - intervals.process_logs(cand)
    n = d.size
    within, df_within = [], 0
    for proc_b, proc_c in zip(base, cand):
        lb = np.log(intervals.placement_medians(proc_b))
        lc = np.log(intervals.placement_medians(proc_c))
        within.append(lb.var(ddof=1) / lb.size + lc.var(ddof=1) / lc.size)
        df_within += lb.size + lc.size - 2
    v_between, v_within = d.var(ddof=1) / n, float(np.mean(within)) / n
    var, df = (v_between, n - 1) if v_between >= v_within else (v_within, df_within)
    q = float(_st.t.ppf(1 - (1 - confidence) / 2, df))
    return math.exp(d.mean() - q * math.sqrt(var)), math.exp(d.mean() + q * math.sqrt(var))


def interval(method: str, base, cand, confidence: float = 0.95, n_resamples: int = 1000,
             seed: int = 0) -> tuple[float, float]:
    """The two-sided interval of the speedup ``base / cand`` by ``method`` (``METHODS``)."""
    method = _validate.choice("method", method, METHODS)
    if method == "process-t":
        ci = intervals.ratio_t_ci(base, cand, confidence)
        return ci.low, ci.high
    if method == "welch":
        t = intervals.log_ratio_t(base, cand, paired=False)
        return t.bounds(confidence)
    if method == "bootstrap":
        ci = bootstrap.ratio_ci(base, cand, confidence, n_resamples, seed)
        return ci.low, ci.high
    if method == "cluster-bootstrap":
        return _cluster_bootstrap(base, cand, confidence, n_resamples,
                                  np.random.default_rng(seed))
    return _hybrid(base, cand, confidence)


def _study_iv(scenarios, processes, methods, n_reps, effect, power_effect, margin,
              confidence, n_resamples, seed):
    scenarios = [scenarios] if isinstance(scenarios, Scenario) else list(scenarios)
    if not scenarios or not all(isinstance(s, Scenario) for s in scenarios):
        raise ValueError("`scenarios` must be a Scenario or a non-empty sequence of them.")
    processes = (processes,) if isinstance(processes, int) else tuple(processes)
    if not processes or any(isinstance(p, bool) or not isinstance(p, int) or p < 2
                            for p in processes):
        raise ValueError(f"`processes` must be integers >= 2; got {processes!r}.")
    methods = (methods,) if isinstance(methods, str) else tuple(methods)
    if not methods or any(m not in METHODS for m in methods):
        raise ValueError(f"`methods` must be drawn from {METHODS}; got {methods!r}.")
    _validate.positive_integer("n_reps", n_reps)
    _validate.finite("effect", effect)
    _validate.finite("power_effect", power_effect)
    margin_iv(margin)
    _validate.number_in("confidence", confidence)
    _validate.integer("n_resamples", n_resamples, 100)
    _validate.integer("seed", seed, 0)
    return scenarios, processes, methods


def interval_study(scenarios, processes=(2, 4, 8), methods=METHODS, n_reps: int = 1000,
                   effect: float = 0.02, power_effect: float = 0.03, margin: float = DEFAULT_MARGIN,
                   confidence: float = 0.95, n_resamples: int = 1000,
                   seed: int = 20240622) -> pd.DataFrame:
    """Coverage, A/A false-positive rate and power of each method, by simulation.

    Parameters
    ----------
    scenarios : Scenario or sequence of Scenario
        Variance components and design inside a process.
    processes : sequence of int
        Processes per arm to simulate, each at least 2; default (2, 4, 8).
    methods : sequence of str
        Drawn from ``METHODS``; default all.
    n_reps : int
        Simulated runs per (scenario, processes); default 1000.
    effect : float
        True slowdown at which coverage is measured (0.02: the candidate takes 2 % longer).
    power_effect : float
        True slowdown at which power (the verdict "slower") is measured; default 0.03.
    margin, confidence
        Margin of the verdict rule and two-sided coverage of every interval (one
        comparison, no family adjustment).
    n_resamples : int
        Resamples of the bootstrap methods, at least 100; default 1000.
    seed : int
        Root of every generator; default 20240622.

    Returns
    -------
    DataFrame
        One row per (scenario, method, processes), columns ``COLUMNS``: the counts
        ``covered`` (of ``n_reps``), ``aa_claims`` (A/A intervals excluding 1) and
        ``slower`` (verdicts "slower" at ``power_effect``), each as a rate with its
        Clopper-Pearson 95 % interval, and the median half-width ``(high - low) / 2``.

    Notes
    -----
    Each replication draws three independent runs from one generator: an A/A pair, a pair
    at ``effect`` and a pair at ``power_effect``; every method is applied to the same
    draws, so differences between methods are not sampling noise between their data.
    The bootstrap methods use the replication index as their seed.
    """
    scenarios, processes, methods = _study_iv(scenarios, processes, methods, n_reps, effect,
                                              power_effect, margin, confidence, n_resamples,
                                              seed)
    truth = 1.0 / (1.0 + effect)
    lower = 1.0 - margin
    rows = []
    for sc in scenarios:
        tag = zlib.crc32(sc.name.encode())
        for p in processes:
            hits = {m: np.zeros(3, dtype=int) for m in methods}
            widths = {m: [] for m in methods}
            for rep in range(n_reps):
                rng = np.random.default_rng([seed, tag, p, rep])
                pairs = [simulate_pair(rng, sc, p, e) for e in (0.0, effect, power_effect)]
                for m in methods:
                    (alo, ahi), (lo, hi), (plo, phi) = (
                        interval(m, b, c, confidence, n_resamples, rep) for b, c in pairs)
                    hits[m] += (not alo <= 1.0 <= ahi, lo <= truth <= hi, phi < lower)
                    widths[m].append((hi - lo) / 2.0)
            for m in methods:
                aa, cov, slow = (int(x) for x in hits[m])
                c_ci, a_ci, s_ci = (intervals.binomial_rate_ci(k, n_reps) for k in (cov, aa, slow))
                rows.append({"scenario": sc.name, "level": sc.level, "method": m,
                             "processes": p, "placements": sc.placements,
                             "samples": sc.samples, "sd_process": sc.sd_process,
                             "sd_placement": sc.sd_placement, "sd_replay": sc.sd_replay,
                             "rho": sc.rho, "n_reps": n_reps, "effect": effect,
                             "covered": cov, "coverage": c_ci.estimate,
                             "coverage_low": c_ci.low, "coverage_high": c_ci.high,
                             "aa_claims": aa, "fpr": a_ci.estimate, "fpr_low": a_ci.low,
                             "fpr_high": a_ci.high, "power_effect": power_effect,
                             "slower": slow, "power": s_ci.estimate, "power_low": s_ci.low,
                             "power_high": s_ci.high,
                             "median_half_width": float(np.median(widths[m]))})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def honest(study: pd.DataFrame, confidence: float = 0.95, alpha: float = 0.001) -> pd.Series:
    """Per method: True when no (scenario, processes) row's coverage is significantly below
    ``confidence`` (one-sided binomial test at ``alpha``) and no A/A rate significantly
    above ``1 - confidence``; the rule that picks the interval ``stats.compare`` uses."""
    df = _validate.frame("study", study, ("method", "covered", "aa_claims", "n_reps"),
                         rows=True)
    ok = {}
    for method, g in df.groupby("method", sort=False):
        low = [_st.binomtest(int(c), int(n), confidence, alternative="less").pvalue < alpha
               for c, n in zip(g["covered"], g["n_reps"])]
        high = [_st.binomtest(int(a), int(n), 1 - confidence, alternative="greater").pvalue
                < alpha for a, n in zip(g["aa_claims"], g["n_reps"])]
        ok[method] = not (any(low) or any(high))
    return pd.Series(ok, name="honest")


FIXED_PROCESS_SDS = (0.003, 0.006)  # the process SDs at which the old bootstrap undercovers
NEGATIVE_RHO = -0.5  # arms' process effects anti-correlated (measured in some cells)


def scenarios_from(components: pd.DataFrame, config: str, candidate: str = "sdpa",
                   mode: str = "graph", placements: int = 8, samples: int = 20
                   ) -> list[Scenario]:
    """The simulation's scenarios from measured variance components.

    ``components`` is :func:`variance.decompose` output. Returns, in order: the
    ``candidate``'s call-level components at ``config`` in ``mode`` ("measured, call");
    its kernel-level ones (one profiler value per placement: "measured, kernel"); the
    largest call-level process component of any cell with the same placement and replay
    components ("largest measured process"); process SDs of ``FIXED_PROCESS_SDS`` with the
    same placement and replay; and the largest of them with the arms' process effects
    correlated at ``NEGATIVE_RHO``.
    """
    comp = _validate.frame("components", components, ("config", "candidate", "mode", "level",
                                                      "sd_process", "sd_placement",
                                                      "sd_replay"), rows=True)
    call = comp[(comp["level"] == "call") & (comp["mode"] == mode)]
    here = call[(call["config"] == config) & (call["candidate"] == candidate)]
    kern = comp[(comp["level"] == "kernel") & (comp["config"] == config)
                & (comp["candidate"] == candidate)]
    if here.empty or kern.empty:
        raise ValueError(f"`components` must hold {candidate!r} at {config!r} at the call "
                         f"level in mode {mode!r} and at the kernel level.")
    c, k = here.iloc[0], kern.iloc[0]
    pl, rp = float(c["sd_placement"]), float(c["sd_replay"])
    out = [Scenario("measured, call", float(c["sd_process"]), pl, rp, "call", placements,
                    samples),
           Scenario("measured, kernel", float(k["sd_process"]), float(k["sd_placement"]), 0.0,
                    "kernel", placements, 1),
           Scenario("largest measured process", float(call["sd_process"].max()), pl, rp,
                    "call", placements, samples)]
    out += [Scenario(f"process {sd:.1%}", sd, pl, rp, "call", placements, samples)
            for sd in FIXED_PROCESS_SDS]
    out.append(Scenario(f"process {max(FIXED_PROCESS_SDS):.1%}, rho {NEGATIVE_RHO:g}",
                        max(FIXED_PROCESS_SDS), pl, rp, "call", placements, samples,
                        NEGATIVE_RHO))
    return out
