"""Where the variance of a timing comes from: machine, process, placement, replay.

Protocol v2 times every unit at several memory placements in several fresh processes on
one or more GPUs, so a log time decomposes into nested random effects::

    log t = mu + machine + process(machine) + placement(process) + replay(placement)

:func:`decompose` estimates the standard deviation of each effect per (configuration,
candidate, timing mode) at two levels: *call* (the timed samples; the replay term is the
spread of the samples of one placement) and *kernel* (the profiler's kernel time, one
value per placement, so there is no replay term). :func:`single_placement_spread` asks
whether placement explains the spread between processes that the old protocol (one
placement per process) saw; :func:`speedup_by_level` asks whether a lead survives
randomized placement, at both levels; ``design.log_speedup_se`` and
``design.cheapest_design`` turn the components into the standard error of a design and the
cheapest design meeting a target.

Pure: pandas, numpy and scipy only; no torch, no files. :func:`stack` joins loaded runs.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import _validate
from . import stats
from .stats import DEFAULT_MARGIN
from ..configs import BASELINE, MODES

__all__ = ["FACTORS", "LEVELS", "PLACEMENT_KEYS", "SAMPLE_KEYS", "CELL", "RESULT_COLUMNS",
           "machine_label", "stack", "nested_components", "decompose",
           "single_placement_spread", "speedup_by_level"]

FACTORS = ("machine", "process", "placement", "replay")
LEVELS = ("call", "kernel")
PLACEMENT_KEYS = ("machine", "run", "config", "candidate", "mode", "trial", "placement")
SAMPLE_KEYS = PLACEMENT_KEYS + ("ms",)
CELL = ("config", "candidate", "mode")
RESULT_COLUMNS = (CELL + ("level",) + tuple(f"sd_{f}" for f in FACTORS)
                  + ("sd_total", "n_machines", "n_processes", "n_placements", "n_values",
                     "geo_mean_ms", "clamped"))


# --------------------------------------------------------------------------- validation

def _positive_times_iv(name: str, values: pd.Series, allow_nan: bool = False) -> None:
    """Times must be positive and finite (NaN allowed where ``allow_nan``)."""
    v = values.to_numpy(dtype=float)
    bad = ~(np.isfinite(v) & (v > 0))
    if allow_nan:
        bad &= ~np.isnan(v)
    if bad.any():
        raise ValueError(f"`{name}` must hold positive finite times; got {v[bad][0]!r}.")


def _levels_iv(levels) -> tuple:
    """``levels`` must be a non-empty subset of :data:`LEVELS`."""
    levels = (levels,) if isinstance(levels, str) else tuple(levels)
    if not levels or any(lv not in LEVELS for lv in levels):
        raise ValueError(f"`levels` must be a non-empty subset of {LEVELS}; got {levels!r}.")
    return levels


# --------------------------------------------------------------------------- joining runs

def machine_label(uuid: str) -> str:
    """A GPU's short name: the first 8 hex digits of its UUID ('GPU-' prefix dropped)."""
    return str(uuid).removeprefix("GPU-")[:8]


