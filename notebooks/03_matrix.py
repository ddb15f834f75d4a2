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
# # The matrix: latency, throughput and the fastest candidate per configuration
#
# This section shows, for the reports' ten configurations around the target, which
# candidates beat the default SDPA dispatch and by how much, and how close the fastest
# come to the device's measured ceilings. It then compares our own Triton kernel with the
# fastest library backend on a wider set of shapes. Both runs measure under protocol 2 at
# the design whose error rates the calibration chapter measures ({ref}`calibration-v2`);
# each table is one family of comparisons with Bonferroni-adjusted intervals.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
run = "h200-reports-p2-all"  # documented default lead run, protocol 2; empty picks the largest GPU run
measure = False           # True measures a new run on this machine first
device = "auto"           # auto picks the GPU if present, else the CPU; or cuda, cpu
shapes = ""               # semicolon-separated B,H,S[,D] or a matrix name; empty for the default
candidates = ""           # comma-separated candidate names; empty for the device default
trials = 4                # independent processes per unit
samples = 0               # samples per placement; 0 for the protocol's default
run_id = ""               # folder name of the new run; empty for the device and UTC time
n_resamples = 1000        # bootstrap resamples per interval
mode = "graph"            # timing mode of the tables: graph, cold_l2 or per_call
triton_run = "h200-triton-p2"  # run of our kernel against the backends; empty picks the largest
kernel_runs = "h200-kernel-target-p2,h200-kernel-causal-p2,h200-kernel-bf16-p2"  # the kernel's
                          # latest tuning at the target (fp16, causal, bf16); '' for none
fa3_run = "h200-fa3-shapes-p2"  # the FlashAttention-3 paper's shapes; '' for none

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis import notebook_support as nbs

root, params, runs, catalog, lead, R = nbs.prelude(globals(), mode=nbs.mode_iv,
                                                   triton_run=nbs.recorded_run_iv,
                                                   kernel_runs=nbs.recorded_runs_iv,
                                                   fa3_run=nbs.recorded_run_iv)

import numpy as np
import pandas as pd
from attn_analysis import configs, figure_style, plots, tables
from attn_analysis.chapters import matrix as mx
from attn_analysis.analyse import (catalog, comparisons, latency_tables, provenance, reference,
                                   stats, workload)

from attn_analysis.analyse import comparisons, kernel_evidence

label = provenance.run_label(R)
# One family per run: the lead run's comparisons at the call, kernel and attention levels
# (the two-level table below) hold the call-level ones the heatmap and the fastest table
# show, so every table of the run takes the family's m, and one comparison has one interval.
two = (comparisons.speedup_table(R.samples, R.placements, mode=mode, kernels=R.kernels)
       if R.protocol == 2 and mode == "graph" else pd.DataFrame())
m_lead = int(two["n_comparisons"].iloc[0]) if len(two) else None
latency = latency_tables.latency_table(R.samples, modes=(mode,),
                                       n_resamples=params["n_resamples"])
speedups = comparisons.speedup_table(R.samples, mode=mode, n_resamples=params["n_resamples"],
                                     n_comparisons=m_lead, include_baseline=True)
m_lead = m_lead or int(speedups["n_comparisons"].iloc[0])


def family_note(m, what):
    """The family a table's intervals belong to, for its caption."""
    return f"family-wise 95 % t-intervals over processes, Bonferroni over m = {m} ({what})"


lead_family = family_note(m_lead, f"run {lead}: every candidate and configuration per call"
                          + (", per kernel and per attention kernel" if len(two) else ""))
