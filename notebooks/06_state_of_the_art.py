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
# # 3.5 The state of the art
#
# :::{div} glued-sentences
# **{glue:text}`sa_claim_target:s`** **{glue:text}`sa_claim_general:s`**
# :::
#
# This section decides claim B. The public kernels run as shipped: FlashAttention-4's CuTe
# DSL kernel and FlashInfer's batch prefill (both of the FlashAttention-3 design on Hopper)
# and cuDNN called directly. The controls are SDPA's A/A twin, SDPA on FlashInfer's
# (B, S, H, D) memory order and SDPA plus a spin kernel.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
target_runs = "h100-sota-target,h200-sota-target"  # comma-separated runs of the target
                          # campaign, one GPU per model (the chapter glues per model); empty
                          # takes every recorded one that measured a peer
reports_runs = "h100-sota-reports,h200-sota-reports"  # the same for the reports campaign
long_runs = "h100-sota-long,h200-sota-long"  # the same for the long campaign (S 128 to 8192)
confirm_runs = ""         # the same for the confirmatory campaign (the exploratory leads)
gluon_runs = ""           # runs that measured our Gluon kernel (target and long grid); empty
                          # takes every recorded one
measure = False           # True runs the campaigns below on this machine first
campaigns = "target,reports,long,confirm"  # which campaigns to measure with measure True
run_prefix = ""           # with measure True the runs are runs_dir/PREFIX-sota-CAMPAIGN;
                          # empty names them after the device
device = "cuda"           # cuda or cpu, for measure True
margin = 0.02             # equivalence margin on the speedup ratio, in (0, 1)
n_resamples = 5000        # bootstrap resamples per interval

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs
from attn_analysis import configs

root, params = nbs.parameters(
    globals(), target_runs=nbs.names_iv, reports_runs=nbs.names_iv, long_runs=nbs.names_iv,
    confirm_runs=nbs.names_iv, gluon_runs=nbs.names_iv,
    measure=lambda n, v, p: nbs._validate.flag(n, v),
    campaigns=lambda n, v, p: nbs.names_iv(n, v, p, choices=configs.CAMPAIGN_PLANS),
    run_prefix=lambda n, v, p: nbs.names_iv(n, v, p)[:1],
    device=lambda n, v, p: nbs.choice_iv(n, v, ("cuda", "cpu")),
    margin=nbs.margin_iv, n_resamples=nbs.resamples_iv)

import pandas as pd
from attn_analysis.present import plots, tables, target_plots
from attn_analysis.analyse import comparisons, machine_level, power
from attn_analysis.chapters import gluon_kernel, phrases, sota_sentences, state_of_the_art as sota
from attn_analysis.chapters import gluon_ablation, target_answer, target_table

if params["measure"]:  # every parameter is checked above, before anything is measured
    from attn_analysis.measure import sweep
    prefix = params["run_prefix"][0] if params["run_prefix"] else params["device"]
    for campaign in params["campaigns"]:
        sweep.run(params["runs_dir"] / f"{prefix}-sota-{campaign}",
                  sweep.campaign_plan(campaign, params["device"]), progress=False)
runs = nbs.load_runs(params["runs_dir"])
chosen = {c: sota.select_runs(runs, c, params[f"{c}_runs"]) for c in configs.CAMPAIGN_PLANS}
if not chosen["target"]:
    raise ValueError("no recorded run of the target campaign measured a peer; run "
                     "scripts/sota_campaign.sh or set measure=True.")
compare = dict(margin=params["margin"], n_resamples=params["n_resamples"])
tabs = {c: {r: sota.comparison_table(run, **compare) for r, run in rs.items()}
        for c, rs in chosen.items()}
every = pd.concat([t for by_run in tabs.values() for t in by_run.values()], ignore_index=True)

nbs.glue_text("sa_margin", params["margin"])
nbs.glue_text("sa_n_runs", sum(len(v) for v in chosen.values()))
nbs.glue_text("sa_runs", ", ".join(r for v in chosen.values() for r in v))
nbs.glue_text("sa_machines", "; ".join(sorted(set(every["machine"]))))

# %% [markdown]
# ## What ran

