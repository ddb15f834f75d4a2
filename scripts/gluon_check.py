"""Check and time the Gluon attention kernel's ablation variants on an sm90 GPU (a script,
not a test).

The kernel (``attn_analysis/measure/gluon_attention.py`` and the modules it names) was
written without a GPU; every variant has since passed a float64 grid on a GPU (``plain``
the quick one only; ``data/checks/gluon_check_*.json``, ``notes/gluon-plan.md``). Each
variant of ``gluon_config.VARIANTS`` runs in a child process of its own with a time limit, so a
variant that fails to compile, deadlocks on an mbarrier (the likeliest failure of a
hand-written schedule) or corrupts the CUDA context is recorded with its error and the next
variant still runs.

(a) ``compile``: per variant and head dim, what the compiler made (wgmma, TMA, ex2 and
    setmaxnreg counts in the PTX, shared memory, registers and spills where the loaded
    kernel reports them).
(b) ``grid``: the float64 correctness grid per variant: fp16 and bf16, causal and not,
    D 64 and 128, S in (1, 17, 127, 509, 1000, 2048) at B=2, H=3; fresh normal inputs,
    output poisoned with NaN, relative error ``||out - ref|| / ||ref||`` against
    ``candidates.reference`` (float64 on the GPU), passed if no element is non-finite and
    the error is under the package's gate (``candidates.REL_ERROR_THRESHOLD``). One more
    row per dtype, D and mask at B=8, H=16, S=509 (:data:`MULTI_TILE`): 512 tiles or more,
    so a persistent program walks several tiles (at B=2, H=3 no grid shape has more tiles
    than an H100 has SMs, and the persistent loop would run once). The plain
    variant also goes through the candidate path itself (``candidates.build("gluon")`` and
    ``candidates.check``) at the target shape.
(b') ``consan``: the same kernel compiled with Triton's concurrency sanitizer
    (``TRITON_INSTRUMENTATION_MODE=consan``, a fresh cache, ``CUDA_LAUNCH_BLOCKING=1``):
    fp16, D 64 and 128, causal or not, at S 509 and the multi-tile shape; a shared-memory
    race (a TMA write into a slot whose wgmma reads are pending, a missing wait) or an
    mbarrier deadlock it sees is a device-side assert, recorded as the child's error with
    its stderr. Slow (instrumented): run it per variant, first for the warp-specialised
    ones.
(c) ``speed``: at the target (B32 H8 S512 D64 fp16, not causal), each variant whose grid
    passed, beside SDPA's default dispatch on the same inputs: the median of 100 calls
    timed one by one (``timing.measure``, mode per_call; exploration) and the profiler's
    kernel time per call (``profiler.profile_device_time``: the longest kernel, the
    attention kernel, alone and all kernels of a call). The sweep's protocol, not this,
    makes the numbers the book reports.

Usage: ``PYTHONPATH=. python3 scripts/gluon_check.py [--variants plain,persist,...]
[--sections compile,consan,grid,speed] [--quick] [--timeout-s 240]``. Writes the sealed check file
(``attn_analysis.record.checks``, kind ``gluon_check``) ``$OUT/gluon_check.json`` (or
./gluon_check.json), rewritten after every variant so a call cut short keeps what was
checked, and prints a short table last. Exit code 1 if any variant fails a check.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch

from attn_analysis.configs import TARGET
from attn_analysis.measure import candidates as cands, machine, profiler, timing
from attn_analysis.measure import gluon_attention as ga, gluon_config as gc
from attn_analysis.record import checks

SEQS = (1, 17, 127, 509, 1000, 2048)
QUICK_SEQS = (17, 509)
MULTI_TILE = (8, 16, 509)  # (B, H, S): more tiles than SMs, so persistent programs loop
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def log(*a):
    print(*a, flush=True, file=sys.stderr)


def emit(row: dict) -> None:
    """A child's result line on stdout (the parent reads lines starting with ``ROW ``)."""
    print("ROW " + json.dumps(row, default=str), flush=True)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()[:400]}"


