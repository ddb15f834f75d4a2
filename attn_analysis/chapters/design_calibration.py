"""The calibration chapter's "design at the margin": the calibration runs pooled per GPU
model, the rates at each number of processes, the design chosen from them, and the
sentences and tables the chapter pastes (``notebooks/12_calibration.py``). The statistics
are :mod:`attn_analysis.analyse.design_calibration`'s; this module only puts them in words.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from ..analyse import calibration, comparisons, design_calibration as dc, power
from ..analyse.inventory import gpu_model
from ..analyse.provenance import model_label
from ..configs import TARGET

__all__ = ["DesignCalibration", "calibrate_design", "design_texts", "aa_beyond_short",
           "spread_table",
           "used_designs", "family_calibration", "family_table", "family_texts",
           "short_runs_power"]

NO_CHOICE = "no choice (no control of that size, or no design reaching the goal)"


@dataclasses.dataclass(frozen=True)
class DesignCalibration:
    """The rates of the runs pooled per GPU model (``rates``: rows of
    :func:`design_calibration.rates_by_processes`, ``device`` the model's label), the
    design (``choice``; None when the rule cannot choose) and each level's choice."""

    runs: tuple
    groups: dict
    ks: tuple
    rates: pd.DataFrame
    choice: int | None
    by_level: dict
    frames: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def k_shown(self) -> int:
        """The processes the chapter's table shows: the design, else the most compared."""
        return self.choice or max(self.ks)

    def pick(self, level: str, k: int, role: str, outcome: str) -> pd.DataFrame:
        r = self.rates
        return r[(r["level"] == level) & (r["k"] == k) & (r["role"] == calibration.ROLES[role])
                 & (r["outcome"] == outcome)]


def calibrate_design(runs, ks, margin: float) -> DesignCalibration:
    """Pool ``runs`` (loaded calibration runs) per GPU model, compute the rates at each
    ``k`` of ``ks`` at both levels, and choose the design
    (:func:`design_calibration.choose_design`)."""
    runs = tuple(runs)
    ks = tuple(sorted({int(k) for k in ks}))
    groups = dc.runs_by_model(runs)
    frames = {model: dc.pooled_levels(rs) for model, rs in groups.items()}
    rates = pd.concat([dc.rates_by_processes(frames[model], model_label(rs), ks=ks,
                                             margin=margin) for model, rs in groups.items()],
                      ignore_index=True)
    choice, by_level = dc.choose_design(rates)
    return DesignCalibration(runs, groups, ks, rates, choice, by_level, frames)


def design_texts(cal: DesignCalibration) -> dict:
    """The chapter's glued values (name -> text or number) for :class:`DesignCalibration`."""
    k0, k = min(cal.ks), cal.k_shown
    big = cal.pick("call", k0, "positive", "slower")
    big = big.loc[big.groupby("device")["size_margins"].idxmax()]
    cov = cal.pick("call", k0, "coverage", calibration.COVERAGE)
    one = cal.pick("kernel", k, "positive", "slower")
    one = one.loc[(one["size_margins"] - 1.0).abs().groupby(one["device"]).idxmin()]

    def aa_by_level(outcome):  # the A/A twin's rows at the design, call then kernel level
        return [cal.pick(level, k, "aa", outcome).sort_values("device").itertuples()
                for level in ("call", "kernel")]
    power = pd.concat([cal.pick(level, k, "positive", "slower") for level in ("call", "kernel")])
    twin = cal.pick("call", k0, "aa", "claimed difference")
    return {
        # the runs behind each GPU model's pooled rates (the figure's caption)
        "cal3_runs_by_model": "; ".join(
            f"{model_label(rs)}: {', '.join(r.run_id for r in rs)}"
            for rs in cal.groups.values()),
        "cal3_processes": "; ".join(
            " + ".join(f"{r.samples['trial'].nunique()} ({r.run_id})" for r in rs)
            + f" processes on the {model_label(rs)}" for rs in cal.groups.values()),
        "cal3_min_size": dc.MIN_CONTROL_MARGINS,
        "cal3_goal": dc.POWER_GOAL,
        "cal3_choice": str(cal.choice) if cal.choice else "none of the designs compared",
        "cal3_choice_call": str(cal.by_level["call"] or NO_CHOICE),
        "cal3_choice_kernel": str(cal.by_level["kernel"] or NO_CHOICE),
        "cal3_power_k2": "; ".join(f"{r.rate:.0%} at {r.size_margins:.1f} margins on the "
                                   f"{r.device}" for r in big.itertuples()),
        "cal3_cov_k2": f"{cov['rate'].min():.0%} to {cov['rate'].max():.0%}",
        "cal3_kernel_one": " ".join(  # one sentence per GPU model
            f"On the {r.device}, {r.candidate} ({r.size_margins:.1f} margins) is called slower "
            f"in {int(r.events)} of {int(r.n)} replications at {k} processes."
            for r in one.itertuples()),
        "cal3_aa": "; ".join(
            f"{int(c.events)}/{int(c.n)} at the call level (95 % upper bound "
            f"{c.ci_high:.1%}) and {int(kr.events)}/{int(kr.n)} at the kernel level (upper "
            f"bound {kr.ci_high:.1%}) on the {c.device}"
            for c, kr in zip(*aa_by_level("claimed difference"))),
        "cal3_near_goal": "; ".join(
            f"at the {level} level on the {device}, " + " and ".join(
                f"{r.rate:.0%} at {r.size_margins:.2f} margins ({r.candidate}, "
                f"{int(r.events)}/{int(r.n)})" for r in _bracket(g).itertuples())
            for (level, device), g in power.groupby(["level", "device"], sort=True)),
        "cal3_aa_beyond": " ".join(  # one sentence per GPU model
            f"On the {c.device}: {int(c.events)}/{int(c.n)} per call and "
            f"{int(kr.events)}/{int(kr.n)} per kernel (95 % upper bound at most "
            f"{max(c.ci_high, kr.ci_high):.1%})."
            for c, kr in zip(*aa_by_level("beyond margin"))),
        "cal3_aa_beyond_short": aa_beyond_short(cal),
        "cal3_twin_truth": ", ".join(f"{r.slowdown:.4f} ({r.device})" for r in twin.itertuples()),
        "cal3_kmax": max(cal.ks),
        "cal3_seeds": "; ".join(
            f"on the {model_label(cal.groups[model])}, {rep} of {n}"
            for model, (rep, n) in dc.repeated_draws(cal.runs).items()),
    }


def aa_beyond_short(cal: DesignCalibration) -> str:
    """The abstract's count of the A/A twin called faster or slower beyond the margin at
    the design's processes, per GPU model: "0 of 72 replications (H100) and 0 of 75
    (H200), per call and kernel" when both levels agree on every model, else each level's
    count per model."""
    k, parts, same = cal.k_shown, [], True
    for model, rs in cal.groups.items():
        label = model_label(rs)
        c, kr = (cal.pick(level, k, "aa", "beyond margin") for level in ("call", "kernel"))
        c, kr = c[c["device"] == label].iloc[0], kr[kr["device"] == label].iloc[0]
        same &= (int(c["events"]), int(c["n"])) == (int(kr["events"]), int(kr["n"]))
        parts.append((gpu_model(model), c, kr))
    if same:
        return " and ".join(
            f"{int(c['events'])} of {int(c['n'])}"
            f"{' replications' if i == 0 else ''} ({name})"
            for i, (name, c, _) in enumerate(parts)) + ", per call and kernel"
    return " and ".join(f"{int(c['events'])}/{int(c['n'])} per call and {int(kr['events'])}/"
                        f"{int(kr['n'])} per kernel ({name})" for name, c, kr in parts)


def _bracket(power: pd.DataFrame) -> pd.DataFrame:
    """Of one level's and model's positive controls, the largest below
    ``MIN_CONTROL_MARGINS`` and the smallest at or above it (those that exist), smaller
    first: the measured power on either side of the goal's size."""
    size = power["size_margins"]
    below, above = power[size < dc.MIN_CONTROL_MARGINS], power[size >= dc.MIN_CONTROL_MARGINS]
    return pd.concat([below.nlargest(1, "size_margins"), above.nsmallest(1, "size_margins")])


def spread_table(cal: DesignCalibration) -> tuple[pd.DataFrame, str]:
    """The table of each run's spread between processes (:func:`design_calibration.process_spread`)
    and the sentence that compares the start methods per GPU model."""
    spread = pd.DataFrame([dc.process_spread(r) for r in cal.runs])
    sentence = "; ".join(
        f"on the {model_label(cal.groups[model])}, " + " against ".join(
            f"{row.sd_process_pct:.2f} % ({row.start_method}, {row.run})"
            for row in spread[spread["device"] == model].itertuples())
        for model in dict.fromkeys(spread["device"]))
    table = pd.DataFrame({
        "run": spread["run"], "GPU": [model_label([r]) for r in cal.runs],
        "processes start": spread["start_method"], "processes": spread["processes"],
        "SD between processes (%)": spread["sd_process_pct"],
        "SD of twin/sdpa per process (%)": spread["sd_twin_ratio_pct"],
        "twin/sdpa − 1 (%)": spread["twin_ratio_pct"]})
    return table, sentence


# ------------------------------------------------------------------ at the families used

def used_designs(runs, target_runs=()) -> pd.DataFrame:
    """The designs the results chapters judge their verdicts with: per loaded run of
    ``runs``, its GPU model, the family m its chapter forms (for a run in
    ``target_runs``, the fixed-shape chapter's :func:`comparisons.target_family` at the
    target; for a run of a pre-registered plan, the plan's family
    (:func:`power.registered_family`, as the powered chapter judges it); else the whole run at the call, kernel and attention levels, as the
    state-of-the-art and powered chapters judge a run), its processes, and the processes
    ``plan --power`` asks at that m per level (:func:`design_calibration.needed_processes`
    of the recorded design SDs for its model, shapes and candidates; None where none are
    recorded)."""
    rows = []
    for run in runs:
        s = run.samples
        registered = power.registered_family(getattr(run, "info", None))
        if registered is not None:  # a pre-registered plan's family, as 3.7 judges it
            m = registered
        elif run.run_id in tuple(target_runs):
            m = int(comparisons.target_family(run, TARGET.key)["n_comparisons"].iloc[0])
        else:
            m = len(comparisons.plan_comparisons(s, run.placements, kernels=run.kernels)[0])
        sig = power.load_design_sigmas(device=run.device, configs=s["config"].unique(),
                                       candidates=sorted(s["candidate"].unique())) or {}
        need = dc.needed_processes(sig, m) if sig else {}
        rows.append({"run": run.run_id, "device": str(run.device),
                     "model": gpu_model(run.device), "m": m,
                     "processes": int(s.groupby(["config", "candidate"])["trial"]
                                      .nunique().min()),
                     "need_call": need.get("call"), "need_kernel": need.get("kernel")})
    return pd.DataFrame(rows, columns=["run", "device", "model", "m", "processes",
                                       "need_call", "need_kernel"])


def family_calibration(cal: DesignCalibration, designs: pd.DataFrame,
                       margin: float) -> pd.DataFrame:
    """:func:`design_calibration.family_rates` of each GPU model's pooled calibration runs
    at the designs of ``designs`` (:func:`used_designs`) of that model: every (m, k) of
    m in {1, the run's m} and k in {the run's processes, those needed at each level}."""
    out = []
    for model, frames in cal.frames.items():
        mine = designs[designs["device"] == model]
        pairs = {(mm, int(k)) for r in mine.itertuples() for mm in (1, r.m)
                 for k in (r.processes, r.need_call, r.need_kernel)
                 if k is not None and not pd.isna(k) and k >= 2}
        if pairs:
            out.append(dc.family_rates(frames, model, sorted(pairs), margin))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=list(dc.FAMILY_COLUMNS))


