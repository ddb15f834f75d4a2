"""Record the per-process SD of every comparison with SDPA at the default placements, and
its variance components (analyse.power.recorded_sds), in the committed runs with at least three processes that
compare SDPA with the custom kernels and peers, into data/reference/design_sigmas.json,
with each run's content hash. ``sweep``, ``plan --power`` and the notebooks size a design
from its quantile over the plan's GPU model, shapes and candidates, at the plan's
placements per process (analyse.power.load_design_sigmas).

    python3 scripts/design_sigmas.py            # writes the file
    python3 scripts/design_sigmas.py --check    # exits 1 if the file differs from the runs
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attn_analysis import record  # noqa: E402
from attn_analysis.analyse import power  # noqa: E402
from attn_analysis.measure.plan import DEFAULT_PLACEMENTS  # noqa: E402

RUNS = ("h100-sota-target", "h200-sota-target", "h100-sota-confirm", "h200-sota-confirm",
        "h100-gluon-target", "h200-gluon-target", "h100-gluon-long", "h200-gluon-long",
        "h200x2-long-placements32")
# PyTorch's slow reference paths and the spin controls are not what a family compares
EXCLUDE = ("eager", "sdpa_math", "sdpa_efficient", "sdpa_spin0", "sdpa_spin1000")


def build() -> dict:
    runs = [record.load(ROOT / "data" / "runs" / r) for r in RUNS]
    sds = power.recorded_sds(runs, DEFAULT_PLACEMENTS, exclude=EXCLUDE)
    for col in ("sd", *power.COMPONENT_COLUMNS):
        sds[col] = sds[col].round(6)
    return {"kind": "design_sigmas", "placements": DEFAULT_PLACEMENTS,
            "excluded_candidates": list(EXCLUDE),
            "runs": {r.run_id: r.content_hash for r in runs},
            "comparisons": sds.to_dict(orient="records")}


def main(argv) -> int:
    doc = build()
    path = ROOT / power.DESIGN_SIGMAS
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    if "--check" in argv:
        same = path.is_file() and path.read_text() == text
        print("design sigmas: " + ("match the runs" if same else "DIFFER from the runs"))
        return 0 if same else 1
    path.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
