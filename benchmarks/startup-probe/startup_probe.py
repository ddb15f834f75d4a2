"""Where a trial process's start-up time goes on a GPU machine (issue 23's budget: the
calibration runs charged 4.6-5.6 s a process to `lock`, 3.9-4.2 s to imports).

Runs fresh child interpreters one after another and times, in each: ``import torch``,
the measuring modules' imports, ``env.lock`` (its ten most expensive calls by cProfile),
``torch.cuda.init()`` and the first allocation. Then the same children while this parent
holds NVML open (a client of the driver, as ``nvidia-smi`` is), to see whether the driver
is brought up anew for every process when nothing else holds it. Reads the persistence
mode and changes nothing on the card. Prints one JSON document per child and a summary.

Usage on the GPU machine, from the repository root:
    PYTHONPATH=. python3 benchmarks/startup-probe/startup_probe.py [--children 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from attn_analysis.measure.fresh_interpreter import run_record

CHILD = r"""
import cProfile, io, json, pstats, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
from attn_analysis.measure import candidates, env, machine, timing, trial  # noqa: F401
t2 = time.perf_counter()
prof = cProfile.Profile()
prof.enable()
env.lock(seed=0, deterministic=False)
prof.disable()
t3 = time.perf_counter()
initialised_by_lock = torch.cuda.is_initialized()
torch.cuda.init()
t4 = time.perf_counter()
x = torch.empty(1 << 20, device="cuda"); torch.cuda.synchronize()
t5 = time.perf_counter()
out = io.StringIO()
pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(12)
print(json.dumps({"import_torch_s": t1 - t0, "import_measure_s": t2 - t1, "lock_s": t3 - t2,
                  "cuda_initialised_by_lock": initialised_by_lock, "cuda_init_s": t4 - t3,
                  "first_alloc_s": t5 - t4, "lock_profile": out.getvalue()[-2500:]}))
"""


def _persistence() -> str:
    done = subprocess.run(["nvidia-smi", "--query-gpu=name,persistence_mode,driver_version",
                           "--format=csv,noheader"], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or done.stderr.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=3)
    args = parser.parse_args()
    print("nvidia-smi:", _persistence(), flush=True)
    results = {}
    for label in ("alone", "parent_holds_nvml"):
        if label == "parent_holds_nvml":
            import pynvml
            pynvml.nvmlInit()
            pynvml.nvmlDeviceGetHandleByIndex(0)
        rows = [run_record(CHILD) for _ in range(args.children)]
        for i, row in enumerate(rows):
            shown = {k: (round(v, 3) if isinstance(v, float) else v)
                     for k, v in row.items() if k != "lock_profile"}
            print(label, i, json.dumps(shown), flush=True)
        if rows and "lock_profile" in rows[0]:
            print(rows[0]["lock_profile"], flush=True)
        results[label] = {k: statistics.median(r[k] for r in rows if k in r)
                          for k in ("import_torch_s", "import_measure_s", "lock_s",
                                    "cuda_init_s", "first_alloc_s", "wall_s")
                          if any(k in r for r in rows)}
    print("medians:", json.dumps({k: {m: round(v, 3) for m, v in d.items()}
                                   for k, d in results.items()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
