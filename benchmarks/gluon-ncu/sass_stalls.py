"""Where the warp-stall samples of an ncu source page land, per kernel (a reader, no GPU).

Usage: ``python3 benchmarks/gluon-ncu/sass_stalls.py FILE [names,in,launch,order] [--top N]``
where FILE is ``ncu --import R.ncu-rep --page source --csv --print-source sass`` output
(``.csv`` or ``.csv.xz``): one block per profiled kernel, each a ``"Kernel Name"`` line, a
header line and one row per SASS instruction with the sampling columns
("Warp Stall Sampling (All Samples)" and one ``stall_*`` column per reason).

Per kernel it prints:

* the samples, and those with reason ``stall_barrier``;
* the samples of the warp-specialisation **idle blocks**: code that holds nothing but
  ``NOP``/``USETMAXREG``/``PLOP3``/``BRA`` and two ``BAR.SYNC 0x1`` in a row (Triton's
  switch loop sends the warps that no partition uses there; their execution counts say
  how many warps run them);
* ``stall_barrier`` samples on ``WARPGROUP.DEPBAR`` (the wait for a warpgroup's wgmma);
* ``stall_barrier`` samples elsewhere, each with the nearest ``BAR.SYNC`` before it in
  program order (an attribution by position: a ``DEFER_BLOCKING`` barrier is sampled on a
  later instruction, so which barrier a sample belongs to is inferred, not recorded);
* ``stall_long_sb`` samples on a branch that follows an mbarrier try-wait
  (``SYNCS.PHASECHK.TRANS64.TRYWAIT``, within 12 instructions), by the try-wait's address;
* the top instructions by all samples, with their share and main reasons.
"""

from __future__ import annotations

import csv
import io
import lzma
import re
import sys
from collections import defaultdict

ALL = "Warp Stall Sampling (All Samples)"
IDLE_OPS = re.compile(r"^(NOP|USETMAXREG\.|PLOP3\.|@!?U?P\d+\s+BRA|BAR\.SYNC\.DEFER_BLOCKING 0x1$)")
BAR1 = re.compile(r"^BAR\.SYNC\.DEFER_BLOCKING 0x1$")


def n(x) -> float:
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


def load(path: str) -> list[dict]:
    """The kernels of a source-page CSV, in report order: name, header, rows (dicts)."""
    raw = lzma.open(path, "rt") if path.endswith(".xz") else open(path, newline="")
    with raw as f:
        text = f.read()
    blocks, header = [], None
    for r in csv.reader(io.StringIO(text)):
        if not r:
            continue
        if r[0] == "Kernel Name":
            blocks.append({"kernel": r[1], "rows": []})
            header = None
        elif r[0] == "Address":
            header = r
        else:
            blocks[-1]["rows"].append(dict(zip(header, r)))
    return blocks


def src(row) -> str:
    return row["Source"].strip()


def idle_rows(rows) -> set[int]:
    """Rows of the blocks that only wait twice at barrier 1 (see the module docstring)."""
    out = set()
    for i in range(len(rows) - 1):
        if BAR1.match(src(rows[i])) and BAR1.match(src(rows[i + 1])):
            a = i
            while a > 0 and IDLE_OPS.match(src(rows[a - 1])):
                a -= 1
            b = i + 2
            while b < len(rows) and not src(rows[b]).startswith("BRA "):
                b += 1
            out.update(range(a, b + 1))
    return out


def before(rows, i, pattern, reach):
    """The nearest row before i (within reach) whose source matches; (index, distance)."""
    for d in range(1, reach + 1):
        if i - d >= 0 and re.search(pattern, src(rows[i - d])):
            return i - d, d
    return None, None


