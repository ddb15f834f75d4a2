"""Explore kernel variants against cuDNN at the target shape, in one GPU process (a script).

For issue 17 (notes/triton_kernel.md, "Session i17"). Phases:

* ``main``: (1) every variant is compiled and checked against a float64 reference on fresh
  random inputs at the target shape (all heads, output poisoned with NaN first); (2) a small
  correctness grid (fp16/bf16, D 64/128, causal or not, S 77 and 1000) for the variants named
  by ``--grid``; (3) timing: ``--placements`` fresh allocations of (q, k, v) (a random-size
  spacer moves them), in each one every variant and SDPA (default dispatch, and cuDNN
  forced) in a random order: CUDA-graph call time (a graph of ``G`` calls replayed ``R``
  times; median per call) and kernel time from torch.profiler (per call: the longest kernel,
  and the sum of all kernels the call launches); (4) a summary with medians over
  placements and bootstrap 95 % intervals of the paired (same placement) speed-ups
  ``t_cudnn / t_variant`` (kernel) and ``t_sdpa / t_variant`` (graph call); > 1 means the
  variant is faster. Writes ``explore.json`` and ``ncu_variants.txt`` (the fastest few, for
  the ncu phase) under ``--out``, and the compiled cubins as ``cubins.tar``.
* ``ncu``: launches each variant in ``--variants`` once, then cuDNN once (for
  ``ncu -k regex:'_attn_fwd|fprop'``); prints the launch order.

Usage: ``PYTHONPATH=. python3 benchmarks/triton-kernel/kernel_explore.py --phase main --out $OUT``.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tarfile
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn_analysis.measure import triton_attention as ta

T0 = time.time()
TARGET = (32, 8, 512, 64)
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


@triton.jit
def _ablate_fwd(Qs, Ks, Vs, Os, S, qk_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                HEAD_DIM: tl.constexpr, MODE: tl.constexpr):
    """Diagnostic copies of the default kernel's non-causal path with one stage left out
    (wrong results on purpose; timed only, to place the time): MODE 0 = all stages (the
    default kernel's work), 1 = no exponentials (P = the shifted scores), 2 = no PV product
    (P added to acc; the compiler then drops the V loads too), 3 = no softmax (P = the
    scores cast to fp16), 4 = the loads and the store only (K and V tiles summed over their
    rows instead of any product)."""
    bh = tl.program_id(1)
    start_m = tl.program_id(0) * BLOCK_M
    q = Qs.load([bh, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, S, BLOCK_N):
        k = Ks.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = Vs.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        if MODE == 4:
            acc += tl.sum(k.to(tl.float32) + v.to(tl.float32), 0)[None, :]
        else:
            qk = tl.dot(q, k.T)
            if MODE == 3:
                p = qk
            else:
                m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                if MODE == 1:
                    p = qk * qk_scale - m_new[:, None]
                else:
                    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
                alpha = tl.math.exp2(m_i - m_new)
                l_i = l_i * alpha + tl.sum(p, 1)
                acc = acc * alpha[:, None]
                m_i = m_new
            if MODE == 2:
                tl.static_assert(BLOCK_N == HEAD_DIM)
                acc = acc + p
            else:
                acc = tl.dot(p.to(tl.float16), v, acc)
    o = (acc / (l_i[:, None] + 1.0)).to(tl.float16)
    Os.store([bh, start_m, 0], o.reshape(1, BLOCK_M, HEAD_DIM))


# name -> (mode, BLOCK_M, BLOCK_N, num_warps, num_stages); timed, never checked.
ABLATIONS = {f"abl{m}_{tag}": (m, bm, bn, w, st) for m in range(5)
             for tag, (bm, bn, w, st) in (("m128n64w8s3", (128, 64, 8, 3)),
                                          ("m64n64w4s3", (64, 64, 4, 3)))}


def ablation_fn(name, q, k, v):
    mode, bm, bn, w, st = ABLATIONS[name]
    out = torch.empty_like(q)
    dq, dk, dv = ta._descriptors(q, k, v, bm, bn)
    do = ta._descriptor(out, bm)
    B, H, S, D = q.shape
    grid = (S // bm, B * H, 1)
    kern = _ablate_fwd[grid](dq, dk, dv, do, S, D ** -0.5 * ta.LOG2E, BLOCK_M=bm,
                             BLOCK_N=bn, HEAD_DIM=D, MODE=mode, num_warps=w, num_stages=st)
    args = (dq, dk, dv, do, S, D ** -0.5 * ta.LOG2E, bm, bn, D, mode)
    run = kern[grid]
    return lambda: run(*args)


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def V(**kw):
    return {**ta.DEFAULT_CONFIGS[64], **kw}


def shape(bm, bn, w, s, **kw):
    return V(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s, **kw)


# name -> (config, tma); tma None = automatic (descriptors on Hopper), False = pointers.
VARIANTS = {
    "base": (V(), None),
    "m128n64w8s2": (shape(128, 64, 8, 2), None),
    "m128n64w8s4": (shape(128, 64, 8, 4), None),
    "m128n128w8s2": (shape(128, 128, 8, 2), None),
    "m128n128w8s3": (shape(128, 128, 8, 3), None),
    "m128n64w4s3": (shape(128, 64, 4, 3), None),
    "m64n64w4s2": (shape(64, 64, 4, 2), None),
    "m64n64w4s3": (shape(64, 64, 4, 3), None),
    "m64n64w4s4": (shape(64, 64, 4, 4), None),
    "m64n128w4s2": (shape(64, 128, 4, 2), None),
    "m64n128w4s3": (shape(64, 128, 4, 3), None),
    "ptr_base": (V(), False),
    "p1": (V(PERSIST=1), None),
    "p2": (V(PERSIST=2), None),
    "p2_m64n128w4": (shape(64, 128, 4, 2, PERSIST=2), None),
    "p4_m64n64w4s2": (shape(64, 64, 4, 2, PERSIST=4), None),
    "p3_m64n64w4s3": (shape(64, 64, 4, 3, PERSIST=3), None),
    "lazy": (V(LAZY_RESCALE=True), None),
    "lazy_m64n128w4": (shape(64, 128, 4, 2, LAZY_RESCALE=True), None),
    "poly": (V(POLY_EXP=True), None),
    "poly_m64n128w4": (shape(64, 128, 4, 2, POLY_EXP=True), None),
    "ws": (V(WARP_SPEC=True), None),
    "m256n64w8s2": (shape(256, 64, 8, 2), None),
    "d_m128n64w4s2": (shape(128, 64, 4, 2, DUAL=True), None),
    "d_m128n64w4s3": (shape(128, 64, 4, 3, DUAL=True), None),
    "d_m128n64w4s2_r168": (shape(128, 64, 4, 2, DUAL=True, MAXNREG=168), None),
    "d_m128n64w8s2": (shape(128, 64, 8, 2, DUAL=True), None),
    "d_m256n64w8s2": (shape(256, 64, 8, 2, DUAL=True), None),
    "d_p2_m128n64w4s2": (shape(128, 64, 4, 2, DUAL=True, PERSIST=2), None),
    "d_poly_m128n64w4s2": (shape(128, 64, 4, 2, DUAL=True, POLY_EXP=True), None),
    "ptr_d_m128n64w4s2": (shape(128, 64, 4, 2, DUAL=True), False),
    # call 2: a register cap that fits two 8-warp programs with 128-key tiles per SM, and
    # three DUAL programs per SM with deeper pipelining.
    "m128n128w8s2_r128": (shape(128, 128, 8, 2, MAXNREG=128), None),
    "p2_m128n128w8s2_r128": (shape(128, 128, 8, 2, MAXNREG=128, PERSIST=2), None),
    "d_m128n64w4s3_r168": (shape(128, 64, 4, 3, DUAL=True, MAXNREG=168), None),
    "d_m128n64w4s4": (shape(128, 64, 4, 4, DUAL=True), None),
    "d_p3_m128n64w4s3_r168": (shape(128, 64, 4, 3, DUAL=True, MAXNREG=168, PERSIST=3), None),
    "p2_s2": (shape(128, 64, 8, 2, PERSIST=2), None),
    "p2_s4": (shape(128, 64, 8, 4, PERSIST=2), None),
    "ptr_p2": (V(PERSIST=2), False),
    # call 3: Triton's warp specialisation on the key loop; combinations of the best.
    "ws": (V(WARP_SPEC=True), None),
    "p2_ws": (V(PERSIST=2, WARP_SPEC=True), None),
    "ws_m128n128w8s2_r128": (shape(128, 128, 8, 2, MAXNREG=128, WARP_SPEC=True), None),
    "d_e16_m128n64w4s3_r168": (shape(128, 64, 4, 3, DUAL=True, MAXNREG=168, EXP_F16=True),
                               None),
    "d_p2_m128n64w4s3_r168": (shape(128, 64, 4, 3, DUAL=True, MAXNREG=168, PERSIST=2), None),
    "p3_m64n64w4s2": (shape(64, 64, 4, 2, PERSIST=3), None),
    "p3_e16_m64n64w4s3": (shape(64, 64, 4, 3, PERSIST=3, EXP_F16=True), None),
    # call 4: shorter per-tile chains (32 keys), more programs per SM.
    "m64n32w4s3": (shape(64, 32, 4, 3), None),
    "m128n32w4s3": (shape(128, 32, 4, 3), None),
    "p4_m64n32w4s3": (shape(64, 32, 4, 3, PERSIST=4), None),
}
LIBS = ("sdpa", "cudnn")


def parse_variants(text):
    """Comma-separated names from VARIANTS, or a JSON object {name: [config, tma]}."""
    if text.strip().startswith("{"):
        return {n: (V(**c), t) for n, (c, t) in json.loads(text).items()}
    return {n: VARIANTS[n] for n in text.split(",") if n}


def reference(q, k, v, causal):
    B, H, S, D = q.shape
    out = torch.empty(B * H, S, D, dtype=torch.float64, device=q.device)
    q2, k2, v2 = (t.reshape(B * H, S, D) for t in (q, k, v))
    step = max(1, (1 << 30) // (S * S * 8))
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1) if causal else None
    for i in range(0, B * H, step):
        s = (q2[i:i + step].double() @ k2[i:i + step].double().transpose(-1, -2)) / math.sqrt(D)
        if causal:
            s.masked_fill_(mask, float("-inf"))
        out[i:i + step] = torch.softmax(s, -1) @ v2[i:i + step].double()
    return out.reshape(B, H, S, D)


def rel_err(out, ref):
    return float((out.double() - ref).norm() / ref.norm())


def run_variant(q, k, v, cfg, tma, causal=False, out=None):
    out = torch.full_like(q, float("nan")) if out is None else out
    return ta._launch(q, k, v, out, causal, q.shape[-1] ** -0.5 * ta.LOG2E, cfg, tma=tma,
                      return_kernel=True)


def make_fn(name, q, k, v, variants):
    """A no-argument callable for one timed call."""
    if name == "sdpa":
        return lambda: F.scaled_dot_product_attention(q, k, v)
    if name == "cudnn":
        def f():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v)
        return f
    if name in ABLATIONS:
        return ablation_fn(name, q, k, v)
    cfg, tma = variants[name]
    if tma is None:
        fast = ta._fast_fn(q, k, v, False, cfg)
        if fast is not None:
            return lambda: fast(q, k, v)
    out = torch.empty_like(q)
    qk = q.shape[-1] ** -0.5 * ta.LOG2E
    return lambda: ta._launch(q, k, v, out, False, qk, cfg, tma=tma)


def graph_time_us(fn, calls=20, replays=12):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        with torch.cuda.graph(g, stream=s):
            for _ in range(calls):
                fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000 / calls)
    del g
    return statistics.median(times)


def kernel_time_us(fn, calls=20):
    """Per call: the longest kernel and the sum of all device activity, from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    evs.sort(key=lambda e: e.time_range.start)
    durs = [(e.name, e.time_range.elapsed_us()) for e in evs]
    per_call = len(durs) // calls if calls and len(durs) % calls == 0 else None
    names = sorted({n for n, _ in durs})
    main_name = max(names, key=lambda n: sum(d for m, d in durs if m == n))
    main = [d for n, d in durs if n == main_name]
    total = sum(d for _, d in durs) / calls
    return {"kernel_us": statistics.median(main), "all_us": total, "kernels_per_call": per_call,
            "main_kernel": main_name[:120], "names": [n[:80] for n in names]}


def boot_ci(values, stat=statistics.median, n=4000, seed=0):
    rng = random.Random(seed)
    vals = list(values)
    if len(vals) < 2:
        return [float("nan"), float("nan")]
    bs = sorted(stat([rng.choice(vals) for _ in vals]) for _ in range(n))
    return [bs[int(0.025 * n)], bs[int(0.975 * n) - 1]]


def check_target(variants, seed):
    """Compile, check against float64 at the target shape; compile facts per variant."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(*TARGET, device="cuda", dtype=torch.float16, generator=g)
               for _ in range(3))
    ref = reference(q, k, v, False)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        cud = rel_err(F.scaled_dot_product_attention(q, k, v), ref)
    rows, cubins = {}, {}
    for name, (cfg, tma) in variants.items():
        t = time.time()
        try:
            out, kern, args = run_variant(q, k, v, cfg, tma)
            torch.cuda.synchronize()
            err = rel_err(out, ref)
            nan = bool(torch.isnan(out).any())
            # a second, fresh input set: the variant must compute the same function anywhere
            q2, k2, v2 = (torch.randn_like(q) * 1.5 for _ in range(3))
            out2, _, _ = run_variant(q2, k2, v2, cfg, tma)
            err2 = rel_err(out2[:2], reference(q2[:2], k2[:2], v2[:2], False))
            row = {"ok": (not nan) and err < TOL[torch.float16] and err2 < TOL[torch.float16],
                   "err": err, "err_second_inputs": err2, "nan": nan,
                   "n_regs": getattr(kern, "n_regs", None),
                   "n_spills": getattr(kern, "n_spills", None),
                   "shared": getattr(kern.metadata, "shared", None),
                   "kernel": kern.name if hasattr(kern, "name") else None,
                   "compile_s": time.time() - t, "config": cfg, "tma": tma}
            try:
                cubins[name] = kern.asm["cubin"]
            except Exception:  # noqa: BLE001
                pass
        except Exception as e:  # noqa: BLE001  compile failure, resources
            row = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:400]}",
                   "config": cfg, "tma": tma}
        rows[name] = row
        log("check", name, json.dumps({k_: row.get(k_) for k_ in (
            "ok", "err", "err_second_inputs", "n_regs", "n_spills", "shared", "error")}))
    log("check cudnn err", cud)
    return rows, cubins, cud


def grid_check(variants, names, seqs=(77, 1000)):
    """fp16/bf16 x D 64/128 x causal x S 77/1000 at B2 H3, for each named variant. At D=128
    the variant's keys are applied to the D=128 default blocks when its own do not fit."""
    g = torch.Generator(device="cuda").manual_seed(7)
    rows = []
    for name in names:
        cfg, tma = variants[name]
        for dtype in (torch.float16, torch.bfloat16):
            for D in (64, 128):
                for causal in (False, True):
                    for S in seqs:
                        q, k, v = (torch.randn(2, 3, S, D, device="cuda", dtype=dtype,
                                               generator=g) for _ in range(3))
                        ref = reference(q, k, v, causal)
                        c = dict(cfg)
                        row = {"variant": name, "dtype": str(dtype)[6:], "D": D,
                               "causal": causal, "S": S}
                        for attempt in (c, {**ta.DEFAULT_CONFIGS[D], **{
                                key: cfg[key] for key in ta._VARIANT_KEYS}}):
                            try:
                                out, _, _ = run_variant(q, k, v, attempt, tma, causal)
                                torch.cuda.synchronize()
                                err = rel_err(out, ref)
                                row.update(err=err, nan=bool(torch.isnan(out).any()),
                                           blocks=(attempt["BLOCK_M"], attempt["BLOCK_N"],
                                                   attempt["num_warps"]))
                                row["ok"] = (not row["nan"]) and err < TOL[dtype]
                                break
                            except Exception as e:  # noqa: BLE001
                                row.update(ok=False, error=f"{type(e).__name__}: {str(e)[:200]}")
                        rows.append(row)
                        if not row["ok"]:
                            log("GRID FAIL", row)
    for name in names:
        sel = [r for r in rows if r["variant"] == name]
        worst = {dt: max((r.get("err", 9) for r in sel if r["dtype"] == dt), default=9.0)
                 for dt in ("float16", "bfloat16")}
        log(f"grid {name}: {sum(r['ok'] for r in sel)}/{len(sel)} ok; max err fp16 "
            f"{worst['float16']:.2e} bf16 {worst['bfloat16']:.2e}")
    return rows


def dump(args, result):
    """Write what is known so far (a call that runs out of time still returns it)."""
    with open(os.path.join(args.out, "explore.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)


def timing(variants, placements, seed, partial=None):
    rng = random.Random(seed)
    names = list(variants) + list(LIBS)
    per = {n: [] for n in names}
    for p in range(placements):
        spacer = torch.empty(rng.randrange(1, 64) << 20, dtype=torch.uint8, device="cuda")
        q, k, v = (torch.randn(*TARGET, device="cuda", dtype=torch.float16) for _ in range(3))
        order = names[:]
        rng.shuffle(order)
        for n in order:
            rec = {"placement": p}
            try:
                fn = make_fn(n, q, k, v, variants)
                rec["graph_us"] = graph_time_us(fn)
                rec.update(kernel_time_us(fn))
            except Exception as e:  # noqa: BLE001
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            per[n].append(rec)
        log(f"placement {p}: " + " ".join(
            f"{n}={per[n][-1].get('kernel_us', float('nan')):.1f}" for n in names))
        errs = {n: per[n][-1]["error"] for n in names if "error" in per[n][-1]}
        if errs:
            log("errors", json.dumps(errs)[:1500])
        del q, k, v, spacer
        torch.cuda.empty_cache()
        if partial:
            partial(per)
    return per


def summarize(per):
    """Medians over placements; paired speed-ups (same placement) with bootstrap CIs."""
    def by_place(n, key):
        return {r["placement"]: r[key] for r in per[n] if key in r}
    summary = {}
    cud_k, sd_g = by_place("cudnn", "kernel_us"), by_place("sdpa", "graph_us")
    for n in per:
        kern, graph = by_place(n, "kernel_us"), by_place(n, "graph_us")
        allk = by_place(n, "all_us")
        if not kern and not graph:
            summary[n] = {"error": next((r.get("error") for r in per[n] if "error" in r), None)}
            continue
        sk = [cud_k[p] / kern[p] for p in kern if p in cud_k]
        sc = [sd_g[p] / graph[p] for p in graph if p in sd_g]
        summary[n] = {
            "kernel_us": statistics.median(kern.values()) if kern else float("nan"),
            "all_us": statistics.median(allk.values()) if allk else float("nan"),
            "graph_us": statistics.median(graph.values()) if graph else float("nan"),
            "speedup_kernel_vs_cudnn": statistics.median(sk) if sk else float("nan"),
            "ci_kernel": boot_ci(sk),
            "speedup_call_vs_sdpa": statistics.median(sc) if sc else float("nan"),
            "ci_call": boot_ci(sc), "n_placements": len(kern),
            "main_kernel": next((r["main_kernel"] for r in per[n] if "main_kernel" in r), None),
            "errors": [r["error"] for r in per[n] if "error" in r][:2]}
    return summary


def env_info():
    p = torch.cuda.get_device_properties(0)
    info = {"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__,
            "triton": triton.__version__, "cudnn": torch.backends.cudnn.version()}
    try:
        info["smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem,power.draw,"
             "temperature.gpu,driver_version", "--format=csv"],
            capture_output=True, text=True, timeout=20).stdout
    except Exception as e:  # noqa: BLE001
        info["smi"] = str(e)
    return info


def main_phase(args):
    variants = parse_variants(args.variants) if args.variants else dict(VARIANTS)
    os.makedirs(args.out, exist_ok=True)
    result = {"env": env_info()}
    log("env", json.dumps(result["env"]))
    checks, cubins, cud_err = check_target(variants, args.seed)
    result["check"], result["cudnn_err"] = checks, cud_err
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for n, blob in cubins.items():
            ti = tarfile.TarInfo(f"{n}.cubin")
            ti.size = len(blob)
            tar.addfile(ti, io.BytesIO(blob))
    with open(os.path.join(args.out, "cubins.tar"), "wb") as f:
        f.write(buf.getvalue())
    dump(args, result)
    good = {n: variants[n] for n in variants if checks[n]["ok"]}
    if args.build:
        q, k, v = (torch.randn(*TARGET, device="cuda", dtype=torch.float16) for _ in range(3))
        t = time.time()
        _, tuning = ta.build(q, k, v)
        result["build"] = {"tuning": tuning, "seconds": time.time() - t}
        log("build picked", json.dumps(tuning))
        good["built"] = ({key: tuning[key] for key in ta.CONFIG_KEYS}, None)
        del q, k, v
    grid_names = [n for n in (args.grid.split(",") if args.grid else []) if n in good]
    if grid_names:
        result["grid"] = grid_check(variants, grid_names,
                                    tuple(int(x) for x in args.grid_s.split(",")))
    if args.ablations:
        for n in args.ablations.split(","):
            good[n] = None  # diagnostic: timed only (make_fn builds it)
    dump(args, result)
    log("timing", len(good), "variants")
    per = timing(good, args.placements, args.seed, partial=lambda per: dump(
        args, {**result, "timing": per}))
    result["timing"] = per
    result["summary"] = summary = summarize(per)
    ranked = sorted((n for n in good if summary.get(n, {}).get("kernel_us", math.nan)
                     == summary.get(n, {}).get("kernel_us", math.nan)),
                    key=lambda n: summary[n]["kernel_us"])
    top = [n for n in ranked if n != "base" and n in VARIANTS][:args.ncu_top]
    with open(os.path.join(args.out, "ncu_variants.txt"), "w") as f:
        f.write(",".join(["base"] + top if "base" in good else top))
    result["elapsed_s"] = time.time() - T0
    dump(args, result)
    log(f"{'variant':18s} {'kern us':>8s} {'all us':>7s} {'graph us':>8s} "
        f"{'cudnn/var (kernel) [95% CI]':>28s} {'sdpa/var (call) [95% CI]':>26s} regs smem")
    for n in ranked + [n for n in LIBS if "kernel_us" in summary.get(n, {})]:
        s = summary[n]
        c = checks.get(n, {})
        log(f"{n:18s} {s['kernel_us']:8.2f} {s['all_us']:7.2f} {s['graph_us']:8.2f} "
            f"{s['speedup_kernel_vs_cudnn']:7.3f} "
            f"[{s['ci_kernel'][0]:.3f},{s['ci_kernel'][1]:.3f}]"
            f"      {s['speedup_call_vs_sdpa']:7.3f} [{s['ci_call'][0]:.3f},{s['ci_call'][1]:.3f}]"
            f"  {c.get('n_regs')} {c.get('shared')}")
    failed = {n: checks[n].get("error", f"err {checks[n].get('err')}") for n in checks
              if not checks[n]["ok"]}
    log("failed variants:", json.dumps(failed)[:3000])


def ncu_phase(args):
    names = [n for n in args.variants.split(",") if n in VARIANTS or n in ABLATIONS]
    q, k, v = (torch.randn(*TARGET, device="cuda", dtype=torch.float16) for _ in range(3))
    for i, name in enumerate(names):
        if name in ABLATIONS:
            ablation_fn(name, q, k, v)  # compiles and launches once
        else:
            run_variant(q, k, v, *VARIANTS[name])
        torch.cuda.synchronize()
        print(f"NCU_ORDER {i} {name}", flush=True)
    variants = names
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    print(f"NCU_ORDER {len(variants)} cudnn", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", choices=("main", "ncu"), default="main")
    ap.add_argument("--variants", default="")
    ap.add_argument("--grid", default="d_m128n64w4s2,p2,lazy,poly")
    ap.add_argument("--grid-s", default="77,1000")
    ap.add_argument("--ablations", default="", help="names from ABLATIONS (timed only)")
    ap.add_argument("--build", action="store_true",
                    help="also tune with ta.build at the target and time what it returns")
    ap.add_argument("--placements", type=int, default=6)
    ap.add_argument("--ncu-top", type=int, default=3)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    if args.phase == "main":
        main_phase(args)
    else:
        ncu_phase(args)


if __name__ == "__main__":
    sys.exit(main())