# %% tags=["remove-cell"]
versions = sota.peer_versions({r: run for rs in chosen.values() for r, run in rs.items()})
not_run = versions[versions["package"] == "not run"]
nbs.glue_text("sa_untimed", ", ".join(sorted(set(not_run["candidate"]))) or "none")
nbs.glue_text("sa_untimed_machines", len(set(not_run["machine"])))
tables.show(versions.drop(columns="run"),
            "The peers as they ran: package and version recorded by each build, and what the "
            "build chose (FlashInfer's backend, the cuDNN frontend's engine) or how the "
            "inputs were handed over; a peer that never ran, with the reason. Every run is in "
            "the CSV.", name="tbl-sota-versions", csv="sota_versions.csv", full=versions)

# %% [markdown]
# Peers that never ran: {glue:text}`sa_untimed:s` (no build for our PyTorch).
# Every peer's version is in {doc}`10_reproducibility`.
#
# (sota-target)=
# ## At the reports' shape

# %% tags=["remove-input"]
target_tables = {sota.machine_label(chosen["target"][r]): t for r, t in tabs["target"].items()}
# the answer at the target (claim A) rests on every confirmatory run that timed a custom
# kernel there, each at its own family; the exploratory target runs (every candidate and
# control) give the figure and the controls
conf_tables = target_answer.target_tables(runs, precomputed=tabs["confirm"], **compare)
confirm_target = target_answer.by_machine(conf_tables)  # the confirm campaign's: computed above
conf_rows = target_answer.confirmatory_rows(conf_tables, runs)  # the decisive runs' figure
nbs.glue_text("sa_confirm_fig_runs", target_answer.figure_runs_phrase(conf_rows))
nbs.glue_figure("sa_confirm_figure", target_plots.confirmatory_target(
    conf_rows, params["margin"], "Every confirmatory run's custom kernels at B32 H8 S512 D64 fp16"))
for name, value in target_answer.section_values(confirm_target or target_tables).items():
    nbs.glue_text(name, value)
nbs.glue_text("sa_controls_sentence", sota.controls_sentence(target_tables))
nbs.glue_text("sa_dispatch_sentence", sota_sentences.dispatch_sentence(target_tables, {
    sota.machine_label(run): run.kernels for run in chosen["target"].values()}))
nbs.glue_text("sa_bshd_sentence", sota_sentences.bshd_sentence(target_tables))
labels = {m: f"{m} ({int(t['n_processes'].min())} processes)" for m, t in target_tables.items()}
shown = {labels[m]: t[t["level"].isin(["call", "kernel"])].assign(candidate=t["label"])
         for m, t in target_tables.items()}
nbs.glue_text("sa_target_fig_runs", sota_sentences.runs_phrase(target_tables.values()))
nbs.glue_figure("sa_target_figure", plots.speedup_summary(
    shown, params["margin"], "Every candidate against SDPA at B32 H8 S512 D64 fp16; "
    "each machine's run is one family"))

# %% [markdown]
# ```{glue:figure} sa_confirm_figure
# :name: fig-sota-confirm-target
#
# The decisive runs: speedup over SDPA's default dispatch at the reports' shape of each
# custom kernel in every confirmatory run that timed one. Family-wise intervals at each
# run's m; hollow: judged at that m, not a family member. Runs: {glue:text}`sa_confirm_fig_runs:s`.
# ```
#
# :::{div} glued-sentences
# Claim A rests on these runs ({numref}`tbl-sota-confirm-target`). Below, one run per GPU
# model: the one whose custom kernel is fastest.
# {glue:text}`sa_h100_target_summary:s` {glue:text}`sa_h200_target_summary:s`
# :::

# %% tags=["remove-input"]
tables.show(target_table.confirmatory_table(conf_rows),
            f"Every confirmatory run that timed a custom kernel at B32 H8 S512 D64 fp16, as in "
            f"the figure above: speedup over SDPA's default dispatch per call (graph replay), "
            f"per kernel and per attention kernel. Family-wise 95 % intervals at each run's m, "
            f"with verdicts; margin ±{params['margin']:.0%}; *: judged at that m, outside the "
            f"run's family. Above 1 is faster.", name="tbl-sota-confirm-target",
            labels={"machine": "GPU", "label": "candidate", "call": "call (×)",
                    "kernel": "kernel (×)", "attention": "attention kernel (×)"},
            csv="sota_confirm_target.csv", full=conf_rows)

