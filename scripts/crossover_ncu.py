"""Nsight Compute at the crossover: cuDNN's SDPA kernel, FlashAttention-4 and -3 (a script).

Why cuDNN's kernel leads at S <= 512 and FlashAttention-4 from S = 2048 is a question of
schedules: how busy the tensor pipe and the SFU (the XU pipe, which computes exp2) are, what
the warps wait on, and how many waves of CTAs the grid makes. This profiles one call of each
kernel at D = 64, fp16: S = 512 and S = 2048 at B = 32, H = 8, and S = 2048 at B = 8 (the
tokens of B = 32, S = 512 held fixed), and writes one JSON.

Usage, on an sm90 GPU from the repository root, after ``source scripts/peers_install.sh``::

    python3 scripts/crossover_ncu.py run            # -> $OUT/crossover_ncu_<gpu>.json

``run`` starts ``ncu`` (``--profile-from-start off``, ``--set full``, ``--clock-control
none``, kernels matched on their demangled names) on this script's ``launch`` step, which builds every candidate as the sweep does
(compile, plan, first calls: none of it profiled), then makes one profiled call of each
between ``cudaProfilerStart`` and ``cudaProfilerStop``; ``-k`` keeps the attention kernels
(the catalog's patterns). A candidate that does not build is recorded with its reason.
The JSON holds, per kernel: its label (candidate and shape, in launch order), name, grid,
block, registers, duration, waves per SM, theoretical and achieved occupancy, every pipe's
utilisation with the tensor and XU pipes picked out, and the five largest stall reasons.
Exploration beside the protocol: the book's times come from the sweep.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from attn_analysis.configs import Config  # noqa: E402

CANDIDATES = ("sdpa_cudnn", "fa4", "fa3")
SHAPES = (Config(32, 8, 512, 64), Config(32, 8, 2048, 64), Config(8, 8, 2048, 64))
ORDER_TAG = "NCU_ORDER"
SECTIONS_METRICS = {  # JSON key -> ncu raw metric
    "time": "gpu__time_duration.sum",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "occupancy_theoretical_pct": "sm__maximum_warps_per_active_cycle_pct",
    "occupancy_achieved_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_per_block_bytes": "launch__shared_mem_per_block",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_throughput_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "issue_active_pct": "sm__inst_issued.avg.pct_of_peak_sustained_active",
}
_PIPE = re.compile(r"sm__(inst_executed_pipe_|pipe_)(\w+?)(_cycles_active)?"
                   r"\.avg\.pct_of_peak_sustained_active$")
_STALL = re.compile(r"smsp__average_warps?_issue_stalled_(\w+)_per_issue_active\.ratio$")


def label(name: str, config: Config) -> str:
    return f"{name}@{config.key}"


def kernel_regex() -> str:
    """The attention kernels of ``CANDIDATES``: the union of their catalog patterns."""
    from attn_analysis.measure import candidates as cands, peers  # noqa: F401 (registers)
    return "|".join(sorted({cands.get(n).meta.kernel_pattern for n in CANDIDATES}))


def launch() -> int:
    """Under ncu: build each candidate at each shape, then one profiled call of each."""
    import torch
    from attn_analysis.measure import candidates as cands, peers  # noqa: F401
    ready = []
    for config in SHAPES:
        for name in CANDIDATES:
            try:
                built = cands.build(name, config, "cuda")
            except Exception as exc:  # Unsupported, or any failure: recorded, the rest go on
                print(f"NCU_SKIP {label(name, config)} {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:200] if str(exc) else ''}", flush=True)
                continue
            q, k, v = cands.make_inputs(config, "cuda", seed=7, layout=built.layout)
            ready.append((label(name, config), built, (q, k, v)))
    torch.cuda.synchronize()
    for i, (tag, built, (q, k, v)) in enumerate(ready):
        with built.context():
            built.fn(q, k, v)  # warm, outside the profiled range
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            built.fn(q, k, v)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        print(f"{ORDER_TAG} {i} {tag}", flush=True)
    return 0


def _num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return None


def summarise(raw_csv: str, order: list[str]) -> list[dict]:
    """One record per profiled kernel of an ``ncu --page raw --csv`` export."""
    import ncu_summary
    header, units, data = ncu_summary.load(raw_csv)
    col = {h: i for i, h in enumerate(header)}
    out = []
    for j, row in enumerate(data):
        rec = {"label": order[j] if len(order) == len(data) else None,
               "kernel": row[col["Kernel Name"]] if "Kernel Name" in col else None,
               "grid": row[col["Grid Size"]] if "Grid Size" in col else None,
               "block": row[col["Block Size"]] if "Block Size" in col else None}
        for key, metric in SECTIONS_METRICS.items():
            rec[key] = _num(row[col[metric]]) if metric in col else None
        rec["time_unit"] = units[col["gpu__time_duration.sum"]] if "gpu__time_duration.sum" in col else None
        pipes = {}
        for h, i in col.items():
            m = _PIPE.match(h)
            if m and _num(row[i]) is not None:
                pipes[f"{m.group(1)}{m.group(2)}{m.group(3) or ''}"] = _num(row[i])
        rec["pipes_pct"] = pipes
        rec["tensor_pipe_pct"] = {k: v for k, v in pipes.items() if "tensor" in k}
        rec["xu_pipe_pct"] = {k: v for k, v in pipes.items() if k.endswith("xu")
                              or "_xu_" in k or k.endswith("xu_cycles_active")}
        stalls = {m.group(1): _num(row[i]) for h, i in col.items()
                  if (m := _STALL.match(h)) and _num(row[i]) is not None}
        rec["top_stalls_cycles_per_issue"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1])[:5])
        out.append(rec)
    return out


def run(out_dir: str) -> int:
    """Profile under ncu, export the raw page, and write ``crossover_ncu.json``."""
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    rep = os.path.join(out_dir, "crossover")
    log_path = os.path.join(out_dir, "crossover_ncu_log.txt")
    t0 = time.monotonic()
    cmd = [ncu, "--profile-from-start", "off", "--set", "full", "--clock-control", "none",
           # FA3's kernel is a template (cutlass::device_kernel<flash::FlashAttnFwdSm90<..>>):
           # match the demangled name, not the bare function name ncu uses by default
           "--kernel-name-base", "demangled", "-k", f"regex:{kernel_regex()}",
           "-f", "-o", rep, sys.executable, __file__, "launch"]
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    text = Path(log_path).read_text(errors="replace")
    order = [line.split()[2] for line in text.splitlines() if line.startswith(ORDER_TAG)]
    skipped = [line[len("NCU_SKIP "):] for line in text.splitlines() if line.startswith("NCU_SKIP")]
    doc = {"script": "scripts/crossover_ncu.py", "ncu": ncu, "ncu_returncode": proc.returncode,
           "command": cmd, "launch_order": order, "skipped": skipped,
           "shapes": [c.key for c in SHAPES], "candidates": list(CANDIDATES),
           "profile_wall_s": round(time.monotonic() - t0, 1)}
    raw = os.path.join(out_dir, "crossover_raw.csv")
    if os.path.exists(rep + ".ncu-rep"):
        with open(raw, "w") as f:
            subprocess.run([ncu, "--import", rep + ".ncu-rep", "--page", "raw", "--csv"], stdout=f)
        doc["kernels"] = summarise(raw, order)
        doc["labels_match_kernels"] = len(order) == len(doc["kernels"])
    else:
        doc["kernels"], doc["log_tail"] = [], text[-3000:]
    import torch
    doc["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    doc["torch"] = torch.__version__
    match = re.search(r"\b([A-Z]\d{1,4}[A-Za-z]?)\b", doc["gpu"] or "")
    path = os.path.join(out_dir, f"crossover_ncu_{match.group(1).lower() if match else 'gpu'}.json")
    from attn_analysis.record import checks
    checks.write(path, doc, "crossover_ncu")
    print(f"wrote {path}: {len(doc['kernels'])} kernels, skipped {skipped}")
    return 0 if doc["kernels"] else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("step", choices=("run", "launch"))
    args = ap.parse_args(argv)
    if args.step == "launch":
        return launch()
    return run(os.environ.get("OUT", "."))


if __name__ == "__main__":
    sys.exit(main())
