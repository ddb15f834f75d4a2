"""Where a sweep process spends the time that is not timing, piece by piece, on a GPU
(issue 23: the README's GPU command in 5 minutes). Prints one JSON document.

Parts, each in fresh child interpreters so that caches and imports are what a trial sees:

- ``imports``: ``import torch, torch._inductor.config`` three times, with Python's bytecode
  cache as the machine has it and with ``PYTHONPYCACHEPREFIX`` set to a writable folder
  (the device's torch ships no bytecode, so every interpreter compiles ~870 modules).
- ``builds``: every default candidate built at three configurations of the reports'
  matrix, seconds per build; run cold (empty Triton/Inductor caches), warm, and warm with
  ``TORCHINDUCTOR_COMPILE_THREADS=1`` (no compile-worker pool).
- ``profile``: at one configuration, the cost of one ``profiler.profile_device_time`` per
  (placement, candidate) against one profiler session per round whose CUDA collection is
  toggled on only around each candidate's profiled calls; the kernel times of both, and
  graph-mode timing with such a session open (collection off) against none (A/A).
- ``gc``: ``gc.collect()`` in a process that has built every candidate at every
  configuration, with and without ``gc.freeze()``.

Usage on the GPU machine, from the repository root:
    PYTHONPATH=. python3 benchmarks/readme-command/probes/sweep_cost_probe.py --parts imports,builds,profile,gc
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from attn_analysis.measure.fresh_interpreter import run_record

CONFIG_KEYS = ("B32-H8-S128-D64-fp16", "B32-H8-S512-D64-fp16", "B32-H8-S2048-D64-fp16")
CANDIDATES = ("sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math", "eager",
              "eager_compiled", "flex", "triton")

IMPORT_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch, torch._inductor.config  # noqa: F401
print(json.dumps({"import_s": time.perf_counter() - t0, "pycache_prefix": sys.pycache_prefix,
                  "dont_write_bytecode": sys.dont_write_bytecode}))
"""

BUILD_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from attn_analysis.configs import Config
from attn_analysis.measure import candidates as cands, env
env.lock(seed=0, deterministic=False)
torch.cuda.init()
t1 = time.perf_counter()
rows = []
for key in KEYS:
    config = Config.from_key(key)
    for name in CANDS:
        s = time.perf_counter()
        try:
            cands.build(name, config, "cuda")
            status = "ok"
        except Exception as exc:
            status = f"{type(exc).__name__}: {str(exc)[:200]}"
        torch.cuda.synchronize()
        rows.append({"config": key, "candidate": name, "s": time.perf_counter() - s,
                     "status": status})
print(json.dumps({"start_s": t1 - t0, "rows": rows, "total_s": time.perf_counter() - t1}))
"""


def part_imports() -> dict:
    prefix = tempfile.mkdtemp(prefix="pyc-")
    return {"plain": [run_record(IMPORT_CHILD) for _ in range(3)],
            "prefix": [run_record(IMPORT_CHILD, env_extra={"PYTHONPYCACHEPREFIX": prefix})
                       for _ in range(3)]}


def _summarise_builds(record: dict) -> dict:
    if "rows" not in record:
        return record
    by_cand: dict = {}
    for row in record["rows"]:
        by_cand[row["candidate"]] = round(by_cand.get(row["candidate"], 0.0) + row["s"], 3)
    return dict(record, by_candidate=by_cand)


def part_builds() -> dict:
    code = BUILD_CHILD.replace("KEYS", repr(CONFIG_KEYS)).replace("CANDS", repr(CANDIDATES))
    return {"cold": _summarise_builds(run_record(code)),
            "warm": _summarise_builds(run_record(code)),
            "warm_threads1": _summarise_builds(run_record(
                code, env_extra={"TORCHINDUCTOR_COMPILE_THREADS": "1"}))}


def _place(r: int, built, config, rng):
    """A fresh placement of ``built``'s inputs for round ``r``, as the sweep makes one."""
    from attn_analysis.measure import candidates as cands, placement
    return placement.place(r, lambda: cands.make_inputs(config, "cuda", seed=r + 1,
                                                        layout=built.layout), "cuda", rng)


