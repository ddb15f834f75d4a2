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
# # The fixed shape: every candidate against the default SDPA dispatch
#
# The claim under test is about one shape, B=32, H=8, S=512, D=64 in fp16. Here every
# candidate of the lead run is compared with `sdpa` (the default dispatch, what a user
# gets from `F.scaled_dot_product_attention` without asking for a backend): the speedup
# `median(sdpa) / median(candidate)` with a hierarchical bootstrap interval over
# independent processes, and an equivalence test with a stated margin. Beside it, the
# original reports' statistics are recomputed on the same samples.

# %% tags=["parameters"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
run = "h100-reports-v1"   # documented default lead run ("" picks the largest GPU run)
measure = False           # True: measure a new run on this machine first
device = "auto"           # "auto" (GPU if present, else CPU), "cuda" or "cpu"
shapes = ""               # "B,H,S[,D];..." or a matrix name; "" = default for the device
candidates = ""           # comma-separated names; "" = default for the device
trials = 2                # independent processes per unit
samples = 0               # samples per unit; 0 = adaptive stopping rule
run_id = ""               # folder name of the new run; "" = device and UTC time
n_resamples = 1000        # bootstrap resamples per interval
config = ""               # configuration key; "" = the target B32-H8-S512-D64-fp16 if recorded
margin = 0.02             # equivalence margin on the speedup ratio

# %% tags=["remove-cell"]
from pathlib import Path
import sys

here = Path.cwd().resolve()
root = next(p for p in (here, *here.parents) if (p / "attn_analysis").is_dir())
sys.path.insert(0, str(root))

import numpy as np
import pandas as pd
from IPython.display import display

from attn_analysis import notebook_support as nbs, plots, reference, stats, summaries
from attn_analysis.configs import TARGET

params, runs, catalog, lead = nbs.start(
    root, runs_dir=runs_dir, run=run, measure=measure, device=device, shapes=shapes,
    candidates=candidates, trials=trials, samples=samples, run_id=run_id,
    n_resamples=n_resamples)
if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < 0.5:
    raise ValueError(f"`margin` must be a number in (0, 0.5); got {margin!r}.")
R = runs[lead]
label = summaries.run_label(R)
recorded = set(R.samples["config"])
if not isinstance(config, str) or (config and config not in recorded):
    raise ValueError(f"`config` must be '' or one of {sorted(recorded)}; got {config!r}.")
config = config or (TARGET.key if TARGET.key in recorded
                    else max(recorded, key=lambda k: summaries.Config.from_key(k)))
modes = [m for m in summaries.MODES if m in set(R.samples.loc[R.samples["config"] == config,
                                                              "mode"])]
main_mode = "graph" if "graph" in modes else modes[0]
nbs.glue_text("fx_label", label)
nbs.glue_text("fx_run", lead)
nbs.glue_text("fx_config", config)
nbs.glue_text("fx_margin", float(margin))
nbs.glue_text("fx_mode", main_mode)

# %% [markdown]
# Lead run {glue:text}`fx_run:s` ({glue:text}`fx_label:s`), configuration
# {glue:text}`fx_config:s`, main timing mode {glue:text}`fx_mode:s` (see the methods
# chapter for why).
#
# ## Speedup over the default dispatch, with its interval and verdict

# %% tags=["remove-cell"]
speedups = summaries.speedup_table(R.samples, modes=modes, margin=float(margin),
                                   n_resamples=params["n_resamples"], configs=config)
main = speedups[speedups["mode"] == main_mode].set_index("candidate")
others = main.drop(index="sdpa")
self_cmp = main.loc["sdpa"]
best = others["speedup"].idxmax()
latency = summaries.latency_table(R.samples[R.samples["config"] == config], modes=modes,
                                  ci_modes=(main_mode,), n_resamples=params["n_resamples"])
base_lat = latency[(latency["candidate"] == "sdpa") & (latency["mode"] == main_mode)].iloc[0]
counts = others["verdict"].value_counts()
kernels = summaries.kernel_table(R.kernels) if len(R.kernels) else pd.DataFrame()
family = kernels.loc[kernels["config"] == config, "family"] if len(kernels) else []
nbs.glue_text("fx_sdpa_family", family.iloc[0] if len(family) else "a kernel not profiled")

