"""Where does a ``graph``-mode time per call go? Replay overhead, idle gaps, kernels (GPU).

``timing.measure(mode="graph")`` divides the event time of one graph replay by the calls
captured in it (``calls_per_sample``, sized so that a replay lasts ``timing.GRAPH_TARGET_MS``). A replay
has a fixed cost, so the figure per call carries ``overhead / k``, and candidates that
ran with different ``k`` carry different shares of it. This script measures that cost and
the rest of the difference between the graph figure and the profiler's kernel sum, in one
process, for each candidate and configuration:

- ``eager_profiler_ms``: ``profiler.profile_device_time`` (the kernels of one eager call);
- for each ``k`` in ``--ks``: a graph of ``k`` calls (``profiler.capture_graph``, as graph
  mode captures it), ``--replays`` replays timed with event pairs (median per call), then
  ten replays under ``torch.profiler`` (``profiler.profile_graph``): per call, the kernels'
  summed duration (``busy``) and the span from the first kernel's start to the last one's
  end (``span``);
- ``fit``: least squares of replay time on ``k`` (ms per replay = overhead + k * per_call),
  with scipy's standard errors; the intercept is the fixed cost of one replay.

The rounds over ``k`` are interleaved (``--rounds``) so that drift hits every ``k`` alike.
Usage: ``PYTHONPATH=. python3 scripts/graph_anatomy.py``; writes the sealed check file
(``attn_analysis.record.checks``, kind graph_anatomy) ``$OUT/graph_anatomy.json`` (or
./graph_anatomy.json) after each configuration, and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

CANDIDATES = ("sdpa", "sdpa_flash", "eager_compiled", "triton")
SEQ_LENS = (128, 512)
KS = (1, 2, 4, 8, 16, 32, 64)


def replay_ms(g, n) -> list[float]:
    """Event time of each of ``n`` back-to-back replays, in ms (events made up front)."""
    import torch
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(n)]
    for s, e in pairs:
        s.record()
        g.replay()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in pairs]


def fit(ks, per_replay_ms) -> dict:
    """Replay time = overhead + k * per_call, least squares (scipy.stats.linregress)."""
    from scipy import stats
    r = stats.linregress(ks, per_replay_ms)
    return {"overhead_ms_per_replay": float(r.intercept), "overhead_se": float(r.intercept_stderr),
            "per_call_ms": float(r.slope), "per_call_se": float(r.stderr),
            "r_squared": float(r.rvalue ** 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", nargs="*", default=list(CANDIDATES))
    ap.add_argument("--seq", type=int, nargs="*", default=list(SEQ_LENS))
    ap.add_argument("--ks", type=int, nargs="*", default=list(KS))
    ap.add_argument("--replays", type=int, default=100, help="timed replays per k and round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    from attn_analysis.measure import candidates as cands, env, machine, profiler, timing
    from attn_analysis.record import checks
    from attn_analysis.configs import Config
    env.lock(seed=0, deterministic=False)  # as the sweep locks it: default dispatch kept
    out_path = os.path.join(os.environ.get("OUT", "."), "graph_anatomy.json")
    doc = {"fingerprint": machine.fingerprint(), "ks": args.ks, "replays": args.replays,
           "rounds": args.rounds, "graph_target_ms": timing.GRAPH_TARGET_MS, "results": {}}
    for s in args.seq:
        cfg = Config(32, 8, s)
        q, k, v = cands.make_inputs(cfg, "cuda", seed=1)
        res = doc["results"][cfg.key] = {}
        for name in args.candidates:
            try:
                b = cands.build(name, cfg, "cuda")
                call = (lambda b=b: b.fn(q, k, v))
                with b.context():
                    auto = timing.measure(call, "graph", device="cuda", n_samples=200,
                                          warmup_ms=200.0)
                    row = {"eager_profiler_ms": profiler.profile_device_time(call)
                           ["device_ms_per_call"],
                           "auto": {"calls_per_sample": auto.calls_per_sample,
                                    "median_ms": auto.median_ms}, "by_k": {}}
                    graphs = {kk: profiler.capture_graph(call, kk) for kk in args.ks}
                    times = {kk: [] for kk in args.ks}
                    for _ in range(args.rounds):
                        for kk in args.ks:
                            times[kk] += replay_ms(graphs[kk], args.replays)
                    for kk in args.ks:
                        med = statistics.median(times[kk])
                        row["by_k"][kk] = dict(profiler.profile_graph(graphs[kk], kk),
                                               replay_median_ms=med, per_call_ms=med / kk)
                    del graphs
                row["fit"] = fit(args.ks, [row["by_k"][kk]["replay_median_ms"] for kk in args.ks])
                res[name] = row
            except Exception as exc:  # report and go on
                res[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(cfg.key, name, json.dumps(res[name])[:300], flush=True)
        checks.write(out_path, doc, "graph_anatomy")
        print("wrote", out_path, flush=True)
    print(f"\n{'config':22s} {'candidate':15s} {'eager':>7s} {'auto k':>6s} {'auto':>7s} "
          f"{'slope':>7s} {'ovh/rep':>7s} {'busy64':>7s} {'span64':>7s}   (us)")
    for key, res in doc["results"].items():
        for name, r in res.items():
            if "error" in r:
                print(f"{key:22s} {name:15s} {r['error'][:80]}")
                continue
            big = r["by_k"][max(args.ks)]
            print(f"{key:22s} {name:15s} {r['eager_profiler_ms'] * 1e3:7.2f} "
                  f"{r['auto']['calls_per_sample']:6d} {r['auto']['median_ms'] * 1e3:7.2f} "
                  f"{r['fit']['per_call_ms'] * 1e3:7.2f} "
                  f"{r['fit']['overhead_ms_per_replay'] * 1e3:7.2f} "
                  f"{big['busy_ms_per_call'] * 1e3:7.2f} {big['span_ms_per_call'] * 1e3:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
