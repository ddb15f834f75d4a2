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
# (calibration-v2)=
# # B Calibration of the design
#
# How often does the design call identical code different, or miss a known slowdown? The
# controls are the A/A twin and spin kernels of known length ({ref}`§2 <methods-protocol2>`).

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"   # recorded runs, relative to the repository root
calibration_runs = "h200-calibration-p2a,h200-calibration-p2b,h200-calibration-p2c"  # pooled
processes = 2            # processes per replication of the design
margin = 0.02            # equivalence margin on the speedup
family_run = "h200-target-p2-m1"  # the target run whose family size m the rates are also given at
n_resamples = 2000       # bootstrap resamples per comparison (the bootstrap shown for comparison)
check_run = "h200-controls-p2-final"  # the controls re-run under the latest code; '' for none
simulation = "data/simulations/interval_coverage.csv"  # scripts/simulate_intervals.py output
design_runs = "h100-calibration-v3,h100-calibration-v4,h100b-calibration-v4,h200-calibration-v3,h200-calibration-v4"  # pooled per GPU model
design_processes = "2,3,4,6"  # processes per replication the design calibration compares
target_runs = "h200-target-p2-m1,h200-target-p2-m2"  # runs judged in the fixed-shape chapter's target family
family_runs = "h100-sota-target,h200-sota-target"  # other runs judged whole; the confirmatory runs join them

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs

root, params = nbs.parameters(globals(), processes=nbs.count_iv, margin=nbs.margin_iv,
                              family_run=nbs.run_iv, n_resamples=nbs.resamples_iv,
                              calibration_runs=nbs.runs_iv, design_runs=nbs.runs_iv,
                              design_processes=nbs.names_iv,
                              target_runs=nbs.runs_iv, family_runs=nbs.runs_iv,
                              check_run=nbs.recorded_run_iv,
                              simulation=nbs.repo_file_iv)
CR = list(params["calibration_runs"].values())

import pandas as pd
from attn_analysis.analyse import (calibration, comparisons, intervals, protocols, provenance,
                                   simulation as sim, stats)
from attn_analysis.present import tables
from attn_analysis.configs import TARGET

samples, kernels = protocols.pool_runs({r.run_id: (r.samples, r.kernels) for r in CR},
                                       devices={r.run_id: r.device for r in CR})
label = provenance.run_label(CR[0])
# The family size at which the paper decides: the target run's whole family
# (comparisons.target_family, every candidate per call in each mode and per kernel).
family = int(comparisons.target_family(params["family_run"], TARGET.key, margin=margin)
             ["n_comparisons"].iloc[0])
per = calibration.design_calibration(samples, kernels, k=processes, margin=margin, n_comparisons=1,
                                     n_resamples=n_resamples)
fam = calibration.design_calibration(samples, kernels, k=processes, margin=margin,
                                     n_comparisons=family, n_resamples=n_resamples)
boot = calibration.design_calibration(samples, kernels, k=processes, margin=margin, n_comparisons=1,
                                      n_resamples=n_resamples, method="bootstrap")
nbs.glue_text("cal2_family_run", params["family_run"].run_id)


def _row(frame, protocol, candidate, outcome):
    sel = frame[(frame["protocol"] == protocol) & (frame["candidate"] == candidate)
                & (frame["outcome"] == outcome)]
    return sel.iloc[0]


uuids = sorted({fp.get("gpu_uuid") or "unknown" for r in CR
                for fp in r.fingerprint["trials"].values()})
nbs.glue_text("cal2_label", label)
nbs.glue_text("cal2_runs", ", ".join(r.run_id for r in CR))
from attn_analysis.analyse import provenance as _prov
_runs_dir = pathlib.Path(CR[0].path).resolve().parent
nbs.glue_text("cal2_gpus", ", ".join(_prov.gpu_name(u, _runs_dir) for u in uuids))
nbs.glue_text("cal2_processes", processes)
nbs.glue_text("cal2_family", family)
nbs.glue_text("cal2_n_processes", int(samples["trial"].nunique()))
nbs.glue_text("cal2_placements", int(samples["placement"].nunique()))
twin = _row(per, protocols.PROTOCOL_B, "sdpa_twin", "claimed difference")
nbs.glue_text("cal2_reps", int(twin["n"]))
nbs.glue_text("cal2_fp_events", int(twin["events"]))
nbs.glue_text("cal2_fp_rate", float(twin["rate"]))
nbs.glue_text("cal2_fp_hi", float(twin["ci_high"]))
spins = sorted({c for c in per["candidate"] if c.startswith("sdpa_spin")},
               key=lambda c: _row(per, protocols.PROTOCOL_B, c, "slower")["slowdown"])
