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
# # 3.2 Beyond the target: the reports' matrix (exploratory)
#
# **These runs are exploratory.** They hold two processes per unit, so each interval has one
# degree of freedom and most differences of a few percent stay inconclusive
# ({ref}`methods-interval`). They show where to look. A powered run of the same shapes
# decides the reports' matrix ({doc}`08_powered`). Confirmatory runs at the shapes they
# pointed to are in {doc}`06_state_of_the_art`.

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
from attn_analysis.cli import notebook_support as nbs

root, params, runs, catalog, lead, R = nbs.prelude(globals(), mode=nbs.mode_iv,
                                                   triton_run=nbs.recorded_run_iv,
                                                   kernel_runs=nbs.recorded_runs_iv,
                                                   fa3_run=nbs.recorded_run_iv)

import numpy as np
import pandas as pd
from attn_analysis import configs
from attn_analysis.present import tables, figure_style, plots
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
fastest = latency_tables.fastest_table(latency, speedups, mode=mode)
through = latency_tables.throughput_table(latency, R.ceilings, R.device)
counts = comparisons.verdict_counts(speedups).reindex([mode]).fillna(0).iloc[0]
n_fast_lib = int(fastest["fastest"].isin(catalog.SDPA_BACKENDS).sum())
nbs.glue_text("mx_label", label)
nbs.glue_text("mx_run", lead)
nbs.glue_text("mx_n_configs", len(fastest))
nbs.glue_text("mx_n_candidates", latency["candidate"].nunique())
nbs.glue_text("mx_margin", float(speedups["margin"].iloc[0]) if len(speedups) else float("nan"))
for v in stats.Verdict:
    nbs.glue_text(f"mx_n_{v.name.lower()}", int(counts.get(v.value, 0)))
in_mode = speedups[(speedups["mode"] == mode) & (speedups["candidate"] != "sdpa")]
nbs.glue_text("mx_tally", mx.verdict_tally(in_mode["verdict"], "comparisons"))
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
# Run {glue:text}`mx_run:s` ({glue:text}`mx_label:s`) times {glue:text}`mx_n_candidates:d`
# candidates at the reports' {glue:text}`mx_n_configs:d` configurations. Per call,
# {glue:text}`mx_tally:s`.
#
# ```{glue:figure} mx_heatmap
# :name: fig-matrix-heatmap
#
# Speedup of every candidate over the default SDPA dispatch at every configuration, with its
# verdict ({glue:text}`mx_family:s`). {glue:text}`mx_label:s`, run {glue:text}`mx_run:s`.
# ```
#
# (matrix-kernel-level)=
# ## Faster per call, or a faster kernel?
#
# {glue:text}`mx_k_sentence:s` {glue:text}`mx_k_att_sentence:s`

# %% tags=["remove-cell"]
if len(two):
    nbs.glue_values("mx_k_", mx.level_split(two))
    nbs.glue_text("mx_k_sentence", mx.leads_sentence(mx.level_split(two)))
    keep = two[two["verdict"] != stats.Verdict.SLOWER.value].sort_values("speedup",
                                                                         ascending=False)
else:
    keep = pd.DataFrame()
    for key in ("mx_k_m", "mx_k_n_call_faster", "mx_k_n_kernel_faster",
                "mx_k_n_kernel_fast_all", "mx_k_n_attention", "mx_k_n_attention_faster"):
        nbs.glue_text(key, 0)
    for key in ("mx_k_only_call", "mx_k_both", "mx_k_split"):
        nbs.glue_text(key, f"not available: run {lead} is protocol {R.protocol} or mode {mode}")
    nbs.glue_text("mx_k_sentence", f"Run {lead} recorded no kernel times, so no lead can "
                  f"be read per kernel. {mx.attention_sentence(0, 0)}")
    nbs.glue_text("mx_k_att_sentence", "")

# %% tags=["remove-cell"]
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

# %% tags=["remove-cell"]
show = ["fastest", "median_ms", "ci_low_ms", "ci_high_ms", "baseline_median_ms", "speedup",
        "speedup_ci_low", "speedup_ci_high", "verdict", "established"]
