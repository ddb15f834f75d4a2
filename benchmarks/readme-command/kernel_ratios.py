"""Did a change to how the README's GPU command runs change what it measures? Compare
two run folders' kernel times, configuration x candidate by configuration x candidate.

For each (configuration, candidate) of graph mode present in both runs: the median over
all placements of ``kernel_ms`` (the profiler's kernel time at each placement) in the new
run over the same in the old one. Prints the number of pairs, the median ratio and its
range, and the pairs outside [lo, hi] (default 0.95-1.05).

Usage: python benchmarks/readme-command/kernel_ratios.py OLD_RUN NEW_RUN [LO HI]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def kernel_medians(run: Path) -> pd.Series:
    """Median kernel time (ms) per (config, candidate) over the run's graph-mode placements."""
    frame = pd.read_parquet(Path(run) / "placements.parquet")
    frame = frame[frame["mode"] == "graph"]
    return frame.groupby(["config", "candidate"])["kernel_ms"].median()


def ratios(old: Path, new: Path) -> pd.Series:
    """New over old, for the pairs both runs measured."""
    a, b = kernel_medians(old), kernel_medians(new)
    both = a.index.intersection(b.index)
    return (b[both] / a[both]).rename("ratio")


def main(argv) -> int:
    if len(argv) not in (2, 4):
        print(__doc__)
        return 2
    lo, hi = (float(argv[2]), float(argv[3])) if len(argv) == 4 else (0.95, 1.05)
    r = ratios(Path(argv[0]), Path(argv[1]))
    print(f"{Path(argv[1]).name} / {Path(argv[0]).name}: {len(r)} pairs, median ratio "
          f"{r.median():.3f} (range {r.min():.3f}-{r.max():.3f})")
    outside = r[(r < lo) | (r > hi)]
    for (config, candidate), value in outside.items():
        print(f"  outside {lo}-{hi}: {config} {candidate} {value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
