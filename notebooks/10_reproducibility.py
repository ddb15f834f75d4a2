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
# # Reproducibility
#
# Which GPU measured which run, with what software, and how long the documented commands
# take; computed from `data/runs/` and `benchmarks/command-durations.csv` at build time.

# %% tags=["parameters", "hide-input"]
runs_dir = "data/runs"    # recorded runs, relative to the repository root

# %% tags=["remove-cell"]
import pathlib, sys  # this repository's package first, whichever copy is installed
sys.path.insert(0, str(next(p for p in pathlib.Path("_").resolve().parents if (p / "attn_analysis").is_dir())))
from attn_analysis.cli import notebook_support as nbs

root, params = nbs.parameters(globals())

import pandas as pd

from attn_analysis.present import tables
from attn_analysis.analyse import inventory, software

RUNS = params["runs_dir"]
gpus = inventory.gpu_inventory(RUNS)
run_table = inventory.run_inventory(RUNS)
counts = inventory.counts(RUNS)
nbs.glue_values("rep_", counts)


def _minute(stamp) -> str:
    """'11-24 16:21' from an ISO time in UTC (the year is in the caption); '-' where none
    is recorded."""
    return pd.Timestamp(stamp).strftime("%m-%d %H:%M") if isinstance(stamp, str) else "-"


# %% [markdown]
# ## The GPUs
#
# The runs come from {glue:text}`rep_n_gpus_h100:d` H100 and {glue:text}`rep_n_gpus_h200:d`
# H200 GPUs, told apart by the UUID each process records
# ({glue:text}`rep_n_runs:d` runs, {glue:text}`rep_n_processes:d` processes). Each GPU has a
# label, lettered per model in the order of its first process; the chapters name GPUs by
# these labels. Runs that recorded no UUID have a row of their own.

# %% tags=["remove-input"]
shown = gpus.assign(runs=gpus["runs"].map(", ".join))
tables.show(shown[["label", "uuid", "n_runs", "processes"]],
            "Every GPU of the recorded runs: its label, UUID, runs and trial processes. The "
            "CSV lists each GPU's runs.",
            name="tbl-gpu-inventory", csv="gpu_inventory.csv", full=shown,
            labels={"label": "label", "uuid": "UUID", "n_runs": "runs",
                    "processes": "processes", "runs": "run ids"},
            formats={"n_runs": ".0f", "processes": ".0f"})

# %% tags=["remove-cell"]
confirm = run_table[run_table["role"] == "confirmatory"]
nbs.glue_text("rep_n_confirm", len(confirm))
nbs.glue_text("rep_confirm_runs", ", ".join(confirm["run"]) or "none")
nbs.glue_text("rep_plan_note", inventory.plan_statement(run_table))

# %% [markdown]
# ## The runs
#
# One table per role, one row per run in order of its first process: its GPUs, trial
# processes (proc.), design (placements per unit × samples, pl.×s.) and the commit that
# added its results (the code that measured it is that commit's or older).
# {glue:text}`rep_plan_note:s`

# %% tags=["remove-input"]
rows = run_table.assign(
    # a space after each comma lets a long list of GPUs wrap inside the text column
    gpus=run_table["gpus"].map(inventory.compact_labels).str.replace(",", ", "),
    design=[f"{p}×{n:.0f}" if pd.notna(n) else f"{p}×?"
            for p, n in zip(run_table["placements_per_unit"], run_table["samples"])],
    first=run_table["first_entry_utc"].map(_minute),
    plan=run_table["plan_committed_utc"].map(_minute),
    results=run_table["results_committed_utc"].map(_minute))
cols = ["run", "gpus", "processes", "design", "configs", "results_commit"]
labels = {"run": "run", "gpus": "GPU", "processes": "proc.", "design": "pl.×s.",
          "configs": "shapes", "first": "first process", "results_commit": "commit",
          "plan": "plan in git", "results": "results in git"}
