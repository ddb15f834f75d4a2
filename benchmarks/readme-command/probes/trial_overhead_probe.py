"""What a trial process pays once, and what one kernel-time session costs, on a GPU (issue
23: the README's GPU command on a fresh H100). Prints one JSON line per part.

Parts (run after ``benchmarks/readme-command/probes/prebuild_probe.py``, so that the compile caches hold what a
sweep's trials load):

- ``forksafe``: whether a process that has imported the fork server's modules and then
  computed Inductor's and Triton's source hashes (``torch_key``, ``triton_key``) can still
  fork a child that starts CUDA; and what each hash costs.
- ``onetime``: in fresh interpreters that first import the fork server's modules (what a
  forked trial starts with), the seconds of each first step of a trial's builds: importing
  Inductor's ``compile_fx``, the two hashes, CUDA's start, and ``eager_compiled`` and
  ``flex`` built at two configurations each; once with the hashes computed before the
  builds and once without.
- ``sessions``: at B32 H8 S512, for ``sdpa`` and ``sdpa_math``, the seconds of each stage
  of ``profiler.profile_device_time``'s session (warm call, enter, calls, exit, reading the
  events), and the same calls under ``torch.autograd.profiler.profile`` with CPU
  collection off.

Usage on the GPU machine, from the repository root:
    PYTHONPATH=. python3 benchmarks/readme-command/probes/prebuild_probe.py && PYTHONPATH=. python3 benchmarks/readme-command/probes/trial_overhead_probe.py --parts forksafe,onetime,sessions
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from attn_analysis.measure.fresh_interpreter import run_record

CONFIG_KEYS = ("B32-H8-S512-D64-fp16", "B32-H8-S2048-D64-fp16")

PRELOAD = r"""
import importlib, json, time
from attn_analysis.measure.sweep import FORKSERVER_PRELOAD
for m in FORKSERVER_PRELOAD:
    importlib.import_module(m)
"""

KEYS = r"""
def keys():
    out = {}
    s = time.perf_counter()
    from torch._inductor.codecache import torch_key
    torch_key()
    out["torch_key_s"] = time.perf_counter() - s
    s = time.perf_counter()
    from triton.runtime.cache import triton_key
    triton_key()
    out["triton_key_s"] = time.perf_counter() - s
    return out
"""

FORK_CHILD = PRELOAD + KEYS + r"""
import os, torch
k = keys()
pid = os.fork()
if pid == 0:
    try:
        torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize(); os._exit(0)
    except Exception as exc:
        print(type(exc).__name__, str(exc)[:80], flush=True); os._exit(1)
_, status = os.waitpid(pid, 0)
print(json.dumps(dict(k, fork="ok" if os.waitstatus_to_exitcode(status) == 0 else "BAD")))
"""

ONETIME_CHILD = PRELOAD + KEYS + r"""
import torch
from attn_analysis.configs import Config
from attn_analysis.measure import candidates as cands, env
steps = {}
def step(name, fn):
    s = time.perf_counter(); fn(); torch.cuda.synchronize() if torch.cuda.is_initialized() else None
    steps[name] = time.perf_counter() - s
t0 = time.perf_counter()
step("env_lock_cuda", lambda: (env.lock(seed=0, deterministic=False), torch.cuda.init(),
                               torch.zeros(1, device="cuda")))
if KEYS_FIRST:
    step("import_compile_fx", lambda: __import__("torch._inductor.compile_fx"))
    steps.update(keys())
for key in CONFIG_KEYS:
    for name in ("eager_compiled", "flex"):
        step(f"{name} {key}", lambda: cands.build(name, Config.from_key(key), "cuda"))
steps["total_s"] = time.perf_counter() - t0
from torch._dynamo.utils import compile_times
steps["dynamo"] = compile_times(repr="str", aggregate=True)
print(json.dumps(steps))
"""


def part_forksafe() -> dict:
    return {"runs": [run_record(FORK_CHILD) for _ in range(2)]}


def part_onetime() -> dict:
    out = {}
    for label, first in (("keys_first", True), ("builds_first", False), ("keys_first_2", True),
                         ("builds_first_2", False)):
        code = (ONETIME_CHILD.replace("KEYS_FIRST", repr(first))
                .replace("CONFIG_KEYS", repr(CONFIG_KEYS)))
        out[label] = run_record(code)
    return out


def _stages(fn, sessions: int, lean: bool) -> dict:
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    rows = {"warm": [], "enter": [], "calls": [], "exit": [], "read": []}
    for _ in range(sessions):
        a = time.perf_counter()
        fn(); torch.cuda.synchronize()
        b = time.perf_counter()
        if lean:
            prof = torch.autograd.profiler.profile(use_device="cuda", use_cpu=False, use_kineto=True)
        else:
            prof = profile(activities=[ProfilerActivity.CUDA])
        prof.__enter__()
        c = time.perf_counter()
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        d = time.perf_counter()
        prof.__exit__(None, None, None)
        e = time.perf_counter()
        results = prof.kineto_results if lean else prof.profiler.kineto_results
        n = sum(1 for evt in results.events() if evt.device_type() == DeviceType.CUDA)
        f = time.perf_counter()
        for k, v in zip(rows, (b - a, c - b, d - c, e - d, f - e)):
            rows[k].append(v)
    return {k: round(statistics.median(v) * 1e3, 3) for k, v in rows.items()} | {"events": n}


def part_sessions(sessions: int = 200) -> dict:
    from attn_analysis.configs import Config
    from attn_analysis.measure import candidates as cands, env, profiler
    env.lock(seed=0, deterministic=False)
    config = Config.from_key(CONFIG_KEYS[0])
    out = {}
    for name in ("sdpa", "sdpa_math"):
        b = cands.build(name, config, "cuda")
        q, k, v = cands.make_inputs(config, "cuda", seed=3, layout=b.layout)
        with b.context():
            fn = lambda: b.fn(q, k, v)  # noqa: E731
            profiler.profile_device_time(fn, n_calls=10)  # the process's profiler start-up
            s = time.perf_counter()
            for _ in range(sessions):
                profiler.profile_device_time(fn, n_calls=10)
            whole = (time.perf_counter() - s) / sessions
            out[name] = {"profile_device_time_ms": round(whole * 1e3, 3),
                         "stages_ms": _stages(fn, sessions, lean=False),
                         "lean_stages_ms": _stages(fn, sessions, lean=True)}
    return out


PARTS = {"forksafe": part_forksafe, "onetime": part_onetime, "sessions": part_sessions}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="forksafe,onetime,sessions")
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"`--parts` may name only {sorted(PARTS)}; got {unknown}.")
    for name in parts:
        s = time.perf_counter()
        try:
            result = PARTS[name]()
        except Exception as exc:  # one part failing leaves the others' numbers
            result = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps({name: result, "wall_s": time.perf_counter() - s}, default=str),
              flush=True)


if __name__ == "__main__":
    main()
