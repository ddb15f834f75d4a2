"""Do three replays of a captured graph before its samples change them? (issue 23: the
README's GPU command on a fresh H100.) Prints one JSON document.

Graph mode used to time three replays after every capture, to size the calls per replay;
at a placement told its calls per replay (every placement of a unit after the first) those
replays sized nothing and only ran before the samples. ``timing`` now times them only where
they size. This probe measures what dropping them does to the samples, as an A/B inside
one process: for each configuration and candidate given, the calls per replay are sized
once (as a trial's first placement does), then at each of ``--placements`` placements made
as a trial makes them (the allocator released, a random pad, fresh inputs) the same
``timing.measure`` call runs twice in a random order, each with its own capture: ``upload``
(what ships: the upload replay, then the samples) and ``three`` (three more replays timed
before the samples, as before). Where the calls per replay are one, the timer replays the
graph three times itself, so both arms run the same sequence: an A/A control. Per arm it keeps each placement's median and its first
sample over its median.

Usage on the GPU machine, from the repository root:
    PYTHONPATH=. python3 benchmarks/readme-command/probes/settle_replays_probe.py \
        --configs B32-H8-S128-D64-fp16,B32-H8-S512-D64-fp16,B32-H8-S2048-D64-fp16
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import statistics
import time

__all__ = ["ARMS", "summarize", "main"]

ARMS = ("upload", "three")


def summarize(rows: list[dict]) -> dict:
    """Per (configuration, candidate): the ``three`` arm's median over the ``upload`` arm's
    at the same placement, balanced for the order the two ran in, and each arm's median
    first-sample ratio; over all pairs, the median and range of the balanced ratios and how
    many lie above 1.

    The arm that runs second at a placement captures into memory the first one freed, and
    at some shapes that alone moves its median by several per cent either way (the
    placement effect protocol 2 samples). The balanced ratio is the geometric mean of the
    two orders' geometric mean ratios, so that effect cancels; with one order only it is
    that order's (``orders`` says how many placements ran each arm first).

    ``rows``: one dict per placement with ``config``, ``candidate``, ``k``, ``order`` (the
    arms in the order they ran) and, per arm, ``{arm: {"median_ms", "first_over_median"}}``.
    ValueError without rows."""
    if not rows:
        raise ValueError("`rows` must hold at least one placement; got none.")
    pairs: dict[tuple, list[dict]] = {}
    for row in rows:
        pairs.setdefault((row["config"], row["candidate"]), []).append(row)
    out = []
    for (config, cand), group in pairs.items():
        logs = {arm: [math.log(r["three"]["median_ms"] / r["upload"]["median_ms"])
                      for r in group if r["order"][0] == arm] for arm in ARMS}
        means = [statistics.fmean(v) for v in logs.values() if v]
        ratios = [r["three"]["median_ms"] / r["upload"]["median_ms"] for r in group]
        out.append({"config": config, "candidate": cand, "k": sorted({r["k"] for r in group}),
                    "placements": len(group),
                    "orders": {f"{arm}_first": len(v) for arm, v in logs.items()},
                    "three_over_upload": math.exp(statistics.fmean(means)),
                    "range": [min(ratios), max(ratios)],
                    **{f"first_over_median_{arm}": statistics.median(
                        r[arm]["first_over_median"] for r in group) for arm in ARMS}})
    balanced = [p["three_over_upload"] for p in out]
    return {"pairs": out, "n_pairs": len(out),
            "median_of_pair_ratios": statistics.median(balanced),
            "range_of_pair_ratios": [min(balanced), max(balanced)],
            "pairs_above_1": sum(m > 1 for m in balanced)}


@contextlib.contextmanager
def _three_replays_before_samples(timing):
    """``timing._CudaTimer.setup`` followed by three timed replays of the captured graph
    where the timer no longer times them (a graph of two calls or more), the sequence a
    told placement ran before the change."""
    original = timing._CudaTimer.setup

    def setup(self, k, flush_bytes, auto_k):
        k = original(self, k, flush_bytes, auto_k)
        if k > 1:  # the timer itself replays a one-call graph three times
            self._time_replays()
        return k
    timing._CudaTimer.setup = setup
    try:
        yield
    finally:
        timing._CudaTimer.setup = original


def _arm(call, k, arm, samples, warmup_ms, timing) -> dict:
    guard = _three_replays_before_samples(timing) if arm == "three" else contextlib.nullcontext()
    with guard:
        s = timing.measure(call, "graph", device="cuda", n_samples=samples,
                           warmup_ms=warmup_ms, calls_per_sample=k)
    return {"median_ms": s.median_ms, "first_over_median": s.times_ms[0] / s.median_ms,
            "elapsed_s": s.elapsed_s}


def _pair(key: str, cand: str, args, rng: random.Random) -> list[dict]:
    from attn_analysis.configs import Config
    from attn_analysis.measure import candidates as cands, placement, timing
    config = Config.from_key(key)
    built = cands.build(cand, config, "cuda")
    rows, k = [], None
    with built.context():
        for p, call in placement.placed_calls(
                args.placements, lambda i: cands.make_inputs(
                    config, "cuda", seed=1 + i, layout=built.layout), built.fn, "cuda", rng):
            if k is None:  # the unit's first placement sizes, as a trial's does
                k = timing.measure(call, "graph", device="cuda", n_samples=args.samples,
                                   warmup_ms=args.warmup_ms).calls_per_sample
            order = list(ARMS)
            rng.shuffle(order)
            row = {"config": key, "candidate": cand, "placement": p, "k": k, "order": order}
            for arm in order:
                row[arm] = _arm(call, k, arm, args.samples, args.warmup_ms, timing)
            rows.append(row)
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="B32-H8-S128-D64-fp16,B32-H8-S512-D64-fp16,"
                                         "B32-H8-S2048-D64-fp16")
    ap.add_argument("--candidates", default="", help="comma-separated (default: the sweep's)")
    ap.add_argument("--placements", type=int, default=8)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--warmup-ms", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.placements < 1 or args.samples < 1:
        raise SystemExit("--placements and --samples must be at least 1")
    from attn_analysis.measure import env
    env.lock(seed=args.seed, deterministic=False)  # as a trial locks, before CUDA starts
    import torch

    from attn_analysis.configs import Config
    from attn_analysis.measure import candidates as cands
    keys = [k for k in args.configs.split(",") if k]
    for key in keys:
        Config.from_key(key)  # a bad key fails here, before the GPU
    names = [c for c in args.candidates.split(",") if c] or list(cands.DEFAULT_CANDIDATES)
    for name in names:
        cands.get(name)
    rng, t0, rows = random.Random(args.seed), time.perf_counter(), []
    for key in keys:
        for cand in names:
            rows += _pair(key, cand, args, rng)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "placements": args.placements, "samples": args.samples,
           "warmup_ms": args.warmup_ms, "summary": summarize(rows), "rows": rows,
           "wall_s": time.perf_counter() - t0}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