def _span(values) -> str:
    """'31–100 %', or '0 %' when every value rounds alike."""
    lo, hi = f"{values.min():.0f}", f"{values.max():.0f}"
    return f"{lo} %" if lo == hi else f"{lo}–{hi} %"


def _pct(rates: pd.DataFrame, model, level, m, k, measure) -> str:
    if k is None or pd.isna(k):
        return "–"
    r = rates[(rates["device"] == model) & (rates["level"] == level) & (rates["m"] == m)
              & (rates["k"] == int(k)) & (rates["measure"] == measure)]
    return "–" if r.empty or not r["n"].iloc[0] else f"{100 * r['rate'].iloc[0]:.0f}"


def family_table(rates: pd.DataFrame, designs: pd.DataFrame) -> pd.DataFrame:
    """The appendix's one table: per used design (GPU model, m, processes; designs that
    share all three are one row), "call/kernel" percentages of the power and the A/A
    "equivalent" rate at m (the false positives are in :func:`family_texts`), the
    processes ``plan --power`` asks, and the power and A/A "equivalent" rate there."""
    rows = []
    for (model, m, p), g in designs.groupby(["device", "m", "processes"], sort=True):
        need = {"call": g["need_call"].iloc[0], "kernel": g["need_kernel"].iloc[0]}

        def both(measure, k=None):
            return "/".join(_pct(rates, model, lv, m, p if k is None else k[lv], measure)
                            for lv in ("call", "kernel"))
        rows.append({"GPU": g["model"].iloc[0], "m": int(m), "P": int(p),
                     "power %": both("power"),
                     "A/A equiv. %": both("A/A equivalent"),
                     "P needed": "/".join("–" if v is None or pd.isna(v) else str(int(v))
                                          for v in need.values()),
                     "power % at need": both("power", need),
                     "A/A equiv. % at need": both("A/A equivalent", need)})
    return pd.DataFrame(rows)