def stack(runs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Placements and samples of several loaded runs, with ``run`` and ``machine`` columns.

    ``runs`` maps a run id to an object with ``placements``, ``samples`` and
    ``fingerprint`` (a :class:`records.Run`); ``machine`` is the trial's ``gpu_uuid`` from
    the fingerprint. Returns ``(placements, samples)``.
    """
    if not isinstance(runs, dict) or not runs:
        raise ValueError(f"`runs` must be a non-empty dict of run id -> loaded run; got {runs!r}.")
    places, samples = [], []
    for run_id, r in runs.items():
        trials = (r.fingerprint or {}).get("trials") or {}
        uuid = {int(t): fp.get("gpu_uuid") for t, fp in trials.items()}
        used = set(r.placements["trial"].unique().tolist()) \
            | set(r.samples["trial"].unique().tolist())
        missing = sorted(t for t in used if not uuid.get(int(t)))
        if missing:
            raise ValueError(f"`runs` must record a gpu_uuid for every trial; run {run_id!r} "
                             f"lacks it for trials {missing}.")
        for frame, out in ((r.placements, places), (r.samples, samples)):
            out.append(frame.assign(run=run_id, machine=frame["trial"].map(
                lambda t: uuid[int(t)])))
    return pd.concat(places, ignore_index=True), pd.concat(samples, ignore_index=True)


# --------------------------------------------------------------------------- estimator

def nested_components(y, groups) -> tuple[np.ndarray, np.ndarray]:
    """Method-of-moments variance components of a nested random-effects model.

    ``y`` is a 1-D array; ``groups`` lists integer codes from the coarsest factor to the
    finest, each finer factor nested in the one before (the last level, the residual, is
    the single observation). Returns ``(variances, estimable)`` with one entry per factor
    plus the residual; a factor with no degrees of freedom (one level per parent
    everywhere) is not estimable and gets NaN. Negative estimates are returned as they
    are (the caller clamps). Henderson's method I: exact for unbalanced data.
    """
    y = np.asarray(y, dtype=float)
    codes = [np.zeros(y.size, dtype=np.int64)]
    for g in groups:  # a group is identified within its parent: codes stay nested
        g = np.asarray(g)
        if g.shape != y.shape:
            raise ValueError(f"`groups` must hold one code per value of `y` ({y.size}); "
                             f"got {g.shape}.")
        pairs = pd.MultiIndex.from_arrays([codes[-1], g])
        codes.append(pd.factorize(pairs)[0].astype(np.int64))
    codes.append(np.arange(y.size, dtype=np.int64))
    depth = len(codes)  # level 0 is the grand mean
    counts = [np.bincount(c) for c in codes]
    sums = [np.bincount(c, weights=y) for c in codes]
    fit = [float(np.sum(s ** 2 / n)) for s, n in zip(sums, counts)]  # sum n_g * mean_g^2
    n_groups = [len(n) for n in counts]
    # k[L][K]: sum over groups g at level L of (sum over its level-K groups h of n_h^2) / n_g
    k = np.zeros((depth, depth))
    for lv in range(depth):
        for kv in range(lv, depth):
            parent = np.zeros(n_groups[kv], dtype=np.int64)
            parent[codes[kv]] = codes[lv]
            sq = np.bincount(parent, weights=counts[kv].astype(float) ** 2,
                             minlength=n_groups[lv])
            k[lv, kv] = float(np.sum(sq / counts[lv]))
    rows = range(1, depth)
    ss = np.array([fit[lv] - fit[lv - 1] for lv in rows])
    coef = np.array([[k[lv, kv] - k[lv - 1, kv] if kv >= lv else 0.0 for kv in rows]
                     for lv in rows])
    df = np.array([n_groups[lv] - n_groups[lv - 1] for lv in rows])
    estimable = df > 0
    var = np.full(depth - 1, np.nan)
    if estimable[-1]:
        idx = np.flatnonzero(estimable)
        var[idx] = np.linalg.solve(coef[np.ix_(idx, idx)], ss[idx])
    else:
        estimable[:] = False
    return var, estimable


def _cell_components(frame: pd.DataFrame, value: str, replays: bool) -> dict:
    """Components of one cell: log ``value`` nested in machine > process (> placement when
    the values are ``replays`` of a placement; otherwise a value is a placement)."""
    y = np.log(frame[value].to_numpy(dtype=float))
    process = pd.MultiIndex.from_arrays([frame["run"], frame["trial"]])
    groups = [pd.factorize(frame["machine"])[0], pd.factorize(process)[0]]
    if replays:
        groups.append(frame["placement"].to_numpy())
    var, _ = nested_components(y, groups)
    names = FACTORS[:len(var)]
    clamped = [n for n, v in zip(names, var) if v < 0]
    sd = {f"sd_{n}": math.sqrt(max(v, 0.0)) if np.isfinite(v) else math.nan
          for n, v in zip(names, var)}
    sd.setdefault("sd_replay", math.nan)
    total = sum(max(v, 0.0) for v in var if np.isfinite(v))
    return dict(sd, sd_total=math.sqrt(total), n_machines=frame["machine"].nunique(),
                n_processes=process.nunique(),
                n_placements=int(frame.groupby(["run", "trial"])["placement"].nunique().sum()),
                n_values=len(frame), geo_mean_ms=float(np.exp(y.mean())),
                clamped=", ".join(clamped))


def decompose(placements: pd.DataFrame, samples: pd.DataFrame | None = None,
              levels=LEVELS) -> pd.DataFrame:
    """Standard deviation of each nested random effect on the log time, per cell and level.

    Parameters
    ----------
    placements : DataFrame
        One row per placement (:func:`stack` output): ``machine``, ``run``, ``config``,
        ``candidate``, ``mode``, ``trial``, ``placement``, ``kernel_ms`` (NaN where the
        profiler did not record it). A process is a (``run``, ``trial``) pair; it is nested
        in its ``machine``.
    samples : DataFrame, optional
        One row per sample, with the same keys and ``ms``; needed for the call level.
    levels : str or tuple of str
        Subset of ``("call", "kernel")``; default both. ``call`` decomposes the log
        samples (machine, process, placement, replay), ``kernel`` the log profiler time per
        placement (machine, process, placement; no replay term).

    Returns
    -------
    DataFrame
        One row per (``config``, ``candidate``, ``mode``, ``level``) with ``sd_machine``,
        ``sd_process``, ``sd_placement``, ``sd_replay`` (NaN at kernel level) and
        ``sd_total``: standard deviations of the natural log of the time, i.e. relative
        standard deviations (0.01 is about 1 %); the counts ``n_machines``,
        ``n_processes``, ``n_placements`` (summed over processes) and ``n_values``;
        ``geo_mean_ms``; and ``clamped``, the components whose estimate was negative and
        is reported as 0. Kernel-level rows have ``mode`` "" (the profiler time of a
        placement does not depend on the timing mode; it is recorded once per placement).

    Notes
    -----
    Method of moments (Henderson's method I, the ANOVA estimator): each level's sum of
    squares is set equal to its expectation under the nested model and the linear system
    is solved from the finest level up; with near-balanced data (here every placement has
    the same samples and every process the same placements) it equals the classical
    balanced ANOVA estimator. A negative solution, which happens when a component is small
    against the noise above it, is clamped at 0 and named in ``clamped``. A factor with
    a single level per parent (e.g. one machine) is not estimable: NaN. With two machines
    the machine component rests on one degree of freedom and is very imprecise. The
    estimator uses means of logs, not medians, so a few extreme samples raise the replay
    component.

    References
    ----------
    .. [1] S. R. Searle, G. Casella, C. E. McCulloch, *Variance Components*, Wiley, 1992,
       ch. 5 (ANOVA estimation, unbalanced data).
    """
    levels = _levels_iv(levels)
    places = _validate.frame("placements", placements, PLACEMENT_KEYS + ("kernel_ms",),
                             rows=True)
    _positive_times_iv("placements['kernel_ms']", places["kernel_ms"], allow_nan=True)
    rows = []
    if "call" in levels:
        s = _validate.frame("samples", samples, SAMPLE_KEYS, rows=True)
        _positive_times_iv("samples['ms']", s["ms"])
        for cell, frame in s.groupby(list(CELL), sort=True):
            rows.append(dict(zip(CELL, cell), level="call",
                             **_cell_components(frame, "ms", replays=True)))
    if "kernel" in levels:
        k = places.dropna(subset=["kernel_ms"])
        keys = ["machine", "run", "config", "candidate", "trial", "placement"]
        spread = k.groupby(keys)["kernel_ms"].nunique()
        if (spread > 1).any():
            raise ValueError(f"`placements` must hold one kernel_ms per placement (the same in "
                             f"every mode); {spread.idxmax()} has {spread.max()} values.")
        k = k.drop_duplicates(keys)
        for cell, frame in k.groupby(["config", "candidate"], sort=True):
            rows.append(dict(config=cell[0], candidate=cell[1], mode="", level="kernel",
                             **_cell_components(frame, "kernel_ms", replays=False)))
    out = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    for c in ("n_machines", "n_processes", "n_placements", "n_values"):
        out[c] = out[c].astype("int64")
    return out


# --------------------------------------------------------------------------- question (a)

def single_placement_spread(placements: pd.DataFrame, components: pd.DataFrame,
                            placement: int = 0) -> pd.DataFrame:
    """The spread between processes that one placement per process shows, beside the
    process component of the nested model.

    The old protocol timed each process at one placement, so the spread of its process
    medians held the process effect *and* that placement's effect. Here each process's
    value at placement ``placement`` (its median at call level, its kernel time at kernel
    level) is taken, and the standard deviation of their logs is pooled within machines
    (each machine's own mean removed), for each row of ``components`` (:func:`decompose`).

    Returns
    -------
    DataFrame
        ``components``' keys with ``sd_one_placement`` (pooled SD of the logs),
        ``df_one_placement`` (its degrees of freedom: processes minus machines),
        ``sd_process`` (from ``components``) and ``share_placement``,
        ``1 - sd_process**2 / sd_one_placement**2`` clipped to [0, 1]: the share of the
        one-placement spread between processes that is not a process effect (placement and
        replay noise). NaN where fewer than two processes share a machine.
    """
    places = _validate.frame("placements", placements,
                             PLACEMENT_KEYS + ("median_ms", "kernel_ms"), rows=True)
    comp = _validate.frame("components", components, CELL + ("level", "sd_process"),
                           rows=True)
    placement = _validate.integer("placement", placement, 0)
    if placement not in set(places["placement"]):
        raise ValueError(f"`placement` must be one of the recorded placements "
                         f"{sorted(set(places['placement']))}; got {placement}.")
    one = places[places["placement"] == placement]
    rows = []
    for r in comp.itertuples(index=False):
        if r.level == "call":
            sel = one[(one["config"] == r.config) & (one["candidate"] == r.candidate)
                      & (one["mode"] == r.mode)]
            value = "median_ms"
        else:
            sel = one[(one["config"] == r.config) & (one["candidate"] == r.candidate)]
            sel = sel.dropna(subset=["kernel_ms"]).drop_duplicates(["machine", "run", "trial"])
            value = "kernel_ms"
        logs = np.log(sel[value].to_numpy(dtype=float))
        centred = logs - sel.assign(y=logs).groupby("machine")["y"].transform("mean").to_numpy()
        dof = len(sel) - sel["machine"].nunique()
        sd_one = math.sqrt(float(np.sum(centred ** 2)) / dof) if dof > 0 else math.nan
        share = (min(1.0, max(0.0, 1.0 - r.sd_process ** 2 / sd_one ** 2))
                 if dof > 0 and sd_one > 0 and np.isfinite(r.sd_process) else math.nan)
        rows.append({"config": r.config, "candidate": r.candidate, "mode": r.mode,
                     "level": r.level, "sd_one_placement": sd_one, "df_one_placement": dof,
                     "sd_process": r.sd_process, "share_placement": share})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- question (b)

def _arm_rows(samples, places, candidate, level, mode) -> pd.DataFrame:
    """One arm's rows: samples in ``mode`` (call level) or one kernel time per placement."""
    if level == "call":
        return samples[(samples["candidate"] == candidate) & (samples["mode"] == mode)]
    d = places[(places["candidate"] == candidate)].dropna(subset=["kernel_ms"])
    return d.drop_duplicates(["run", "trial", "placement"])


def _nested_arm(rows: pd.DataFrame, level: str, processes) -> list:
    """One arm as processes -> placements -> samples (stats.compare's nested input), over
    the (run, trial) ``processes`` given, in their order."""
    out = []
    for key in processes:
        proc = rows[(rows["run"] == key[0]) & (rows["trial"] == key[1])]
        if level == "call":
            out.append([g["ms"].to_numpy(dtype=float) for _, g in proc.groupby("placement")])
        else:
            out.append([np.array([v]) for v in proc.sort_values("placement")["kernel_ms"]])
    return out


def speedup_by_level(placements: pd.DataFrame, samples: pd.DataFrame, config: str,
                     baseline: str = BASELINE, candidate: str = "eager_compiled",
                     modes=None, margin: float = DEFAULT_MARGIN, n_resamples: int = 10_000,
                     seed: int | None = 42, n_comparisons=None) -> pd.DataFrame:
    """Speedup ``baseline / candidate`` on each machine, at call level in each mode and at
    kernel level, with :func:`stats.compare`'s interval and verdict.

    Each process gives one value per arm (its placements' log medians averaged; at kernel
    level one kernel time per placement), paired between the arms over the processes
    both ran in, and :func:`stats.compare`'s t-interval treats the processes as the
    independent units. Machines are compared separately: with two machines, a machine
    level cannot be estimated. Every interval is Bonferroni-adjusted for
    ``n_comparisons``: an int, or a dict of machine -> int (the family each machine's run
    belongs to in the chapter that reports it, e.g. ``comparisons.target_family``);
    default the number of rows returned.

    Returns
    -------
    DataFrame
        One row per (``machine``, ``level``, ``mode``; mode "" at kernel level):
        ``n_processes``, ``speedup``, ``ci_low``, ``ci_high``, ``verdict``, ``reason``,
        ``margin``, ``n_comparisons``.
    """
    places = _validate.frame("placements", placements, PLACEMENT_KEYS + ("kernel_ms",),
                             rows=True)
    s = _validate.frame("samples", samples, SAMPLE_KEYS, rows=True)
    if config not in set(s["config"]):
        raise ValueError(f"`config` must be one of {sorted(set(s['config']))}; got {config!r}.")
    s, places = s[s["config"] == config], places[places["config"] == config]
    for name, cand in (("baseline", baseline), ("candidate", candidate)):
        if cand not in set(s["candidate"]):
            raise ValueError(f"`{name}` must be one of {sorted(set(s['candidate']))}; "
                             f"got {cand!r}.")
    recorded = [m for m in MODES if m in set(s["mode"])]
    modes = tuple(recorded if modes is None else ((modes,) if isinstance(modes, str) else modes))
    if not modes or any(m not in recorded for m in modes):
        raise ValueError(f"`modes` must be a non-empty subset of the recorded modes "
                         f"{recorded}; got {modes!r}.")
    jobs = []
    for machine in sorted(set(s["machine"])):
        ms, mp = s[s["machine"] == machine], places[places["machine"] == machine]
        jobs += [(machine, "call", m, ms, mp) for m in modes]
        if mp.loc[mp["candidate"].isin([baseline, candidate]), "kernel_ms"].notna().any():
            jobs.append((machine, "kernel", "", ms, mp))
    if isinstance(n_comparisons, dict):
        missing = sorted(set(s["machine"]) - set(n_comparisons))
        if missing:
            raise ValueError(f"`n_comparisons` must give a family size for every machine; "
                             f"missing {missing}.")
        family = {k: _validate.positive_integer("n_comparisons", v)
                  for k, v in n_comparisons.items()}
    else:
        one = len(jobs) if n_comparisons is None else _validate.positive_integer(
            "n_comparisons", n_comparisons)
        family = {machine: one for machine in set(s["machine"])}
    rows = []
    for machine, level, mode, ms, mp in jobs:
        m = family[machine]
        arms = [_arm_rows(ms, mp, c, level, mode) for c in (baseline, candidate)]
        both = sorted(set(zip(arms[0]["run"], arms[0]["trial"]))
                      & set(zip(arms[1]["run"], arms[1]["trial"])))
        if not both:
            continue
        base, cand = (_nested_arm(a, level, both) for a in arms)
        c = stats.compare(base, cand, margin=margin, n_resamples=n_resamples, seed=seed,
                          n_comparisons=m)
        rows.append({"machine": machine, "level": level, "mode": mode,
                     "n_processes": min(len(base), len(cand)), "speedup": c.ratio_ci.ratio,
                     "ci_low": c.ratio_ci.low, "ci_high": c.ratio_ci.high,
                     "verdict": c.verdict.value, "reason": c.reason, "margin": margin,
                     "n_comparisons": m})
    return pd.DataFrame(rows)