def analyse(rows) -> dict:
    tot = sum(n(r[ALL]) for r in rows)
    bar = sum(n(r["stall_barrier"]) for r in rows)
    idle = idle_rows(rows)
    out = {"samples": tot, "barrier": bar,
           "idle_rows": len(idle),
           "idle_warp_executions": sorted({int(n(rows[i]["Instructions Executed"]))
                                           for i in idle if n(rows[i]["Instructions Executed"])}),
           "idle_samples": sum(n(rows[i][ALL]) for i in idle),
           "idle_barrier": sum(n(rows[i]["stall_barrier"]) for i in idle),
           "depbar_barrier": sum(n(r["stall_barrier"]) for r in rows
                                 if src(r).startswith("WARPGROUP.DEPBAR")),
           "reasons": {}}
    for c in rows[0]:
        if c.startswith("stall_") and "Not Issued" not in c:
            out["reasons"][c[6:]] = sum(n(r[c]) for r in rows)
    after_bar = defaultdict(float)
    for i, r in enumerate(rows):
        if i in idle or src(r).startswith("WARPGROUP.DEPBAR") or not n(r["stall_barrier"]):
            continue
        j, _ = before(rows, i, r"BAR\.SYNC", 40)
        after_bar[re.sub(r"^@!?P\d\s+", "", src(rows[j])) if j is not None else "(none)"] += \
            n(r["stall_barrier"])
    out["other_barrier_by_preceding_bar"] = dict(sorted(after_bar.items(), key=lambda kv: -kv[1]))
    waits = defaultdict(float)
    for i, r in enumerate(rows):
        if n(r["stall_long_sb"]) and "BRA" in src(r):
            j, _ = before(rows, i, r"SYNCS\.PHASECHK", 12)
            if j is not None:
                addr = re.search(r"\[[^\]]*\]", src(rows[j])).group(0)
                waits[f"{addr} (row {j})"] += n(r["stall_long_sb"])
    out["long_sb_after_trywait"] = dict(sorted(waits.items(), key=lambda kv: -kv[1]))
    return out


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    top = 8
    if "--top" in argv:
        k = argv.index("--top")
        top = int(argv[k + 1])
        argv = argv[:k] + argv[k + 2:]
    names = argv[1].split(",") if len(argv) > 1 else None
    for j, block in enumerate(load(argv[0])):
        rows = block["rows"]
        a = analyse(rows)
        tot, bar = a["samples"], a["barrier"]
        name = names[j] if names and j < len(names) else f"kernel {j}"
        print(f"== {name} ({block['kernel'][:60]}): {len(rows)} SASS rows, {tot:.0f} samples, "
              f"barrier {bar:.0f} ({100 * bar / tot:.1f} %)")
        print("   reasons: " + ", ".join(f"{k}={v:.0f}" for k, v in
                                          sorted(a["reasons"].items(), key=lambda kv: -kv[1]) if v))
        print(f"   idle blocks (two BAR.SYNC 0x1 and nothing else): {a['idle_rows']} rows, "
              f"executions per row {a['idle_warp_executions']}, samples {a['idle_samples']:.0f} "
              f"({100 * a['idle_samples'] / tot:.1f} % of all), barrier {a['idle_barrier']:.0f} "
              f"({100 * a['idle_barrier'] / bar:.1f} % of barrier)")
        print(f"   WARPGROUP.DEPBAR barrier {a['depbar_barrier']:.0f} "
              f"({100 * a['depbar_barrier'] / bar:.1f} % of barrier, "
              f"{100 * a['depbar_barrier'] / tot:.1f} % of all)")
        print("   other barrier samples by the nearest BAR.SYNC before them: " + ", ".join(
            f"{k}: {v:.0f}" for k, v in a["other_barrier_by_preceding_bar"].items()))
        print("   long_sb on a branch after an mbarrier try-wait, by its address: " + ", ".join(
            f"{k}: {v:.0f}" for k, v in a["long_sb_after_trywait"].items()))
        print(f"   top {top} instructions by samples:")
        reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
        ranked = sorted(enumerate(rows), key=lambda ir: -n(ir[1][ALL]))[:top]
        for i, r in ranked:
            s = n(r[ALL])
            main_reasons = ", ".join(f"{c[6:]}={n(r[c]):.0f}" for c in reasons
                                     if n(r[c]) >= max(3.0, 0.1 * s))
            prev = src(rows[i - 1])[:36] if i else ""
            print(f"     row {i:4d} {s:5.0f} {100 * s / tot:5.1f} %  {src(r)[:52]:52s} "
                  f"exec={int(n(r['Instructions Executed'])):6d}  {main_reasons}  (after: {prev})")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # piped into head
        sys.stderr.close()
