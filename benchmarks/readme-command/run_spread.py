"""How much does each candidate's graph-mode time move from one run of the README's command
to the next, on the same GPU model? For each (GPU model, configuration, candidate): the
largest over the smallest of the runs' medians (each run's median over its placements of
the placement medians), over every run folder given.

With ``--new``, the runs after it are set against the runs before it instead: for each new
run and (configuration, candidate), its median over the median of the old runs of its GPU
model, and whether it lies inside the old runs' range (:func:`against`).

Usage: PYTHONPATH=. python benchmarks/readme-command/run_spread.py RUN_FOLDER [RUN_FOLDER ...]
       PYTHONPATH=. python benchmarks/readme-command/run_spread.py OLD ... --new NEW ...
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


def against(old: list[Path], new: list[Path]) -> pd.DataFrame:
    """Per new run and (config, candidate): its median over the median of the old runs of
    its GPU model (``over_old``), the old runs' smallest and largest over that median
    (``old_lo``, ``old_hi``) and whether the new median lies between them (``inside``)."""
    before = pd.concat([run_medians(run) for run in old])
    ref = before.groupby(["gpu", "config", "candidate"])["ms"].agg(["median", "min", "max"])
    rows = []
    for run in new:
        cur = run_medians(run).join(ref, on=["gpu", "config", "candidate"], how="inner")
        rows.append(cur.assign(run=Path(run).name, over_old=cur["ms"] / cur["median"],
                               old_lo=cur["min"] / cur["median"],
                               old_hi=cur["max"] / cur["median"],
                               inside=(cur["ms"] >= cur["min"]) & (cur["ms"] <= cur["max"])))
    cols = ["run", "gpu", "config", "candidate", "over_old", "old_lo", "old_hi", "inside"]
    return pd.concat(rows)[cols].reset_index(drop=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    pd.set_option("display.width", 200)
    if "--new" in args:
        cut = args.index("--new")
        old, new = [Path(p) for p in args[:cut]], [Path(p) for p in args[cut + 1:]]
        if not old or not new:
            sys.exit(__doc__)
        table = against(old, new)
        for (run, gpu), group in table.groupby(["run", "gpu"], sort=False):
            print(f"{run} ({gpu}): {len(group)} pairs, median over old runs' median "
                  f"{group['over_old'].median():.3f} (range {group['over_old'].min():.3f}-"
                  f"{group['over_old'].max():.3f}); inside the old runs' range: "
                  f"{int(group['inside'].sum())}")
            for _, row in group[~group["inside"]].iterrows():
                print(f"  outside: {row['config']} {row['candidate']} {row['over_old']:.3f} "
                      f"(old {row['old_lo']:.3f}-{row['old_hi']:.3f})")
        sys.exit(0)
    if len(args) < 2:
        sys.exit(__doc__)
    print(spread([Path(p) for p in args]).round(3).to_string())