nbs.glue_text("mx_family", lead_family)
nbs.glue_text("mx_family_m", m_lead)
fastest = latency_tables.fastest_table(latency, speedups, mode=mode)
through = latency_tables.throughput_table(latency, R.ceilings, R.device)
counts = comparisons.verdict_counts(speedups).reindex([mode]).fillna(0).iloc[0]
n_fast_lib = int(fastest["fastest"].isin(catalog.SDPA_BACKENDS).sum())
nbs.glue_text("mx_label", label)
nbs.glue_text("mx_run", lead)
nbs.glue_text("mx_mode", mode)
nbs.glue_text("mx_n_configs", len(fastest))
nbs.glue_text("mx_n_candidates", latency["candidate"].nunique())
nbs.glue_text("mx_n_comparisons", int(counts.sum()))
nbs.glue_text("mx_margin", float(speedups["margin"].iloc[0]) if len(speedups) else float("nan"))
for v in stats.Verdict:
    nbs.glue_text(f"mx_n_{v.name.lower()}", int(counts.get(v.value, 0)))
# The hierarchical bootstrap the t-interval replaced, for comparison only: what it called
# faster per call in the same family (not honest with two processes, methods chapter).
boot = comparisons.speedup_table(R.samples, mode=mode, n_resamples=params["n_resamples"],
                                 n_comparisons=m_lead, method="bootstrap")
boot_fast = boot[boot["verdict"] == stats.Verdict.FASTER.value]
boot_fast = boot_fast.iloc[sorted(range(len(boot_fast)), key=lambda i: (
    configs.Config.from_key(boot_fast["config"].iloc[i]), boot_fast["candidate"].iloc[i]))]
nbs.glue_text("mx_boot_n_faster", len(boot_fast))
nbs.glue_text("mx_boot_faster", "; ".join(
    f"{c} at {tables.short_config(k)}" for k, c in zip(boot_fast["config"],
                                                      boot_fast["candidate"])) or "none")
nbs.glue_text("mx_n_established", int((fastest["established"] != "").sum()))
nbs.glue_text("mx_n_fastest_is_sdpa", int((fastest["fastest"] == "sdpa").sum()))
nbs.glue_text("mx_n_fastest_library", n_fast_lib)
best_tflops = through.loc[through["tflops"].idxmax()]
nbs.glue_text("mx_best_tflops", best_tflops["tflops"])
nbs.glue_text("mx_best_tflops_who", f"{best_tflops['candidate']} at {best_tflops['config']}")
nbs.glue_text("mx_best_frac_matmul", best_tflops["frac_matmul"])
nbs.glue_text("mx_matmul_ceiling", (R.ceilings.get("matmul") or {}).get("tflops", np.nan))
nbs.glue_text("mx_copy_ceiling", (R.ceilings.get("copy") or {}).get("gbs", np.nan))
nbs.glue_figure("mx_heatmap", plots.speedup_heatmap(speedups, label, mode=mode))

# %% [markdown]
# Lead run {glue:text}`mx_run:s` ({glue:text}`mx_label:s`), mode
# {glue:text}`mx_mode:s`: {glue:text}`mx_n_configs:d` configurations,
# {glue:text}`mx_n_candidates:d` candidates. Of {glue:text}`mx_n_comparisons:d`
# call-level comparisons with the default dispatch ({glue:text}`mx_family:s`),
# {glue:text}`mx_n_faster:d` are faster by more than the margin of
# {glue:text}`mx_margin:.0%` (the whole interval above one plus the margin),
# {glue:text}`mx_n_equivalent:d` equivalent within it, {glue:text}`mx_n_slower:d` slower by
# more than it and {glue:text}`mx_n_inconclusive:d` inconclusive;
# {glue:text}`mx_n_faster_within_margin:d` are faster and
# {glue:text}`mx_n_slower_within_margin:d` slower by a real amount smaller than the
# margin, and {glue:text}`mx_n_undecided:d` are undecided at this precision (an interval
# end within half a unit of the third decimal of a boundary). With two processes per
# unit each interval has one degree of freedom, so most differences of a few percent
# cannot be decided here (the methods chapter, {ref}`methods-interval`).
#
# ```{glue:figure} mx_heatmap
# :name: fig-matrix-heatmap
#
# Speedup of every candidate over the default SDPA dispatch at every configuration, with
# its verdict ({glue:text}`mx_family:s`). Measured on {glue:text}`mx_label:s` (run
# {glue:text}`mx_run:s`, mode {glue:text}`mx_mode:s`).
# ```
#
# (matrix-kernel-level)=
# ## Faster per call, or a faster kernel?
#
# A protocol-2 run records the profiler's kernel time at every placement, so each
# comparison of the matrix also has a kernel-level speedup, judged by the same rule in one
# family with the call level.