nbs.glue_text("fx_sdpa_ms", base_lat["median_ms"])
nbs.glue_text("fx_sdpa_lo", base_lat["ci_low_ms"])
nbs.glue_text("fx_sdpa_hi", base_lat["ci_high_ms"])
nbs.glue_text("fx_sdpa_us", base_lat["median_ms"] * 1e3)
nbs.glue_text("fx_n_trials", base_lat["n_trials"])
nbs.glue_text("fx_n_candidates", len(others))
for v in ("faster", "equivalent", "slower", "inconclusive"):
    nbs.glue_text(f"fx_n_{v}", int(counts.get(v, 0)))
nbs.glue_text("fx_best", best)
nbs.glue_text("fx_best_speedup", others.loc[best, "speedup"])
nbs.glue_text("fx_best_lo", others.loc[best, "ci_low"])
nbs.glue_text("fx_best_hi", others.loc[best, "ci_high"])
nbs.glue_text("fx_best_verdict", others.loc[best, "verdict"])
nbs.glue_text("fx_self_lo", self_cmp["ci_low"])
nbs.glue_text("fx_self_hi", self_cmp["ci_high"])
nbs.glue_text("fx_self_resolvable", self_cmp["resolvable_margin"])
nbs.glue_text("fx_self_verdict", self_cmp["verdict"])
nbs.glue_text("fx_min_resolvable", others["resolvable_margin"].min())
for name in others.index:
    nbs.glue_text(f"fx_speedup_{name}", others.loc[name, "speedup"])
    nbs.glue_text(f"fx_lo_{name}", others.loc[name, "ci_low"])
    nbs.glue_text(f"fx_hi_{name}", others.loc[name, "ci_high"])
    nbs.glue_text(f"fx_verdict_{name}", others.loc[name, "verdict"])
nbs.glue_figure("fx_forest", plots.speedup_forest(speedups, label, config=config,
                                                  margin=float(margin)))
nbs.glue_figure("fx_spread", plots.trial_spread(summaries.trial_medians(R.samples), label,
                                                config=config, mode=main_mode))

# %% [markdown]
# ```{glue:figure} fx_forest
# :name: fig-fixed-forest
#
# Speedup of each candidate over the default SDPA dispatch at {glue:text}`fx_config:s`,
# with its 95 % hierarchical-bootstrap interval, one panel per timing mode; the band is the
# ±{glue:text}`fx_margin:.0%` equivalence margin. Measured on {glue:text}`fx_label:s`
# (run {glue:text}`fx_run:s`).
# ```
#
# In {glue:text}`fx_mode:s` mode the default dispatch took {glue:text}`fx_sdpa_ms:.4f` ms
# (95 % CI {glue:text}`fx_sdpa_lo:.4f`–{glue:text}`fx_sdpa_hi:.4f` ms over
# {glue:text}`fx_n_trials:d` processes). Of the {glue:text}`fx_n_candidates:d` other
# candidates, {glue:text}`fx_n_faster:d` were shown faster, {glue:text}`fx_n_equivalent:d`
# equivalent within the margin, {glue:text}`fx_n_slower:d` slower and
# {glue:text}`fx_n_inconclusive:d` could not be told apart either way. The fastest point
# estimate is {glue:text}`fx_best:s`, speedup {glue:text}`fx_best_speedup:.3f`
# (95 % CI {glue:text}`fx_best_lo:.3f`–{glue:text}`fx_best_hi:.3f`, verdict
# *{glue:text}`fx_best_verdict:s`*).
#
# The row `sdpa` compares the default dispatch with itself, resampled independently on
# both sides: its interval, {glue:text}`fx_self_lo:.3f`–{glue:text}`fx_self_hi:.3f`, is
# the resolution of this run. The smallest margin it could have shown equivalence within
# is ±{glue:text}`fx_self_resolvable:.1%`, so with these trials even identical code is
# *{glue:text}`fx_self_verdict:s`* at ±{glue:text}`fx_margin:.0%`: the spread between
# processes, not the number of samples, sets the limit (figure below).

# %% tags=["remove-input"]
cols = ["speedup", "ci_low", "ci_high", "tost_low", "tost_high", "verdict",
        "resolvable_margin", "n_trials_candidate"]
display(speedups.set_index(["mode", "candidate"])[cols].sort_index()
        .style.format({c: "{:.3f}" for c in cols[:5]} | {"resolvable_margin": "{:.1%}"})
        .set_caption(f"Speedup over sdpa at {config}: 95 % CI (ci_low, ci_high), 90 % TOST "
                     f"interval, verdict at margin ±{margin:.0%}. {label}."))

