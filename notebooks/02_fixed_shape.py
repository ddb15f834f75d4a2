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
# # 3.1 The reports' shape
#
# **At {glue:text}`fx_config:s`, nothing that PyTorch offers beats SDPA's default dispatch
# beyond the margin.** These runs are exploratory; confirmatory runs of our Triton kernel
# and the public kernels at this shape are in {ref}`sota-target`.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
run = "h200-target-p2-m1" # documented default lead run, the target shape under protocol 2;
                          # empty picks the largest GPU run
measure = False           # True measures a new run on this machine first
                          # with measure True also device, shapes, candidates, trials,
                          # samples and run_id, as declared in 03_matrix
n_resamples = 1000        # bootstrap resamples per interval
config = ""               # configuration key; empty for B32-H8-S512-D64-fp16 if recorded
margin = 0.02             # equivalence margin on the speedup ratio, in (0, 1)
graph_check = "data/checks/graph_variability_h100.json"  # scripts/graph_variability.py output
replication = "h200-target-p2-m2"  # the same plan on a second GPU of the same model;
                                   # empty skips the sections that need it

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs

root, params, runs, catalog, lead, R = nbs.prelude(
    globals(), config=nbs.config_iv, margin=nbs.margin_iv,
    graph_check=nbs.check_file_iv("graph_variability", optional=True),
    replication=nbs.recorded_run_iv)

import json, pandas as pd
from attn_analysis.analyse import (findings, kernel_evidence, latency_tables, provenance, reference,
                                   sample_groups, stats, replay_cost as rc)
from attn_analysis import configs
from attn_analysis.present import tables, plots
from attn_analysis.configs import TARGET
from attn_analysis.measure.controls import CONTROL_NAMES

label = provenance.run_label(R)
recorded = set(R.samples["config"])
if not isinstance(config, str) or (config and config not in recorded):
    raise ValueError(f"`config` must be '' or one of {sorted(recorded)}; got {config!r}.")
config = config or (TARGET.key if TARGET.key in recorded
                    else max(recorded, key=lambda k: configs.Config.from_key(k)))
modes = [m for m in configs.MODES if m in set(R.samples.loc[R.samples["config"] == config,
                                                            "mode"])]
main_mode = "graph" if "graph" in modes else modes[0]
nbs.glue_text("fx_label", label)
nbs.glue_text("fx_run", lead)
nbs.glue_text("fx_config", config)
nbs.glue_text("fx_margin", float(margin))
nbs.glue_text("fx_mode", main_mode)

# %% [markdown]
# (fixed-two-levels)=
# ## The answer per call and per kernel
#
# Each candidate gets two speedups over the default dispatch, per call (graph replay) and
# per kernel (the profiler's kernel time), each with a family-wise
# {ref}`interval <methods-interval>`.

# %% tags=["remove-cell"]
from attn_analysis.analyse import comparisons
from attn_analysis.chapters import fixed_shape as fx, state_of_the_art as sota

spin_controls = [c for c in CONTROL_NAMES if c != "sdpa_twin"]
v2_runs = [r for r in (lead, replication) if r and runs[r].protocol == 2
           and config in set(runs[r].samples["config"]) and "graph" in set(runs[r].samples["mode"])]
_gpu = fx.gpu_label


# One family per run: every candidate at the call level in each recorded timing mode and
# at the kernel level (comparisons.target_family). Every table and figure of this chapter
# takes its rows of a run from that family, so a comparison has one interval in the book.
families, family_m, two_level = {}, {}, {}
for rid in v2_runs:
    families[rid] = comparisons.target_family(runs[rid], config, margin=float(margin))
    family_m[rid] = int(families[rid]["n_comparisons"].iloc[0])
    f = families[rid]
    two_level[rid] = f[(f["level"] == "kernel") | (f["mode"] == "graph")]


def family_note(rid):
    return fx.family_note(families, rid)