# %% [markdown]
# ```{glue:figure} sa_target_figure
# :name: fig-sota-target
#
# Exploratory runs, for the controls ({glue:text}`sa_target_fig_runs:s`): every candidate
# per call (left) and per kernel (right), one marker per GPU.
# ```
#
# {glue:text}`sa_controls_sentence:s` {glue:text}`sa_dispatch_sentence:s`
# {glue:text}`sa_bshd_sentence:s`

# %% [markdown]
# ## Across sequence lengths: explored, then confirmed
#
# Exploratory runs covered the reports' shapes and a long grid at FlashAttention-3's
# geometry (S = {glue:text}`sa_long_s:s`). Every shape where they showed a lead went into a
# confirmatory matrix (`configs.MATRICES["confirm-v1"]`). It ran with
# {glue:text}`sa_confirm_n_proc:d` processes on a second GPU of each model
# ({glue:text}`sa_confirm_runs:s`). Each run is one family of {glue:text}`sa_confirm_m:d`
# comparisons, {glue:text}`sa_confirm_per_level:s` custom-kernel comparisons per level. A
# powered, pre-registered run over several GPUs decides the long grid's S = 2048 and 8192
# rows at its own family ({ref}`powered-long`).

# %% tags=["remove-input"]
explore = [t for c in ("reports", "long") for t in tabs[c].values()]
confirm = list(tabs["confirm"].values())
# one row of panels per machine and run kind, the exploratory run of a model above its
# confirmatory one
seq_rows = sorted((t.assign(machine=t["machine"] + f"\n{kind}") for kind, ts in
                   (("exploratory", tabs["long"].values()), ("confirmatory", confirm))
                   for t in ts), key=lambda t: (t["machine"].iloc[0].split()[0],
                                                "confirmatory" in t["machine"].iloc[0]))
seq_all = sota.fa3_geometry(pd.concat(seq_rows, ignore_index=True)) if seq_rows else every
seq_all = seq_all[~seq_all["same_kernel_as_baseline"] | (seq_all["origin"] == "peer")]
seq_runs = list(tabs["long"].values()) + confirm
nbs.glue_text("sa_seq_fig_runs", sota_sentences.runs_phrase(seq_runs) if seq_runs else "none")
nbs.glue_text("sa_seq_inconclusive", sota_sentences.inconclusive_runs_sentence(seq_all))
nbs.glue_figure("sa_seq_figure", plots.speedup_by_seq_len(
    seq_all, params["margin"], title=f"FlashAttention-3's geometry (B·S = {configs.FA3_TOKENS}, "
    f"H·D = {configs.FA3_HIDDEN}, fp16), CUDA-graph replay per call; at S = "
    f"{configs.TARGET.seq_len} that is B{configs.FA3_TOKENS // configs.TARGET.seq_len} "
    f"H{configs.FA3_HIDDEN // configs.TARGET.head_dim}, not the reports' "
    f"B{configs.TARGET.batch} H{configs.TARGET.heads} (see At the reports' shape)"))
away = confirm or explore or list(tabs["target"].values())
long_s = sorted(set(sota.fa3_geometry(pd.concat(list(tabs["long"].values()) or away))["seq_len"]))
nbs.glue_text("sa_long_s", f"{long_s[0]} to {long_s[-1]}" if long_s else "none")
from_s = sota_sentences.attention_from_s(away)
for model, s_min in from_s.items():
    nbs.glue_text(f"sa_{model}_attention_from_s", s_min if s_min is not None else float("nan"))
nbs.glue_text("sa_from_s_sentence", sota_sentences.from_s_sentence(from_s))
nbs.glue_text("sa_confirm_runs", ", ".join(tabs["confirm"]) or "none")
nbs.glue_text("sa_confirm_n_proc", int(min(t["n_processes"].min() for t in away)))
nbs.glue_text("sa_confirm_m", int(max(t["n_comparisons"].iloc[0] for t in away)))
wins = sota.wins_summary(away, margin=params["margin"])
wins_att = sota.wins_summary(away, level="attention", margin=params["margin"])
nbs.glue_text("sa_wins_counts", phrases.count_by_model(
    {m: (int(k), int(n)) for m, k, n in wins[["machine", "n_faster", "n_custom"]].values},
    "comparisons") if len(wins) else "nowhere: no run away from the target")
