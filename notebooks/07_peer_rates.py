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
# # 3.6 Rates and the crossover
#
# A rate is the forward attention FLOPs, 4·B·H·S²·D (halved for causal; softmax not
# counted), over the kernel time: the profiler's kernel sum per call, the median over the
# peer and powered runs of a GPU model.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
checks_dir = "data/checks"  # recorded check files (peers2_check_*, crossover_ncu_*)
margin = 0.02             # equivalence margin on the speedup ratio, in (0, 1)
n_resamples = 2000        # bootstrap resamples per interval

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs

root, params = nbs.parameters(globals(), checks_dir=lambda n, v, p: str(v),
                              margin=nbs.margin_iv, n_resamples=nbs.resamples_iv)

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from attn_analysis.present import tables, figure_style
from attn_analysis.chapters import state_of_the_art as sota
from attn_analysis.analyse import inventory
from attn_analysis.chapters import peer_rates as pr
from attn_analysis.record import checks

inv = inventory.run_inventory(params["runs_dir"])
chosen = inv[[pr.rate_campaign(c) for c in inv["campaign"]]]["run"].tolist()
if not chosen:
    raise ValueError("no recorded run of the peers2 or powered campaigns.")
runs = nbs.load_runs(params["runs_dir"])
tabs = [sota.comparison_table(runs[r], margin=params["margin"],
                              n_resamples=params["n_resamples"]) for r in chosen]
rate = pr.rates(tabs)
folder = root / params["checks_dir"]
ncu = pd.concat([pr.crossover_frame(checks.read(p, "crossover_ncu"))
                 for p in sorted(folder.glob("crossover_ncu_*.json"))], ignore_index=True)
gates = {p.stem.split("_")[-1]: pr.gate_frame(checks.read(p, "peers_check"))
         for p in sorted(folder.glob("peers2_check_*.json"))}
published = pd.read_csv(root / "data/reference/fa3_published.csv")
pub = published.set_index("quantity")
nbs.glue_text("pr_runs", ", ".join(chosen))
nbs.glue_text("pr_crossover_sentence", pr.crossover_sentence(ncu))
ncu_files = sorted(folder.glob("crossover_ncu_*.json"))
nbs.glue_text("pr_ncu_source", "; ".join(sorted(set(ncu["gpu"]))) + ", "
              + ", ".join(p.name for p in ncu_files))
top = rate.sort_values("fraction_of_peak", ascending=False).iloc[0]
nbs.glue_text("pr_top_rate", f"{top.tflops:.0f} TFLOP/s ({100 * top.fraction_of_peak:.0f}% of "
              f"the {top.gpu}'s peak, {top.candidate} at {top.config})")
nbs.glue_text("pr_published", f"{pub.loc['max_forward_tflops', 'value']:.0f} TFLOP/s "
              f"({100 * pub.loc['max_forward_utilization', 'value']:.0f}% utilisation) on the "
              f"{pub.loc['max_forward_tflops', 'device']}, as reported "
              f"({pub.loc['max_forward_tflops', 'source']}; shape "
              f"{pub.loc['max_forward_tflops', 'shape']})")
for gpu, g in gates.items():
    nbs.glue_text(f"pr_sdpa_fa4_{gpu}", pr.sdpa_fa4_sentence(g))
    nbs.glue_text(f"pr_xformers_{gpu}", pr.xformers_sentence(g))
nbs.glue_text("pr_gate_sentence", " ".join(
    f"{gpu.upper()}: {pr.sdpa_fa4_sentence(g)} {pr.xformers_sentence(g)}."
    for gpu, g in gates.items()))

# %% [markdown]
# The highest rate measured is {glue:text}`pr_top_rate:s`. The FA3 paper reports
# {glue:text}`pr_published:s`; that figure is published, not measured here.

# %% tags=["remove-input"]
for gpu, g in rate.groupby("gpu"):
    peak = float((g["tflops"] / g["fraction_of_peak"]).median())
    shown = pr.rate_display(g, min_seq_len=pr.LONG_S, percent=False,
                            min_filled=0.5).drop(columns="GPU")
    tables.show(shown, f"{gpu}: TFLOP/s per candidate measured at most shapes of S ≥ "
                f"{pr.LONG_S} (dense fp16 peak {peak:.0f}); runs " + ", ".join(chosen) + ". "
                "The CSV holds every candidate and shape and the percent of peak.",
                csv=f"rates_{gpu.split()[-1].lower()}.csv", full=g)

# %% [markdown]
# ## The crossover, profiled
#
# {glue:text}`pr_crossover_sentence:s`

# %% tags=["remove-cell"]
fig, axes = plt.subplots(1, 2, figsize=(10, 0.4 * len(ncu) + 1.2), sharey=True)
for ax, (col, name) in zip(axes, [("tensor_pct", "tensor pipe busy (%)"),
                                  ("xu_pct", "XU pipe (exponentials) (%)")]):
    labels = [f"{pr._NAMES.get(c, c)}, {s}" for c, s in
              zip(ncu["candidate"], ncu["config"].str.replace("-D64-fp16", ""))]
    y = ncu[col].to_numpy(float)
    ax.barh(range(len(y)), y, color=[{"sdpa_cudnn": "C0", "fa4": "C1", "fa3": "C2"}.get(c, "C7")
                                     for c in ncu["candidate"]])
    ax.set_yticks(range(len(y)), labels, fontsize=9)
    ax.set_xlabel(name, fontsize=9)
    ax.set_xlim(*figure_style.check_span((0, 1.1 * y.max()), y, name="x"))
axes[0].invert_yaxis()  # the axes share y: once puts the first kernel on top
_ncu_sw = sorted({f"{d.get('gpu')}, torch {d.get('torch')}" for d in
                  (checks.read(p, "crossover_ncu") for p in folder.glob("crossover_ncu_*.json"))})
fig.suptitle("Nsight Compute at S = 512 and 2048, D = 64, on the " + "; ".join(_ncu_sw),
             fontsize=10)
fig.tight_layout()
nbs.glue_figure("pr_crossover_figure", fig)

# %% [markdown]
# ```{glue:figure} pr_crossover_figure
# :name: fig-crossover
#
# Pipe utilisation of cuDNN's SDPA kernel, FA4 and FA3 per profiled shape (Nsight Compute,
# clocks not controlled; {glue:text}`pr_ncu_source:s`).
# ```
#
# ## The new peers' gate
#
# `fa3` is FlashAttention-3's Hopper forward; `fa4_bshd` feeds FA4 its own (B, S, H, D)
# layout; `flex_flash` is FlexAttention's FLASH backend. {glue:text}`pr_gate_sentence:s`

# %% tags=["remove-input"]
for gpu, g in gates.items():
    tables.show(g, f"{gpu.upper()}: float64 gate of the new peers (shapes passed) and the "
                "versions, per environment.")