nbs.glue_text("fx_family_lead", family_note(lead))
if two_level:
    nbs.glue_text("fx2_m", family_m[v2_runs[0]])
    nbs.glue_text("fx2_conf", 1 - 0.05 / family_m[v2_runs[0]])
    for i, rid in enumerate(v2_runs, start=1):
        nbs.glue_text(f"fx2_run{i}", rid)
        nbs.glue_text(f"fx2_family{i}", family_note(rid))
        nbs.glue_text(f"fx2_gpu{i}", _gpu(runs[rid]))
        nbs.glue_text(f"fx2_answer{i}", findings.kernel_answer(
            two_level[rid][~two_level[rid]["candidate"].isin(spin_controls + ["sdpa_twin"])],
            margin=float(margin)))
        nbs.glue_values("fx2_", fx.run_values(two_level[rid], str(i)))
    nbs.glue_text("fx2_answer", fx.answer_sentence(
        {_gpu(runs[r]): two_level[r][~two_level[r]["candidate"].isin(CONTROL_NAMES)]
         for r in v2_runs}, float(margin)))
    a, b = ((two_level[r]["baseline_ms"].iloc[0] for r in v2_runs) if len(v2_runs) == 2
            else (1.0, float("nan")))  # the second GPU's SDPA against the first's, in %
    nbs.glue_text("fx2_machine_pct", (b / a - 1) * 100)
    fig = plots.speedup_summary(
        {_gpu(runs[r]): two_level[r][~two_level[r]["candidate"].isin(spin_controls)]
         for r in v2_runs}, float(margin),
        f"{provenance.run_label(R)}, {config}: every candidate against the default SDPA "
        f"dispatch (protocol 2, runs {', '.join(v2_runs)})")
    nbs.glue_figure("fx2_summary", fig)
else:
    raise ValueError(f"`run` ({lead!r}) or `replication` must be a protocol-2 run holding "
                     f"{config} in graph mode; the recorded ones are listed in data/runs/README.md.")

# %% [markdown]
# ```{glue:figure} fx2_summary
# :name: fig-fixed-summary
#
# Speedup of each candidate over the default SDPA dispatch at {glue:text}`fx_config:s`, per
# call (left) and per kernel (right), on {glue:text}`fx2_gpu1:s` and {glue:text}`fx2_gpu2:s`,
# each run one Bonferroni family; each interval at {glue:text}`fx2_conf:.2%`. The band is
# the ±{glue:text}`fx_margin:.0%` margin.
# ```
#
# **{glue:text}`fx2_answer:s`** The default dispatch took {glue:text}`fx2_sdpa_us1:.2f` µs
# per call on {glue:text}`fx2_gpu1:s` ({glue:text}`fx2_procs1:d` processes ×
# {glue:text}`fx2_places1:d` placements) and {glue:text}`fx2_sdpa_us2:.2f` µs on
# {glue:text}`fx2_gpu2:s`. `eager_compiled` runs the default dispatch's own cuDNN kernels; it
# is {glue:text}`fx2_levels_eager_compiled1:s`.

# %% tags=["remove-input"]
if two_level:
    _t = two_level[v2_runs[0]]
    tables.show(fx.two_level_table(_t[~_t["candidate"].isin(spin_controls)]),
                f"Speedup over sdpa at {config} per call (graph replay) and per kernel, "
                f"family-wise intervals in parentheses (run {v2_runs[0]}, "
                f"{_gpu(runs[v2_runs[0]])}, m = {family_m[v2_runs[0]]}). Both runs' families "
                f"are in the CSV.", name="tbl-fixed-two-levels",
                csv="fixed_shape_two_levels.csv",
                full=pd.concat([t.assign(run=r) for r, t in families.items()]))

# %% [markdown]
# ## Each timing mode

# %% tags=["remove-cell"]
speedups = comparisons.speedup_table(R.samples, mode=modes, margin=float(margin),
                                     n_resamples=params["n_resamples"], configs=config,
                                     n_comparisons=family_m.get(lead), include_baseline=True)
main = speedups[speedups["mode"] == main_mode].set_index("candidate")
# Controls (the A/A twin, spin kernels) check the protocol; they are not contenders.
controls = main[main.index.isin(CONTROL_NAMES)]
others = main.drop(index=["sdpa", *controls.index])
self_cmp = main.loc["sdpa"]
best = others["speedup"].idxmax()
latency = latency_tables.latency_table(R.samples[R.samples["config"] == config], modes=modes,
                                       ci_modes=(main_mode,), n_resamples=params["n_resamples"])
base_lat = latency[(latency["candidate"] == "sdpa") & (latency["mode"] == main_mode)].iloc[0]
counts = others["verdict"].value_counts()
kernels = kernel_evidence.kernel_table(R.kernels) if len(R.kernels) else pd.DataFrame()
family = kernels.loc[kernels["config"] == config, "family"] if len(kernels) else []
nbs.glue_text("fx_sdpa_family", family.iloc[0] if len(family) else "a kernel not profiled")

