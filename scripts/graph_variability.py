"""Why do two candidates that run the same cuDNN kernel differ in graph-mode time? (GPU)

In the recorded target-shape run, ``sdpa`` (eager, default dispatch) and
``eager_compiled`` (torch.compile of matmul-softmax-matmul, which inductor rewrites to the
same cuDNN kernel) have the same kernels per call in ``torch.profiler``, yet the per-process
graph-mode medians of ``sdpa`` spread over several percent while those of
``eager_compiled`` do not. This script separates the possible sources, in one process:

- ``recaptures``: each candidate's graph is captured afresh ``--rounds`` times
  (interleaved, so drift hits all alike) and timed with ``timing.measure(mode="graph")``;
  if the spread appears between captures of one process, it is not a per-process effect;
- ``device_timeline``: one captured graph of 4 calls replayed under ``torch.profiler``
  (``profiler.capture_graph``, ``profiler.profile_graph``): per call, the span from the first
  kernel's start to the last kernel's end, and the sum of kernel durations (the difference
  is the idle gap inside the graph);
- ``graph_nodes``: the captured graph's nodes (CUDA graph debug dump), counted by kind.

Usage: ``PYTHONPATH=. python3 scripts/graph_variability.py [--rounds 15]``; writes the
sealed check file (``attn_analysis.record.checks``, kind graph_variability)
``$OUT/graph_variability.json`` (or ./graph_variability.json) and prints a table last.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import tempfile

CANDIDATES = ("sdpa", "eager_compiled", "sdpa_cudnn")


def device_timeline(call, n_calls=4, n_replays=10) -> dict:
    """Kernel spans and busy time per call (µs), from the profiler over graph replays."""
    from attn_analysis.measure import profiler
    t = profiler.profile_graph(profiler.capture_graph(call, n_calls), n_calls, n_replays)
    us = {k: t[f"{k}_ms_per_call"] and t[f"{k}_ms_per_call"] * 1e3 for k in ("span", "busy")}
    return {"kernels_per_replay": t["kernels_per_replay"], "kernel_names": t["kernel_names"],
            "span_us_per_call": us["span"], "busy_us_per_call": us["busy"]}


def graph_nodes(call) -> dict:
    """Node kinds of a captured graph of one call, from the CUDA graph debug dump."""
    from attn_analysis.measure import profiler
    g = profiler.capture_graph(call, 1, debug=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "graph.dot")
        g.debug_dump(path)
        text = open(path).read()
    kinds = collections.Counter(re.findall(r"\b(KERNEL|MEMSET|MEMCPY|EMPTY|HOST|EVENT_RECORD|"
                                           r"WAIT_EVENT|MEM_ALLOC|MEM_FREE)\b", text))
    kernels = sorted(set(re.findall(r"func=([A-Za-z0-9_]+)", text)))
    return {"node_kinds": dict(kinds), "kernel_functions": kernels[:10], "dot_chars": len(text)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)
    from attn_analysis.measure import candidates as cands, env, machine, timing
    from attn_analysis.record import checks
    from attn_analysis.configs import TARGET
    env.lock(seed=0, deterministic=False)
    out_path = os.path.join(os.environ.get("OUT", "."), "graph_variability.json")
    q, k, v = cands.make_inputs(TARGET, "cuda", seed=1)
    built = {name: cands.build(name, TARGET, "cuda") for name in CANDIDATES}
    doc = {"config": TARGET.key, "fingerprint": machine.fingerprint(), "recaptures": {},
           "device_timeline": {}, "graph_nodes": {}}
    calls = {name: (lambda b=b: b.fn(q, k, v)) for name, b in built.items()}
    for name in CANDIDATES:
        doc["recaptures"][name] = []
    for r in range(args.rounds):
        for name in CANDIDATES:
            with built[name].context():
                s = timing.measure(calls[name], "graph", device="cuda", n_samples=20,
                                   warmup_ms=100.0)
            doc["recaptures"][name].append(s.median_ms)
            doc.setdefault("calls_per_replay", {}).setdefault(name, []).append(s.calls_per_sample)
    for name in CANDIDATES:
        with built[name].context():
            try:
                doc["device_timeline"][name] = device_timeline(calls[name])
            except Exception as exc:  # report, do not lose the rest
                doc["device_timeline"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            try:
                doc["graph_nodes"][name] = graph_nodes(calls[name])
            except Exception as exc:
                doc["graph_nodes"][name] = {"error": f"{type(exc).__name__}: {exc}"}
    checks.write(out_path, doc, "graph_variability")
    print("wrote", out_path)
    print(f"{'candidate':16s} {'min':>8s} {'median':>8s} {'max':>8s} {'span':>8s} {'busy':>8s}"
          "  (us per call; graph recaptures, then profiler over replays)")
    for name in CANDIDATES:
        m = [x * 1e3 for x in doc["recaptures"][name]]
        t = doc["device_timeline"][name]
        print(f"{name:16s} {min(m):8.2f} {statistics.median(m):8.2f} {max(m):8.2f} "
              f"{t.get('span_us_per_call') or float('nan'):8.2f} "
              f"{t.get('busy_us_per_call') or float('nan'):8.2f}  {doc['graph_nodes'][name]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
