"""What a cold page cache costs an interpreter that imports torch, and whether reading the
shared libraries ahead helps (issue 23: a fresh machine's command spends 5-7 s more
outside the sweep's clock than a second run on it, bytecode aside).

Each part runs a fresh child interpreter that imports torch and starts CUDA, and prints
its times and the shared libraries it mapped. ``cold``: the libraries of torch, triton and
the NVIDIA wheels are first dropped from the page cache (``posix_fadvise`` DONTNEED, which
needs no privilege and drops only clean pages); ``warm``: the same child again, nothing
dropped; ``ahead``: dropped, then read ahead (``posix_fadvise`` WILLNEED, one thread per
file, started just before the child) while the child imports. Changes no file.

Usage on the GPU machine, from the repository root:
    python3 benchmarks/readme-command/probes/cold_start_probe.py [--parts cold,warm,ahead,cold,ahead] [--device cuda]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import threading
import time
from pathlib import Path

from attn_analysis.measure.fresh_interpreter import run_record

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
if sys.argv[1] == "cuda":
    torch.cuda.init()
    torch.empty(1, device="cuda")
t2 = time.perf_counter()
maps = set()
for line in open("/proc/self/maps"):
    parts = line.split()
    if len(parts) >= 6 and ".so" in parts[5]:
        maps.add(parts[5])
print(json.dumps({"import_torch_s": t1 - t0, "cuda_s": t2 - t1, "mapped": sorted(maps)}))
"""


def library_files() -> list[Path]:
    """The shared libraries of torch, triton and the NVIDIA wheels (found without importing)."""
    files = []
    for name in ("torch", "triton", "nvidia"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        for folder in spec.submodule_search_locations:
            files += [p for p in Path(folder).rglob("*.so*") if p.is_file()]
    return sorted(set(files))


def advise(files, advice) -> None:
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, advice)
        finally:
            os.close(fd)


def read_ahead(files) -> list[threading.Thread]:
    threads = [threading.Thread(target=advise, args=([p], os.POSIX_FADV_WILLNEED), daemon=True)
               for p in sorted(files, key=lambda p: -p.stat().st_size)]
    for t in threads:
        t.start()
    return threads


PARTS = ("cold", "warm", "ahead")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="cold,warm,ahead,cold,ahead")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = ap.parse_args(argv)
    parts = args.parts.split(",")
    if not set(parts) <= set(PARTS):
        raise ValueError(f"`--parts` may name only {PARTS}, comma-separated; got {args.parts!r}.")
    files = library_files()
    total = sum(p.stat().st_size for p in files)
    print(json.dumps({"libraries": len(files), "library_bytes": total}))
    mapped_bytes = None
    for part in parts:
        if part in ("cold", "ahead"):
            advise(files, os.POSIX_FADV_DONTNEED)
        threads = read_ahead(files) if part == "ahead" else []
        record = run_record(CHILD, args.device)
        ahead_s = None
        if threads:
            t = time.perf_counter()
            for th in threads:
                th.join()
            ahead_s = time.perf_counter() - t
        mapped = record.pop("mapped", [])
        if mapped_bytes is None and mapped:
            mapped_bytes = sum(os.path.getsize(p) for p in mapped if os.path.exists(p))
        print(json.dumps({"part": part, **{k: round(v, 3) if isinstance(v, float) else v
                                           for k, v in record.items()},
                          "read_ahead_left_after_child_s": ahead_s,
                          "mapped_libraries": len(mapped)}))
    print(json.dumps({"mapped_library_bytes": mapped_bytes}))


if __name__ == "__main__":
    main()
