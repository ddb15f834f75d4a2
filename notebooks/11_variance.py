# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (variance-v2)=
# # A Variance decomposition
#
# Protocol 2's timing spread splits into nested components: GPU, process, memory placement
# and replay noise. Does placement explain the spread between processes, and
# `eager_compiled`'s old lead over `sdpa`?

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"                                   # recorded runs, relative to the repository root
decomposition_runs = "h200-decomp-p2-m1,h200-decomp-p2-m2"  # protocol-v2 runs for the decomposition, comma-separated
target_runs = "h200-target-p2-m1,h200-target-p2-m2"      # protocol-v2 target runs for the speedup, comma-separated
margin = 0.02                                            # equivalence margin on the speedup ratio
n_resamples = 2000                                       # bootstrap resamples per comparison

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs

root, params = nbs.parameters(globals(), margin=nbs.margin_iv,
                              n_resamples=nbs.resamples_iv,
                              decomposition_runs=nbs.protocol2_runs_iv,
                              target_runs=nbs.protocol2_runs_iv)
DR, TR = params["decomposition_runs"], params["target_runs"]

import numpy as np
import pandas as pd
from scipy import stats as sps

from attn_analysis.analyse import gpu_time
from attn_analysis.present import audit_plots, tables
from attn_analysis.analyse import design, provenance, stats, variance
from attn_analysis.configs import TARGET
from attn_analysis.measure.plan import DEFAULT_TRIALS

DP, DS = variance.stack(DR)
TP, TS = variance.stack(TR)
if TARGET.key not in set(DS["config"]) or TARGET.key not in set(TS["config"]):
    raise ValueError(f"`decomposition_runs` and `target_runs` must both hold the target "
                     f"configuration {TARGET.key}.")
g = nbs.glue_text
label = "; ".join(dict.fromkeys(provenance.run_label(r) for r in [*DR.values(), *TR.values()]))
d_names, t_names = ", ".join(DR), ", ".join(TR)
gpus = sorted(set(DP["machine"]) | set(TP["machine"]))
runs_dir = pathlib.Path(next(iter(DR.values())).path).resolve().parent


def gpu_name(uuid):
    return provenance.gpu_name(uuid, runs_dir)


gpu_names = [gpu_name(u) for u in gpus]
cfg = TARGET.key
cfg_short = tables.short_config(cfg)
g("var_label", label)
g("var_d_runs", d_names)
g("var_t_runs", t_names)
g("var_cfg", cfg_short)
g("var_gpus", " and ".join(sorted(gpu_names)))
g("var_n_gpus", len(gpus))
g("var_machine_df", f"{len(gpus) - 1} degree{'' if len(gpus) == 2 else 's'} of freedom")

# the decomposition, call level in the runs' mode(s), kernel level once per placement
comp = variance.decompose(DP, DS)
one = variance.single_placement_spread(DP, comp, placement=0)
d_mode = "graph" if "graph" in set(DS["mode"]) else sorted(set(DS["mode"]))[0]
g("var_mode", d_mode)
first = comp.iloc[0]
g("var_n_proc", int(first["n_processes"]))
g("var_n_place", int(round(first["n_placements"] / first["n_processes"])))
g("var_n_samp", int(round(first["n_values"] / first["n_placements"])))
g("var_n_cells", len(comp))
g("var_n_configs", comp["config"].nunique())
g("var_n_cands", comp["candidate"].nunique())
g("var_n_clamped", int((comp["clamped"] != "").sum()))


def row(frame, candidate, level, config=cfg):
    """The row of ``frame`` for a candidate at a configuration and level."""
    sel = frame[(frame["config"] == config) & (frame["candidate"] == candidate)
                & (frame["level"] == level)]
    if level == "call":
        sel = sel[sel["mode"] == d_mode]
    return sel.iloc[0]


for level in ("call", "kernel"):
    r = row(comp, "sdpa", level)
    for f in variance.FACTORS:
        g(f"var_sdpa_{level}_{f}", r[f"sd_{f}"])
    g(f"var_sdpa_{level}_total", r["sd_total"])
    o = row(one, "sdpa", level)
    g(f"var_sdpa_{level}_one", o["sd_one_placement"])
    g(f"var_sdpa_{level}_share", o["share_placement"])
g("var_one_df", int(row(one, "sdpa", "call")["df_one_placement"]))