# %% [markdown]
# ```{glue:figure} fx_spread
# :name: fig-fixed-spread
#
# Median of each independent process (trial) relative to the median of the trial medians,
# per candidate, at {glue:text}`fx_config:s` in {glue:text}`fx_mode:s` mode.
# Measured on {glue:text}`fx_label:s`.
# ```
#
# ## The reports' statistics, recomputed beside ours
#
# The reports compared one array of latencies with itself and reported a speedup of one,
# Hedges' g of zero, Cliff's delta of zero and a Mann-Whitney p-value of one. Those
# numbers follow from the comparison, not from the kernels. Below,
# `stats.reports_protocol` applies their statistics (per-sample bootstrap CI of the median,
# Hedges' g, Cliff's delta, Mann-Whitney) to our pooled samples of each candidate against
# `sdpa`, next to our hierarchical interval and verdict.

# %% tags=["remove-cell"]
def pooled(candidate):
    sel = R.samples[(R.samples["config"] == config) & (R.samples["candidate"] == candidate)
                    & (R.samples["mode"] == main_mode)]
    return sel["ms"].to_numpy(dtype=float)


protocol = {"sdpa vs the same array (the reports' comparison)":
            stats.reports_protocol(pooled("sdpa"), pooled("sdpa"))}
protocol |= {f"sdpa vs {c}": stats.reports_protocol(pooled("sdpa"), pooled(c))
             for c in others.index}
theirs = summaries.reports_protocol_table(protocol)
ours = others[["ci_low", "ci_high", "verdict"]].rename(
    columns={"ci_low": "our_ci_low", "ci_high": "our_ci_high", "verdict": "our_verdict"})
ours.index = [f"sdpa vs {c}" for c in ours.index]
side_by_side = theirs.set_index("comparison").join(ours)
same = protocol["sdpa vs the same array (the reports' comparison)"]
nbs.glue_text("fx_rp_same_g", same.hedges_g)
nbs.glue_text("fx_rp_same_p", same.p_value)
narrow = side_by_side.dropna(subset=["our_verdict"])
nbs.glue_text("fx_rp_n_significant", int((narrow["p_value"] < 0.05).sum()))
nbs.glue_text("fx_rp_n_faster_ours", int((narrow["our_verdict"] == "faster").sum()))

# %% tags=["remove-input"]
num = ["baseline_median_ms", "candidate_median_ms", "speedup", "hedges_g", "cliffs_delta",
       "our_ci_low", "our_ci_high"]
display(side_by_side[num + ["p_value", "cis_overlap", "our_verdict"]]
        .style.format({c: "{:.4f}" for c in num} | {"p_value": "{:.2g}"}, na_rep="")
        .set_caption(f"The reports' statistics on pooled {main_mode} samples at {config} "
                     f"(left) and our hierarchical 95 % interval and verdict (right). {label}."))

# %% [markdown]
# On the same array the reports' protocol gives g = {glue:text}`fx_rp_same_g:.1f` and
# p = {glue:text}`fx_rp_same_p:.1f` whatever the data. On real pairs it calls
# {glue:text}`fx_rp_n_significant:d` differences significant (p < 0.05), because pooling
# thousands of samples from a few processes treats them as independent; the hierarchical
# interval shows {glue:text}`fx_rp_n_faster_ours:d` candidates faster. A large p-value or
# overlapping intervals would in any case not show equivalence: only an equivalence test
# with a margin can.
#
# ## What the original reports state for this shape (NVIDIA L4, as reported)

# %% tags=["remove-cell"]
reported = reference.load_reported()
l4 = summaries.reported_latency(reported)
l4_here = l4[l4["config"] == config]
nbs.glue_text("fx_l4_n", len(l4_here))
nbs.glue_text("fx_l4_software", str(reported["software"].mode().iloc[0]))
nbs.glue_text("fx_l4_min", l4_here["value_ms"].min() if len(l4_here) else float("nan"))
nbs.glue_text("fx_l4_max", l4_here["value_ms"].max() if len(l4_here) else float("nan"))

# %% tags=["remove-input"]
display(l4_here[["source_file", "value_ms", "n_mentions", "status", "device"]]
        .reset_index(drop=True))

# %% [markdown]
# The reports give {glue:text}`fx_l4_n:d` distinct median latencies for this shape on the
# L4, from {glue:text}`fx_l4_min:.4f` to {glue:text}`fx_l4_max:.4f` ms, **as reported**: we
# had no L4 and did not measure one.
