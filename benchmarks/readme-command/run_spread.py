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


def run_medians(run: Path) -> pd.DataFrame:
    """Median over graph mode's placements of each (config, candidate)'s placement median
    (``ms``), with the GPU the run was measured on (``gpu``, as ``Run.device`` names it)."""
    loaded = record.load(run)
    frame = loaded.placements[loaded.placements["mode"] == "graph"]
    medians = frame.groupby(["config", "candidate"])["median_ms"].median()
    return medians.rename("ms").reset_index().assign(gpu=loaded.device, run=str(run))


def spread(runs: list[Path]) -> pd.DataFrame:
    """Max over min of the runs' medians, a row per (GPU, config), a column per candidate,
    with the number of runs of each GPU model."""
    data = pd.concat([run_medians(run) for run in runs])
    ratio = data.groupby(["gpu", "config", "candidate"])["ms"].agg(lambda s: s.max() / s.min())
    table = ratio.unstack("candidate")
    table.insert(0, "runs", data.groupby(["gpu", "config"])["run"].nunique())
    return table


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pd.set_option("display.width", 200)
    print(spread([Path(p) for p in sys.argv[1:]]).round(3).to_string())