# question (a) over every cell: how much of the one-placement spread is not a process effect
shares = one["share_placement"].dropna()
g("var_a_n", len(shares))
g("var_a_n_mostly", int((shares > 0.5).sum()))
g("var_a_median_share", float(shares.median()))
g("var_a_median_one", float(one["sd_one_placement"].median()))
g("var_a_median_proc", float(one["sd_process"].median()))

# the machine component between the GPUs
big = comp.loc[comp["sd_machine"].idxmax()]
g("var_machine_max", big["sd_machine"])
g("var_machine_max_who", f"{big['candidate']} at {tables.short_config(big['config'])}, "
                         f"{big['level']} level")
g("var_machine_median", float(comp["sd_machine"].median()))

# question (b): sdpa / eager_compiled on each GPU, call level in each mode and kernel level.
# Each target run's comparisons belong to the family the fixed-shape chapter reports them
# in (comparisons.target_family: every candidate per call in each mode and per kernel), so
# these rows are the same intervals as there.
from attn_analysis.analyse import comparisons

fam_m = {}
for r in TR.values():
    uuids = {fp.get("gpu_uuid") for fp in r.fingerprint["trials"].values()}
    m = int(comparisons.target_family(r, cfg, margin=margin)["n_comparisons"].iloc[0])
    fam_m.update({u: m for u in uuids})
spd = variance.speedup_by_level(TP, TS, cfg, baseline="sdpa", candidate="eager_compiled",
                                margin=margin, n_resamples=n_resamples, n_comparisons=fam_m)
g("var_b_family", "; ".join(f"{gpu_name(u)}: m = {m}" for u, m in sorted(fam_m.items())))
spd["gpu"] = spd["machine"].map(gpu_name)
g("var_b_n", len(spd))
g("var_margin", margin)
decisive = spd[(spd["level"] == "kernel") | (spd["mode"] == "graph")]
g("var_b_n_decisive", len(decisive))
Vd = stats.Verdict
g("var_b_n_faster", int((decisive["verdict"] == Vd.FASTER.value).sum()))
g("var_b_n_equivalent", int(decisive["verdict"].isin(
    [Vd.EQUIVALENT.value, Vd.FASTER_WITHIN_MARGIN.value, Vd.SLOWER_WITHIN_MARGIN.value]).sum()))
g("var_b_lo", float(decisive["ci_low"].min()))
g("var_b_hi", float(decisive["ci_high"].max()))
host = spd[spd["mode"].isin(["per_call", "cold_l2"])]
g("var_b_n_host", len(host))
g("var_b_n_host_slower", int((host["verdict"] == Vd.SLOWER.value).sum()))
g("var_b_host_max", float(host["speedup"].max()) if len(host) else np.nan)
g("var_t_n_place", int(TP.groupby(["run", "trial", "candidate", "mode"]).size().median()))
g("var_t_n_proc", " and ".join(f"{n} on {gpu_name(m)}" for m, n in
                               zip(spd.drop_duplicates("machine")["machine"],
                                   spd.drop_duplicates("machine")["n_processes"])))

# the design: standard error of the log speedup and cost, from the components
arm_b, arm_c = row(comp, "sdpa", "call"), row(comp, "eager_compiled", "call")
units = pd.concat([r.units for r in DR.values()])
ok = units[units["status"] == "ok"]
per_unit = DP.groupby(["run", "config", "candidate", "mode", "trial"]).size()
placement_s = float((ok["elapsed_s"] / float(per_unit.median())).median())
overhead_s = float(np.median([gpu_time.process_overhead_s(r.units) for r in DR.values()]))
target_se = margin / (2 * sps.norm.ppf(0.975))
# the calibrated design: the sweep's processes per comparison (measure.plan.DEFAULT_TRIALS),
# at the placements and samples the decomposition runs recorded
P_USED = DEFAULT_TRIALS
M_USED = int(round(first["n_placements"] / first["n_processes"]))
N_USED = int(round(first["n_values"] / first["n_placements"]))
se_used = design.log_speedup_se(arm_b, arm_c, P_USED, M_USED, N_USED)
se_one = design.log_speedup_se(arm_b, arm_c, P_USED, 1, N_USED)
cost = lambda p, m: p * (overhead_s + 2 * m * placement_s)  # noqa: E731
best = design.cheapest_design(arm_b, arm_c, target_se, overhead_s, placement_s, samples=N_USED)
for key, value in (("p_used", P_USED), ("m_used", M_USED), ("n_used", N_USED)):
    g(f"var_{key}", value)