for c in spins:
    r, f = _row(per, protocols.PROTOCOL_B, c, "slower"), _row(fam, protocols.PROTOCOL_B, c, "slower")
    nbs.glue_text(f"cal2_{c}_slowdown_pct", (float(r["slowdown"]) - 1) * 100)
    nbs.glue_text(f"cal2_{c}_extra_pct", float(r["extra_share"]) * 100)
    nbs.glue_text(f"cal2_{c}_power", float(r["rate"]))
    nbs.glue_text(f"cal2_{c}_power_lo", float(r["ci_low"]))
    nbs.glue_text(f"cal2_{c}_power_family", float(f["rate"]))
    nbs.glue_text(f"cal2_{c}_power_family_lo", float(f["ci_low"]))
smallest = spins[0]
nbs.glue_text("cal2_small", smallest)
ra = _row(per, protocols.PROTOCOL_A, "sdpa_twin", "significant")
nbs.glue_text("cal2_reports_fp", float(ra["rate"]))
nbs.glue_text("cal2_reports_fp_lo", float(ra["ci_low"]))
nbs.glue_text("cal2_reports_fp_hi", float(ra["ci_high"]))
nbs.glue_text("cal2_reports_n", int(ra["n"]))
fp_goal, power_goal = 0.05, 0.80
small = _row(per, protocols.PROTOCOL_B, smallest, "slower")
met = twin["rate"] <= fp_goal and small["rate"] >= power_goal
nbs.glue_text("cal2_goal", (
    f"met: {int(twin['events'])} false positives in {int(twin['n'])} replications "
    f"(goal at most {fp_goal:.0%}) and power {small['rate']:.0%} against a true "
    f"{(small['slowdown'] - 1):.1%} slowdown (goal at least {power_goal:.0%})") if met else (
    f"not met: false-positive rate {twin['rate']:.0%} (goal at most {fp_goal:.0%}), power "
    f"{small['rate']:.0%} against a true {(small['slowdown'] - 1):.1%} slowdown "
    f"(goal at least {power_goal:.0%})"))
# Coverage of the design's interval (each control's truth: every process pooled), and the
# same replications judged by the hierarchical bootstrap the t-interval replaced.
cov = per[per["outcome"] == calibration.COVERAGE]
nbs.glue_text("cal2_cov_events", int(cov["events"].sum()))
nbs.glue_text("cal2_cov_n", int(cov["n"].sum()))
cov_ci = intervals.binomial_rate_ci(int(cov["events"].sum()), int(cov["n"].sum()))
nbs.glue_text("cal2_cov", cov_ci.estimate)
nbs.glue_text("cal2_cov_lo", cov_ci.low)
nbs.glue_text("cal2_cov_hi", cov_ci.high)
bt = _row(boot, protocols.PROTOCOL_B, "sdpa_twin", "claimed difference")
nbs.glue_text("cal2_boot_fp_events", int(bt["events"]))
nbs.glue_text("cal2_boot_small_power", float(_row(boot, protocols.PROTOCOL_B, smallest, "slower")["rate"]))
bcov = boot[boot["outcome"] == calibration.COVERAGE]
nbs.glue_text("cal2_boot_cov", float(bcov["events"].sum() / bcov["n"].sum()))
nbs.glue_text("cal2_n_reps_for_5pct", int(next(n for n in range(1, 1000)
                                               if intervals.binomial_rate_ci(0, n).high < 0.05)))
nbs.glue_text("cal2_fp_bound", (
    f"with {int(twin['n'])} replications and no false positive, the 95 % upper bound on the "
    f"rate is {twin['ci_high']:.1%}" if twin["events"] == 0 else
    f"the 95 % interval of the rate is {twin['ci_low']:.1%}–{twin['ci_high']:.1%}"))

