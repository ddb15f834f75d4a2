"""Measurements the audit needs beyond the sweep: TF32 flags, chunked attention, warm-up (GPU).

Three experiments at B=32, H=8, D=64, fp16, non-causal, random normal inputs:

- ``tf32``: default-dispatch SDPA timed (graph mode) in fresh processes with TF32 left
  off by ``env.lock`` and with TF32 switched back on the way the original reports' ordering
  bug did (``allow_tf32`` for matmul and cuDNN, fp32 matmul precision "high"); processes
  alternate on/off. The kernels each setting runs come from ``torch.profiler``.
- ``chunking``: at S=512, full attention; the queries cut into four chunks of 128 rows,
  each attending to all keys (exact); and queries, keys and values cut into four
  independent 128-blocks (block-diagonal attention, not the same function). Each
  variant's relative error against float64 attention and its graph-mode time in fresh
  processes.
- ``warmup``: at S=128, the original reports' protocol (per-call event pairs, a
  synchronise after each) with no warm-up at all, 1000 samples in each of several fresh
  processes, so the spread early in a process can be told from the spread later on.

Usage, from the repository root on a GPU machine::

    PYTHONPATH=. python3 scripts/audit_extras.py [--trials 6] [--out FILE]

Writes one sealed check file (``attn_analysis.record.checks``, kind audit_extras; default
``$OUT/audit_extras.json``) with the fingerprint and every raw per-sample time in
milliseconds.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time

import torch
import torch.nn.functional as F

from attn_analysis.measure import candidates, env, machine, profiler, processes, timing
from attn_analysis.record import checks
from attn_analysis.configs import Config

CHUNKS = 4


def _inputs(seq_len: int, seed: int):
    return candidates.make_inputs(Config(32, 8, seq_len), "cuda", seed=seed)


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def _q_chunked(q, k, v):
    step = q.shape[2] // CHUNKS
    return torch.cat([_sdpa(q[:, :, i:i + step], k, v) for i in range(0, q.shape[2], step)], 2)


def _qkv_chunked(q, k, v):
    step = q.shape[2] // CHUNKS
    return torch.cat([_sdpa(q[:, :, i:i + step], k[:, :, i:i + step], v[:, :, i:i + step])
                      for i in range(0, q.shape[2], step)], 2)


VARIANTS = {"full": _sdpa, "q_chunks": _q_chunked, "qkv_chunks": _qkv_chunked}


def _enable_tf32_like_the_reports():
    """The reports' ordering bug: TF32 disabled, then precision set to "high" afterwards."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("high")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True


def tf32_factory(tf32_on: bool, seq_len: int = 512, seed: int = 0):
    """Process body: lock, optionally re-enable TF32, return a zero-argument SDPA call."""
    env.lock(seed=seed, deterministic=False)
    if tf32_on:
        _enable_tf32_like_the_reports()
    q, k, v = _inputs(seq_len, seed)
    return functools.partial(_sdpa, q, k, v)


def variant_factory(name: str, seed: int = 0):
    env.lock(seed=seed, deterministic=False)
    q, k, v = _inputs(512, seed)
    return functools.partial(VARIANTS[name], q, k, v)


def _sample(s: timing.TimingSample) -> dict:
    return {"times_ms": [float(t) for t in s.times_ms], "mode": s.mode, "clock": s.clock,
            "calls_per_sample": s.calls_per_sample, "stop_reason": s.stop_reason,
            "pid": s.pid}


def _kernels(fn) -> list:
    evidence = profiler.profile_device_time(fn)
    return [{"name": k["name"][:200], "ms_per_call": k["ms_per_call"]}
            for k in evidence["kernels"]]


def _log(*a):
    print(*a, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=6, help="fresh processes per setting")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."),
                                                  "audit_extras.json"))
    args = ap.parse_args(argv)
    # This process locks more than once (between settings); the lock wants cuBLAS's
    # workspace setting exported before CUDA starts.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if not torch.cuda.is_available():
        raise SystemExit("audit_extras.py needs a CUDA device")
    started = time.time()
    result = {"script": "scripts/audit_extras.py", "trials": args.trials,
              "fingerprint": machine.fingerprint(), "gpu_state_start": machine.gpu_state()}
    graph = dict(mode="graph", device="cuda", ci_target=0.005, budget_s=0.5, warmup_ms=100)

    # TF32: alternate on/off processes so drift hits both settings alike.
    tf32 = {"on": [], "off": []}
    for t in range(args.trials):
        for setting in (("on", "off") if t % 2 == 0 else ("off", "on")):
            s = processes.measure_in_processes(
                functools.partial(tf32_factory, setting == "on", 512, t), 1, **graph)[0]
            tf32[setting].append(_sample(s))
            _log(f"tf32 {setting} trial {t}: {sorted(s.times_ms)[len(s.times_ms) // 2]:.5f} ms")
    env.lock(seed=0, deterministic=False)
    kernels_off = _kernels(tf32_factory(False))
    _enable_tf32_like_the_reports()
    kernels_on = _kernels(functools.partial(_sdpa, *_inputs(512, 0)))
    env.lock(seed=0, deterministic=False)
    result["tf32"] = {"seq_len": 512, "samples": tf32,
                      "kernels": {"on": kernels_on, "off": kernels_off}}

    # Chunking: error against float64, then time in fresh processes.
    q, k, v = _inputs(512, 123)
    ref = candidates.reference(q, k, v, causal=False)
    chunking = {}
    for name, fn in VARIANTS.items():
        out = fn(q, k, v).double()
        err = float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))
        chunking[name] = {"rel_error": err,
                          "max_abs_error": float((out - ref).abs().max()),
                          "kernels": _kernels(functools.partial(fn, q, k, v)),
                          "samples": []}
    for t in range(args.trials):
        for name in VARIANTS:
            s = processes.measure_in_processes(functools.partial(variant_factory, name, t), 1,
                                            **graph)[0]
            chunking[name]["samples"].append(_sample(s))
        _log(f"chunking trial {t} done")
    result["chunking"] = {"seq_len": 512, "chunks": CHUNKS, "variants": chunking}

    # Warm-up: the reports' per-call protocol with no warm-up, from the first call on.
    warm = []
    for t in range(args.trials):
        s = processes.measure_in_processes(functools.partial(tf32_factory, False, 128, t), 1,
                                        mode="per_call", device="cuda", n_samples=1000,
                                        warmup_ms=0)[0]
        warm.append(_sample(s))
    result["warmup"] = {"seq_len": 128, "n_samples": 1000, "warmup_ms": 0, "samples": warm}
    result["gpu_state_end"] = machine.gpu_state()
    result["elapsed_s"] = time.time() - started

    checks.write(args.out, result, "audit_extras")
    _log(f"wrote {args.out} in {result['elapsed_s']:.0f} s")
    for setting in ("on", "off"):
        meds = [sorted(x["times_ms"])[len(x["times_ms"]) // 2] for x in tf32[setting]]
        _log(f"tf32 {setting}: trial medians {[round(m, 5) for m in meds]}")
    for name, v in chunking.items():
        meds = [sorted(x["times_ms"])[len(x["times_ms"]) // 2] for x in v["samples"]]
        _log(f"{name}: rel error {v['rel_error']:.2e}, trial medians "
             f"{[round(m, 5) for m in meds]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
