"""How much does each candidate's graph-mode time move from one run of the README's command
to the next, on the same GPU model? For each (GPU model, configuration, candidate): the
largest over the smallest of the runs' medians (each run's median over its placements of
the placement medians), over every run folder given.

Usage: PYTHONPATH=. python benchmarks/readme-command/run_spread.py RUN_FOLDER [RUN_FOLDER ...]
(the tarballs here unpack to run folders: ``tar xzf h100w-readme-graph.tar.gz -C /tmp``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from attn_analysis import record


def gpu_model(run: Path) -> str:
    """The GPU the run was measured on, as the package names it (``Run.device``)."""
    return record.load(run).device


def run_medians(run: Path) -> pd.Series:
    """Median over graph mode's placements of each (config, candidate)'s placement median."""
    frame = pd.read_parquet(Path(run) / "placements.parquet")
    frame = frame[frame["mode"] == "graph"]
    return frame.groupby(["config", "candidate"])["median_ms"].median()


def spread(runs: list[Path]) -> pd.DataFrame:
    """Max over min of the runs' medians, a row per (GPU, config), a column per candidate,
    with the number of runs of each GPU model."""
    parts = [run_medians(run).rename("ms").reset_index().assign(gpu=gpu_model(run), run=str(run))
             for run in runs]
    data = pd.concat(parts)
    ratio = data.groupby(["gpu", "config", "candidate"])["ms"].agg(lambda s: s.max() / s.min())
    table = ratio.unstack("candidate")
    table.insert(0, "runs", data.groupby(["gpu", "config"])["run"].nunique())
    return table


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pd.set_option("display.width", 200)
    print(spread([Path(p) for p in sys.argv[1:]]).round(3).to_string())