# %% [markdown]
# Runs {glue:text}`cal2_runs:s` ({glue:text}`cal2_gpus:s`) hold
# {glue:text}`cal2_n_processes:d` processes at {glue:text}`cal2_placements:d` placements,
# in graph mode. One replication is {glue:text}`cal2_processes:d` processes; disjoint
# groups give {glue:text}`cal2_reps:d` replications.
#
# **The A/A twin was called different {glue:text}`cal2_fp_events:d` times in
# {glue:text}`cal2_reps:d` replications** ({glue:text}`cal2_fp_bound:s`). The smallest
# positive control, {glue:text}`cal2_small:s`, {glue:text}`cal2_sdpa_spin0_slowdown_pct:.1f` %
# slower per call, was called slower beyond the margin in
# {glue:text}`cal2_sdpa_spin0_power:.0%` of replications. The
# interval held each control's true speedup in {glue:text}`cal2_cov:.1%` of replications.
# These runs cover the call level only ({ref}`below <calibration-design>` adds the kernel level).
#
# The reports' test (Mann-Whitney U on one process's samples) called the identical twin
# different in {glue:text}`cal2_reports_fp:.0%` of {glue:text}`cal2_reports_n:d` processes
# (95 % interval {glue:text}`cal2_reports_fp_lo:.0%`–{glue:text}`cal2_reports_fp_hi:.0%`).

# %% tags=["remove-cell"]
show = per.assign(
    slowdown=lambda d: (d["slowdown"] - 1) * 100,
    extra_share=lambda d: d["extra_share"] * 100,
    rate=lambda d: [f"{e}/{n} = {r:.2f} ({lo:.2f}–{hi:.2f})" for e, n, r, lo, hi in
                    zip(d["events"], d["n"], d["rate"], d["ci_low"], d["ci_high"])])
show["protocol"] = show["protocol"].str.split(":").str[0]
tables.show(show[["protocol", "candidate", "role", "slowdown", "extra_share", "outcome",
                  "rate"]],
            f"Outcome rates per replication of {processes} processes with Clopper-Pearson "
            f"95 % intervals, each replication judged by its own 95 % t-interval over "
            f"processes (one comparison, no family; the rates at the target family's "
            f"m = {family} and under the hierarchical bootstrap are in the CSV); slowdown: "
            f"the control's true call-level slowdown over every process (%), extra kernel: "
            f"the profiler's extra kernel time over the default dispatch's (%). {label}, runs "
            f"{', '.join(r.run_id for r in CR)}.", name="tbl-calibration-v2",
            labels={"slowdown": "true slowdown (%)", "extra_share": "extra kernel (%)",
                    "rate": "events / replications = rate (95 % CI)"},
            formats={"slowdown": ".1f", "extra_share": ".1f"},
            csv="calibration_v2.csv",
            full=pd.concat([per.assign(family=1, interval=stats.DEFAULT_INTERVAL),
                            fam.assign(family=family, interval=stats.DEFAULT_INTERVAL),
                            boot.assign(family=1, interval="bootstrap")]))

# %% [markdown]
# (calibration-interval)=
# ## Which interval, by simulation
#
# `simulation.interval_study` drew runs of 2, 4 and 8 processes from the nested model with
# the measured components ({ref}`App. A <variance-v2>`) and larger ones, for five intervals' coverage
# and A/A false-positive rate. Honest in every scenario (no coverage
# significantly below 95 %, no A/A rate above 5 %): **{glue:text}`sim_honest:s`**. With a
# process component of 0.6 % at two processes the bootstrap covered
# {glue:text}`sim_bootstrap_p06_p2_cov:.1%`, the t-interval
# {glue:text}`sim_process_t_p06_p2_cov:.1%`. The t-interval's power against a 3 % slowdown is
# {glue:text}`sim_process_t_measured_call_p2_power:.0%` at two processes,
# {glue:text}`sim_process_t_measured_call_p8_power:.0%` at eight.

# %% tags=["remove-cell"]
study = pd.read_csv(params["simulation"])
honest = sim.honest(study)
nbs.glue_text("sim_honest", ", ".join(m for m, ok in honest.items() if ok) or "none")
nbs.glue_text("sim_n_reps", int(study["n_reps"].min()))
scen_keys = {"measured, call": "measured_call", "measured, kernel": "measured_kernel",
             "largest measured process": "largest"}
for name in study["scenario"].unique():
    key = scen_keys.get(name) or ("p06_neg" if "rho" in name else
                                  "p" + name.split()[1].rstrip("%").replace(".", ""))
    for r in study[study["scenario"] == name].itertuples():
        base = f"sim_{r.method.replace('-', '_')}_{key}_p{r.processes}"
        nbs.glue_text(base + "_cov", r.coverage)
        nbs.glue_text(base + "_fpr", r.fpr)
        nbs.glue_text(base + "_hw", r.median_half_width)
        nbs.glue_text(base + "_power", r.power)

# %% tags=["remove-cell"]
shown = study[study["scenario"].isin(["measured, call", "process 0.6%"])]
wide = shown.pivot_table(index=["scenario", "method"], columns="processes",
                         values=["coverage", "fpr"]).reset_index()