# %% tags=["remove-cell"]
if len(two):
    nbs.glue_values("mx_k_", mx.level_split(two))
    keep = two[two["verdict"] != stats.Verdict.SLOWER.value].sort_values("speedup",
                                                                         ascending=False)
else:
    keep = pd.DataFrame()
    for key in ("mx_k_m", "mx_k_n_call_faster", "mx_k_n_kernel_faster",
                "mx_k_n_kernel_fast_all", "mx_k_n_attention", "mx_k_n_attention_faster"):
        nbs.glue_text(key, 0)
    for key in ("mx_k_only_call", "mx_k_both", "mx_k_split"):
        nbs.glue_text(key, f"not available: run {lead} is protocol {R.protocol} or mode {mode}")

# %% [markdown]
# Of the comparisons that came out *faster* per call, {glue:text}`mx_k_n_call_faster:d`
# in all, {glue:text}`mx_k_n_kernel_faster:d` are also faster per kernel
# ({glue:text}`mx_k_both:s`). Faster per call only: {glue:text}`mx_k_only_call:s`. A
# call-level lead without a kernel-level one lies outside the kernels: the default
# dispatch's graph replay holds a memset and a wait between its two kernels that a
# one-kernel candidate does not pay, which weighs most where the kernel is shortest.
# Intervals are family-wise over {glue:text}`mx_k_m:d` comparisons, the same family as
# the heatmap's.
#
# The kernel level sums every kernel of a call, so it still counts the default dispatch's
# memset. A third level, *attention*, compares the longest kernel of each side alone: each
# placement's kernel time less that side's other kernels, as the run's profiler evidence
# splits them (`kernel_evidence.kernel_split`), judged by the same rule in the same family.
# Of the {glue:text}`mx_k_n_kernel_fast_all:d` comparisons faster per kernel, at the
# attention level: {glue:text}`mx_k_split:s`. Over all
# {glue:text}`mx_k_n_attention:d` attention-level comparisons,
# {glue:text}`mx_k_n_attention_faster:d` show an attention kernel faster than cuDNN's by
# more than the margin.

# %% tags=["remove-input"]
if len(keep):
    k = keep.assign(speedup=tables.with_interval(keep["speedup"], keep["ci_low"],
                                                 keep["ci_high"]))
    tables.show(k[["config", "candidate", "level", "speedup", "verdict"]],
                f"Comparisons of run {lead} that are not slower than sdpa, at the call, "
                f"kernel and attention levels, largest speedup first (intervals in "
                f"parentheses: {lead_family}). {label}. Every row, the slower ones too, is "
                f"in the CSV.",
                name="tbl-matrix-two-levels", labels={"speedup": "speedup (×)"},
                csv="matrix_two_levels.csv", full=two)

# %% [markdown]
# ## The fastest candidate per configuration
#
# `fastest` is the lowest median; `verdict` says whether its lead over `sdpa` is
# established; `established` lists every candidate shown faster than `sdpa` there. The
# lowest median was the default dispatch itself at {glue:text}`mx_n_fastest_is_sdpa:d`
# configurations and a library backend (default or forced) at
# {glue:text}`mx_n_fastest_library:d`; a lead over the default dispatch is established at
# {glue:text}`mx_n_established:d` of {glue:text}`mx_n_configs:d`.

