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
before the samples, as before). Per arm it keeps each placement's median and its first
sample over its median.

Usage on the GPU machine, from the repository root:
    PYTHONPATH=. python3 scripts/settle_replays_probe.py \
        --configs B32-H8-S128-D64-fp16,B32-H8-S512-D64-fp16,B32-H8-S2048-D64-fp16
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import time

__all__ = ["ARMS", "summarize", "main"]

ARMS = ("upload", "three")


def summarize(rows: list[dict]) -> dict:
    """Per (configuration, candidate): the median over placements of the ``three`` arm's
    median over the ``upload`` arm's at the same placement, their range, and each arm's
    median first-sample ratio; over all pairs, the median and range of those medians and
    how many lie above 1. ``rows``: one dict per placement with ``config``, ``candidate``
    and, per arm, ``{arm: {"median_ms", "first_over_median"}}``. ValueError without rows."""
    if not rows:
        raise ValueError("`rows` must hold at least one placement; got none.")
    pairs: dict[tuple, list[dict]] = {}
    for row in rows:
        pairs.setdefault((row["config"], row["candidate"]), []).append(row)
    out = []
    for (config, cand), group in pairs.items():
        ratios = [r["three"]["median_ms"] / r["upload"]["median_ms"] for r in group]
        out.append({"config": config, "candidate": cand, "placements": len(group),
                    "three_over_upload": statistics.median(ratios),
                    "range": [min(ratios), max(ratios)],
                    **{f"first_over_median_{arm}": statistics.median(
                        r[arm]["first_over_median"] for r in group) for arm in ARMS}})
    medians = [p["three_over_upload"] for p in out]
    return {"pairs": out, "n_pairs": len(out),
            "median_of_pair_medians": statistics.median(medians),
            "range_of_pair_medians": [min(medians), max(medians)],
            "pairs_above_1": sum(m > 1 for m in medians)}


@contextlib.contextmanager
def _three_replays_before_samples(timing):
    """``timing._CudaTimer.setup`` followed by three timed replays of the captured graph,
    the sequence a told placement ran before the change."""
    original = timing._CudaTimer.setup

    def setup(self, k, flush_bytes, auto_k):
        k = original(self, k, flush_bytes, auto_k)
        for start, end in self._event_pairs(3):
            start.record()
            self.graph.replay()
            end.record()
        self.torch.cuda.synchronize()
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
        for p in range(args.placements):
            placement.release("cuda")
            pl = placement.place(p, lambda: cands.make_inputs(
                config, "cuda", seed=1 + p, layout=built.layout), "cuda", rng)
            q, kk, v = pl.inputs

            def call(q=q, k=kk, v=v):
                return built.fn(q, k, v)
            if k is None:  # the unit's first placement sizes, as a trial's does
                k = timing.measure(call, "graph", device="cuda", n_samples=args.samples,
                                   warmup_ms=args.warmup_ms).calls_per_sample
            order = list(ARMS)
            rng.shuffle(order)
            row = {"config": key, "candidate": cand, "placement": p, "k": k, "order": order}
            for arm in order:
                row[arm] = _arm(call, k, arm, args.samples, args.warmup_ms, timing)
            rows.append(row)
            del call, q, kk, v, pl
    placement.release("cuda")
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