per_level = sorted({int(n) for n in wins["n_custom"]}) if len(wins) else [0]
nbs.glue_text("sa_confirm_per_level", " or ".join(map(str, per_level)))
short = sota.wins_table(away)
for _, row in wins.iterrows():
    slug = sota.machine_slug(row["machine"])
    nbs.glue_text(f"sa_{slug}_wins_sentence", sota_sentences.wins_sentence(row.to_dict()))
    nbs.glue_text(f"sa_{slug}_kernel_sentence",
                  sota.kernel_sentence(short[short["machine"] == row["machine"]],
                                       row["machine"]))
    nbs.glue_text(f"sa_{slug}_n_faster", int(row["n_faster"]))
    nbs.glue_text(f"sa_{slug}_n_custom", int(row["n_custom"]))
    nbs.glue_text(f"sa_{slug}_min_processes", int(row["min_processes"]))
    for key in ("best_speedup", "best_low", "best_high"):
        nbs.glue_text(f"sa_{slug}_{key}", nbs.as_number(row[key]))
    nbs.glue_text(f"sa_{slug}_best_candidate", row["best_candidate"] or "none")
    nbs.glue_text(f"sa_{slug}_best_config", row["best_config"] or "none")
    nbs.glue_text(f"sa_{slug}_where", row["where"] or "nowhere")
    nbs.glue_text(f"sa_{slug}_machine_away", row["machine"])
for _, row in (sota.wins_summary(explore, margin=params["margin"]) if explore
               else wins.iloc[:0]).iterrows():
    slug = sota.machine_slug(row["machine"])
    nbs.glue_text(f"sa_{slug}_explore_sentence", sota_sentences.wins_sentence(row.to_dict()))
    nbs.glue_text(f"sa_{slug}_explore_min_processes", int(row["min_processes"]))
# the target clause rests on the confirmatory runs that measured the target
answer = sota.claim_sentences({m: sota.fastest(t) for m, t in
                               (confirm_target or target_tables).items()}, wins,
                              kind="confirmatory" if confirm_target else "exploratory")
short_cfg = configs.Config(32, 8, 128).key  # glued once: the key must be unique
nbs.glue_text("sa_s128_config", short_cfg)
for t in confirm:  # where our kernel's short-sequence lead comes from, in microseconds
    slug = sota.machine_slug(t["machine"].iloc[0])
    if ((t["config"] == short_cfg) & (t["candidate"] == "triton")).any():
        for key, value in comparisons.call_anatomy(t, short_cfg, "triton").items():
            nbs.glue_text(f"sa_{slug}_s128_{key}", nbs.as_number(value))
nbs.glue_text("sa_claim_target", target_answer.claim_target(confirm_target)
              if confirm_target else answer["target"])
nbs.glue_text("sa_claim_target_short", target_answer.claim_target(confirm_target, detail=False)
              if confirm_target else answer["target"])
nbs.glue_text("sa_claim_general", answer["general"])
for _, row in wins_att.iterrows():  # per attention kernel, for the abstract (P1a)
    slug = sota.machine_slug(row["machine"])
    nbs.glue_text(f"sa_{slug}_n_faster_attention", int(row["n_faster"]))
    nbs.glue_text(f"sa_{slug}_n_custom_attention", int(row["n_custom"]))
    nbs.glue_text(f"sa_{slug}_where_attention", row["where"] or "nowhere")
# %% [markdown]
# ```{glue:figure} sa_seq_figure
# :name: fig-sota-seq
#
# Speedup over SDPA's default dispatch against sequence length at FlashAttention-3's
# geometry, per custom kernel. Rows: GPU and run kind; panels: head dimension and masking.
# Family-wise intervals, cut at the edge, and the ±{glue:text}`sa_margin:.0%` margin band.
# Hollow markers: one-process runs, not findings. GPUs and runs:
# {glue:text}`sa_seq_fig_runs:s`. {glue:text}`sa_seq_inconclusive:s`
# ```
#
# :::{div} glued-sentences
# Per call, custom kernels beat SDPA beyond the margin {glue:text}`sa_wins_counts:s`.
# {glue:text}`sa_h200_kernel_sentence:s`
# {glue:text}`sa_from_s_sentence:s`
# :::
#
# Where a lead is per call only, SDPA's call runs more than its attention kernel. At
# {glue:text}`sa_s128_config:s` on the {glue:text}`sa_h200_machine_away:s`, SDPA's call takes
# {glue:text}`sa_h200_s128_base_call_us:.2f` µs: the attention kernel
# {glue:text}`sa_h200_s128_base_attention_us:.2f` µs, a memset
# {glue:text}`sa_h200_s128_base_other_us:.2f` µs and
# {glue:text}`sa_h200_s128_base_gaps_us:.2f` µs between kernels. Our kernel's call takes
# {glue:text}`sa_h200_s128_cand_call_us:.2f` µs.