# %% tags=["remove-input"]
show = ["fastest", "median_ms", "ci_low_ms", "ci_high_ms", "baseline_median_ms", "speedup",
        "speedup_ci_low", "speedup_ci_high", "verdict", "established"]
tables.show(fastest[["config", "fastest", "median_ms", "speedup", "speedup_ci_low",
                     "speedup_ci_high", "verdict"]],
            f"Fastest candidate per configuration ({mode} mode), its median, its speedup over "
            f"sdpa with its interval ({lead_family}), and the verdict; sdpa's median, the "
            f"latency intervals and the candidates shown faster are in the CSV. {label}.",
            name="tbl-matrix-fastest", formats={"median_ms": ".4f"},
            csv="matrix_fastest.csv", full=fastest[["config"] + show])

# %% [markdown]
# ## Latency, TFLOP/s and fraction of the measured ceilings
#
# `tflops` counts the two matrix products (4·B·H·S²·D FLOP); `frac_matmul` is that rate
# over the run's own measured fp16 matrix-product rate
# ({glue:text}`mx_matmul_ceiling:.0f` TFLOP/s on this device), `eff_gbs` the minimum
# traffic (Q, K, V read and O written once) over time, and `frac_copy` that over the
# measured copy bandwidth ({glue:text}`mx_copy_ceiling:.0f` GB/s). The highest rate,
# {glue:text}`mx_best_tflops:.0f` TFLOP/s ({glue:text}`mx_best_tflops_who:s`), is
# {glue:text}`mx_best_frac_matmul:.0%` of the measured matrix-product ceiling.

# %% tags=["remove-input"]
cols = ["median_ms", "ci_low_ms", "ci_high_ms", "tflops", "frac_matmul", "frac_peak_tflops",
        "eff_gbs", "frac_copy", "trial_spread"]
top = through.loc[through.groupby("config")["tflops"].idxmax()]
top = top.set_index("config").loc[sorted(top["config"], key=configs.Config.from_key)]
tables.show(top.reset_index()[["config", "candidate", "tflops", "frac_matmul",
                               "frac_peak_tflops", "frac_copy"]],
            f"The highest rate per configuration ({mode} mode): TFLOP/s of the two matrix "
            f"products, its fraction of the measured and datasheet ceilings, and the "
            f"effective traffic rate's fraction of the measured copy rate. Every candidate at "
            f"every configuration, with latencies, intervals, effective GB/s and the spread "
            f"between trials, is in the CSV. {label}, run {lead}.",
            name="tbl-matrix-rates", labels={"candidate": "fastest candidate"},
            csv="matrix_rates.csv", full=through[["config", "candidate"] + cols])

# %% [markdown]
# ## Our Triton kernel against the fastest library backend
#
# Run {glue:text}`mx_tr_run:s` ({glue:text}`mx_tr_label:s`) timed our kernel
# (`attn_analysis/measure/triton_attention.py`) and the four SDPA entry points on
# {glue:text}`mx_tr_n_configs:d` shapes, including long sequences and head dimension 128.
# Per configuration the kernel is compared with the fastest of them; a speedup above one
# means ours is faster. Ours was shown faster at {glue:text}`mx_tr_n_faster:d`
# configurations, slower at {glue:text}`mx_tr_n_slower:d`, and could not be told apart at
# {glue:text}`mx_tr_n_inconclusive:d`. At the target shape it took
# {glue:text}`mx_tr_target_ratio:.2f` times the time of {glue:text}`mx_tr_target_lib:s`
# (speedup interval {glue:text}`mx_tr_target_lo:.3f`–{glue:text}`mx_tr_target_hi:.3f`;
# {glue:text}`mx_tr_family:s`).
#
# Per kernel, against the default dispatch (the profiler's kernel time at every
# placement, in the same family of {glue:text}`mx_tr_k_m:d` comparisons),
# ours is faster by more than the margin at {glue:text}`mx_tr_k_n_faster:d` of
# {glue:text}`mx_tr_k_n:d` shapes and slower at {glue:text}`mx_tr_k_n_slower:d`; at the
# target its kernel speedup is {glue:text}`mx_tr_k_target:.3f`
# ({glue:text}`mx_tr_k_target_lo:.3f`–{glue:text}`mx_tr_k_target_hi:.3f`). Against
# cuDNN's attention kernel alone (the attention level: each side's longest kernel, without
# the default dispatch's memset; {glue:text}`mx_tr_k_n_attention:d` comparisons in the same
# family), ours is faster by more than the margin at
# {glue:text}`mx_tr_n_beats_attention_kernel:d` shapes
# ({glue:text}`mx_tr_beats_attention_kernel:s`).