nbs.glue_values("fx_", {"sdpa_ms": base_lat["median_ms"], "sdpa_lo": base_lat["ci_low_ms"],
                        "sdpa_hi": base_lat["ci_high_ms"], "sdpa_us": base_lat["median_ms"] * 1e3,
                        "n_trials": base_lat["n_trials"]})
nbs.glue_text("fx_n_candidates", len(others))
for v in (stats.Verdict.FASTER, stats.Verdict.EQUIVALENT, stats.Verdict.SLOWER,
          stats.Verdict.INCONCLUSIVE):
    nbs.glue_text(f"fx_n_{v.value}", int(counts.get(v.value, 0)))
nbs.glue_values("fx_best", {"": best, "_speedup": others.loc[best, "speedup"],
                            "_lo": others.loc[best, "ci_low"], "_hi": others.loc[best, "ci_high"],
                            "_verdict": others.loc[best, "verdict"]})
nbs.glue_text("fx_self_lo", self_cmp["ci_low"])
nbs.glue_text("fx_self_hi", self_cmp["ci_high"])
nbs.glue_text("fx_self_resolvable", self_cmp["resolvable_margin"])
nbs.glue_text("fx_self_verdict", self_cmp["verdict"])
nbs.glue_text("fx_min_resolvable", others["resolvable_margin"].min())
nbs.glue_text("fx_finding", findings.verdict_sentence(others.reset_index(), margin=float(margin)))
nbs.glue_text("fx_twin", fx.twin_sentence(controls))
twins_kernels = kernel_evidence.same_kernels(R.kernels, config) if len(R.kernels) else []
twins_kernels = [c for c in twins_kernels if c not in CONTROL_NAMES]
nbs.glue_text("fx_same_kernels", ", ".join(twins_kernels) if twins_kernels else "none")
nbs.glue_text("fx_claim", findings.negative_result_verdict(others.reset_index(), twins_kernels))
for name in others.index:
    nbs.glue_text(f"fx_speedup_{name}", others.loc[name, "speedup"])
    nbs.glue_text(f"fx_lo_{name}", others.loc[name, "ci_low"])
    nbs.glue_text(f"fx_hi_{name}", others.loc[name, "ci_high"])
    nbs.glue_text(f"fx_verdict_{name}", others.loc[name, "verdict"])
nbs.glue_figure("fx_forest", plots.speedup_forest(speedups, label, config=config,
                                                  margin=float(margin)))
nbs.glue_figure("fx_spread", plots.trial_spread(sample_groups.trial_medians(R.samples), label,
                                                config=config, mode=main_mode))

# %% [markdown]
# ```{glue:figure} fx_forest
# :name: fig-fixed-forest
#
# Speedup over the default SDPA dispatch per timing mode, family-wise intervals, the
# ±{glue:text}`fx_margin:.0%` margin band. {glue:text}`fx2_gpu1:s`, run {glue:text}`fx_run:s`.
# ```
#
# In graph mode the run resolves ±{glue:text}`fx_self_resolvable:.1%`, and
# {glue:text}`fx_twin:s`. The per-call and cold-cache panels include the host's launch
# cost.

# %% tags=["remove-cell"]
cols = ["speedup", "ci_low", "ci_high", "tost_low", "tost_high", "verdict",
        "resolvable_margin", "n_processes"]
tables.show(main.reset_index().sort_values("speedup", ascending=False)[
                ["candidate", "speedup", "ci_low", "ci_high", "verdict", "resolvable_margin",
                 "n_processes"]],
            f"Speedup over sdpa at {config} in {main_mode} mode: {family_note(lead)}; "
            f"verdict at margin ±{margin:.0%}, and the smallest margin each interval could "
            f"have shown equivalence within. The intervals of the two one-sided tests and "
            f"every mode are in the CSV. {label}.", name="tbl-fixed-speedups",
            labels={"resolvable_margin": "resolvable margin (±%)"},
            csv="fixed_shape_speedups.csv",
            full=speedups.sort_values(["mode", "candidate"])[["mode", "candidate"] + cols])

# %% [markdown]
# ## The reports' statistics beside ours
#
# We applied the reports' statistics (bootstrap CI of the median, Hedges' g, Cliff's
# delta, Mann-Whitney) to our pooled samples.

