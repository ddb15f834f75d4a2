"""Issue 43's ablation of the Gluon kernel on one sm90 GPU, in about four minutes: the float64
grid on each variant, then graph-replay timing of every variant that passed beside SDPA's
default (cuDNN) at the target, and optionally ncu's pipe and stall metrics for the best two.

(1) ``grid``: ``scripts/gluon_check.py``'s float64 grid (56 rows a variant: fp16 and bf16,
    D 64 and 128, causal or not, S 1 to 2048 and the multi-tile row), one child process
    per variant, ``--jobs`` of them at a time (the compiles dominate and run on the CPU).
    A variant with any failed row, or a child that ended badly, is not timed.
(2) ``time``: one process; at B32 H8 S512 D64 fp16 (``configs.TARGET``) each candidate
    (SDPA and each passed variant) is captured as a CUDA graph of ``--calls`` back-to-back
    calls; ``--rounds`` placements, each visiting the candidates in another order (a
    rotation, reversed every other round), each placement the median over ``--replays``
    replays of ms per call. Beside it the profiler's attention-kernel time
    (``profiler.profile_device_time``) and Triton's ``do_bench_cudagraph``. Exploration:
    the sweep's protocol makes the numbers the book reports.
(3) ``--ncu``: ncu with a short metric list (tensor, XU = SFU, FMA pipes, issue activity,
    stall reasons) on one launch each of the two fastest variants and of SDPA.

Usage (repository root, an sm90 GPU): ``PYTHONPATH=. python3 scripts/gluon_ablation.py
[--variants a,b,...|round2|round3] [--out-name NAME.json] [--ncu] [--jobs 13] [--quick]``.
``--variants round2`` is ``gluon_config.ROUND2_VARIANTS`` (the second round: the H100 round's
best two beside the combinations of its winners); ``round3`` is ``ROUND3_VARIANTS`` (round
2's fastest, fa3_n128_s3, and overlap_p2 beside their one-step changes). Writes the sealed check file
``$OUT/<--out-name>`` (default ``gluon_ablation.json``; kind ``gluon_check``, marked
``ablation``), rewritten after each phase, ncu's raw CSV beside it (``<stem>_ncu.csv``), and
prints the timing table last. Invalid arguments raise ValueError naming the option before
any GPU work or file write. Exit code 1 if any variant failed its grid.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
# The check kind of the file written: gluon_check's (the ablation runs its grid), marked
# ``"ablation": true`` in the payload; a kind of its own needs a line in record/checks.py.
CHECK_KIND = "gluon_check"
NCU_METRICS = (
    "gpu__time_duration.sum",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    # occupancy: programs per SM allowed by shared memory and registers, and achieved
    # (the second round's hypotheses turn on one versus two programs per SM)
    "launch__registers_per_thread",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_registers",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
)


def log(*a):
    print(*a, flush=True, file=sys.stderr)


def _gluon_check():
    """scripts/gluon_check.py as a module (its grid child and parent helpers)."""
    spec = importlib.util.spec_from_file_location("gluon_check",
                                                  os.path.join(HERE, "gluon_check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ pure helpers


def parse_variants(text, known, default: tuple, named: dict) -> list:
    """The variant list of ``--variants``: None gives ``default``; a name of ``named`` (e.g.
    ``round2``) its tuple; else comma-separated names, each in ``known``, none twice.
    ValueError naming ``--variants`` otherwise."""
    if text is None:
        return list(default)
    if text in named:
        return list(named[text])
    names = [v.strip() for v in text.split(",")]
    if not names or any(not v for v in names):
        raise ValueError(f"`--variants` must be comma-separated variant names or one of "
                         f"{tuple(named)}; got {text!r}.")
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"`--variants` must be among {tuple(known)} (or one of "
                         f"{tuple(named)}); got {unknown}.")
    if len(set(names)) != len(names):
        raise ValueError(f"`--variants` names a variant twice: {text!r}.")
    return names


def check_out_name(name: str) -> str:
    """``--out-name``: a plain file name (no folder) ending in ``.json``, written under
    ``$OUT``; ValueError naming ``--out-name`` otherwise."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.json", name):
        raise ValueError(f"`--out-name` must be a file name ending in .json, without a "
                         f"folder (letters, digits, _ . -); got {name!r}.")
    return name


def ncu_report_path(out: str) -> str:
    """Where ncu's raw CSV goes: beside the check file ``out``, named ``<stem>_ncu.csv``
    (``gluon_ablation3_h200.json`` gives ``gluon_ablation3_h200_ncu.csv``)."""
    if not out.endswith(".json"):
        raise ValueError(f"`out` must end in .json; got {out!r}.")
    return out[:-len(".json")] + "_ncu.csv"


def placement_orders(names: list, rounds: int) -> list:
    """The candidate order of each round: round r is ``names`` rotated by r, reversed when
    r is odd, so each candidate runs early, late and beside different neighbours."""
    if not names or rounds < 1:
        raise ValueError("`names` must be non-empty and `rounds` >= 1.")
    out = []
    for r in range(rounds):
        k = r % len(names)
        order = names[k:] + names[:k]
        out.append(order[::-1] if r % 2 else order)
    return out


