"""Print the placement-lever check of run h200x2-long-placements32 as a Markdown table
(analyse.placement_lever.subsample_check): the README's table is this script's output.

    python3 benchmarks/long-placements/check.py
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from attn_analysis import record  # noqa: E402
from attn_analysis.analyse import placement_lever  # noqa: E402

RUN = "h200x2-long-placements32"

if __name__ == "__main__":
    run = record.load(ROOT / "data" / "runs" / RUN)
    table = placement_lever.subsample_check(run.placements)
    cols = ["config", "candidate", "level", "sd_all", "sd_subset", "predicted_subset",
            "sd_interaction"]
    print(table[cols].round(4).to_markdown(index=False))
    ratio = (table["sd_all"] / table["sd_subset"]).median()
    print(f"\nmedian SD at {int(table['placements'].iloc[0])} placements over SD at "
          f"{int(table['subset'].iloc[0])}: {ratio:.2f}")