def family_texts(rates: pd.DataFrame, designs: pd.DataFrame) -> dict:
    """The glued values of the family re-analysis: the runs, the controls' sizes, and the
    range over the used designs of each measure at m = 1 and at the design's m (at the
    runs' processes), per level."""
    out = {"fam_runs": ", ".join(designs["run"])}
    used = {(r.device, r.m, r.processes) for r in designs.itertuples()}
    mine = rates[[(d, k) in {(u[0], u[2]) for u in used} and (m == 1 or (d, m, k) in used)
                  for d, m, k in zip(rates["device"], rates["m"], rates["k"])]]
    for level in ("call", "kernel"):
        pw = mine[(mine["level"] == level) & (mine["measure"] == "power")]
        out[f"fam_size_{level}"] = (f"{pw['size_margins'].min():.1f}–"
                                    f"{pw['size_margins'].max():.1f}")
        for measure, key in (("power", "power"), ("A/A equivalent", "eq"),
                             ("false positive", "fp")):
            for at, sel in (("1", mine["m"] == 1), ("m", mine["m"] > 1)):
                r = mine[sel & (mine["level"] == level) & (mine["measure"] == measure)
                         & (mine["n"] > 0)]["rate"]
                out[f"fam_{key}_{level}_{at}"] = _span(100 * r) if len(r) else "none"
    fp = mine[(mine["m"] > 1) & (mine["measure"] == "false positive") & (mine["n"] > 0)]
    out["fam_fp_m"] = _span(100 * fp["rate"]) if len(fp) else "none"
    return out


def short_runs_power(rates: pd.DataFrame, designs: pd.DataFrame, runs) -> str:
    """The power, at its own family m and processes P, of each run of ``runs`` (run ids of
    ``designs``, :func:`used_designs`) whose P falls short of what ``plan --power`` asks at
    either level: "58/82 % on r1 (m = 144)", call/kernel as in :func:`family_table`, runs
    joined by "and". The threats chapter pastes it; "none" when no such run falls short."""
    if isinstance(runs, str):
        raise ValueError(f"`runs` must be a collection of run ids; got the string {runs!r}.")
    wanted = set(runs)
    missing = wanted - set(designs["run"])
    if missing:
        raise ValueError(f"`runs` names runs that `designs` does not hold: {sorted(missing)}.")

    def short(r):
        return any(need is not None and not pd.isna(need) and r.processes < need
                   for need in (r.need_call, r.need_kernel))
    parts = ["/".join(_pct(rates, r.device, lv, r.m, r.processes, "power")
                      for lv in ("call", "kernel")) + f" % on {r.run} (m = {int(r.m)})"
             for r in designs.itertuples() if r.run in wanted and short(r)]
    return " and ".join(parts) if parts else "none"
