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
# # 3.7 The reports' matrix, decided
#
# {glue:text}`pw_counts_sentence:s`
# {glue:text}`pw_untimed_sentence:s`
#
# Run {glue:text}`pw_run:s` is confirmatory. At the reports' shape it replicates, at the call
# and kernel levels, the answer per GPU model of {ref}`sota-target`.
# {glue:text}`pw_plan_sentence:s` Its processes were spread over a host's GPUs in shards,
# then merged. {glue:text}`pw_decidability:s`

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
margin = 0.02             # equivalence margin on the speedup ratio, in (0, 1)
n_resamples = 2000        # bootstrap resamples per interval

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs

root, params = nbs.parameters(globals(), margin=nbs.margin_iv, n_resamples=nbs.resamples_iv)

import pandas as pd
from attn_analysis import configs
from attn_analysis.present import tables
from attn_analysis.chapters import state_of_the_art as sota
from attn_analysis.analyse import inventory, neighbours, placement_lever, power
from attn_analysis.chapters import powered as pw

inv = inventory.run_inventory(params["runs_dir"])
confirm = inv[(inv["role"] == "confirmatory") & inv["campaign"].isin(
    [c for c in configs.POWERED_PLANS if c != "neighbours-v1"])]
if confirm.empty:
    raise ValueError("no recorded run of a pre-registered powered campaign.")
runs = nbs.load_runs(params["runs_dir"])
first = confirm.iloc[0]
run = runs[first["run"]]
plan = configs.POWERED_PLANS[first["campaign"]]
# the family as planned, judged as `python -m attn_analysis compare <run>` judges it
table = pw.family_table(run, plan, margin=params["margin"], n_resamples=params["n_resamples"])
m = int(table["n_comparisons"].iloc[0])
counts = pw.verdict_counts(table, plan["family_candidates"])
controls = pw.verdict_counts(table, [c for c in table["candidate"].unique()
                                     if c not in plan["family_candidates"]]) \
    if set(table["candidate"]) - set(plan["family_candidates"]) else None
nbs.glue_text("pw_counts_sentence",
              f"Run {first['run']} measured the reports' matrix with "
              f"{int(first['processes'])} processes on {inventory.compact_labels(first['gpus'])} "
              f"({first['model']}). Its family was fixed in advance: m = {m}, at the call and "
              f"kernel levels. Of its {counts['total']} comparisons of a candidate with SDPA: "
              f"{pw.headline_phrase(counts)}."
              + (f" Of the A/A twin's {controls['total']}, {pw.counts_sentence(controls)}."
                 if controls else ""))
# the abstract states the same four counts, from the same phrase
nbs.glue_text("pw_headline", pw.headline_phrase(counts))
nbs.glue_text("pw_total", str(counts["total"]))
nbs.glue_text("pw_model", str(first["model"]))
nbs.glue_text("pw_run", str(first["run"]))
nbs.glue_text("pw_processes", str(int(first["processes"])))
nbs.glue_text("pw_gpus", inventory.compact_labels(first["gpus"]))
nbs.glue_text("pw_plan_sentence", pw.plan_sentence(first))
missing = sota.untimed(run)
missing = missing[missing["candidate"].isin(plan["family_candidates"])]
nbs.glue_text("pw_untimed_sentence", " ".join(
    f"Candidate {r.candidate} was planned but not timed ({r.status}: "
    f"{r.reason.split(' (')[0]})."
    for r in missing.itertuples()))
sigmas = power.load_design_sigmas(device=run.device, configs=run.samples["config"].unique(),
                                  candidates=sorted(run.samples["candidate"].unique()))
nbs.glue_text("pw_decidability", pw.decidability_sentence(
    power.design_report(int(first["processes"]), m, {lv: s for lv, s in (sigmas or {}).items()
                                                     if lv in plan["levels"]},
                        params["margin"]), int(first["processes"]), first["model"]) if sigmas else
    "No design SDs are recorded for this GPU model, so whether the run decides is not said.")
near = inv[inv["campaign"] == "neighbours-v1"].set_index("run")
pairs = neighbours.control_pairs(near.index)
nbs.glue_text("pw_neighbours_sentence", pw.neighbours_sentence({
    f"runs {c} and {s}, {len(near.at[c, 'gpus'])} {near.at[c, 'model']} GPUs":
    neighbours.neighbour_effect(runs[c].placements, runs[s].placements, margin=params["margin"])
    for c, s in pairs}, params["margin"]) if pairs else
    "No neighbours control is recorded, so spreading processes over a host is not shown safe.")

lever = {rid: placement_lever.lever_summary(r.placements) for rid, r in runs.items()
         if placement_lever.placements_per_process(r.placements) >= 32}
nbs.glue_text("pw_lever_sentence", pw.lever_sentence(lever))

# %% [markdown]
# ## The long grid
#
# The long grid's per-process spread is larger than the reports' shapes'.
# {glue:text}`pw_lever_sentence:s`

# %% [markdown]
# ## Neighbours, the condition for spreading processes
#
# Spreading processes over a host's GPUs is trusted only if neighbours do not move the
# controls. {glue:text}`pw_neighbours_sentence:s`

# %% tags=["remove-input"]
tables.show(pw.speedup_display(table),
            f"{run.device}, run {first['run']}: speedup over SDPA at the call and the kernel "
            f"level, each with its verdict at m = {m}: ▲ faster, ▼ slower, ≈ equivalent, "
            f"? inconclusive, △ ▽ faster or slower within the margin, ~ undecided at this "
            f"precision. Intervals in the CSV.",
            name="tbl-powered", csv="powered_family.csv", full=table)