def rel_err(out, ref) -> float:
    return float((out.double() - ref).norm() / ref.norm())


# ----------------------------------------------------------------- child sections


def compile_section(variant: str) -> None:
    for D in gc.HEAD_DIMS:
        row = {"section": "compile", "variant": variant, "D": D}
        try:
            cfg = gc.config_for(D, variant)
            row["config"] = cfg
            ck = ga.compile_only(D, torch.float16, False, cfg)
            ptx = ck.asm["ptx"]
            row.update(wgmma=ptx.count("wgmma.mma_async"), tma=ptx.count("cp.async.bulk.tensor"),
                       ex2=ptx.count("ex2.approx"), setmaxnreg=ptx.count("setmaxnreg"),
                       shared=ck.metadata.shared, status="ok")
            try:  # registers and spills are known once the module is loaded on the device
                ck._init_handles()
                row.update(n_regs=ck.n_regs, n_spills=ck.n_spills)
            except Exception as exc:  # noqa: BLE001
                row["load_error"] = _error(exc)
        except Exception as exc:  # noqa: BLE001  (a compile error is a result)
            row.update(status="error", error=_error(exc))
        emit(row)


def grid_cases(quick: bool, consan: bool = False) -> list[tuple]:
    """The ``(dtype name, D, causal, B, H, S)`` a grid (or consan) section runs, in order:
    B=2, H=3 at each S, then the multi-tile shape; consan runs fp16 at S 509 only."""
    shapes = [(2, 3, S) for S in ((509,) if consan else QUICK_SEQS if quick else SEQS)]
    shapes.append(MULTI_TILE)
    return [(dtype_name, D, causal, *shape)
            for dtype_name in DT if not (consan and dtype_name != "float16")
            for D in gc.HEAD_DIMS for causal in (False, True) for shape in shapes]


def grid_section(variant: str, quick: bool, consan: bool = False, from_row: int = 0) -> None:
    """Run the grid (or consan) cases of ``variant`` from case ``from_row`` on; the inputs
    of the cases skipped are drawn all the same, so every row sees the inputs it would see
    in a run from the first case (a run cut by its time limit can be finished this way)."""
    gen = torch.Generator(device="cuda").manual_seed(1234)
    section = "consan" if consan else "grid"
    if consan:  # the sanitizer's state lives in global scratch memory
        import triton
        triton.set_allocator(lambda size, align, stream: torch.empty(
            size, dtype=torch.int8, device="cuda"))
    for i, (dtype_name, D, causal, B, H, S) in enumerate(grid_cases(quick, consan)):
        dtype = DT[dtype_name]
        cfg = gc.config_for(D, variant, dtype)
        row = {"section": section, "variant": variant, "dtype": dtype_name,
               "D": D, "causal": causal, "B": B, "H": H, "S": S, "case": i}
        q, k, v = [torch.randn(B, H, S, D, device="cuda", dtype=dtype, generator=gen)
                   for _ in range(3)]
        if i < from_row:
            continue
        out = torch.full_like(q, float("nan"))
        t0 = time.monotonic()
        try:
            ga.attention(q, k, v, causal=causal, config=cfg, out=out)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            row.update(ok=False, error=_error(exc))
            emit(row)
            if "CUDA" in str(exc):  # the context is gone: stop this child
                return
            continue
        ref = cands.reference(q, k, v, causal)
        nonfinite = int((~torch.isfinite(out)).sum())
        err = rel_err(torch.nan_to_num(out, nan=0.0), ref)
        tol = cands.REL_ERROR_THRESHOLD[dtype_name]
        row.update(err=err, nonfinite=nonfinite, threshold=tol,
                   ok=nonfinite == 0 and err < tol, first_call_s=time.monotonic() - t0)
        emit(row)


