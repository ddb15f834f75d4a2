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
# # 3.7 Powered runs: the reports' matrix and the long grid, decided
#
# {glue:text}`pw_sentences:s`
#
# At the reports' shape this run is one of the confirmatory runs behind claim A
# ({ref}`3.5 <sota-target>`); it did not time our Gluon kernel. Each powered run's processes ran in
# {ref}`shards <methods-protocol2>`, on one or more hosts, then merged; `data/runs/README.md`
# names the hosts. Counts fold the within-margin verdicts into equivalent
# ({ref}`methods-interval`). The {ref}`A/A twin <methods-protocol2>` is a control judged
# beside the family. The long grid's run is in {ref}`powered-long`.

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
# each powered campaign's texts under its own glue prefix; the first run of a campaign
# (inventory order) is the one the abstract and the other chapters name
PREFIX = {"powered-v1-reports": "pw", "powered-v2-long": "pwl"}
LEVER_PLACEMENTS = 32  # a run with this many placements per process tests the lever


def sigmas_at(run, placements):
    """The design SDs of the run's GPU model, shapes and candidates at ``placements``."""
    return power.load_design_sigmas(
        device=run.device, configs=run.samples["config"].unique(),
        candidates=sorted(run.samples["candidate"].unique()), placements=placements)


tables_by_campaign = {}
for campaign, rows in confirm.groupby("campaign", sort=False):
    plan = configs.POWERED_PLANS[campaign]
    prefix = PREFIX.get(campaign, campaign.replace("-", "_"))
    parts, shown = [], []
    for i, row in enumerate(rows.itertuples(index=False)):
        row = pd.Series(row._asdict())
        run = runs[row["run"]]
        # the family as planned, judged as `python -m attn_analysis compare <run>` judges it
        table = pw.family_table(run, plan, margin=params["margin"],
                                n_resamples=params["n_resamples"])
        texts = pw.run_texts(row, table, plan, sota.untimed(run))
        decides = pw.design_sentence(sigmas_at(run, int(row["placements_per_unit"])), plan,
                                     int(row["processes"]), int(texts["m"]), row["model"],
                                     params["margin"])
        if i == 0:  # how the run was sharded and merged (threats)
            nbs.glue_text(f"{prefix}_merge_sentence", pw.merge_sentence(run.info))
        if i == 0 and int(row["placements_per_unit"]) >= LEVER_PLACEMENTS:
            # a run of many placements: what its family would need at a quarter of them
            few = int(row["placements_per_unit"]) // 4
            few_sigmas = {lv: sg for lv, sg in (sigmas_at(run, few) or {}).items()
                          if lv in plan["levels"]}
            nbs.glue_text(f"{prefix}_need_few_sentence", pw.placements_need_sentence(
                power.design_report(int(row["processes"]), int(texts["m"]), few_sigmas,
                                    params["margin"]), few) if few_sigmas else "")
        parts.append(" ".join(t for t in (texts["counts_sentence"], texts["untimed_sentence"],
                                          texts["plan_sentence"], decides) if t))
        if i == 0:  # the abstract and other chapters state the first run's counts
            for key in ("headline", "headline_short", "total", "model", "run", "processes", "gpus",
                        "inconclusive_share"):
                nbs.glue_text(f"{prefix}_{key}", texts[key])
        shown.append((pw.speedup_display(table).assign(run=row["run"], m=texts["m"]),
                      table.assign(run=row["run"])))
    nbs.glue_text(f"{prefix}_sentences", " ".join(parts))
    tables_by_campaign[campaign] = (pd.concat([d for d, _ in shown], ignore_index=True),
                                    pd.concat([f for _, f in shown], ignore_index=True), rows)

near = inv[inv["campaign"] == "neighbours-v1"].set_index("run")
pairs = neighbours.control_pairs(near.index)
nbs.glue_text("pw_neighbours_sentence", pw.neighbours_sentence({
    f"runs {c} and {s}, {len(near.at[c, 'gpus'])} {near.at[c, 'model']} GPUs":
    neighbours.neighbour_effect(runs[c].placements, runs[s].placements, margin=params["margin"])
    for c, s in pairs}, params["margin"]) if pairs else
    "No neighbours control is recorded, so spreading processes over a host is not shown safe.")

# a powered run's lever over its family's comparisons only (m of them), others' over all
family_of = {r: configs.POWERED_PLANS[c]["family_candidates"]
             for r, c in zip(confirm["run"], confirm["campaign"])}
lever = {rid: placement_lever.lever_summary(
    r.placements[r.placements["candidate"].isin([configs.BASELINE, *family_of[rid]])]
    if rid in family_of else r.placements) for rid, r in runs.items()
    if placement_lever.placements_per_process(r.placements) >= LEVER_PLACEMENTS}
nbs.glue_text("pw_lever_sentence", pw.lever_sentence(lever))

# the pre-registered plans without a run, and why (protocol history)
unrun = [c for c in configs.POWERED_PLANS
         if c != "neighbours-v1" and c not in set(inv["campaign"])]
unrun_text = []
for c in unrun:
    plan = configs.POWERED_PLANS[c]
    cfgs = [k.key for k in configs.matrix(plan["matrix"])]
    sg = power.load_design_sigmas(device=confirm["model"].iloc[0], configs=cfgs,
                                  candidates=list(plan["candidates"]),
                                  placements=plan.get("placements", 8))
    if sg:
        unrun_text.append(pw.unrun_plan_sentence(c, plan, power.design_report(
            plan["trials"], plan["family_size"],
            {lv: v for lv, v in sg.items() if lv in plan["levels"]}, params["margin"]),
            confirm["model"].iloc[0]))
nbs.glue_text("pw_unrun_sentence", " ".join(unrun_text) or "Every pre-registered powered plan has a run.")

# %% tags=["remove-input"]
def show_campaign(campaign, name, csv):
    """The campaign's compact table, one block of rows per run, with its caption."""
    shown, full, rows = tables_by_campaign[campaign]
    devices = ", ".join(sorted({runs[r].device for r in rows["run"]}))
    one = shown["run"].nunique() == 1  # one run: named in the caption, not in every row
    cols = [*([] if one else ["run"]), "config",
            *[c for c in shown.columns if c not in ("run", "config", "m")]]
    whose = f"run {shown['run'].iloc[0]}" if one else f"campaign {campaign}"
    tables.show(shown[cols],
                f"{devices}, {whose}: speedup over SDPA at the call and the kernel "
                f"level, each with its verdict at m = {shown['m'].iloc[0]}: ▲ faster, "
                f"▼ slower, ≈ equivalent, ? inconclusive, △ ▽ faster or slower within the "
                f"margin, ~ undecided at this precision. Intervals in the CSV.",
                name=name, csv=csv, full=full)


show_campaign("powered-v1-reports", "tbl-powered", "powered_family.csv")

# %% [markdown]
# (powered-long)=
# ## The long grid, decided
#
# The long grid's per-process spread is larger than the reports' shapes'. More
# {ref}`placements <methods-protocol2>` per process are the lever that lets its run decide.
# {glue:text}`pw_lever_sentence:s`
# {glue:text}`pwl_need_few_sentence:s`
#
# {glue:text}`pwl_sentences:s`

# %% tags=["remove-input"]
show_campaign("powered-v2-long", "tbl-powered-long", "powered_long_family.csv")

# %% [markdown]
# ## Neighbours, the condition for spreading processes
#
# Spreading processes over a host's GPUs is trusted only if neighbours do not move the
# controls. {glue:text}`pw_neighbours_sentence:s`
