"""Is the first profiled call of a placement's profile session slower than the ones after
it? (issue 23: a profile of fewer calls for long calls.) Prints one JSON document.

For each (configuration, candidate) given, at each of ``--placements`` placements made as a
trial makes them (the allocator released, a random pad, fresh inputs), it runs ``--warm``
unrecorded calls (the first timed on the host, to the end of its kernels), then one
profiler session of ``--calls`` calls, and splits the session's kernels into calls by their
start time (every call launches the same number of kernels). It reports, per call index,
the median over placements of that call's summed kernel time relative to the median of
the session's later calls, and the host time of the first unrecorded call.

Usage on the GPU machine, from the repository root:
    PYTHONPATH=. python3 benchmarks/readme-command/probes/profile_calls_probe.py \
        --pairs B32-H8-S2048-D64-fp16:sdpa_math,B32-H8-S512-D64-fp16:sdpa --warm 1
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

__all__ = ["per_call_ms", "main"]


def per_call_ms(events, n_calls: int) -> list[float]:
    """Summed kernel time (ms) of each of ``n_calls`` calls, from ``(start_ns, duration_us)``
    device events: sorted by start, cut into ``n_calls`` equal runs. ValueError when the
    events do not divide evenly (a call launched a different number of kernels)."""
    events = sorted(events)
    if n_calls < 1 or not events or len(events) % n_calls:
        raise ValueError(f"{len(events)} kernels do not split into {n_calls} equal calls.")
    per = len(events) // n_calls
    return [sum(us for _, us in events[i * per:(i + 1) * per]) / 1e3 for i in range(n_calls)]


def _session_events(fn, n_calls):
    """``(start_ns, duration_us)`` of the kernels of one profiler session of ``n_calls``
    calls (the session ``profiler.profile_device_time`` runs), less the profiler's own."""
    from attn_analysis.measure import profiler
    return [(e.start_ns(), (e.end_ns() - e.start_ns()) / 1e3)
            for e in profiler.device_activities(profiler.profile_session(fn, n_calls))
            if e.name() not in profiler.PROFILER_OVERHEAD]


def _pair(key: str, cand: str, args, torch) -> dict:
    from attn_analysis.configs import Config
    from attn_analysis.measure import candidates as cands, placement
    config, rng = Config.from_key(key), random.Random(0)
    built = cands.build(cand, config, "cuda")
    calls, first_host_ms = [], []
    with built.context():
        for _, fn in placement.placed_calls(
                args.placements, lambda i: cands.make_inputs(
                    config, "cuda", seed=1 + i, layout=built.layout), built.fn, "cuda", rng):
            for w in range(args.warm):
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                if w == 0:
                    first_host_ms.append((time.perf_counter() - t0) * 1e3)
            calls.append(per_call_ms(_session_events(fn, args.calls), args.calls))
    later = statistics.median(c for row in calls for c in row[1:])
    return {"config": key, "candidate": cand, "warm": args.warm, "placements": len(calls),
            "later_calls_median_ms": later,
            "call_over_later": [statistics.median(row[i] for row in calls) / later
                                for i in range(args.calls)],
            "first_unrecorded_host_ms": first_host_ms}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", required=True, help="CONFIG:CANDIDATE,... ")
    ap.add_argument("--placements", type=int, default=8)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--warm", type=int, default=1)
    args = ap.parse_args(argv)
    pairs = [item.split(":") for item in args.pairs.split(",")]
    if any(len(p) != 2 for p in pairs):
        raise SystemExit("--pairs: CONFIG:CANDIDATE items, comma-separated")
    import torch

    from attn_analysis.measure import profiler
    profiler.profile_device_time(lambda: torch.ones(1, device="cuda"), n_calls=1)  # CUPTI up
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "rows": [_pair(key, cand, args, torch) for key, cand in pairs]}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
