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
# # Environment: the lock, its check, and every run's fingerprint
#
# This section shows that every recorded timing was taken with TF32 off and the
# environment checked, and that the check catches the original reports' TF32 ordering
# bug when it is replayed. It lists the recorded runs and the lock state of each; the
# hardware and software of each run are in {doc}`10_reproducibility`.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root
run = "h200-reports-p2-all"  # documented default lead run; empty picks the largest GPU run
measure = False           # True measures a new run on this machine first (see 03_matrix)
                          # with measure True also device, shapes, candidates, trials,
                          # samples and run_id, as declared in 03_matrix
n_resamples = 1000        # bootstrap resamples (unused here; shared parameter set)

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis import notebook_support as nbs

root, params, runs, catalog, lead, R = nbs.prelude(globals())

import pandas as pd
import torch
from IPython.display import Markdown

from attn_analysis.measure import env
from attn_analysis import tables
from attn_analysis.analyse import provenance

nbs.glue_text("env_n_runs", len(runs))
nbs.glue_text("env_lead_run", lead)
nbs.glue_text("env_lead_label", catalog.set_index("run").loc[lead, "label"])

# %% [markdown]
# ## The recorded runs
#
# The book found {glue:text}`env_n_runs:d` finalized runs under `data/runs/` (each
# verified against its SHA-256 manifest when loaded); the lead run is
# {glue:text}`env_lead_run:s`, measured on {glue:text}`env_lead_label:s`.

# %% tags=["remove-input"]
tables.show(catalog[["run", "matrix", "n_configs", "n_trials", "n_units", "n_samples"]],
            "The recorded runs under data/runs/ (every run verified against its manifest "
            "when loaded); the device kind and candidates of each run are in the CSV.",
            name="tbl-env-runs", labels={"n_trials": "processes (trials)"},
            csv="recorded_runs.csv", full=catalog)

# %% [markdown]
# ## The fingerprint of each run
#
# One row per run, summarising its trials (each trial is a separate process; every
# trial's fingerprint is in the CSV). *Locked* counts the trials whose `assert_locked()`
# passed just before they timed anything; TF32 and the fp32 precision are the two
# settings the original reports' bug concerned. Deterministic algorithms are off on
# purpose: they change which kernel SDPA dispatches to, and the question is what a user
# gets by default.

# %% tags=["remove-input"]
fingerprints = provenance.fingerprint_table(runs.values())
all_locked = bool(fingerprints["locked"].fillna(False).astype(bool).all())
tf32_off = bool((fingerprints["tf32_matmul"] == False).all())  # noqa: E712
nbs.glue_text("env_n_trials", len(fingerprints))
nbs.glue_text("env_all_locked", "every" if all_locked else "not every")
nbs.glue_text("env_tf32_off", "off" if tf32_off else "NOT off")
from myst_nb import glue
from attn_analysis.measure import candidates as cands
lock_state = (fingerprints.assign(locked=fingerprints["locked"].fillna(False).astype(bool))
              .groupby("run", as_index=False)
              .agg(trials=("trial", "size"), locked=("locked", "sum"),
                   tf32=("tf32_matmul", lambda v: ", ".join(sorted({str(x) for x in v}))),
                   precision=("fp32_precision",
                              lambda v: ", ".join(sorted({str(x) for x in v}))),
                   deterministic=("deterministic",
                                  lambda v: ", ".join(sorted({str(x) for x in v})))))
tables.show(lock_state, "Lock state of every recorded run: trials (processes), how many "
            "passed assert_locked(), and the TF32, fp32-precision and deterministic "
            "settings they ran with.", name="tbl-env-lock",
            labels={"trials": "trials", "locked": "trials locked", "tf32": "TF32 matmul",
                    "precision": "fp32 matmul precision",
                    "deterministic": "deterministic algorithms"},
            formats={"locked": ".0f", "trials": ".0f"},
            csv="fingerprints_per_trial.csv", full=fingerprints)
per_run = (fingerprints.groupby("run", as_index=False)
           .agg(device=("device", "first"), torch=("torch", "first"), cuda=("cuda", "first"),
                cudnn=("cudnn", "first"), triton=("triton", "first"),
                driver=("driver", "first"), python=("python", "first"),
                trials=("trial", "size")))
glue("env_runs_table", Markdown(tables.markdown_table(
    per_run, "Hardware and software of every recorded run (all trials of a run share "
    "them; from each run's fingerprint.json).", name="tbl-runs-software",
    labels={"device": "device", "torch": "PyTorch", "cuda": "CUDA", "cudnn": "cuDNN",
            "triton": "Triton", "driver": "driver", "python": "Python", "trials": "trials"},
    formats={"trials": ".0f"}, csv="runs_software.csv")), display=False)
plan = (runs[lead].info or {}).get("plan", {})
timing = plan.get("timing", {})
nbs.glue_text("env_lead_trials", plan.get("trials", float("nan")))
nbs.glue_text("env_lead_placements", plan.get("placements", 1))
nbs.glue_text("env_lead_samples", timing.get("n_samples", float("nan")))
nbs.glue_text("env_warmup_ms", timing.get("warmup_ms", float("nan")))
nbs.glue_text("env_rel_threshold_fp16", cands.REL_ERROR_THRESHOLD["float16"])
corr = runs[lead].correctness
nbs.glue_text("env_corr_total", len(corr))
nbs.glue_text("env_corr_passed", int(corr["passed"].sum()))
nbs.glue_text("env_corr_max_rel", corr.loc[corr["passed"], "rel_error"].max())

# %% [markdown]
# Of {glue:text}`env_n_trials:d` trial processes, {glue:text}`env_all_locked:s` one passed
# `assert_locked()`, and TF32 for matrix products was {glue:text}`env_tf32_off:s` in all
# of them.
#
# ## The original reports' TF32 ordering bug, replayed
#
# The reports switched TF32 off through the legacy flag and then called
# `torch.set_float32_matmul_precision("high")`, which switches it back on: the two calls
# write the same underlying setting, and the last one wins. Below, on this machine's
# PyTorch, the lock is applied, then the reports' two lines run in their order, then
# `assert_locked()` is asked. The settings are restored afterwards.

# %%
from attn_analysis.measure.env import EnvironmentNotLocked

with env.preserved_state():
    env.lock(seed=0, deterministic=False)
    locked_before = env.is_locked(deterministic=False)
    torch.backends.cuda.matmul.allow_tf32 = False    # the reports' first line
    torch.set_float32_matmul_precision("high")       # their second line: TF32 is back
    tf32_after = torch.backends.cuda.matmul.allow_tf32
    try:
        env.assert_locked(deterministic=False)
        caught = ""
    except EnvironmentNotLocked as exc:
        caught = str(exc)
print("locked before the two lines:", locked_before)
print("allow_tf32 after them:      ", tf32_after)
print("assert_locked() raised:     ", caught or "nothing")

# %% tags=["remove-cell"]
if not caught or not locked_before:
    raise RuntimeError("the TF32 ordering bug was not caught: the lock check is broken")
nbs.glue_text("env_bug_caught", "raised EnvironmentNotLocked" if caught else "did not raise")
nbs.glue_text("env_bug_tf32_after", str(bool(tf32_after)))
nbs.glue_text("env_torch", torch.__version__)

# %% [markdown]
# With PyTorch {glue:text}`env_torch:s`, `allow_tf32` reads
# {glue:text}`env_bug_tf32_after:s` after the reports' two lines, and `assert_locked()`
# {glue:text}`env_bug_caught:s`, naming each setting that differs. The reports' own fix
# (precision "highest" first, then the flag) is what `lock()` does, followed by the
# check that they did not have.