# %% tags=["remove-cell"]
tr_id = triton_run if triton_run in runs else ""
if not tr_id:  # no recorded kernel run: take the largest run that has the kernel
    with_kernel = catalog[catalog["candidates"].str.contains(r"\btriton\b")]
    tr_id = str(with_kernel.sort_values("n_configs")["run"].iloc[-1]) if len(with_kernel) else ""
if tr_id:
    T = runs[tr_id]
    tr_label = provenance.run_label(T)
    tr_mode = "graph" if "graph" in set(T.samples["mode"]) else T.samples["mode"].iloc[0]
    tuning = provenance.tuning_table(T.units)
    # Our kernel against the fastest library and against the default dispatch, per call,
    # per kernel and per attention kernel (protocol 2 only): one table, so one family.
    against_sdpa = (T.protocol == 2 and tr_mode == "graph"
                    and "sdpa" in set(T.samples["candidate"]))
    n_sdpa = (len(comparisons.plan_comparisons(T.samples, T.placements,
                                               candidates=["triton"], kernels=T.kernels)[0])
              if against_sdpa else 0)
    vs_lib = comparisons.kernel_vs_library(T.samples, mode=tr_mode,
                                           n_resamples=params["n_resamples"])
    m_tr = len(vs_lib) + n_sdpa
    vs_lib = comparisons.kernel_vs_library(T.samples, mode=tr_mode,
                                           n_resamples=params["n_resamples"], n_comparisons=m_tr)
    tr_two = (comparisons.speedup_table(T.samples, T.placements, candidates=["triton"],
                                        kernels=T.kernels, n_comparisons=m_tr)
              if against_sdpa else pd.DataFrame())
    tr_family = family_note(m_tr, f"run {tr_id}: our kernel against the fastest library "
                            f"backend per shape and against sdpa per call, kernel and "
                            f"attention kernel")
else:
    tr_label, vs_lib, tuning = "no recorded run has the triton candidate", pd.DataFrame(), None
    tr_two, tr_family = pd.DataFrame(), "no run"
nbs.glue_text("mx_tr_family", tr_family)
nbs.glue_values("mx_tr_", mx.triton_values(tr_two, vs_lib, configs.TARGET.key))
nbs.glue_text("mx_attention_answer", mx.attention_answer(two, lead, tr_two, tr_id))
nbs.glue_text("mx_tr_run", tr_id or "none")
nbs.glue_text("mx_tr_label", tr_label)
if len(vs_lib):
    fig_tr = plots.kernel_vs_library(vs_lib, tr_label)
else:  # keep the figure slot filled with a labelled empty panel
    fig_tr = figure_style._figure(6.4, 2.0)
    fig_tr.subplots().set_title("no recorded run has the triton candidate")
nbs.glue_figure("mx_tr_figure", fig_tr)

# %% [markdown]
# ```{glue:figure} mx_tr_figure
# :name: fig-triton-vs-library
#
# Speedup of our Triton kernel over the fastest SDPA backend at each configuration (the
# backend is named beside the shape), with its interval ({glue:text}`mx_tr_family:s`).
# Measured on {glue:text}`mx_tr_label:s` (run {glue:text}`mx_tr_run:s`).
# ```