# %% tags=["remove-cell"]
side_by_side, protocol = fx.reports_side_by_side(R.samples, config, main_mode, others)
narrow = side_by_side.dropna(subset=["our_verdict"])
nbs.glue_text("fx_rp_n_significant", int((narrow["p_value"] < 0.05).sum()))
nbs.glue_text("fx_rp_n_faster_ours",
              int((narrow["our_verdict"] == stats.Verdict.FASTER.value).sum()))
# The reports' test against ours where ours finds no difference beyond the margin: each
# "significant" p-value there is a difference the interval over processes places inside it.
equivalent = narrow[narrow["our_verdict"] == stats.Verdict.EQUIVALENT.value]
nbs.glue_text("fx_rp_n_equivalent", len(equivalent))
nbs.glue_text("fx_rp_n_sig_equivalent", int((equivalent["p_value"] < 0.05).sum()))
nbs.glue_text("fx_rp_sentence", fx.reports_sentence(
    int((narrow["p_value"] < 0.05).sum()), int((equivalent["p_value"] < 0.05).sum()),
    len(equivalent), names=sorted(str(c).removeprefix("sdpa vs ") for c in equivalent.index)))

# %% tags=["remove-cell"]
num = ["baseline_median_ms", "candidate_median_ms", "speedup", "hedges_g", "cliffs_delta",
       "our_ci_low", "our_ci_high"]
tables.show(side_by_side.reset_index()[["comparison", "speedup", "hedges_g", "p_value",
                                         "our_ci_low", "our_ci_high", "our_verdict"]],
            f"The reports' statistics on pooled {main_mode} samples at {config} (speedup of "
            f"medians, Hedges' g, Mann-Whitney p) beside our interval ({family_note(lead)}) "
            f"and verdict; Cliff's delta, the medians and the reports' per-sample intervals "
            f"are in the CSV. {label}.", name="tbl-fixed-reports",
            formats={"speedup": ".3f"}, csv="fixed_shape_reports_statistics.csv",
            full=side_by_side.reset_index())

# %% [markdown]
# {glue:text}`fx_rp_sentence:s` Pooling samples from few processes treats them as
# independent. Neither a large p-value nor overlapping intervals shows equivalence.
#
# ## Replication on a second GPU

# %% tags=["remove-cell"]

gv_path = root / graph_check
gv = json.loads(gv_path.read_text()) if graph_check and gv_path.exists() else None
if gv is not None:
    gv_table, gv_label = fx.graph_check_table(gv)
    nbs.glue_text("fx_gv_label", gv_label)
    nbs.glue_text("fx_gv_captures", int(gv_table["captures"].max()))
    nbs.glue_text("fx_gv_range", "; ".join(
        f"{c} {r.min_us:.1f}–{r.max_us:.1f} µs" for c, r in gv_table.iterrows()))
    nbs.glue_text("fx_gv_gap", "; ".join(
        f"{c} {r.span_us - r.busy_us:.1f} µs" for c, r in gv_table.iterrows()))
else:
    gv_table = pd.DataFrame()
    for key in ("fx_gv_label", "fx_gv_range", "fx_gv_gap"):
        nbs.glue_text(key, "not recorded")
    nbs.glue_text("fx_gv_captures", 0)

# %% tags=["remove-cell"]
if len(gv_table):
    tables.show(gv_table.reset_index(),
                f"Graph-mode time per call over fresh captures in one process (min, median, "
                f"max) and, from the profiler over one replayed graph, the span and busy time "
                f"per call. {gv_label}; {graph_check}.", name="tbl-fixed-captures",
                formats={"kernels_per_call": ".1f"})

# %% tags=["remove-cell"]
# A new measured lead run (another shape, a CPU) has nothing to replicate: skip, say why.
R2 = runs[replication] if replication else None
rep_ok = (R2 is not None and replication != lead and config in set(R2.samples["config"])
          and "graph" in set(R2.samples["mode"]) and main_mode == "graph")
