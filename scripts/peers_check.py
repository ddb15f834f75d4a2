"""Check the peer kernels on a CUDA GPU before they are timed (a script, not a test).

For every peer that ``attn_analysis.peers`` registers (and, beside them, SDPA's default
dispatch on the same inputs), over a grid of configurations (fp16 and bf16, causal and not,
D 64 and 128, the target shape, odd and long sequence lengths): build the candidate as the
sweep would (``candidates.build``: compile, plan, first call), pass it through the float64
gate on fresh random inputs (``candidates.check``: output poisoned with NaN, relative error
against the float64 reference), and record the error, the threshold, the build time and
what the build recorded (package version, backend, engine). An unsupported configuration
is recorded with its reason and the grid goes on. At the target shape it also lists each
candidate's kernels from ``torch.profiler`` (the names the catalog's kernel patterns must
match) and a rough event-timed median, which is exploration, not a measurement the book
reports (the sweep's protocol does that).

Usage (after ``source scripts/peers_install.sh``):
``PYTHONPATH=.:$PYTHONPATH python3 scripts/peers_check.py [--quick]``. Writes the sealed
check file (``attn_analysis.record.checks``, kind ``peers_check``) to ``$OUT/peers_check.json``
(or ./peers_check.json) and prints a short table last. Exit code 1 if a candidate that
built fails the gate.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import torch

from attn_analysis.measure import candidates as cands, machine, peers, profiler
from attn_analysis.record import checks
from attn_analysis.configs import TARGET, Config

GRID = (
    TARGET,
    Config(32, 8, 512, 64, "float16", True),
    Config(32, 8, 512, 64, "bfloat16"),
    Config(32, 8, 512, 128),
    Config(2, 4, 77, 64),
    Config(2, 4, 1000, 128, "float16", True),
    Config(1, 4, 4097, 64, "bfloat16", True),
    Config(2, 32, 8192, 64),
    Config(2, 16, 8192, 128, "float16", True),
)
QUICK = GRID[:3]
NAMES = ("sdpa",) + peers.PEER_NAMES + ("sdpa_bshd",)


def log(*a):
    print(*a, flush=True)


def median_ms(fn, n=50) -> float:
    """Median of n event-timed calls after 10 warm-up calls (exploration only)."""
    for _ in range(10):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[n // 2]


def check_one(name: str, config: Config, seed: int, profile: bool) -> dict:
    row = {"candidate": name, "config": config.key}
    t0 = time.monotonic()
    try:
        built = cands.build(name, config, "cuda")
    except cands.Unsupported as exc:
        return dict(row, status="unsupported", reason=str(exc))
    except Exception as exc:  # record and go on, as the sweep does
        return dict(row, status="error", reason=f"{type(exc).__name__}: {str(exc)[:300]}")
    row["build_s"] = time.monotonic() - t0
    row["info"] = built.info
    result = cands.check(built, config, "cuda", seed=seed, name=name)
    row.update(dataclasses.asdict(result), status="ok" if result.passed else "failed")
    if profile and result.passed:
        q, k, v = cands.make_inputs(config, "cuda", seed + 1, layout=built.layout)
        with built.context():
            call = lambda: built.fn(q, k, v)  # noqa: E731
            row["median_ms_exploratory"] = median_ms(call)
            row["kernels"] = profiler.profile_device_time(call, n_calls=10)["kernels"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the first three configurations")
    args = ap.parse_args()
    grid = QUICK if args.quick else GRID
    rows, seed = [], 1234
    out = os.path.join(os.environ.get("OUT", "."), "peers_check.json")
    fingerprint = machine.fingerprint()
    for config in grid:
        for name in NAMES:
            seed += 1
            row = check_one(name, config, seed, profile=config == TARGET)
            rows.append(row)
            log(f"{config.key:32s} {name:15s} {row['status']:12s} "
                f"{row.get('rel_error', float('nan')):.2e} {row.get('reason', '')[:120]}")
            torch.cuda.empty_cache()
            # rewritten after every row, so a call cut short keeps what was checked
            checks.write(out, {"fingerprint": fingerprint, "rows": rows,
                               "complete": len(rows) == len(grid) * len(NAMES)}, "peers_check")
    log("\ncandidate        config                           status      rel.err   ms(expl.)")
    for r in rows:
        if r["config"] == TARGET.key:
            log(f"{r['candidate']:16s} {r['config']:32s} {r['status']:10s} "
                f"{r.get('rel_error', float('nan')):.2e} {r.get('median_ms_exploratory', float('nan')):.4f}")
            for kern in r.get("kernels", [])[:3]:
                log(f"    {kern['ms_per_call']:.4f} ms  {kern['name'][:110]}")
    log(f"wrote {out}")
    return 1 if any(r["status"] == "failed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