def part_profile(rounds: int = 4) -> dict:
    import random
    import statistics

    import torch
    from torch.profiler import ProfilerActivity, profile

    from attn_analysis.configs import Config
    from attn_analysis.measure import candidates as cands, env, placement, profiler, timing
    env.lock(seed=0, deterministic=False)
    config = Config.from_key("B32-H8-S512-D64-fp16")
    built = {name: cands.build(name, config, "cuda") for name in CANDIDATES}
    rng = random.Random(0)
    out: dict = {"per_pair": {}, "per_round": {}, "per_pair_s": [], "per_round_s": [],
                 "stages_s": []}
    for r in range(rounds):
        # (a) the sweep's present way: one profiler session per (placement, candidate)
        order = list(built)
        rng.shuffle(order)
        t_round = 0.0
        for name in order:
            b = built[name]
            placement.release("cuda")
            pl = _place(r, b, config, rng)
            q, k, v = pl.inputs
            with b.context():
                s = time.perf_counter()
                ms = profiler.profile_device_time(lambda: b.fn(q, k, v), n_calls=10)
                t_round += time.perf_counter() - s
            out["per_pair"].setdefault(name, []).append(ms["device_ms_per_call"])
            del q, k, v, pl
        out["per_pair_s"].append(t_round)
        # (b) one session per round, CUDA collection on only around each candidate's calls,
        # a spin kernel after each window to split the kernels by candidate
        rng.shuffle(order)
        s_round = time.perf_counter()
        windows = []
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            prof.toggle_collection_dynamic(False, [ProfilerActivity.CUDA])
            for name in order:
                b = built[name]
                placement.release("cuda")
                pl = _place(r, b, config, rng)
                q, k, v = pl.inputs
                with b.context():
                    b.fn(q, k, v)
                    torch.cuda.synchronize()
                    prof.toggle_collection_dynamic(True, [ProfilerActivity.CUDA])
                    for _ in range(10):
                        b.fn(q, k, v)
                    torch.cuda._sleep(1000)
                    torch.cuda.synchronize()
                    prof.toggle_collection_dynamic(False, [ProfilerActivity.CUDA])
                windows.append(name)
                del q, k, v, pl
        t_stop = time.perf_counter()
        events = sorted((e for e in prof.events() if e.device_type.name == "CUDA"
                         and e.name not in ("Activity Buffer Request",)),
                        key=lambda e: e.time_range.start)
        t_parse = time.perf_counter()
        groups, current = [], []
        for e in events:
            if "spin" in e.name:
                groups.append(current)
                current = []
            else:
                current.append(e)
        out["per_round_s"].append(time.perf_counter() - s_round)
        out["stages_s"].append({"session": t_stop - s_round, "events": t_parse - t_stop})
        out.setdefault("group_counts", []).append([len(g) for g in groups])
        for name, group in zip(windows, groups):
            us = sum(e.time_range.end - e.time_range.start for e in group)
            out["per_round"].setdefault(name, []).append(us / 1e3 / 10)
    out["kernel_ms_median"] = {
        name: {"per_pair": statistics.median(out["per_pair"][name]),
               "per_round": statistics.median(out["per_round"].get(name, [float("nan")]))}
        for name in built}
    # (c) A/A: graph-mode timing of sdpa with a session open, collection off, against none
    b = built["sdpa"]
    q, k, v = cands.make_inputs(config, "cuda", seed=7, layout=b.layout)
    med = {"none": [], "open_off": []}
    with b.context():
        for i in range(16):
            arm = "none" if i % 2 == 0 else "open_off"
            if arm == "none":
                sample = timing.measure(lambda: b.fn(q, k, v), mode="graph", device="cuda",
                                        n_samples=20, warmup_ms=10.0)
            else:
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    prof.toggle_collection_dynamic(False, [ProfilerActivity.CUDA])
                    sample = timing.measure(lambda: b.fn(q, k, v), mode="graph",
                                            device="cuda", n_samples=20, warmup_ms=10.0)
            med[arm].append(statistics.median(sample.times_ms))
    out["aa_graph_median_ms"] = med
    return out


def part_gc() -> dict:
    import gc

    import torch

    from attn_analysis.configs import Config
    from attn_analysis.measure import candidates as cands, env
    env.lock(seed=0, deterministic=False)
    keep = []
    for key in CONFIG_KEYS:
        config = Config.from_key(key)
        for name in CANDIDATES:
            keep.append(cands.build(name, config, "cuda"))
    torch.cuda.synchronize()
    def three_collections() -> list[float]:
        times = []
        for _ in range(3):
            s = time.perf_counter()
            gc.collect()
            times.append(time.perf_counter() - s)
        return times
    out = {"objects": len(gc.get_objects()), "collect_s": three_collections()}
    gc.freeze()
    out["collect_frozen_s"] = three_collections()
    gc.unfreeze()
    s = time.perf_counter()
    torch.cuda.empty_cache()
    out["empty_cache_s"] = time.perf_counter() - s
    return out