# %% tags=["remove-input"]
if len(vs_lib):
    table, shown = mx.triton_table(vs_lib, tuning, tr_two)
    compact = table.reset_index()
    compact["speedup"] = tables.with_interval(compact["speedup"], compact["ci_low"],
                                              compact["ci_high"])
    tables.show(compact[shown],
                f"Our kernel against the fastest library backend per configuration (graph "
                f"mode; {tr_family}), and the verdicts per kernel against sdpa (the default dispatch, "
                f"its memset included) and per attention kernel (each side's longest kernel "
                f"alone); the medians, the kernel and attention speedups with intervals and "
                f"the tuning each shape used (block sizes, warps, pipeline stages, tensor-memory "
                f"loads, fp16 exponentials) are in the CSV. {tr_label}, run {tr_id}.",
                name="tbl-triton-vs-library", csv="triton_vs_library.csv",
                labels={"speedup": "speedup (×, interval)", "library": "fastest library",
                        "kernel_verdict": "per kernel", "attention_verdict": "attention"},
                full=table.reset_index())

# %% [markdown]
# (matrix-tuning)=
# ### Which tuning each run measured
#
# Our kernel is autotuned, so which kernel a run measured depends on the tuner's pick. The
# pick is fixed in advance within a run: the first process to build the kernel for a
# shape tunes it, records the configuration with its timing units, and every later
# process of the run reuses that configuration instead of tuning again (the sweep hands it
# over; the units record `reused`). The interval over processes therefore measures one
# kernel per run and shape, and does not sample the tuner's choice: a different pick is a
# different kernel, and two runs that picked differently compare two kernels, not two
# measurements of one. Over the {glue:text}`mx_tune_n_runs:d` runs that timed our kernel
# ({glue:text}`mx_tune_n_cells:d` run-and-shape pairs), every later process reused the
# first one's pick in {glue:text}`mx_tune_n_reused:d`, and ran the same configuration in
# every process in {glue:text}`mx_tune_n_same:d`. Shapes that two runs tuned differently:
# {glue:text}`mx_tune_differ:s`.

# %% tags=["remove-cell"]
tune_runs = {rid: r.units for rid, r in runs.items()
             if "triton" in set(r.units["candidate"])}
tune = provenance.tuning_by_run(tune_runs)
nbs.glue_values("mx_tune_", mx.tuning_values(tune))
per_run = mx.tuning_per_run(tune)

# %% tags=["remove-input"]
if len(per_run):
    tables.show(per_run, "Our kernel's tuning per run: shapes timed, processes, the fewest "
                "processes that reused the first one's pick at a shape, whether every "
                "process ran the same configuration at every shape, and the warps and key "
                "block sizes (BLOCK_N) picked across the run's shapes. Every run and shape, "
                "with the whole configuration, is in the CSV.", name="tbl-triton-tuning",
                labels={"n_configs": "shapes", "processes": "processes",
                        "reused": "processes reusing the pick (fewest)",
                        "same": "same configuration in every process",
                        "warps": "warps picked", "blocks": "BLOCK_N picked"},
                csv="triton_tuning_by_run.csv", full=tune)

# %% [markdown]
# (matrix-kernel-latest)=
# ### The kernel's latest tuning at the target, and at FlashAttention-3's shapes
#
# A later campaign widened the kernel's tuning space (a persistent grid, two row halves
# per program with a register cap, and leaving out the masked key loop when it is empty;
# `notes/triton_kernel.md`, session i17) and measured what the tuner picked under the same
# protocol. Each run is its own family of comparisons with the default dispatch, at the
# call, kernel and attention levels.

# %% tags=["remove-cell"]
latest_rows = []
# One table, so one family: every comparison of the kernel runs together.
m_lt = sum(len(comparisons.plan_comparisons(runs[rid].samples, runs[rid].placements,
                                            candidates=["triton"], kernels=runs[rid].kernels)[0])
           for rid in params["kernel_runs"])