# %% tags=["remove-input"]
for machine, rows in short.groupby("machine", sort=True):
    tables.show(
        rows[["config", "label", "interval", "attention_verdict"]],
        f"{machine}, run {rows['run'].iloc[0]} ({int(rows['n_processes'].min())} processes, "
        f"one family of {int(rows['n_comparisons'].max())}, "
        f"{int(wins.set_index('machine').loc[machine, 'n_custom'])} custom-kernel comparisons "
        f"per level): every per-call lead of a custom "
        f"kernel beyond the margin, and its attention kernel's verdict. Every comparison, "
        f"with the attention kernel's speedup, is in the CSV.",
        name=f"tbl-sota-wins-{sota.machine_slug(machine)}",
        labels={"label": "candidate", "interval": "call (×)",
                "attention": "attention kernel (×)", "attention_verdict": "attention verdict"},
        csv=f"sota_comparisons_{sota.machine_slug(machine)}.csv", full=every)

# %% [markdown]
# ## The same candidates on a second GPU of each model
#
# The confirmatory runs also measured the target. {glue:text}`sa_spread_sentence:s`

# %% tags=["remove-cell"]
spread_tables = list(tabs["target"].values()) + confirm
spread = machine_level.machine_spread(spread_tables) if spread_tables else None
nbs.glue_text("sa_spread_sentence", machine_level.spread_sentence(spread)
              if spread is not None else "No run measured the target.")
if spread is not None and len(spread):
    tables.show(spread.drop(columns="runs").assign(between_gpus=(spread["between_gpus"] - 1) * 100,
                              within_run=(spread["within_run"] - 1) * 100),
                "Speedup over SDPA's default dispatch per call at B32 H8 S512 D64 fp16 on each "
                "GPU of a model (inventory label: speedup, family-wise interval of its own run), "
                "how far apart the GPUs are (largest over smallest speedup, in %) and the "
                "largest within-run interval half-width (in %).", name="tbl-sota-machines",
                labels={"per_gpu": "per GPU (×)", "between_gpus": "between GPUs (%)",
                        "within_run": "within run (%)", "same_verdict": "same verdict"},
                formats={"between_gpus": ".2f", "within_run": ".2f"}, csv="sota_machines.csv")

# %% [markdown]
# ## Our Gluon kernel beside cuDNN and FlashAttention-4
#
# Our Gluon kernel follows FlashAttention-3's Hopper schedule ({doc}`../book/kernels`). Each
# GPU model's numbers come from its confirmatory runs where it has them, else from its
# newest run. Older runs of earlier variants ({glue:text}`gl_superseded:s`) are listed in
# {doc}`10_reproducibility`. A variant is a named configuration of the kernel
# (`gluon_config.VARIANTS`); {numref}`tbl-gluon-ablation` gives what each changes.

# %% tags=["remove-input"]
gl_every = gluon_kernel.gluon_runs(runs, params["gluon_runs"])
gl = {part: gluon_kernel.lead_runs(rs) for part, rs in gl_every.items()}
gl_tabs = {part: {r: sota.comparison_table(run, **compare,
                                           n_comparisons=power.registered_family(run.info))
                  for r, run in rs.items()} for part, rs in gl.items()}
nbs.glue_text("gl_superseded", ", ".join(r for part, rs in gl_every.items() for r in rs
                                         if r not in gl[part]) or "none")
nbs.glue_text("gl_goal_sentence", gluon_kernel.goal_sentence(list(gl_tabs["target"].values())))
reps = target_answer.replications(gl["target"])  # later runs of one plan: in the figure only
nbs.glue_text("gl_target_sentences", " ".join(
    gluon_kernel.target_sentence(gl_tabs["target"][r], run) for r, run in gl["target"].items()
    if r not in reps) or "No recorded run measured our Gluon kernel at the reports' shape.")