def gate_section() -> None:
    """The plain variant through the candidate registry and the package's gate."""
    row = {"section": "gate", "variant": "plain", "config": TARGET.key}
    try:
        built = cands.build("gluon", TARGET, "cuda")
        result = cands.check(built, TARGET, "cuda", seed=7, name="gluon")
        row.update(ok=result.passed, rel_error=result.rel_error, reason=result.reason,
                   info=built.info)
    except Exception as exc:  # noqa: BLE001
        row.update(ok=False, error=_error(exc))
    emit(row)


def speed_section(variant: str) -> None:
    c = TARGET
    q, k, v = cands.make_inputs(c, "cuda", seed=11)
    row = {"section": "speed", "variant": variant, "config": c.key}
    try:
        if variant == "sdpa":
            def call():
                return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            cfg = gc.config_for(c.head_dim, variant)
            fn, info = ga.build(q, k, v, causal=c.causal, config=cfg)
            row["info"] = info

            def call():
                return fn(q, k, v)
        row["err"] = rel_err(call()[:1], cands.reference(q[:1], k[:1], v[:1], c.causal))
        row["median_ms_exploratory"] = timing.measure(call, "per_call", device="cuda",
                                                      n_samples=100).median_ms
        prof = profiler.profile_device_time(call, n_calls=20)
        row["device_ms_per_call"] = prof["device_ms_per_call"]
        row["kernels"] = prof["kernels"]
        row["attention_kernel_ms"] = prof["kernels"][0]["ms_per_call"] if prof["kernels"] \
            else None
        row["ok"] = True
    except Exception as exc:  # noqa: BLE001
        row.update(ok=False, error=_error(exc))
    emit(row)


def child(args) -> int:
    if args.section == "compile":
        compile_section(args.child)
    elif args.section == "grid":
        grid_section(args.child, args.quick, from_row=args.from_row)
    elif args.section == "consan":
        grid_section(args.child, args.quick, consan=True, from_row=args.from_row)
    elif args.section == "gate":
        gate_section()
    elif args.section == "speed":
        speed_section(args.child)
    return 0


# ------------------------------------------------------------------------ parent


