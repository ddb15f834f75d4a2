"""Where a kernel's warps stall, per SASS instruction, from Nsight Compute's source page.

Usage (any machine; the export is made on the device)::

    ncu --section SourceCounters --section WarpStateStats -k regex:'_gluon_attn_fwd|fprop' \\
        -c 4 -o /tmp/src python3 scripts/gluon_ncu.py fa3_n128_s3,fa3_xt
    ncu --import /tmp/src.ncu-rep --page source --print-source sass --csv > source.csv
    python3 scripts/ncu_stalls_by_pc.py source.csv[.gz]

Why: ncu's kernel-level stall reasons (``scripts/gluon_ablation.py --ncu``) say that our
kernel's warps wait at barriers far more often than cuDNN's, not at which instruction. The
source page lists, per SASS instruction, its executions and the sampled stall reasons. This
script prints, for each kernel of the export, the samples, the barrier stalls, those on the
instruction right after Triton's warp-specialize switch-loop barrier (``BAR.SYNC 0x1``, where
warps without a partition wait all kernel long) and those at a wgmma wait
(``WARPGROUP.DEPBAR``), and the instructions executed: the table of
notes/kernel-schedules.md, "Where the barrier stalls sit", from
``data/checks/gluon_stalls_h200_source.csv.gz``. Exploration beside the protocol.
"""

from __future__ import annotations

import csv
import gzip
import io
import sys

SWITCH_BARRIER = "BAR.SYNC.DEFER_BLOCKING 0x1"  # Triton's switch loop: every warp, id 1
WGMMA_WAIT = "WARPGROUP.DEPBAR"


def kernels(text: str) -> list[dict]:
    """The export's kernels: ``{"name", "rows"}``, each row a dict of the page's columns
    (``Address``, ``Source``, ``# Samples``, ``stall_barrier``, ...). ValueError naming
    ``text`` when it holds no kernel."""
    out, header = [], None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            out.append({"name": row[1], "rows": []})
            header = None
        elif row[0] == "Address":
            header = row
        elif header and out:
            out[-1]["rows"].append(dict(zip(header, row)))
    if not out or not any(k["rows"] for k in out):
        raise ValueError("`text` must be ncu's source page as CSV (--page source --csv), "
                         "with at least one kernel and its instructions.")
    return out


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def summary(kernel: dict) -> dict:
    """Totals of one kernel: samples, barrier stalls, barrier stalls on the instruction
    after the switch-loop barrier and at wgmma waits, and instructions executed."""
    rows = kernel["rows"]
    after_switch = [r for prev, r in zip(rows, rows[1:])
                    if prev.get("Source", "").strip().startswith(SWITCH_BARRIER)]
    return {"name": kernel["name"],
            "samples": int(sum(_num(r.get("# Samples")) for r in rows)),
            "barrier": int(sum(_num(r.get("stall_barrier")) for r in rows)),
            "barrier_after_switch_loop": int(sum(_num(r.get("stall_barrier"))
                                                 for r in after_switch)),
            "barrier_at_wgmma_wait": int(sum(_num(r.get("stall_barrier")) for r in rows
                                             if r.get("Source", "").strip()
                                             .startswith(WGMMA_WAIT))),
            "instructions_executed": int(sum(_num(r.get("Instructions Executed"))
                                             for r in rows))}


def read_text(path: str) -> str:
    """The export's text, gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return fh.read()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit(__doc__)
    for k in kernels(read_text(argv[0])):
        print(summary(k))
    return 0


if __name__ == "__main__":
    sys.exit(main())