g("var_se_used", se_used)
g("var_se_one", se_one)
g("var_cost_used", cost(P_USED, M_USED))
g("var_cost_one", cost(P_USED, 1))
g("var_overhead_s", overhead_s)
g("var_placement_s", placement_s)
g("var_target_se", target_se)
g("var_best", f"{best.processes} processes x {best.placements} placements"
                if best else "none within 64 x 64")
g("var_best_cost", best.cost_s if best else np.nan)
g("var_best_se", best.se if best else np.nan)
g("var_proc_in_places", overhead_s / placement_s)
by_proc = design.cheapest_design(arm_b, arm_c, se_used, overhead_s, placement_s, samples=N_USED,
                                 max_placements=1)  # the design's error from processes alone
g("var_by_proc", f"{by_proc.processes} processes" if by_proc else "more than 64 processes")
g("var_by_proc_cost", by_proc.cost_s if by_proc else np.nan)
nbs.glue_figure("var_figure", audit_plots.variance_components(comp, label, runs=d_names,
                                                        mode=d_mode))

# %% [markdown]
# The decomposition runs ({glue:text}`var_d_runs:s`) hold {glue:text}`var_n_proc:d`
# processes on {glue:text}`var_gpus:s`. Each times {glue:text}`var_n_cands:d` candidates at
# {glue:text}`var_n_configs:d` configurations, at {glue:text}`var_n_place:d` placements of
# {glue:text}`var_n_samp:d` samples. `variance.decompose` fits the nested model to log times
# by the method of moments, so each standard deviation is a relative spread.
#
# At {glue:text}`var_cfg:s`, `sdpa`'s call-level components are: machine
# {glue:text}`var_sdpa_call_machine:.2%`, process {glue:text}`var_sdpa_call_process:.2%`,
# placement {glue:text}`var_sdpa_call_placement:.2%`, replay
# {glue:text}`var_sdpa_call_replay:.2%`. At kernel level: machine
# {glue:text}`var_sdpa_kernel_machine:.2%`, process {glue:text}`var_sdpa_kernel_process:.2%`,
# placement {glue:text}`var_sdpa_kernel_placement:.2%`.

# %% tags=["remove-cell"]
shown = comp[comp["config"] == cfg].merge(
    one[["config", "candidate", "mode", "level", "sd_one_placement"]],
    on=["config", "candidate", "mode", "level"])
cols = ["candidate", "level", "sd_machine", "sd_process", "sd_placement", "sd_replay",
        "sd_one_placement"]
tables.show(shown[cols],
            f"Standard deviation of each nested component of the log time at {cfg_short} "
            f"(call level in {d_mode} mode; kernel level from the profiler, one value per "
            f"placement, so no replay term), and, last, the spread between processes that "
            f"one placement per process shows (placement 0 only, pooled within GPUs). "
            f"{label}, runs {d_names}. Every configuration is in the CSV.",
            name="tbl-variance-components",
            labels={"level": "level", "sd_machine": "machine (%)",
                    "sd_process": "process (%)", "sd_placement": "placement (%)",
                    "sd_replay": "replay (%)",
                    "sd_one_placement": "between processes, one placement (%)"},
            formats={c: ".2%" for c in cols[2:]}, csv="variance_components.csv",
            full=comp.merge(one[["config", "candidate", "mode", "level", "sd_one_placement",
                                 "share_placement"]],
                            on=["config", "candidate", "mode", "level"]))