if rep_ok:
    label2 = provenance.run_label(R2)
    sp2 = comparisons.speedup_table(R2.samples, mode="graph", margin=float(margin),
                                    n_resamples=params["n_resamples"], configs=config,
                                    n_comparisons=family_m.get(replication),
                                    include_baseline=True)
    main2 = sp2.set_index("candidate")
    others2 = main2.drop(index=["sdpa", *[c for c in main2.index if c in CONTROL_NAMES]])
    lat2 = latency_tables.latency_table(R2.samples[R2.samples["config"] == config],
                                        modes=("graph",), ci_modes=("graph",),
                                        n_resamples=params["n_resamples"])
    base2 = lat2[lat2["candidate"] == "sdpa"].iloc[0]
    k2 = (rc.graph_calls(R2.units).query("config == @config")
          .set_index("candidate")[["k_min", "k_max"]])
    k1 = (rc.graph_calls(R.units).query("config == @config")
          .set_index("candidate")[["k_min", "k_max"]])
    same2 = [c for c in (kernel_evidence.same_kernels(R2.kernels, config) if len(R2.kernels) else [])
             if c not in CONTROL_NAMES]
    nbs.glue_text("fx_r2_run", replication)
    nbs.glue_text("fx_r2_label", label2)
    nbs.glue_text("fx_r2_trials", int(base2["n_trials"]))
    nbs.glue_text("fx_r2_sdpa_ms", base2["median_ms"])
    nbs.glue_text("fx_r2_sdpa_lo", base2["ci_low_ms"])
    nbs.glue_text("fx_r2_sdpa_hi", base2["ci_high_ms"])
    nbs.glue_text("fx_r2_k", fx.k_range(k2))
    # the lead run's k, same candidates
    nbs.glue_text("fx_r1_k", fx.k_range(k1.loc[k1.index.intersection(k2.index)]))
    nbs.glue_text("fx_r12_k", fx.k_versus(fx.k_range(k2),
                                          fx.k_range(k1.loc[k1.index.intersection(k2.index)])))
    nbs.glue_text("fx_r2_finding", findings.verdict_sentence(others2.reset_index(),
                                                             margin=float(margin)))
    nbs.glue_text("fx_r2_claim", findings.negative_result_verdict(others2.reset_index(), same2))
    nbs.glue_text("fx_r2_scope", fx.verdict_scope(others2.index, sota.recorded_meta(R2.units)))
    nbs.glue_text("fx_r2_twin", fx.twin_sentence(main2, explain=False))
    both = fx.replication_join(main, main2, k1, k2)
else:
    why = (f"no replication at {config} in graph mode of a run other than {lead}"
           if replication else "no replication run asked for")
    for key in ("fx_r2_run", "fx_r2_label", "fx_r2_k", "fx_r1_k", "fx_r12_k", "fx_r2_finding",
                "fx_r2_claim", "fx_r2_twin", "fx_r2_scope"):
        nbs.glue_text(key, why)
    for key in ("fx_r2_trials", "fx_r2_sdpa_ms", "fx_r2_sdpa_lo", "fx_r2_sdpa_hi"):
        nbs.glue_text(key, 0)
    both = pd.DataFrame()

# %% tags=["remove-cell"]
if len(both):
    tables.show(fx.replication_table(both), f"Graph-mode speedup over sdpa at {config} (interval in "
                f"parentheses, verdict at ±{margin:.0%}) in the lead run and the "
                f"replication, each in its own run's family: {family_note(lead)}; "
                f"{family_note(replication)}; with the calls per replay (k) each ran "
                f"with. {label}; {label2}.", name="tbl-fixed-replication",
                labels={"speedup_lead": f"speedup, {lead} (×)", "verdict_lead": "verdict",
                        "k_lead": "k", "speedup_replication": f"speedup, {replication} (×)",
                        "verdict_replication": "verdict", "k_replication": "k"},
                csv="fixed_shape_replication.csv", full=both.reset_index())

# %% [markdown]
# Run {glue:text}`fx_r2_run:s` ({glue:text}`fx2_gpu2:s`, {glue:text}`fx_r2_trials:d`
# processes) held {glue:text}`fx_r12_k:s`. Judged on this run alone, over
# {glue:text}`fx_r2_scope:s` only, the claim is {glue:text}`fx_r2_claim:s`. Over every
# custom kernel, {ref}`3.5 <sota-target>` answers per GPU model.

# %% tags=["remove-cell"]
reported = reference.load_reported()
l4 = reference.reported_latency(reported)
l4_here = l4[l4["config"] == config]
nbs.glue_text("fx_l4_software", str(reported["software"].mode().iloc[0]))

# %% tags=["remove-cell"]
tables.show(l4_here[["source_file", "value_ms", "n_mentions", "status"]],
            f"Median latencies the original reports give for {config} on the NVIDIA L4, "
            f"as reported (not measured by us), with the report file that gives each.",
            name="tbl-fixed-l4")

# %% [markdown]
# The reports' L4 latencies for this shape, as reported, are in {doc}`3.4 <05_cross_device>`.