tables.show(fastest[["config", "fastest", "median_ms", "speedup", "speedup_ci_low",
                     "speedup_ci_high", "verdict"]],
            f"Fastest candidate per configuration ({mode} mode), its median, its speedup over "
            f"sdpa with its interval ({lead_family}), and the verdict; sdpa's median, the "
            f"latency intervals and the candidates shown faster are in the CSV. {label}.",
            name="tbl-matrix-fastest", formats={"median_ms": ".4f"},
            csv="matrix_fastest.csv", full=fastest[["config"] + show])

# %% tags=["remove-cell"]
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
# Run {glue:text}`mx_tr_run:s` ({glue:text}`mx_tr_label:s`) times our kernel and the four
# SDPA entry points. Per shape, ours is compared with the fastest of them:
# {glue:text}`mx_tr_lib_tally:s`. {glue:text}`mx_tr_att_sentence:s`

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
# Speedup of our Triton kernel over the fastest SDPA backend at each configuration; the
# backend is named beside the shape. Intervals: {glue:text}`mx_tr_family:s`.
# Measured on {glue:text}`mx_tr_label:s`, run {glue:text}`mx_tr_run:s`.
# ```

# %% tags=["remove-cell"]
if len(vs_lib):
    table, shown = mx.triton_table(vs_lib, tuning, tr_two)
    compact = table.reset_index()
    compact["speedup"] = tables.with_interval(compact["speedup"], compact["ci_low"],
                                              compact["ci_high"])
    tables.show(compact[shown],
                f"Our kernel against the fastest library backend per configuration (graph "
                f"mode; {tr_family}), and the verdicts per kernel against sdpa (the default dispatch, "
                f"every kernel of its call included) and per attention kernel (each side's longest kernel "
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
# Over the {glue:text}`mx_tune_n_runs:d` runs that timed our kernel
# ({glue:text}`mx_tune_n_cells:d` run-and-shape pairs), later processes reused the first
# one's pick in {glue:text}`mx_tune_n_reused:d`. Runs that tuned a shape differently
# measured different kernels there.

# %% tags=["remove-cell"]
tune_runs = {rid: r.units for rid, r in runs.items()
             if "triton" in set(r.units["candidate"])}
tune = provenance.tuning_by_run(tune_runs)
nbs.glue_values("mx_tune_", mx.tuning_values(tune))
per_run = mx.tuning_per_run(tune)

# %% tags=["remove-cell"]
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
# ### Our kernel at FlashAttention-3's shapes

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
    nbs.glue_text("mx_fa3_tally", mx.verdict_tally(kv, "shapes") if len(kv)
                  else "no shape was compared")
    nbs.glue_text("mx_fa3_m", int(fv["n_comparisons"].iloc[0]) if len(fv) else 0)
else:
    fa3 = pd.DataFrame()
    for key in ("mx_fa3_n", "mx_fa3_n_equivalent", "mx_fa3_n_slower", "mx_fa3_n_faster",
                "mx_fa3_m"):
        nbs.glue_text(key, 0)
    nbs.glue_text("mx_fa3_run", "none")
    nbs.glue_text("mx_fa3_tally", "no shape was compared")
    nbs.glue_text("mx_fa3_label", "no run")

# %% tags=["remove-cell"]
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
# Our kernel's value at the target is in {ref}`sota-target`. At FlashAttention-3's shapes
# (run {glue:text}`mx_fa3_run:s`), per kernel: {glue:text}`mx_fa3_tally:s`.

# %% tags=["remove-cell"]
if len(fa3):
    tables.show(fa3.reset_index(),
                f"TFLOP/s per call (graph replay, 4·B·H·S²·D over the median time) of the "
                f"default dispatch, cuDNN forced and our kernel at the FlashAttention-3 "
                f"paper's shapes, and our kernel's verdicts against sdpa per call, kernel and "
                f"attention kernel ({fa3_family}). {provenance.run_label(F)}.",
                name="tbl-fa3-shapes", formats={c: ".0f" for c in fa3.columns
                                                if c.endswith("_tflops")},
                csv="fa3_shapes.csv")