# %% [markdown]
# ```{glue:figure} var_figure
# :name: fig-variance-components
#
# Standard deviation of each nested component of the log time, per candidate and
# configuration: call level on the left, kernel level on the right. Runs
# {glue:text}`var_d_runs:s` on {glue:text}`var_gpus:s`.
# ```
#
# ## Placement and the spread between processes
#
# With one placement per process (protocol 1), the process medians of `sdpa` spread by
# {glue:text}`var_sdpa_call_one:.2%` at call level. The full model's process component
# is {glue:text}`var_sdpa_call_process:.2%`, so {glue:text}`var_sdpa_call_share:.0%` of that
# variance was placement and replay noise, not the process. Over all
# {glue:text}`var_a_n:d` cells, placement and replay make up more than half in
# {glue:text}`var_a_n_mostly:d`.
#
# Between the GPUs, `sdpa`'s machine component is {glue:text}`var_sdpa_call_machine:.2%`
# per call; the median over all cells is {glue:text}`var_machine_median:.2%`. It rests on
# {glue:text}`var_machine_df:s`, so it says whether these GPUs differed,
# not how a model's GPUs differ.
#
# ## `eager_compiled` under randomized placement
#
# The target runs ({glue:text}`var_t_runs:s`) give `sdpa / eager_compiled` on each GPU.
# Where the GPU does the work
# (graph mode and kernel level), `eager_compiled` was faster beyond the margin in
# {glue:text}`var_b_n_faster:d` of {glue:text}`var_b_n_decisive:d` comparisons, and within
# the margin in {glue:text}`var_b_n_equivalent:d`. Its protocol-1 lead was placement.

# %% tags=["remove-cell"]
tables.show(spd[["gpu", "level", "mode", "n_processes", "speedup", "ci_low", "ci_high",
                 "verdict"]],
            f"Speedup sdpa / eager_compiled at {cfg_short} on each GPU, call level per "
            f"timing mode and kernel level (profiler time per placement, mode not "
            f"applicable), with the family-wise 95 % t-interval over processes (Bonferroni "
            f"over each run's family in the fixed-shape chapter: "
            f"{'; '.join(f'{gpu_name(u)}: m = {m}' for u, m in sorted(fam_m.items()))}) "
            f"and the verdict against a ±{margin:.0%} margin. {label}, runs {t_names}.",
            name="tbl-variance-speedup",
            labels={"gpu": "GPU (UUID prefix)", "level": "level",
                    "n_processes": "processes"})

# %% [markdown]
# ## Consequences for the design
#
# With these components (`variance.log_speedup_se`), the design used (P =
# {glue:text}`var_p_used:d`, M = {glue:text}`var_m_used:d`, N =
# {glue:text}`var_n_used:d`) gives a log-speedup standard error of
# {glue:text}`var_se_used:.2%` in {glue:text}`var_cost_used:.0f` s of device time. One
# placement per process gives {glue:text}`var_se_one:.2%` in {glue:text}`var_cost_one:.0f` s.
# A process start costs as much as {glue:text}`var_proc_in_places:.0f` placements.
# Placements buy precision cheaply; only
# processes give the interval degrees of freedom.


# %% [markdown]
# (variance-robustness)=
# ## How robust the headline counts are
#
# Under the package's other analyses, no verdict count of the headline runs
# ({glue:text}`rb_runs:s`) moves by more than {glue:text}`rb_spread:s`
# ({glue:text}`rb_spread_where:s`; {numref}`tbl-robustness`). In runs
# {glue:text}`rb_clock_runs:s`, the SM clock ranged over {glue:text}`rb_clock_range:s`. Per 100 MHz the speedup moved by
# {glue:text}`rb_slopes:s` ({numref}`fig-clock`). Dropping placements below each run's
# median clock changes {glue:text}`rb_changed:s` verdicts ({glue:text}`rb_to_inc:s` to
# inconclusive) and leaves {glue:text}`rb_lost:s` unjudged; as many dropped at random
# change or unjudge {glue:text}`rb_random:s`.

# %% tags=["remove-input"]
from attn_analysis import record
from attn_analysis.analyse import inventory, robustness as rb
from attn_analysis.chapters import robustness as robustness_chapter

_inv = inventory.run_inventory(params["runs_dir"])
_confirm = _inv[_inv["role"] == "confirmatory"]
_powered = _confirm[_confirm["campaign"].fillna("").str.startswith("powered")]["run"].tolist()
_load = {rid: record.load(params["runs_dir"] / rid) for rid in [*_powered, *_confirm["run"]]}
_load.update(TR)


def _recorded_modes(r):
    have = set(r.samples.loc[r.samples["config"] == cfg, "mode"])
    return [m for m in ("graph", "per_call", "cold_l2") if m in have] + sorted(
        have - {"graph", "per_call", "cold_l2"})


