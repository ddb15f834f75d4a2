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
# # 3.4 The reports' L4 figures beside ours
#
# The default SDPA dispatch on every recorded GPU, next to the reports' L4 latencies. The L4
# values are **as reported**: we had no L4. The reports timed one process with a
# synchronisation after every call, so compare orders of magnitude and trends, not
# percentages.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
run = "h200-reports-p2-all"  # documented default lead run; empty picks the largest GPU run
measure = False           # True measures a new run on this machine first
                          # with measure True also device, shapes, candidates, trials,
                          # samples and run_id, as declared in 03_matrix
n_resamples = 1000        # bootstrap resamples per interval
candidate = "sdpa"        # which candidate to compare across devices

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs

root, params, runs, catalog, lead, R = nbs.prelude(globals(), candidate=nbs.candidate_name_iv)

import numpy as np
import pandas as pd
from attn_analysis import configs
from attn_analysis.present import tables, latency_plots
from attn_analysis.chapters import cross_device as xd
from attn_analysis.analyse import latency_tables, provenance, reference, workload

# Runs that hold the target shape alone (the calibration and target-shape runs, also in
# bf16 or causal) add nothing to compare across configurations; any other run, a new one
# included, is shown.
with_candidate = [r for r, R in runs.items() if candidate in set(R.samples["candidate"])
                  and not all(xd.target_sizes(c) for c in set(R.samples["config"]))]
if not isinstance(candidate, str) or not with_candidate:
    raise ValueError(f"`candidate` must be recorded in at least one run; got {candidate!r}.")
frames = []
for run_id in with_candidate:
    R = runs[run_id]
    s = R.samples[R.samples["candidate"] == candidate]
    lat = latency_tables.latency_table(s, modes=tuple(m for m in configs.MODES
                                                      if m in set(s["mode"])),
                                       ci_modes=("graph",) if "graph" in set(s["mode"]) else None,
                                       n_resamples=params["n_resamples"])
    frames.append(lat.assign(run=run_id, device=provenance.run_label(R)))
by_run = pd.concat(frames, ignore_index=True)
reported = reference.load_reported()
table = reference.cross_device_table(by_run, reported, candidate=candidate)
l4 = reference.reported_latency(reported)
devices = sorted(set(by_run["device"]))
nbs.glue_text("xd_n_runs", len(with_candidate))
nbs.glue_text("xd_runs", ", ".join(with_candidate))
nbs.glue_text("xd_n_devices", len(devices))
nbs.glue_text("xd_devices", "; ".join(devices))
nbs.glue_text("xd_candidate", candidate)
nbs.glue_text("xd_n_l4_values", len(l4))
nbs.glue_text("xd_n_l4_configs", l4["config"].nunique())
target = table[(table["config"] == configs.TARGET.key) & (table["mode"] == "graph")]
for run_id in with_candidate:
    row = target[target["run"] == run_id]
    nbs.glue_text(f"xd_target_ms_{run_id}", row["median_ms"].iloc[0] if len(row) else np.nan)
    nbs.glue_text(f"xd_l4_over_{run_id}", row["l4_over_ours"].iloc[0] if len(row) else np.nan)
lead_row = target[target["run"] == lead]
nbs.glue_text("xd_lead_run", lead)
nbs.glue_text("xd_lead_label", provenance.run_label(runs[lead]))
nbs.glue_text("xd_lead_target_ms", lead_row["median_ms"].iloc[0] if len(lead_row) else np.nan)
nbs.glue_text("xd_lead_l4_over", lead_row["l4_over_ours"].iloc[0] if len(lead_row) else np.nan)
nbs.glue_text("xd_l4_target_min", l4.loc[l4["config"] == configs.TARGET.key, "value_ms"].min())
nbs.glue_text("xd_l4_target_max", l4.loc[l4["config"] == configs.TARGET.key, "value_ms"].max())
# one run and one timing mode, named in the prose: the lead run, graph replay where recorded
lead_modes = set(table.loc[table["run"] == lead, "mode"])
lead_mode = "graph" if "graph" in lead_modes else (sorted(lead_modes) or ["none"])[0]
nbs.glue_text("xd_ratio_mode", {"graph": "graph replay", "per_call": "per call"}.get(
    lead_mode, lead_mode))
shared = table[(table["run"] == lead) & (table["mode"] == lead_mode)].dropna(
    subset=["l4_min_ms"])