for rid in params["kernel_runs"]:
    K = runs[rid]
    t = comparisons.speedup_table(K.samples, K.placements, candidates=["triton"],
                                  kernels=K.kernels, n_comparisons=m_lt)
    latest_rows.append(t.assign(run=rid, device=provenance.run_label(K)))
lt_family = family_note(m_lt, "runs " + ", ".join(params["kernel_runs"]) + ": our kernel "
                        "against sdpa per call, kernel and attention kernel")
nbs.glue_text("mx_lt_family", lt_family)
latest = pd.concat(latest_rows, ignore_index=True) if latest_rows else pd.DataFrame()
nbs.glue_values("mx_lt_", mx.latest_values(latest, configs.TARGET.key, params["kernel_runs"]))
# The FlashAttention-3 paper's shapes: the rate each candidate reached per call, and our
# kernel's verdicts against the default dispatch.
if params["fa3_run"]:
    F = runs[params["fa3_run"]]
    fa3, fv = mx.fa3_table(F)
    fa3_family = family_note(int(fv["n_comparisons"].iloc[0]) if len(fv) else 0,
                             f"run {params['fa3_run']}: our kernel against sdpa per call, "
                             f"kernel and attention kernel")
    kv = fv[fv["level"] == "kernel"]["verdict"]
    nbs.glue_text("mx_fa3_run", params["fa3_run"])
    nbs.glue_text("mx_fa3_label", provenance.run_label(F))
    nbs.glue_text("mx_fa3_n", len(fa3))
    for v in (stats.Verdict.EQUIVALENT, stats.Verdict.SLOWER, stats.Verdict.FASTER):
        nbs.glue_text(f"mx_fa3_n_{v.value}", int((kv == v.value).sum()))
    nbs.glue_text("mx_fa3_m", int(fv["n_comparisons"].iloc[0]) if len(fv) else 0)
else:
    fa3 = pd.DataFrame()
    for key in ("mx_fa3_n", "mx_fa3_n_equivalent", "mx_fa3_n_slower", "mx_fa3_n_faster",
                "mx_fa3_m"):
        nbs.glue_text(key, 0)
    nbs.glue_text("mx_fa3_run", "none")
    nbs.glue_text("mx_fa3_label", "no run")

# %% tags=["remove-input"]
if len(latest):
    show_lt = latest.assign(speedup=tables.with_interval(latest["speedup"], latest["ci_low"],
                                                         latest["ci_high"]))
    tables.show(show_lt[["run", "config", "level", "speedup", "verdict"]],
                f"Our kernel's latest tuning against sdpa (the default dispatch) at the "
                f"target in fp16, causal and bf16: speedup per call, per kernel and per "
                f"attention kernel ({lt_family}). "
                f"{'; '.join(sorted(set(latest['device'])))}.", name="tbl-kernel-latest",
                labels={"speedup": "speedup (×)"}, csv="kernel_latest.csv", full=latest)

