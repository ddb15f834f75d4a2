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
# # 3.3 Sweeps and the roofline (exploratory)
#
# Each candidate's latency along the reports' three sweeps (sequence length, batch, heads),
# and each configuration under the roofline. The run is the exploratory matrix run of
# {doc}`03_matrix`; read it for shape, not for verdicts.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
run = "h200-reports-p2-all"  # documented default lead run; empty picks the largest GPU run
measure = False           # True measures a new run on this machine first
                          # with measure True also device, shapes, candidates, trials,
                          # samples and run_id, as declared in 03_matrix
n_resamples = 1000        # bootstrap resamples per interval
mode = "graph"            # timing mode of the figures: graph, cold_l2 or per_call
roofline_candidates = "sdpa,sdpa_flash,sdpa_cudnn,triton"  # drawn on the roofline if recorded

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs

root, params, runs, catalog, lead, R = nbs.prelude(
    globals(), mode=nbs.mode_iv, roofline_candidates=nbs.candidate_names_iv)
roofline_names = params["roofline_candidates"]

import numpy as np
import pandas as pd
from attn_analysis import configs
from attn_analysis.present import tables, figure_style, latency_plots
from attn_analysis.analyse import latency_tables, provenance, reference, workload

if not set(roofline_names) & set(R.samples.loc[R.samples["mode"] == mode, "candidate"]):
    raise ValueError(f"`roofline_candidates` must name a candidate recorded in run {lead!r} "
                     f"({sorted(set(R.samples['candidate']))}); got {roofline_candidates!r}.")
label = provenance.run_label(R)
latency = latency_tables.latency_table(R.samples, modes=(mode,),
                                       n_resamples=params["n_resamples"])
nbs.glue_text("sw_label", label)
nbs.glue_text("sw_run", lead)
nbs.glue_text("sw_mode", mode)
for axis in latency_tables.SWEEP_AXES:
    rows = latency_tables.sweep_table(latency, axis)
    nbs.glue_text(f"sw_{axis}_n", rows[axis].nunique())
    nbs.glue_text(f"sw_{axis}_range", f"{rows[axis].min()} to {rows[axis].max()}")
    if rows[axis].nunique() > 1:
        fig = latency_plots.latency_sweep(rows, axis, label, mode=mode)
    else:  # a run without this sweep: a labelled empty panel keeps the figure slot
        fig = figure_style._figure(6.4, 2.0)
        fig.subplots().set_title(f"run {lead} has no sweep along {axis}\n{label}", fontsize=9)
    nbs.glue_figure(f"sw_{axis}_figure", fig)

# %% [markdown]
# ```{glue:figure} sw_seq_len_figure
# :name: fig-sweep-seq
#
# Median latency per call against sequence length S ({glue:text}`sw_seq_len_range:s`,
# the other sizes fixed), one line per candidate, 95 % intervals over trials as error
# bars. Measured on {glue:text}`sw_label:s` (run {glue:text}`sw_run:s`).
# ```
#
# ```{glue:figure} sw_batch_figure
# :name: fig-sweep-batch
#
# Median latency per call against batch size B ({glue:text}`sw_batch_range:s`). Measured
# on {glue:text}`sw_label:s` (run {glue:text}`sw_run:s`).
# ```
#
# ```{glue:figure} sw_heads_figure
# :name: fig-sweep-heads
#
# Median latency per call against the number of heads H ({glue:text}`sw_heads_range:s`).
# Measured on {glue:text}`sw_label:s` (run {glue:text}`sw_run:s`).
# ```
#
# ## Roofline

# %% tags=["remove-cell"]
through = latency_tables.throughput_table(latency, R.ceilings, R.device)
names = [c for c in roofline_candidates.replace(",", " ").split()
         if c in set(through["candidate"])] or sorted(set(through["candidate"]))
spec = workload.device_spec_or_none(R.device)
dtype = through["dtype"].iloc[0]
datasheet = (spec.peak_tflops(dtype), spec.mem_bandwidth_gbs) if spec else None
mm = (R.ceilings.get("matmul") or {}).get("tflops")
cp = (R.ceilings.get("copy") or {}).get("gbs")
measured_roof = (mm, cp) if mm and cp else None
nbs.glue_figure("sw_roofline", latency_plots.roofline(through, label, datasheet=datasheet,
                                              measured=measured_roof, candidates=names))
sel = through[through["candidate"].isin(names)]
nbs.glue_text("sw_datasheet", "the datasheet roof (dashed) and " if spec else "")
nbs.glue_text("sw_max_frac_matmul", sel["frac_matmul"].max())
nbs.glue_text("sw_max_frac_peak", sel["frac_peak_tflops"].max())
ridge = (mm * 1e12 / (cp * 1e9)) if measured_roof else float("nan")
nbs.glue_text("sw_ridge", ridge)
nbs.glue_text("sw_min_intensity", sel["intensity"].min())
nbs.glue_text("sw_max_intensity", sel["intensity"].max())

# %% [markdown]
# ```{glue:figure} sw_roofline
# :name: fig-roofline
#
# Achieved TFLOP/s (two matrix products per call) against arithmetic intensity (FLOP per
# byte of minimum traffic), with {glue:text}`sw_datasheet:s`the roof of the rates measured in
# the same run (solid). {glue:text}`sw_label:s`, run {glue:text}`sw_run:s`.
# ```
#
# The measured roofs meet at {glue:text}`sw_ridge:.0f` FLOP/B. The best point reaches
# {glue:text}`sw_max_frac_matmul:.0%` of the measured matrix-product rate. The roofline
# counts only the two products; the softmax's exponentials are outside it.

# %% tags=["remove-cell"]
cols = ["intensity", "tflops", "frac_matmul", "frac_peak_tflops", "eff_gbs", "frac_copy",
        "frac_peak_bw"]
best = sel.loc[sel.groupby("config")["tflops"].idxmax()]
best = best.set_index("config").loc[sorted(best["config"], key=configs.Config.from_key)]
tables.show(best.reset_index()[["config", "candidate", "intensity", "tflops", "frac_matmul",
                                "frac_peak_tflops"]],
            f"Roofline coordinates of the highest point per configuration ({mode} mode); "
            f"every drawn candidate, with effective rates and fractions of the bandwidth "
            f"ceilings, is in the CSV. {label}, run {lead}.",
            name="tbl-roofline", labels={"candidate": "fastest drawn candidate"},
            csv="roofline_points.csv", full=sel[["config", "candidate"] + cols])