def part_pycache() -> dict:
    """``import torch`` in fresh interpreters that may write bytecode to a prefix folder."""
    prefix = tempfile.mkdtemp(prefix="pyc-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = prefix
    return {"write_prefix": [run_record(IMPORT_CHILD, base_env=env) for _ in range(3)]}


def part_profile2(rounds: int = 6) -> dict:
    """Profiler session cost by stage, and one session per round over co-resident
    placements split by a spin-kernel marker, against one session per pair."""
    import random
    import statistics

    import torch
    from torch.profiler import ProfilerActivity, profile

    from attn_analysis.configs import Config
    from attn_analysis.measure import candidates as cands, env, placement, profiler
    env.lock(seed=0, deterministic=False)
    out: dict = {}
    for key in ("B32-H8-S512-D64-fp16", "B32-H8-S2048-D64-fp16"):
        config = Config.from_key(key)
        built = {name: cands.build(name, config, "cuda") for name in CANDIDATES}
        rng = random.Random(1)
        res: dict = {"pair": {}, "round": {}, "pair_s": [], "round_s": [], "counts": [],
                     "stages": []}
        for r in range(rounds):
            order = list(built)
            rng.shuffle(order)
            pls = {}
            for name in order:
                b = built[name]
                pls[name] = _place(r, b, config, rng)
            t_pairs = 0.0
            for name in order:  # per pair, at these placements
                b = built[name]
                q, k, v = pls[name].inputs
                with b.context():
                    s = time.perf_counter()
                    ms = profiler.profile_device_time(lambda: b.fn(q, k, v), n_calls=10)
                    t_pairs += time.perf_counter() - s
                res["pair"].setdefault(name, []).append(ms["device_ms_per_call"])
            res["pair_s"].append(t_pairs)
            s = time.perf_counter()
            for name in order:  # one unrecorded call each, as profile_device_time makes
                b = built[name]
                q, k, v = pls[name].inputs
                with b.context():
                    b.fn(q, k, v)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for name in order:
                    b = built[name]
                    q, k, v = pls[name].inputs
                    with b.context():
                        for _ in range(10):
                            b.fn(q, k, v)
                    torch.cuda._sleep(100)
                torch.cuda.synchronize()
                t2 = time.perf_counter()
            t3 = time.perf_counter()
            events = sorted((e for e in prof.events() if e.device_type.name == "CUDA"
                             and e.name != "Activity Buffer Request"),
                            key=lambda e: e.time_range.start)
            groups, current, names = [], [], set()
            for e in events:
                if "spin_kernel" in e.name:
                    groups.append(current)
                    current = []
                else:
                    current.append(e)
                names.add(e.name)
            t4 = time.perf_counter()
            res["round_s"].append(t4 - s)
            res["stages"].append({"warm": t1 - s, "calls": t2 - t1, "exit": t3 - t2,
                                  "split": t4 - t3})
            res["counts"].append([len(g) for g in groups])
            if r == 0:
                res["event_names"] = sorted(names)[:40]
            for name, group in zip(order, groups):
                us = sum(e.time_range.end - e.time_range.start for e in group)
                res["round"].setdefault(name, []).append(us / 1e3 / 10)
            del pls
            placement.release("cuda")
        res["ratio_round_over_pair"] = {
            name: statistics.median(res["round"].get(name, [float("nan")]))
            / statistics.median(res["pair"][name]) for name in built}
        out[key] = res
    # the stages of one profile_device_time session
    b = built["sdpa"]
    q, k, v = cands.make_inputs(config, "cuda", seed=3, layout=b.layout)
    stages = []
    for _ in range(10):
        t0 = time.perf_counter()
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.__enter__()
        t1 = time.perf_counter()
        for _ in range(10):
            b.fn(q, k, v)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        prof.__exit__(None, None, None)
        t3 = time.perf_counter()
        prof.key_averages()
        t4 = time.perf_counter()
        stages.append({"enter": t1 - t0, "calls": t2 - t1, "exit": t3 - t2, "key_avg": t4 - t3})
    out["session_stages"] = stages
    return out


def part_builds2() -> dict:
    """Builds on empty Triton and Inductor caches, as a fresh machine's first process has
    them, with the compile-worker pool (Inductor's default) and without it, each with and
    without a bytecode cache that earlier children wrote."""
    code = BUILD_CHILD.replace("KEYS", repr(CONFIG_KEYS)).replace("CANDS", repr(CANDIDATES))
    prefix = tempfile.mkdtemp(prefix="pyc-")
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = {}
    for label, extra in (("pool_nocache", {}), ("pool_pyc1", {"PYTHONPYCACHEPREFIX": prefix}),
                         ("threads1_pyc2", {"PYTHONPYCACHEPREFIX": prefix,
                                            "TORCHINDUCTOR_COMPILE_THREADS": "1"}),
                         ("pool_pyc3", {"PYTHONPYCACHEPREFIX": prefix}),
                         ("warm_threads1_pyc", {"PYTHONPYCACHEPREFIX": prefix,
                                                "TORCHINDUCTOR_COMPILE_THREADS": "1"})):
        env = dict(base if "pyc" in label else os.environ, **extra)
        if label != "warm_threads1_pyc":
            env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-")
            env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")
            last = env
        else:
            env["TRITON_CACHE_DIR"] = last["TRITON_CACHE_DIR"]
            env["TORCHINDUCTOR_CACHE_DIR"] = last["TORCHINDUCTOR_CACHE_DIR"]
        out[label] = _summarise_builds(run_record(code, base_env=env))
        out[label].pop("rows", None)
    return out


def part_kinetoeq() -> dict:
    """The kernel rows ``profile_device_time`` now reads from the profiler's raw events
    against ``key_averages`` on the same session, for every default candidate at two
    configurations: names, counts and summed device time must agree."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from attn_analysis.configs import Config
    from attn_analysis.measure import candidates as cands, env, profiler
    env.lock(seed=0, deterministic=False)
    rows = []
    for key in ("B32-H8-S512-D64-fp16", "B32-H8-S2048-D64-fp16"):
        config = Config.from_key(key)
        for name in CANDIDATES:
            b = cands.build(name, config, "cuda")
            q, k, v = cands.make_inputs(config, "cuda", seed=5, layout=b.layout)
            with b.context():
                b.fn(q, k, v)
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(10):
                        b.fn(q, k, v)
                    torch.cuda.synchronize()
                new = profiler.kernels_per_call(profiler._device_events(prof), 10)
                old = {}
                for evt in prof.key_averages():
                    if evt.device_type != DeviceType.CUDA or evt.key in ("Activity Buffer Request",):
                        continue
                    old[evt.key] = (evt.self_device_time_total / 1e3 / 10, evt.count / 10)
                s = time.perf_counter()
                for _ in range(5):
                    profiler.profile_device_time(lambda: b.fn(q, k, v), n_calls=10)
                per_session = (time.perf_counter() - s) / 5
            new_map = {r["name"]: (r["ms_per_call"], r["count_per_call"]) for r in new}
            rows.append({"config": key, "candidate": name,
                         "same_names": sorted(new_map) == sorted(old),
                         "max_abs_ms_diff": max((abs(new_map[n][0] - old[n][0])
                                                 for n in old if n in new_map), default=None),
                         "same_counts": all(new_map.get(n, (0, -1))[1] == old[n][1] for n in old),
                         "new_ms": sum(v[0] for v in new_map.values()),
                         "old_ms": sum(v[0] for v in old.values()),
                         "session_s": per_session})
    return {"rows": rows, "all_equal": all(r["same_names"] and r["same_counts"]
                                           and (r["max_abs_ms_diff"] or 0) < 1e-9 for r in rows)}


PARTS = {"kinetoeq": part_kinetoeq, "builds2": part_builds2, "pycache": part_pycache, "profile2": part_profile2, "imports": part_imports, "builds": part_builds, "profile": part_profile, "gc": part_gc}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="imports,builds,profile,gc")
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"`--parts` may name only {sorted(PARTS)}; got {unknown}.")
    result = {}
    for name in parts:
        s = time.perf_counter()
        try:
            result[name] = PARTS[name]()
        except Exception as exc:  # one part failing leaves the others' numbers
            result[name] = {"error": f"{type(exc).__name__}: {exc}"}
        result[name + "_wall_s"] = time.perf_counter() - s
        print(json.dumps({name: result[name]}, default=str), flush=True)
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