def run_child(variant: str, section: str, quick: bool, timeout_s: float,
              from_row: int = 0) -> tuple[list, dict]:
    """Run one section of one variant in a fresh process; its rows, and how it ended."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", variant, "--section", section]
    if quick:
        cmd.append("--quick")
    if from_row:
        cmd += ["--from-row", str(from_row)]
    env = dict(os.environ)
    if section == "consan":  # Triton 3.6's cache key ignores the mode: a fresh cache
        env.update(TRITON_INSTRUMENTATION_MODE="consan", CUDA_LAUNCH_BLOCKING="1",
                   TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="gluon-consan-"))
    t0 = time.monotonic()
    timed_out = False
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
        status = "ok" if rc == 0 else f"exit {rc}"
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        timed_out = True
    rows = [json.loads(line[4:]) for line in stdout.splitlines() if line.startswith("ROW ")]
    if timed_out:
        status = timeout_status(timeout_s, len(rows))
    end = {"variant": variant, "section": section, "status": status,
           "seconds": round(time.monotonic() - t0, 1), "rows_done": len(rows),
           "stderr_tail": stderr[-1500:]}
    return rows, end


def timeout_status(timeout_s: float, rows_done: int) -> str:
    """How a child that reached its time limit ended. Rows done before the limit mean the
    section was progressing (under the sanitizer one row took 18 to 76 s on an H200,
    2026-11-25), so the limit, not a hang, ended it; only a child with no row at all may
    have hung, and even then a slow compile is another possible cause."""
    if rows_done:
        return (f"timeout: time limit after {timeout_s:.0f} s with {rows_done} rows done; "
                "not shown to hang")
    return (f"timeout: time limit after {timeout_s:.0f} s with no row done; possibly a hang "
            "(an mbarrier wait never met), possibly a slow compile")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default=",".join(gc.VARIANTS))
    ap.add_argument("--sections", default="compile,grid,speed")
    ap.add_argument("--quick", action="store_true", help="S in (17, 509) only in the grid")
    ap.add_argument("--timeout-s", type=float, default=240.0,
                    help="time limit of one variant's section (its child process)")
    ap.add_argument("--from-row", type=int, default=0,
                    help="grid and consan: start at this case (0-based; the earlier cases' "
                         "inputs are drawn but not run), to finish a section cut short")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--section", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(gc.VARIANTS))
    if unknown:
        ap.error(f"--variants must be among {tuple(gc.VARIANTS)}; got {unknown}")
    sections = args.sections.split(",")
    n_cases = len(grid_cases(args.quick, consan="consan" in sections))
    if not 0 <= args.from_row < n_cases or (args.from_row and not
                                            set(sections) <= {"grid", "consan"}):
        ap.error(f"--from-row must be in [0, {n_cases}) and given with the grid or consan "
                 f"section only; got {args.from_row} with {sections}")
    reason = ga.unavailable_reason()
    out = os.path.join(os.environ.get("OUT", "."), "gluon_check.json")
    doc = {"fingerprint": machine.fingerprint(), "unavailable": reason, "variants": variants,
           "sections": sections, "from_row": args.from_row, "rows": [], "children": [],
           "complete": False}
    if reason:
        log("not run:", reason)
        checks.write(out, doc, "gluon_check")
        return 1
    import triton
    doc["triton"] = triton.__version__
    plan = [(v, s) for s in ("compile", "consan", "grid") if s in sections for v in variants]
    if "grid" in sections:
        plan.append(("plain", "gate"))
    for v, s in plan:
        rows, end = run_child(v, s, args.quick, args.timeout_s,
                              args.from_row if s in ("grid", "consan") else 0)
        doc["rows"] += rows
        doc["children"].append(end)
        bad = sum(not r.get("ok", r.get("status") == "ok") for r in rows)
        log(f"{s:8s} {v:13s} {end['status']:10s} {len(rows)} rows, {bad} bad, "
            f"{end['seconds']} s")
        checks.write(out, doc, "gluon_check")
    if "speed" in sections:
        passed = {v for v in variants
                  if any(r["section"] == "grid" and r["variant"] == v for r in doc["rows"])
                  and all(r["ok"] for r in doc["rows"]
                          if r["section"] == "grid" and r["variant"] == v)}
        if "grid" not in sections:
            passed = set(variants)  # asked for speed alone: time what is asked
        for v in ["sdpa"] + [v for v in variants if v in passed]:
            rows, end = run_child(v, "speed", False, args.timeout_s)
            doc["rows"] += rows
            doc["children"].append(end)
            checks.write(out, doc, "gluon_check")
        speed = {r["variant"]: r for r in doc["rows"] if r["section"] == "speed" and r["ok"]}
        sdpa = speed.get("sdpa", {})
        log(f"\n{'variant':13s} {'kernel ms':>9s} {'call ms':>9s} {'median ms':>9s} "
            f"{'SDPA/this kernel':>16s} {'SDPA/this call':>14s}")
        for v, r in speed.items():
            ratio = (sdpa.get("device_ms_per_call", math.nan) / r["device_ms_per_call"]
                     if r.get("device_ms_per_call") else math.nan)
            r["sdpa_over_this_device_ms"] = ratio
            r["sdpa_over_this_attention_kernel"] = (
                sdpa.get("attention_kernel_ms", math.nan) / r["attention_kernel_ms"]
                if r.get("attention_kernel_ms") else math.nan)
            log(f"{v:13s} {r['attention_kernel_ms']:9.4f} {r['device_ms_per_call']:9.4f} "
                f"{r['median_ms_exploratory']:9.4f} "
                f"{r['sdpa_over_this_attention_kernel']:16.3f} {ratio:14.3f}")
    doc["complete"] = True
    checks.write(out, doc, "gluon_check")
    failed = [r for r in doc["rows"] if not r.get("ok", r.get("status") == "ok")]
    failed += [c for c in doc["children"] if c["status"] != "ok"]
    log(f"wrote {out}; {len(failed)} failed rows or children")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