nbs.glue_text("xd_ratio_min", shared["l4_over_ours"].min() if len(shared) else np.nan)
nbs.glue_text("xd_ratio_max", shared["l4_over_ours"].max() if len(shared) else np.nan)
# The figure keeps the configurations the reports give L4 values for and those of the lead
# run (a new run's own shapes then show); the table and the CSV keep every configuration.
drawn = set(l4["config"]) | set(runs[lead].samples["config"])
drawn_table = table[table["mode"].isin(["graph", "per_call"]) & table["config"].isin(drawn)]
# the caption names the runs the figure draws (its legend), not every run with the candidate
nbs.glue_text("xd_drawn_runs", ", ".join(sorted(drawn_table["run"].unique())))
nbs.glue_figure("xd_figure", latency_plots.cross_device(
    drawn_table, l4,
    title_note=f"candidate {candidate}; L4 values as reported, not measured by us"))

# %% [markdown]
# The reports give {glue:text}`xd_n_l4_values:d` L4 medians for
# {glue:text}`xd_n_l4_configs:d` configurations. At the target they range from
# {glue:text}`xd_l4_target_min:.4f` to {glue:text}`xd_l4_target_max:.4f` ms (as reported).
# The reports' smallest L4 median is {glue:text}`xd_ratio_min:.1f` to
# {glue:text}`xd_ratio_max:.1f` times our median (run {glue:text}`xd_lead_run:s`,
# {glue:text}`xd_ratio_mode:s`).
#
# ```{glue:figure} xd_figure
# :name: fig-cross-device
#
# Median latency of the default SDPA dispatch per configuration for every recorded run, with
# the reports' L4 medians as hollow black markers from smallest to largest, **as reported**
# (PyTorch 2.2.1 on an NVIDIA L4). Runs: {glue:text}`xd_drawn_runs:s`; filled markers graph replay,
# hollow per call.
# ```

# %% tags=["remove-input"]
# One row per configuration, one column per run in its main mode (graph where recorded);
# runs that measured only the target shape (the fixed-shape and calibration runs) and the
# other modes are in the CSV.
run_mode = {r: ("graph" if "graph" in set(g["mode"]) else g["mode"].iloc[0])
            for r, g in table.groupby("run")}
main = table[[run_mode[r] == m for r, m in zip(table["run"], table["mode"])]]
target_only = [r for r, g in main.groupby("run") if set(g["config"]) == {configs.TARGET.key}]
main = main[~main["run"].isin(target_only)]
# At most four run columns fit the page: one run per device (the lead run on its device,
# elsewhere the run covering the most configurations), so a newly measured device always
# gets a column; the other runs (and every mode) are in the CSV and the figure.
n_configs = main.groupby("run")["config"].nunique()
device_of = {r: runs[r].device for r in n_configs.index}
shown, left_out = xd.shown_runs(n_configs.to_dict(), device_of, lead)
main = main[main["run"].isin(shown)]
# Rows: the figure's configurations, and every configuration of a device with a single
# run in the book (a newly measured device); the CSV holds every row.
runs_per_device = pd.Series(device_of).value_counts()
single = [r for r in shown if runs_per_device[device_of[r]] == 1]
main = main[main["config"].isin(drawn) | main["run"].isin(single)]
wide = main.pivot_table(index="config", columns="run", values="median_ms")
short = wide.loc[sorted(wide.index, key=configs.Config.from_key)].reset_index()
tables.show(short, f"Median latency of {candidate} (ms) per configuration, one run per "
            f"device. Rows: the figure's configurations, plus all configurations of devices "
            f"with one run. The CSV holds every run, configuration and timing mode, and the L4 range.",
            name="tbl-cross-device",
            labels={r: f"{r}, {run_mode[r]} (ms)" for r in wide.columns},
            formats={r: ".4f" for r in wide.columns}, csv="cross_device.csv", full=table)

# %% [markdown]
# ## The reports' L4 values and their sources

# %% tags=["remove-input"]
by_cfg = (l4.groupby("config")
          .agg(values=("value_ms", lambda v: ", ".join(f"{x:.4f}" for x in sorted(v))),
               reports=("source_file", lambda v: ", ".join(sorted({str(x)[:3] for x in v}))))
          .reset_index())
by_cfg = by_cfg.set_index("config").loc[sorted(by_cfg["config"], key=configs.Config.from_key)]
tables.show(by_cfg.reset_index(), "Every L4 median the original reports give per "
            "configuration (ms, as reported) and the reports that give it (by the first "
            "three characters of the report's file name; the CSV has the file, mention "
            "count and status of each value).", name="tbl-l4-reported",
            labels={"values": "L4 medians, as reported (ms)", "reports": "reports"},
            csv="l4_reported.csv", full=l4)
