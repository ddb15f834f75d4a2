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
# {glue:text}`pw_counts_sentence:s` At its own family, {glue:text}`pw_inconclusive_pct`%
# of the comparisons stay inconclusive.
#
# This run is confirmatory: its plan was fixed in code before it ran.
# {glue:text}`pw_plan_sentence:s` Its processes were spread over a host's GPUs in shards,
# then merged. Each interval is family-wise over every comparison of the run.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
margin = 0.02             # equivalence margin on the speedup ratio, in (0, 1)
n_resamples = 2000        # bootstrap resamples per interval

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis import notebook_support as nbs

root, params = nbs.parameters(globals(), margin=nbs.margin_iv, n_resamples=nbs.resamples_iv)

import pandas as pd
from attn_analysis import configs, tables
from attn_analysis import state_of_the_art as sota
from attn_analysis.analyse import inventory, neighbours, power
from attn_analysis.chapters import powered as pw

inv = inventory.run_inventory(params["runs_dir"])
confirm = inv[(inv["role"] == "confirmatory") & inv["campaign"].isin(
    [c for c in configs.POWERED_PLANS if c != "neighbours-v1"])]
if confirm.empty:
    raise ValueError("no recorded run of a pre-registered powered campaign.")
runs = nbs.load_runs(params["runs_dir"])
first = confirm.iloc[0]
run = runs[first["run"]]
table = sota.comparison_table(run, margin=params["margin"], n_resamples=params["n_resamples"])
counts = pw.verdict_counts(table)
nbs.glue_text("pw_counts_sentence", f"On the {first['model']} run {first['run']} "
              f"({int(first['processes'])} processes on {', '.join(first['gpus'])}): "
              + pw.counts_sentence(counts))
nbs.glue_text("pw_inconclusive_pct", f"{100 * pw.inconclusive_share(counts):.1f}")
nbs.glue_text("pw_total", str(counts["total"]))
nbs.glue_text("pw_processes", str(int(first["processes"])))
nbs.glue_text("pw_gpus", ", ".join(first["gpus"]))
nbs.glue_text("pw_plan_sentence", pw.plan_sentence(first))
nbs.glue_text("pw_decidability", power.run_decidability(run).replace("\n", " "))
near = inv[inv["campaign"] == "neighbours-v1"]
pairs = {}
for model, g in near.groupby("model"):
    conc = g[g["run"].str.endswith("-concurrent")]["run"].tolist()
    ser = g[g["run"].str.endswith("-serial")]["run"].tolist()
    if conc and ser:
        pairs[model] = (conc[0], ser[0])
effects = {m: neighbours.neighbour_effect(runs[c].placements, runs[s].placements,
                                          margin=params["margin"]) for m, (c, s) in pairs.items()}
nbs.glue_text("pw_neighbours_sentence", " ".join(
    f"On the {m} (runs {pairs[m][0]} and {pairs[m][1]}): "
    + pw.neighbours_sentence(e, params["margin"]) for m, e in effects.items())
    or "No neighbours control is recorded, so spreading processes over a host is not shown safe.")

# %% [markdown]
# {glue:text}`pw_decidability:s`
#
# ## Neighbours, the condition for spreading processes
#
# Spreading processes over a host's GPUs is trusted only if neighbours do not move the
# controls. {glue:text}`pw_neighbours_sentence:s`

# %% tags=["remove-input"]
shown = pw.speedup_display(table)
for level in pw.LEVELS:
    wide = shown.pivot(index="shape", columns="candidate", values=level).fillna("")
    wide.columns.name = None
    tables.show(wide.reset_index(), f"{run.device}, run {first['run']}: speedup over SDPA at "
                f"the {level} level with its family-wise interval and verdict "
                f"(m = {counts['total']}).")
