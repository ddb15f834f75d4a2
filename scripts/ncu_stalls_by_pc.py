"""Warp-stall samples per SASS instruction from an Nsight Compute report, for each kernel.

Usage, on the device after ncu has written a report with the SourceCounters section::

    ncu --section SourceCounters --section WarpStateStats -k regex:'_gluon_attn_fwd|fprop' \\
        -c 3 -o /tmp/src python3 scripts/gluon_ncu.py fa3_n128_s3
    python3 scripts/ncu_stalls_by_pc.py /tmp/src.ncu-rep $OUT/stalls.json

Why: ncu's kernel-level stall reasons (``scripts/gluon_ablation.py --ncu``) say that our
kernel's warps wait at barriers about 2.6 times as often as cuDNN's, not at which
instruction. The sampled stall reasons are instanced metrics of ncu's report, one instance
per program counter; this script joins them to the SASS at that address and writes, per
kernel, every sampled instruction with its samples per reason, and the totals per opcode.
It reads the report through ``ncu_report``, the Python module Nsight Compute ships in its
``extras/python`` folder (found beside the ``ncu`` on PATH). Exploration beside the
protocol: it explains a kernel, it is not a timing.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
from collections import defaultdict

PREFIX = "smsp__pcsamp_"


def _ncu_report():
    """The ``ncu_report`` module of the Nsight Compute next to ``ncu`` on PATH."""
    ncu = shutil.which("ncu")
    if ncu is None:
        raise SystemExit("ncu is not on PATH")
    root = os.path.dirname(os.path.dirname(os.path.realpath(ncu)))
    hits = sorted(glob.glob(os.path.join(root, "**", "extras", "python", "ncu_report.py"),
                            recursive=True))
    hits += sorted(glob.glob("/usr/local/cuda*/nsight-compute*/extras/python/ncu_report.py"))
    hits += sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python/ncu_report.py"))
    if not hits:
        raise SystemExit(f"no ncu_report.py under {root}")
    sys.path.insert(0, os.path.dirname(hits[0]))
    import ncu_report  # noqa: PLC0415  (found at run time)
    return ncu_report


def opcode(sass: str) -> str:
    """The opcode of one SASS line, predicate and modifiers dropped: ``@!P0 BAR.SYNC.DEFER_BLOCKING
    R3`` gives ``BAR``; an empty line gives ``?``."""
    words = [w for w in sass.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else "?"


def per_opcode(rows: list) -> dict:
    """Sum of each stall reason over the rows of one kernel, by opcode."""
    out: dict = defaultdict(lambda: defaultdict(int))
    for row in rows:
        for reason, n in row["samples"].items():
            out[opcode(row["sass"])][reason] += n
    return {op: dict(r) for op, r in out.items()}


def kernel_rows(action) -> tuple[list, list]:
    """(rows, metric names): one row per sampled program counter of ``action``."""
    names = [n for n in action.metric_names() if n.startswith(PREFIX)]
    by_pc: dict = defaultdict(dict)
    for name in names:
        metric = action.metric_by_name(name)
        if metric is None or not metric.num_instances():
            continue
        ids = metric.correlation_ids()
        for i in range(metric.num_instances()):
            value = metric.as_uint64(i)
            if value:
                by_pc[ids.as_uint64(i)][name[len(PREFIX):]] = value
    try:
        sass = action.sass_by_pc()
    except Exception:  # noqa: BLE001  (older ncu_report: no SASS by address)
        sass = {}
    rows = [{"pc": pc, "sass": str(sass.get(pc, "")), "samples": samples}
            for pc, samples in sorted(by_pc.items())]
    return rows, names


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        raise SystemExit(__doc__)
    report_path, out = argv
    ncu_report = _ncu_report()
    ctx = ncu_report.load_report(report_path)
    kernels = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            rows, names = kernel_rows(action)
            kernels.append({"name": action.name(), "metrics": names, "rows": rows,
                            "by_opcode": per_opcode(rows)})
            top = sorted(per_opcode(rows).items(),
                         key=lambda kv: -kv[1].get("warps_issue_stalled_barrier", 0))[:6]
            print(action.name()[:60], len(rows), "PCs;",
                  [(op, r.get("warps_issue_stalled_barrier", 0)) for op, r in top], flush=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"report": os.path.basename(report_path), "kernels": kernels}, fh)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