# %% [markdown]
# :::{div} glued-sentences
# {glue:text}`gl_target_sentences:s` Later runs of the same plan on another GPU of the
# model are in {numref}`fig-sota-confirm-target` only. {glue:text}`gl_goal_sentence:s`
# :::

# %% tags=["remove-cell"]
for t in gl_tabs["target"].values():
    machine = t["machine"].iloc[0]
    tables.show(sota.level_cells(t),
                f"{machine}, run {t['run'].iloc[0]} ({int(t['n_processes'].min())} processes): "
                f"our Gluon kernel beside SDPA forced to cuDNN and the A/A twin (and our "
                f"Triton kernel where the run timed it), speedup over SDPA's default dispatch "
                f"at B32 H8 S512 D64 fp16 per call (graph replay), per kernel and per "
                f"attention kernel. Bonferroni at m = {int(t['n_comparisons'].iloc[0])} "
                f"(the run's pre-registered family where it has one; every other row is "
                f"judged at the same level), family-wise 95 %; margin "
                f"±{params['margin']:.0%}. Above 1 is faster.",
                name=f"tbl-gluon-target-{machine.lower().replace(' ', '-')}",
                labels={"call": "call (×)", "kernel": "kernel (×)",
                        "attention": "attention kernel (×)"},
                csv=f"gluon_target_{machine.lower().replace(' ', '_').replace('-', '_')}.csv",
                full=t)

# %% tags=["remove-input"]
gl_long = list(gl_tabs["long"].values())
gl_seq = (sota.fa3_geometry(pd.concat(gl_long, ignore_index=True)) if gl_long
          else every.iloc[:0])
if len(gl_seq):
    nbs.glue_text("gl_seq_fig_runs", sota_sentences.runs_phrase(gl_long))
    nbs.glue_figure("gl_seq_figure", plots.speedup_by_seq_len(
        gl_seq, params["margin"], level="kernel",
        title=f"Our Gluon kernel and FlashAttention-4, kernel time (B·S = {configs.FA3_TOKENS}, "
              f"H·D = {configs.FA3_HIDDEN}, fp16)"))
gl_values, versus, choices = gluon_kernel.long_section(
    gl_tabs["long"], gl["long"], "fa4", "FlashAttention-4", min_seq_len=2048, **compare)
for name, value in gl_values.items():
    nbs.glue_text(name, value)

# %% [markdown]
# ```{glue:figure} gl_seq_figure
# :name: fig-gluon-seq
#
# Kernel-time speedup over SDPA against sequence length for our Gluon kernel and
# FlashAttention-4 in the same processes ({glue:text}`gl_seq_fig_runs:s`); family-wise
# intervals and the ±{glue:text}`sa_margin:.0%` margin band.
# ```
#
# {glue:text}`gl_long_sentence:s` {glue:text}`gl_fa4_goal_sentence:s`

# %% tags=["remove-cell"]
if len(versus):
    k = versus[versus["level"] == "kernel"]
    tables.show(k.assign(interval=tables.with_interval(k["speedup"], k["ci_low"], k["ci_high"]))
                [["machine", "config", "interval", "verdict"]],
                f"Our Gluon kernel against FlashAttention-4 per kernel (profiler kernel time) "
                f"at S ≥ 2048, FlashAttention-4 the baseline: above 1 ours is faster. Each "
                f"run is one family of {int(versus['n_comparisons'].max())} comparisons "
                f"(call, kernel and attention kernel at each configuration; Bonferroni, "
                f"family-wise 95 %); margin ±{params['margin']:.0%}. Every level is in the CSV.",
                name="tbl-gluon-fa4", labels={"interval": "kernel (×)"},
                csv="gluon_against_fa4.csv", full=versus)
    table = choices.pivot_table(index="config", columns="machine", values="variant",
                                aggfunc=lambda v: ", ".join(v)).reset_index()
    tables.show(table, "The variant of our Gluon kernel that each shape's tuning chose "
                "(first process; the later ones reused it), per GPU.",
                name="tbl-gluon-variants", csv="gluon_variants.csv", full=choices)

# %% [markdown]
# ## The ablation of our Gluon kernel

# %% tags=["remove-input"]
tables.show(**gluon_ablation.table_args(gluon_ablation.ablation_table(
    root, runs_dir=params["runs_dir"])), name="tbl-gluon-ablation", csv="gluon_ablation.csv")
