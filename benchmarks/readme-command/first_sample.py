"""Is a placement's first sample a transient? For each run folder given: per kind of graph-mode
placement (``sized``: the unit's first placement, which sizes its calls per replay; ``told``:
the others) and per graph size (one call a replay, or more), the number of placements and
the median over them of the first and of the second sample over the placement's median.

Used to check that a change to what runs before the samples (the replays after a capture)
leaves the samples as they were. Usage (the tarballs here unpack to run folders):
    python benchmarks/readme-command/first_sample.py RUN_FOLDER [RUN_FOLDER ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from attn_analysis import record


def first_samples(run: Path) -> pd.DataFrame:
    """One row per kind of placement and graph size: ``placements``, ``first`` and
    ``second`` (medians over the placements of that sample over the placement's median)."""
    rows = []
    for path in record.journal_paths(run, "timing"):
        unit = record.read_unit(path)
        if unit.get("mode") != "graph":
            continue
        for place in unit.get("placements", []):
            times = np.asarray(place["times_ms"], dtype=float)
            if times.size < 2:
                continue
            median = float(np.median(times))
            rows.append({"kind": "sized" if place.get("calls_per_sample_sized", True)
                         else "told",
                         "calls": "one" if place["timing"]["calls_per_sample"] == 1
                         else "more",
                         "first": times[0] / median, "second": times[1] / median})
    frame = pd.DataFrame(rows)
    return (frame.groupby(["kind", "calls"])
            .agg(placements=("first", "size"), first=("first", "median"),
                 second=("second", "median")).reset_index())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for arg in sys.argv[1:]:
        print(f"## {Path(arg).name}")
        print(first_samples(Path(arg)).round(4).to_string(index=False))