# Each headline run in its chapter's family: 3.7's pre-registered family (call and kernel
# levels, m = power.registered_family), 3.1's target family (every mode per call, and per
# kernel); counted where the chapters count (3.7: call and kernel; 3.1: graph mode per
# call, and per kernel).
from attn_analysis.analyse.power import registered_family
_head = {rid: comparisons.plan_comparisons(_load[rid].samples, _load[rid].placements,
                                           modes=("graph",))[0] for rid in _powered}
_fam = {rid: registered_family(_load[rid].info) or len(_head[rid]) for rid in _powered}
_head.update({rid: comparisons.plan_comparisons(r.samples, r.placements,
                                                modes=_recorded_modes(r), configs=[cfg])[0]
              for rid, r in TR.items()})
_fam.update({rid: len(_head[rid]) for rid in TR})
_verdicts = pd.concat([rb.alternative_verdicts(
    plan, family=_fam[rid], margin=margin, n_resamples=n_resamples,
    keep=lambda c, k, lv, m: lv == "kernel" or (lv == "call" and m == "graph")).assign(run=rid)
    for rid, plan in _head.items()], ignore_index=True)
_cols = {}
for rid in _head:
    c = rb.verdict_counts(_verdicts[_verdicts["run"] == rid])
    _cols[f"{rid} (m = {_fam[rid]})"] = [
        "/".join(str(int(v)) for v in row) for row in c[list(rb.CATEGORIES)].to_numpy()]
_all = rb.verdict_counts(_verdicts[_verdicts["run"] == next(iter(_head))])
# the largest move of any count of any headline run between analyses, and where
_moves = {(rid, c_): rb.count_ranges(rb.verdict_counts(_verdicts[_verdicts["run"] == rid]))[c_]
          for rid in _head for c_ in rb.CATEGORIES}
(_mrid, _mcat), (_lo, _hi) = max(_moves.items(), key=lambda kv: kv[1][1] - kv[1][0])
g("rb_spread", str(_hi - _lo))
g("rb_spread_where", f"{_mcat}, {_lo}–{_hi} in {_mrid}")
g("rb_runs", ", ".join(_head))
tables.show(pd.DataFrame({"analysis": list(_all.index), **_cols}),
            "Verdicts (equivalent/faster/slower/inconclusive) of each headline run under "
            "each analysis; Bonferroni over the run's family m. Powered run: call and "
            "kernel level with the A/A twin, m pre-registered. Target runs: graph mode "
            "per call, and per kernel; their m also holds the other timing modes.",
            name="tbl-robustness", csv="robustness_counts.csv", full=_verdicts)

# the SM clock, per GPU model: every run above, each comparison's placements paired
_cs = rb.clock_sensitivity(
    [(rid, inventory.gpu_model(r.device), r,
      ("graph",) if rid not in TR else _recorded_modes(r), None if rid not in TR else [cfg],
      r.kernels if rid not in TR and rid not in _fam else None) for rid, r in _load.items()],
    margin=margin)
_pairs = _cs.pairs
_slopes = {(m_, lv): rb.clock_slope(d) for (m_, lv), d in _pairs.groupby(["model", "level"])}
g("rb_clock_range", "; ".join(f"{m_} {d.min():.0f}–{d.max():.0f} MHz"
                               for m_, d in _pairs.groupby("model")["clock_mhz"]))
g("rb_slopes", "; ".join(f"{m_} {lv} {s.pct_per_100mhz:+.2f} % ({s.low:+.2f} to {s.high:+.2f})"
                         for (m_, lv), s in _slopes.items() if s is not None))
g("rb_changed", f"{_cs.changed} of {_cs.judged}")
g("rb_to_inc", str(_cs.to_inconclusive))
g("rb_random", str(_cs.random))
g("rb_lost", str(_cs.lost))
g("rb_clock_runs", ", ".join(_load))
fig = robustness_chapter.clock_figure(_pairs, _slopes)
# taller panels, and the devices and software of the runs drawn on the figure itself
fig.set_size_inches(fig.get_size_inches()[0], 3.6)
fig.suptitle("; ".join(sorted({provenance.run_label(_load[r]) for r in set(_pairs["run"])})),
             fontsize=8.5)
nbs.glue_figure("fig-clock", fig)

# %% [markdown]
# ```{glue:figure} fig-clock
# :name: fig-clock
#
# Speedup over SDPA against the SM clock, centred within each comparison, in 30 MHz bins;
# lines: the fitted slopes. One panel per GPU model, its runs named in the panel title.
# ```