# %% [markdown]
# At the target the latest tuning ({glue:text}`mx_lt_label:s`, runs
# {glue:text}`mx_lt_runs:s`) is {glue:text}`mx_lt_call_v:s` per call
# ({glue:text}`mx_lt_call:.3f`, {glue:text}`mx_lt_call_lo:.3f`–{glue:text}`mx_lt_call_hi:.3f`),
# {glue:text}`mx_lt_kernel_v:s` per kernel ({glue:text}`mx_lt_kernel:.3f`,
# {glue:text}`mx_lt_kernel_lo:.3f`–{glue:text}`mx_lt_kernel_hi:.3f`) and
# {glue:text}`mx_lt_attention_v:s` per attention kernel ({glue:text}`mx_lt_attention:.3f`,
# {glue:text}`mx_lt_attention_lo:.3f`–{glue:text}`mx_lt_attention_hi:.3f`);
# {glue:text}`mx_lt_n_faster:d` of its {glue:text}`mx_lt_n:d` comparisons are faster.
#
# At the FlashAttention-3 paper's shapes (B·S = 16k, H·D = 2048; run
# {glue:text}`mx_fa3_run:s`, {glue:text}`mx_fa3_label:s`), per kernel against the default
# dispatch ours is equivalent within the margin at {glue:text}`mx_fa3_n_equivalent:d` of
# {glue:text}`mx_fa3_n:d` shapes, slower at {glue:text}`mx_fa3_n_slower:d` and faster at
# {glue:text}`mx_fa3_n_faster:d` (one family of {glue:text}`mx_fa3_m:d` comparisons). The
# paper measured an H100 and its own kernel, which we did not; we give our two
# measurements only.

# %% tags=["remove-input"]
if len(fa3):
    tables.show(fa3.reset_index(),
                f"TFLOP/s per call (graph replay, 4·B·H·S²·D over the median time) of the "
                f"default dispatch, cuDNN forced and our kernel at the FlashAttention-3 "
                f"paper's shapes, and our kernel's verdicts against sdpa per call, kernel and "
                f"attention kernel ({fa3_family}). {provenance.run_label(F)}.",
                name="tbl-fa3-shapes", formats={c: ".0f" for c in fa3.columns
                                                if c.endswith("_tflops")},
                csv="fa3_shapes.csv")

# %% [markdown]
# ### How the kernel was developed, and what each step bought
#
# The development log is `notes/triton_kernel.md`; every step was predicted before it was
# timed, and the timings of each step live in that log, not in this book's data. In order:
#
# - **First version**: a FlashAttention-style forward pass (one query tile per program,
#   online softmax in base 2, one normalisation at the end), correct everywhere on the
#   first GPU run and using Hopper's asynchronous tensor-core instructions for both
#   products. It was slower than cuDNN's attention at most shapes; the time at long
#   sequences was close to the *sum* of the matrix-product and exponential costs, so the
#   two barely overlapped.
# - **Tensor-memory (TMA) loads**: kept; a gain of a few percent, at the low end of the
#   prediction.
# - **Automatic warp specialisation**: compiled only with eight warps and gained nothing;
#   dropped.
# - **Source-level software pipelining** (next tile's scores before this tile's softmax):
#   a loss, because the compiler waited on the product anyway and the extra tile cost
#   registers; dropped.
# - **Exponentials in fp16, two at a time**: predicted to help if the special-function unit
#   were the limit; measured slower, so that unit is not the binding limit. Left as an
#   opt-in tuning key.
# - **Direct launch of the compiled kernel**: the host cost of a Python-level Triton call
#   exceeded the GPU time at the target shape, so the candidate launches the compiled
#   kernel directly, checked bit for bit against the full call at build time. The graph
#   mode used here replays launches from a CUDA graph, which removes host cost for every
#   candidate alike.
# - **Tuning**: the tuner re-times its fastest block configurations with more repetitions,
#   and later trials of a sweep reuse the first trial's choice (the table above).
# - **A persistent grid, two row halves per program, a register cap, no empty masked
#   loop** (session i17): each predicted from Nsight Compute's reading of where the time
#   goes (neither kernel saturates a pipe; ours issues more instructions and its softmax
#   barely overlaps the products); together a few percent, kept as tuning keys
#   ({ref}`matrix-kernel-latest`). A conditional accumulator rescale and a polynomial
#   exponential on the FMA pipes were slower and stay off.
# - **What would be needed** to pass cuDNN here, by that reading: one warpgroup's softmax
#   overlapping another's matrix products with a producer warp issuing the loads, which
#   needs explicit warp and barrier placement (CUDA, CUTLASS or Triton's lower-level
#   dialect) rather than what Triton 3.6 schedules itself.
