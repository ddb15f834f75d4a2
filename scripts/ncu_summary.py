"""Summarise an ``ncu --page raw --csv`` export: one column per profiled kernel (a script).

Usage: ``python3 scripts/ncu_summary.py ncu_raw.csv [names,in,launch,order]``. Prints the
duration, launch shape, occupancy, issue activity, the busiest pipes (percent of peak,
active cycles) and the largest warp stall reasons (cycles per issued instruction).
"""

from __future__ import annotations

import csv
import re
import sys


def load(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    start = next(i for i, r in enumerate(rows) if "ID" in r and "Kernel Name" in r)
    header, units, data = rows[start], rows[start + 1], rows[start + 2:]
    return header, units, data


def num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return None


def summarise(path, names=None):
    header, units, data = load(path)
    col = {h: i for i, h in enumerate(header)}
    out = []
    for j, row in enumerate(data):
        def get(h, row=row):
            return row[col[h]] if h in col else None
        dur = "gpu__time_duration.sum"
        peak = ".avg.pct_of_peak_sustained_"
        rec = {"name": (names[j] if names and j < len(names) else get("Kernel Name")[:40]),
               "kernel": get("Kernel Name")[:60],
               "grid": get("Grid Size"), "block": get("Block Size"),
               "regs": get("launch__registers_per_thread"),
               "time_us": num(get(dur)), "time_unit": units[col[dur]] if dur in col else None,
               "sm_busy_pct": num(get("sm__throughput" + peak + "elapsed")),
               "mem_busy_pct": num(get("gpu__compute_memory_throughput" + peak + "elapsed")),
               "dram_pct": num(get("gpu__dram_throughput" + peak + "elapsed")),
               "occupancy_pct": num(get("sm__warps_active" + peak + "active")),
               "issue_active_pct": num(get("sm__inst_issued" + peak + "active")
                                       or get("smsp__issue_active" + peak + "active")),
               "ipc": num(get("sm__inst_executed.avg.per_cycle_active"))}
        pipes = {}
        for h, i in col.items():
            m = re.match(r"sm__(inst_executed_pipe_|pipe_)(\w+?)(_cycles_active)?"
                         r"\.avg\.pct_of_peak_sustained_active$", h)
            if m and num(row[i]) is not None:
                pipes[m.group(1)[:4] + m.group(2) + (m.group(3) or "")] = num(row[i])
        rec["pipes"] = dict(sorted(pipes.items(), key=lambda kv: -kv[1])[:10])
        stalls = {}
        for h, i in col.items():
            m = re.match(r"smsp__average_warps?_issue_stalled_(\w+)_per_issue_active\.ratio$", h)
            if m and num(row[i]) is not None:
                stalls[m.group(1)] = num(row[i])
        rec["stalls"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1])[:8])
        out.append(rec)
    return out


def main(argv=None) -> None:
    """Print the summary of an ncu raw CSV: ``ncu_summary.py RAW.csv [name,name,...]``."""
    argv = sys.argv[1:] if argv is None else argv
    names = argv[1].split(",") if len(argv) > 1 else None
    for rec in summarise(argv[0], names):
        print(f"== {rec['name']}  ({rec['kernel']})")
        print("   " + ", ".join(f"{k}={rec[k]}" for k in (
            "grid", "block", "regs", "time_us", "time_unit", "sm_busy_pct", "mem_busy_pct",
            "dram_pct", "occupancy_pct", "issue_active_pct", "ipc")))
        print("   pipes %: " + ", ".join(f"{k}={v:.1f}" for k, v in rec["pipes"].items()))
        print("   stalls (cycles/issue): "
              + ", ".join(f"{k}={v:.2f}" for k, v in rec["stalls"].items()))


if __name__ == "__main__":
    main()