wide.columns = [f"{a} P={b}" if b != "" else a for a, b in wide.columns]
order = {m: i for i, m in enumerate(sim.METHODS)}
wide = wide.sort_values(["scenario", "method"], key=lambda c: c.map(order) if c.name ==
                        "method" else c)
tables.show(wide, f"Coverage of the true speedup and A/A false-positive rate of each "
            f"interval at 2, 4 and 8 processes, simulated ({int(study['n_reps'].min())} "
            f"runs per cell; 95 % intervals, one comparison): with the components measured "
            f"on the H200 (the default dispatch at the target, per call) and with a process "
            f"component of 0.6 % per arm. Every scenario (kernel level, 0.3 %, the largest "
            f"measured process component, anti-correlated arms), the power and the "
            f"half-widths, with Clopper-Pearson intervals, are in the CSV; "
            f"{simulation}, written by scripts/simulate_intervals.py.",
            name="tbl-interval-simulation",
            formats={c: ".1%" for c in wide.columns if " P=" in c},
            labels={c: c.replace("coverage", "coverage,").replace("fpr", "A/A rate,")
                    for c in wide.columns if " P=" in c},
            csv="interval_simulation.csv", full=study)

# %% [markdown]
# (calibration-recheck)=
# ## The controls under the latest code
#
# Run {glue:text}`cal2_check_run:s` re-ran the controls: the twin is
# {glue:text}`cal2_check_twin:s`; the spin controls are {glue:text}`cal2_check_spins:s`.

# %% tags=["remove-cell"]
from attn_analysis.analyse import comparisons

if params["check_run"]:
    from attn_analysis import record
    C = record.load(params["runs_dir"] / params["check_run"])
    ct = comparisons.speedup_table(C.samples, C.placements,
                                   candidates=[c for c in sorted(set(C.samples["candidate"]))
                                               if c.startswith("sdpa_")],
                                   margin=margin, n_resamples=n_resamples)
    ct = ct[ct["level"] == "call"].set_index("candidate")

    def _say(c):
        r = ct.loc[c]
        return f"{r['verdict']} ({r['speedup']:.3f}, {r['ci_low']:.3f}–{r['ci_high']:.3f})"
    nbs.glue_text("cal2_check_run", C.run_id)
    nbs.glue_text("cal2_check_label", provenance.run_label(C))
    nbs.glue_text("cal2_check_twin", _say("sdpa_twin") if "sdpa_twin" in ct.index
                  else "not measured")
    nbs.glue_text("cal2_check_spins", "; ".join(
        f"{c} {_say(c)}" for c in ct.index if c.startswith("sdpa_spin")) or "not measured")
else:
    for key in ("cal2_check_run", "cal2_check_label", "cal2_check_twin", "cal2_check_spins"):
        nbs.glue_text(key, "none")

# %% [markdown]
# (calibration-design)=
# ## The design at the margin
#
# The calibration runs time the default dispatch, its A/A twin and positive controls near
# 0.5, 1 and 1.5 margins, per call and per kernel. They hold
# {glue:text}`cal3_processes:s`. A replication of a k-process design takes k consecutive
# processes of one run. Processes that repeat another run's random draws:
# {glue:text}`cal3_seeds:s`.
#
# The rule: at each level with a control of at least {glue:text}`cal3_min_size:.1f` margins,
# take the fewest processes whose power to call every such control "slower" reaches
# {glue:text}`cal3_goal:.0%` on every GPU model. The rule was written after the `-v3` runs
# were measured. It gives {glue:text}`cal3_choice_call:s` processes at the call level and
# {glue:text}`cal3_choice_kernel:s` at the kernel level, so the design is
# **{glue:text}`cal3_choice:s`** processes. How often two processes find the largest
# control: {glue:text}`cal3_power_k2:s`. A kernel-level difference of one margin stays
# hard to detect. {glue:text}`cal3_kernel_one:s` The A/A twin beyond the margin under the
# chosen design: {glue:text}`cal3_aa_beyond:s`

# %% tags=["remove-cell"]
from attn_analysis.present import audit_plots
from attn_analysis.analyse import design_calibration as dc
from attn_analysis.chapters import design_calibration as design_chapter

DR = list(params["design_runs"].values())
cal3 = design_chapter.calibrate_design(DR, [int(k) for k in params["design_processes"]], margin)
rates, ks, k_shown = cal3.rates, cal3.ks, cal3.k_shown
for name, value in design_chapter.design_texts(cal3).items():
    nbs.glue_text(name, value)

