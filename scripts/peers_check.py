"""Check the peer kernels on a CUDA GPU before they are timed (a script, not a test).

For every peer that ``attn_analysis.measure.peers`` registers (and, beside them, SDPA's default
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

Several environments, one file (the peers2 check): run it once per environment with
``--part LABEL [--candidates ...]`` under that environment's PYTHONPATH (each writes
``$OUT/peers_part_LABEL.json``, rewritten after every row, with the versions of the packages
it saw), then ``--combine`` writes the sealed ``$OUT/peers2_check_<gpu>.json`` holding every
part's rows, each row naming its environment. A package that does not import in an
environment is a row with status ``unsupported`` and the reason, not a failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import importlib.metadata
import json
import os
import re
import sys
import time

import torch

from attn_analysis.measure import candidates as cands, machine, peers, profiler
from attn_analysis.record import checks
from attn_analysis.record.journal import atomic_write_bytes
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
NAMES = ("sdpa",) + peers.PEER_NAMES + peers.CONTROL_NAMES
# The distributions whose versions a part records (what its environment resolved).
DISTRIBUTIONS = ("torch", "flash-attn-4", "nvidia-cutlass-dsl", "quack-kernels",
                 "tokenspeed-fa3", "fa3-fwd", "xformers", "nvidia-cudnn-frontend",
                 "flashinfer-python", "einops", "triton")


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


def versions() -> dict:
    """The installed version of each of ``DISTRIBUTIONS`` (None where absent)."""
    out = {}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def gpu_slug(name: str) -> str:
    """A file-name label for a GPU model: "NVIDIA H100 80GB HBM3" -> "h100"."""
    match = re.search(r"\b([A-Z]\d{1,4}[A-Za-z]?)\b", name or "")
    return match.group(1).lower() if match else re.sub(r"[^a-z0-9]+", "-", (name or "gpu").lower())


def _write_json(path: str, doc: dict) -> None:
    """A part file (unsealed: :func:`combine` seals the parts into one check), atomically."""
    atomic_write_bytes(path, json.dumps(doc, indent=1, default=str).encode())


def combine(out_dir: str) -> str:
    """Seal every ``peers_part_*.json`` of ``out_dir`` into one peers2 check file."""
    parts = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out_dir, "peers_part_*.json")))]
    if not parts:
        raise ValueError(f"`out_dir` {out_dir!r} holds no peers_part_*.json")
    rows = [dict(row, env=part["env"]) for part in parts for row in part["rows"]]
    doc = {"fingerprint": parts[0]["fingerprint"], "rows": rows,
           "environments": {part["env"]: {"pythonpath": part["pythonpath"],
                                          "versions": part["versions"],
                                          "candidates": part["candidates"],
                                          "complete": part["complete"]} for part in parts},
           "complete": all(part["complete"] for part in parts)}
    path = os.path.join(out_dir, f"peers2_check_{gpu_slug(parts[0]['gpu'])}.json")
    checks.write(path, doc, "peers_check")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the first three configurations")
    ap.add_argument("--candidates", nargs="+", choices=NAMES, default=NAMES,
                    help="the candidates to check (default: all)")
    ap.add_argument("--part", help="label of this environment: write $OUT/peers_part_LABEL.json")
    ap.add_argument("--combine", action="store_true",
                    help="seal the parts in $OUT into peers2_check_<gpu>.json and stop")
    args = ap.parse_args()
    out_dir = os.environ.get("OUT", ".")
    if args.combine:
        log(f"wrote {combine(out_dir)}")
        return 0
    if args.part is not None and not re.fullmatch(r"[A-Za-z0-9_-]+", args.part):
        raise ValueError(f"`--part` must be letters, digits, '_' or '-'; got {args.part!r}.")
    grid = QUICK if args.quick else GRID
    names = tuple(args.candidates)
    rows, seed = [], 1234
    fingerprint = machine.fingerprint()
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    for config in grid:
        for name in names:
            seed += 1
            row = check_one(name, config, seed, profile=config == TARGET)
            rows.append(row)
            log(f"{config.key:32s} {name:15s} {row['status']:12s} "
                f"{row.get('rel_error', float('nan')):.2e} {row.get('reason', '')[:120]}")
            torch.cuda.empty_cache()
            # rewritten after every row, so a call cut short keeps what was checked
            complete = len(rows) == len(grid) * len(names)
            if args.part is None:
                out = os.path.join(out_dir, "peers_check.json")
                checks.write(out, {"fingerprint": fingerprint, "rows": rows,
                                   "complete": complete}, "peers_check")
            else:
                out = os.path.join(out_dir, f"peers_part_{args.part}.json")
                _write_json(out, {"env": args.part, "gpu": gpu, "fingerprint": fingerprint,
                                  "pythonpath": os.environ.get("PYTHONPATH", ""),
                                  "versions": versions(), "candidates": list(names),
                                  "rows": rows, "complete": complete})
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