def summarise(samples: dict, base: str = "sdpa") -> dict:
    """Per candidate, from ``samples[name] = [ms per call of each round]`` (rounds paired
    across candidates): the median ms, and ``base``'s time over this one's per round (>1:
    this one is faster) as median, min and max."""
    if base not in samples:
        raise ValueError(f"`samples` must hold the base candidate {base!r}.")
    out = {}
    for name, ms in samples.items():
        ratios = [b / m for b, m in zip(samples[base], ms)]
        out[name] = {"median_ms": statistics.median(ms), "ratio_median": statistics.median(ratios),
                     "ratio_min": min(ratios), "ratio_max": max(ratios), "rounds": len(ms)}
    return out


def parse_ncu_csv(text: str) -> list:
    """Rows of ``ncu --csv --page raw`` output: one dict per profiled kernel with its name
    and the metrics as floats where they parse (ncu's units row and stray log lines are
    skipped)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    reader = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = reader[0], reader[1:]
    rows = []
    for rec in body:
        row = dict(zip(header, rec))
        if not row.get("ID", "").strip().isdigit():
            continue  # the units row
        parsed = {"kernel": row.get("Kernel Name", "")}
        for m in NCU_METRICS:
            try:
                parsed[m] = float(row[m].replace(",", ""))
            except (KeyError, ValueError):
                parsed[m] = None
        rows.append(parsed)
    return rows


# ------------------------------------------------------------------ the timing child


def time_child(variants: list, rounds: int, calls: int, replays: int) -> None:
    """Time SDPA and ``variants`` at the target (see the module docstring); print one
    ``ROW`` line of JSON."""
    import torch
    import triton.testing
    from attn_analysis.configs import TARGET
    from attn_analysis.measure import candidates as cands, profiler
    from attn_analysis.measure import gluon_attention as ga, gluon_config as gc
    c = TARGET
    q, k, v = cands.make_inputs(c, "cuda", seed=11)
    fns, info = {"sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)}, {}
    for name in variants:
        fn, inf = ga.build(q, k, v, causal=c.causal, config=gc.config_for(c.head_dim, name))
        fns[name] = (lambda fn=fn: fn(q, k, v))
        info[name] = inf
    graphs, stream = {}, torch.cuda.Stream()
    for name, fn in fns.items():
        with torch.cuda.stream(stream):
            for _ in range(2):
                fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        graphs[name] = g
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = {name: [] for name in fns}
    orders = placement_orders(list(fns), rounds)
    for order in orders:
        for name in order:
            per = []
            for _ in range(replays):
                start.record()
                graphs[name].replay()
                end.record()
                end.synchronize()
                per.append(start.elapsed_time(end) / calls)
            samples[name].append(statistics.median(per))
    kernel, bench = {}, {}
    for name, fn in fns.items():
        prof = profiler.profile_device_time(fn, n_calls=20)
        kernel[name] = {"attention_kernel_ms": prof["kernels"][0]["ms_per_call"],
                        "device_ms_per_call": prof["device_ms_per_call"],
                        "kernels": prof["kernels"]}
        bench[name] = float(triton.testing.do_bench_cudagraph(fn, rep=50))
    row = {"samples_ms": samples, "orders": orders, "summary": summarise(samples),
           "kernel": kernel, "do_bench_cudagraph_ms": bench, "info": info,
           "calls_per_graph": calls, "replays": replays, "config": c.key}
    print("ROW " + json.dumps(row, default=str), flush=True)


# ------------------------------------------------------------------ parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default=None,
                    help="comma-separated names, or round2 or round3 "
                         "(gluon_config.ROUND2_VARIANTS, ROUND3_VARIANTS); "
                         "default: gluon_config.ABLATION_VARIANTS")
    ap.add_argument("--out-name", default="gluon_ablation.json",
                    help="file name of the check file under $OUT (ncu's CSV: <stem>_ncu.csv)")
    ap.add_argument("--jobs", type=int, default=13, help="grid children at a time")
    ap.add_argument("--quick", action="store_true", help="grid S in (17, 509) only")
    ap.add_argument("--skip-grid", action="store_true", help="time without the grid (exploration)")
    ap.add_argument("--ncu", action="store_true", help="ncu metrics of the best two and SDPA")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--timeout-s", type=float, default=150.0)
    ap.add_argument("--time-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from attn_analysis.measure import gluon_attention as ga, gluon_config as gc, machine
    from attn_analysis.record import checks
    ROUNDS = {"round2": gc.ROUND2_VARIANTS, "round3": gc.ROUND3_VARIANTS,
              "round4": gc.ROUND4_VARIANTS, "round5": gc.ROUND5_VARIANTS,
              "round6": gc.ROUND6_VARIANTS}
    if args.time_child is not None:
        time_child([v for v in args.time_child.split(",") if v], args.rounds, args.calls,
                   args.replays)
        return 0
    variants = parse_variants(args.variants, gc.VARIANTS, gc.ABLATION_VARIANTS,
                              ROUNDS)
    name = check_out_name(args.out_name)
    for key in ("jobs", "rounds", "calls", "replays"):
        if getattr(args, key) < 1:
            raise ValueError(f"`--{key}` must be >= 1; got {getattr(args, key)}.")
    if not args.timeout_s > 0:
        raise ValueError(f"`--timeout-s` must be > 0; got {args.timeout_s}.")
    out = os.path.join(os.environ.get("OUT", "."), name)
    reason = ga.unavailable_reason()
    doc = {"ablation": True, "fingerprint": machine.fingerprint(), "unavailable": reason,
           "variants": variants,
           "args": vars(args), "grid": {}, "children": [], "complete": False}
    if reason:
        log("not run:", reason)
        checks.write(out, doc, CHECK_KIND)
        return 1
    import triton
    doc["triton"] = triton.__version__
    t0 = time.monotonic()
    passed = list(variants)
    if not args.skip_grid:
        gcheck = _gluon_check()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda v: gcheck.run_child(v, "grid", args.quick,
                                                                args.timeout_s), variants))
        passed = []
        for v, (rows, end) in zip(variants, results):
            bad = [r for r in rows if not r.get("ok")]
            ok = end["status"] == "ok" and rows and not bad
            doc["grid"][v] = {"ok": bool(ok), "rows": rows, "n_rows": len(rows),
                              "n_bad": len(bad),
                              "max_err": {dt: max((r["err"] for r in rows if r.get("dtype") == dt
                                                   and "err" in r), default=None)
                                          for dt in ("float16", "bfloat16")}}
            doc["children"].append(end)
            log(f"grid {v:12s} {end['status']:10s} {len(rows)} rows, {len(bad)} bad")
            if ok:
                passed.append(v)
        log(f"grid phase {time.monotonic() - t0:.0f} s")
        checks.write(out, doc, CHECK_KIND)
    cmd = [sys.executable, os.path.abspath(__file__), "--time-child", ",".join(passed),
           "--rounds", str(args.rounds), "--calls", str(args.calls),
           "--replays", str(args.replays)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s)
    rows = [json.loads(ln[4:]) for ln in proc.stdout.splitlines() if ln.startswith("ROW ")]
    doc["children"].append({"section": "time", "status": f"exit {proc.returncode}",
                            "stderr_tail": proc.stderr[-1500:]})
    doc["timing"] = rows[0] if rows else None
    checks.write(out, doc, CHECK_KIND)
    if doc["timing"]:
        summ, kern = doc["timing"]["summary"], doc["timing"]["kernel"]
        bench = doc["timing"]["do_bench_cudagraph_ms"]
        log(f"\n{'candidate':12s} {'graph ms':>9s} {'SDPA/this':>9s} {'[min, max]':>14s} "
            f"{'kernel ms':>9s} {'SDPA/this k':>11s} {'do_bench':>9s}")
        for cand, s in sorted(summ.items(), key=lambda kv: kv[1]["median_ms"]):
            kr = kern["sdpa"]["attention_kernel_ms"] / kern[cand]["attention_kernel_ms"]
            log(f"{cand:12s} {s['median_ms']:9.4f} {s['ratio_median']:9.3f} "
                f"[{s['ratio_min']:.3f}, {s['ratio_max']:.3f}] "
                f"{kern[cand]['attention_kernel_ms']:9.4f} {kr:11.3f} {bench[cand]:9.4f}")
        if args.ncu:
            best = [n for n in sorted(summ, key=lambda n: summ[n]["median_ms"])
                    if n != "sdpa"][:2]
            report = ncu_report_path(out)  # from the check file, not a loop variable
            ncu = ["ncu", "--metrics", ",".join(NCU_METRICS), "-k",
                   "regex:_gluon_attn_fwd|fprop", "--csv", "--page", "raw",
                   "--log-file", report, sys.executable, os.path.join(HERE, "gluon_ncu.py"),
                   ",".join(best)]
            try:
                p = subprocess.run(ncu, capture_output=True, text=True, timeout=args.timeout_s)
                text = open(report).read() if os.path.exists(report) else ""
                order = [ln.split()[2] for ln in p.stdout.splitlines()
                         if ln.startswith("NCU_ORDER")]
                kernels = parse_ncu_csv(text)
                doc["ncu"] = {"order": order, "kernels": kernels, "rc": p.returncode,
                              "csv": os.path.basename(report),
                              "stderr_tail": p.stderr[-1500:]}
                for cand, kr in zip(order, kernels):
                    log(cand, json.dumps({m.split("__")[1][:40]: kr[m] for m in NCU_METRICS}))
            except Exception as exc:  # noqa: BLE001  (ncu missing or slow: recorded)
                doc["ncu"] = {"error": f"{type(exc).__name__}: {exc}"}
    doc["complete"] = True
    doc["seconds"] = round(time.monotonic() - t0, 1)
    checks.write(out, doc, CHECK_KIND)
    log(f"wrote {out} in {doc['seconds']} s")
    return 1 if any(not g["ok"] for g in doc["grid"].values()) or not doc["timing"] else 0


if __name__ == "__main__":
    sys.exit(main())