# %% tags=["remove-cell"]
spread, spread_sentence = design_chapter.spread_table(cal3)
nbs.glue_text("cal3_spread", spread_sentence)
tables.show(spread,
    "How much the processes of each calibration run differ at the call level (event time, "
    "graph mode, the target): the standard deviation over processes of the default "
    "dispatch's mean log time, and of each process's log ratio of the A/A twin to it (what "
    "the process-t interval is built from), in percent; and the twin's mean difference. "
    "Spawned processes start a fresh interpreter; forked ones start from a server that "
    "imported the measuring code (each starts its own CUDA context).",
    name="tbl-start-spread", csv="process_spread.csv",
    formats={"SD between processes (%)": ".2f", "SD of twin/sdpa per process (%)": ".2f",
             "twin/sdpa − 1 (%)": "+.3f"})

# %% tags=["remove-input"]
fig = audit_plots.power_by_processes(
    rates, dc.POWER_GOAL, f"Design calibration at {TARGET.key}, graph mode, margin "
    f"{margin:.0%}: power to call each control slower, A/A differences beyond it\n"
    f"runs {', '.join(r.run_id for r in DR)}, pooled per GPU model")
nbs.glue_figure("fig-design-power", fig)

# %% [markdown]
# ```{glue:figure} fig-design-power
# :name: fig-design-power
#
# Power (verdict "slower") of each positive control, labelled with its measured size in margins, and
# the A/A twin's rate beyond the margin, against processes per replication (Clopper-Pearson
# 95 % intervals). Rows: call and kernel level; columns:
# GPU model, its runs pooled ({glue:text}`cal3_runs_by_model:s`).
# ```

# %% tags=["remove-cell"]
tables.show(dc.design_table(rates, k_shown),
            f"Calibration of the design at the target, graph mode, margin {margin:.0%}, at "
            f"{k_shown} processes per replication (the other designs: "
            f"the figure above and the CSV); runs {', '.join(r.run_id for r in DR)}, pooled "
            f"per GPU model. Rate: for "
            f"the A/A twin its claimed differences, for a positive control its verdicts "
            f"'slower', over the replications, with the Clopper-Pearson 95 % interval; one "
            f"comparison per replication (a family of one).",
            name="tbl-design-rates", csv="design_calibration.csv", full=rates,
            formats={"size (margins)": ".1f", "rate": ".0%"})

# %% [markdown]
# (calibration-family)=
# ## At the results' families
#
# The results judge families of m comparisons ({numref}`tbl-family-calibration`). Re-judged
# there, power against the {glue:text}`fam_size_call:s`-margin call control is
# {glue:text}`fam_power_call_1:s` at m = 1 and {glue:text}`fam_power_call_m:s` at the used m;
# against the {glue:text}`fam_size_kernel:s`-margin kernel control,
# {glue:text}`fam_power_kernel_1:s` and {glue:text}`fam_power_kernel_m:s`. The A/A twin is
# called equivalent in {glue:text}`fam_eq_call_m:s` (call) and
# {glue:text}`fam_eq_kernel_m:s` (kernel), and different in {glue:text}`fam_fp_m:s`.

# %% tags=["remove-input"]
from attn_analysis.analyse import inventory

_inv = inventory.run_inventory(params["runs_dir"])
_used = {**params["target_runs"], **params["family_runs"]}
from attn_analysis import record as _record
for _rid in _inv.loc[_inv["role"] == "confirmatory", "run"]:
    _used.setdefault(_rid, _record.load(params["runs_dir"] / _rid))
used = design_chapter.used_designs(_used.values(), target_runs=tuple(params["target_runs"]))
fam_rates = design_chapter.family_calibration(cal3, used, margin)
for name, value in design_chapter.family_texts(fam_rates, used).items():
    nbs.glue_text(name, value)
tables.show(design_chapter.family_table(fam_rates, used),
            "Calibration at the results' families: call/kernel % of replications (k "
            "consecutive processes of one calibration run) with P processes, at each "
            "family m; P needed: `plan --power`. Runs, events and intervals: CSV.",
            name="tbl-family-calibration", csv="family_calibration.csv",
            full=fam_rates.merge(used.groupby(["device", "m"])["run"].agg(", ".join)
                                 .reset_index(), on=["device", "m"], how="left"))

# %% tags=["remove-cell"]
# The confirmatory runs with fewer processes than `plan --power` asks at their own family:
# their power there (the threats chapter pastes it).
nbs.glue_text("fam_short_confirm_power", design_chapter.short_runs_power(
    fam_rates, used, _inv.loc[_inv["role"] == "confirmatory", "run"]))
