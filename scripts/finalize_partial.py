"""Finalize a sweep that a device call's time limit cut short, keeping its complete trials.

Usage: python scripts/finalize_partial.py SRC_RUN_DIR DEST_RUN_DIR

A trial is complete when every unit the plan calls for in it is in the journal. The
complete trials must be 0..N-1; the units of any later, incomplete trial are dropped (they
are never analysed) and the plan is rewritten with ``trials = N`` before the run is
finalized as ``sweep.run`` finalizes a finished run (tables, JSON views, manifest; no GPU
needed, so it runs on any machine). The count of dropped units is printed, for the run's README entry.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from attn_analysis import __version__, record
from attn_analysis.measure import sweep
from attn_analysis.measure.plan import _now


def main(src: str, dest: str) -> int:
    src, dest = Path(src), Path(dest)
    if dest.exists():
        raise SystemExit(f"{dest} exists; choose a new run folder")
    plan = json.loads((src / "plan.json").read_text())
    done, bad = record.finished_units(src)
    if bad:
        raise SystemExit(f"{src}: journal units that do not verify: {bad[:3]}")
    wanted = record.plan_unit_names(plan)
    complete = [t for t, names in wanted.items() if all(n in done for n in names)]
    n = 0
    while n in complete:
        n += 1
    if n == 0:
        raise SystemExit(f"{src}: trial 0 is incomplete; nothing to finalize")
    keep = {name for t in range(n) for name in wanted[t]}
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".current-t*", ".fatal", ".tmp-*",
                                                             "manifest.json"))
    dropped = 0
    for path in sorted((dest / "journal").glob("*.json")):
        if path.name not in keep:
            path.unlink()
            dropped += 1
    plan["trials"] = n
    (dest / "plan.json").write_text(json.dumps(plan, indent=1))
    plan = sweep.Plan.from_json(plan).to_json()  # validated, as the sweep writes it
    (dest / "plan.json").write_text(json.dumps(plan, indent=1))
    record.finalize(dest, {"plan": plan, "attn_analysis_version": __version__,
                            "finished_utc": _now(), "sweep_wall_s_last_invocation": 0.0})
    print(f"{dest.name}: {n} complete trials kept, {dropped} unit(s) of later trials dropped")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