for role in inventory.ROLES:
    part = rows[rows["role"] == role]
    if part.empty:
        continue
    extra = ["first", "plan", "results"] if role == "confirmatory" else []
    tables.show(part[cols + extra],
                f"The {role} runs."
                + (" GPU '?': no UUID recorded." if (part["gpus"] == "?").any() else "")
                + (" Times in UTC, 2026; plan and results in git: the first commit holding "
                   "each." if extra else ""),
                name=f"tbl-runs-{role}", csv=f"runs_{role}.csv", labels=labels,
                formats={"processes": ".0f", "configs": ".0f"},
                full=run_table[run_table["role"] == role])

# %% [markdown]
# ## The software
#
# Every process records its software; runs that share every version share a row. Each
# peer package is recorded as shipped, by the units that timed it.

# %% tags=["remove-input"]
soft = software.software_table(RUNS).merge(run_table[["run", "code_version"]], on="run",
                                           how="left")
keys = ["code_version", *software.BASE_KEYS]
base = software.base_software(soft, keys)
# one column per set of versions (narrow: the versions are rows), the largest set first
by_set = pd.DataFrame({f"{n} runs": [*row, ", ".join(r) if i else
                                     ("every other run" if len(base) > 1 else "every run")]
                       for i, (n, r, row) in enumerate(zip(base["n_runs"], base["runs"],
                                                           base[keys].itertuples(index=False)))},
                      index=["attn_analysis", *software.BASE_KEYS, "run ids"])
tables.show(by_set.rename_axis("software").reset_index(),
            "The software of every run, from each process's fingerprint; one column per "
            "set of versions (attn_analysis: this package's version).",
            name="tbl-software", csv="software.csv", full=soft)
peers = software.peer_runs(soft)
tables.show(peers.assign(runs=peers["runs"].map(", ".join)),
            "Each peer package version, from the timing units of the runs that timed it.",
            name="tbl-peer-versions", labels={"n_runs": "runs", "runs": "run ids"},
            formats={"n_runs": ".0f"})

# %% [markdown]
# ## The documented commands and their duration
#
# From a fresh clone, without a GPU, build the book, then run the tests:
#
# ```bash
# python3 -m pip install -r requirements.txt && jupyter-book build . -W -n --keep-going
# python3 -m pip install -r requirements.txt -r requirements-test.txt && python3 -m pytest
# ```
#
# On a GPU, keep your CUDA build of torch, measure the reports' shape (a design that
# decides at its family), check the run and rebuild; the new run joins the tables above:
#
# ```bash
# python3 -m pip install -r requirements-core.txt
# python3 -m attn_analysis sweep --out data/runs/my-gpu --matrix fixed-v1 --trials 18 --modes graph
# python3 -m attn_analysis verify data/runs/*/
# ```
#
# `verify` checks each run against its SHA-256 manifest; the book refuses a run that
# fails. To re-execute a notebook with other parameters:
#
# ```bash
# jupytext --to ipynb -o - notebooks/03_matrix.py | papermill - /tmp/03_matrix.ipynb --cwd notebooks -p run h200-reports-p2-all -p mode per_call
# ```
#
# The PDF needs TeX Live (`apt-get install -y --no-install-recommends
# texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended
# texlive-fonts-extra texlive-xetex latexmk fonts-freefont-otf`); then
# `jupyter-book build . --builder pdflatex` writes `_build/latex/book.pdf`.

# %% tags=["remove-input"]
dur = software.command_durations()
shown = dur.assign(source=dur["source"].str.split("§").str[0].str.strip())
tables.show(shown[["name", "scope", "wall_s"]],
            "Measured wall time of each documented command; without a GPU, on a 2-core "
            "machine. The CSV gives the command, machine, commit and benchmark file.",
            name="tbl-command-durations", csv="command_durations.csv", full=dur,
            labels={"name": "command", "wall_s": "wall (s)", "scope": "what it covers"},
            formats={"wall_s": "g"})

# %% [markdown]
# ## Executed notebooks
#
# ```{nb-exec-table}
# ```
