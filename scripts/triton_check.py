"""Check and time the Triton attention kernel on a CUDA GPU (a script, not a test).

(a) Correctness grid: odd and even S from 77 to 8192, fp16 and bf16, D 64 and 128, causal
    and not, small B*H; per head dim the default, a second block shape with fp16
    exponentials, the pointer path and every configuration the tuner may pick. Fresh
    normal inputs per case, output poisoned with NaN, error ``||out - ref|| / ||ref||``
    against the float64 reference ``candidates.reference`` computed on the GPU (chunked
    over heads). SDPA's flash backend is measured on the same inputs so the thresholds can
    be judged against a library kernel.
(b) Speed table: the reports' ten configurations, S=4096/8192, D=128 and two causal rows.
    Ours is built (tuned) first, outside the timing; then ours and each SDPA backend
    (flash, efficient, cuDNN; unsupported ones skipped) are timed with
    ``triton.testing.do_bench`` (median, L2 flushed before each call). Every tuned
    configuration is also checked against the float64 reference on batch element 0, and
    timed again with the other exponential precision and through the pointer path.
(c) Host cost of one call (CPU microseconds, no synchronisation) for ours and SDPA.

The ``env`` section records ``machine.fingerprint()`` and the device's measured ceilings
(``ceilings.measure_ceilings``: an 8192³ fp16 product and a 2 GiB copy).

Usage: ``PYTHONPATH=. python3 scripts/triton_check.py [--sections env,grid,host,speed]
[--quick]``. Writes the sealed check file (``attn_analysis.record.checks``, kind triton_check)
``$OUT/triton_check.json`` (or ./triton_check.json) and prints a short table last. Exit
code 1 if any correctness check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

from attn_analysis.measure import ceilings, machine
from attn_analysis import configs
from attn_analysis.record import checks
from attn_analysis.measure import triton_attention as ta
from attn_analysis.measure.candidates import reference

TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def log(*a):
    print(*a, flush=True)


def rel_err(out, ref):
    return float((out.double() - ref).norm() / ref.norm())


def sdpa(name, causal):
    def fn(q, k, v):
        with sdpa_kernel([BACKENDS[name]]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return fn


def bench(fn, warmup=25, rep=100):
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def env_section():
    """The machine (``machine.fingerprint``) and its measured matmul and copy ceilings."""
    info = {"fingerprint": machine.fingerprint(), "ceilings": ceilings.measure_ceilings("cuda")}
    log("env", json.dumps({"gpu": info["fingerprint"]["gpu_name"],
                           "torch": info["fingerprint"]["torch_version"],
                           "triton": info["fingerprint"]["triton_version"],
                           "mm_TFLOPS": info["ceilings"]["matmul"]["tflops"],
                           "copy_GBps": info["ceilings"]["copy"]["gbs"]}))
    return info


def kernel_report(q, cfg, causal):
    """Compile facts for one config: wgmma present in the PTX, registers, spills, smem.
    The kernel is the one ``attention`` launches for this config (variant keys included)."""
    full = ta._config_iv(cfg, q.shape[-1])
    _, ck, _ = ta._launch(q, q, q, torch.empty_like(q), causal, 1.0, full, return_kernel=True)
    ptx = ck.asm.get("ptx", "")
    return {"wgmma": ptx.count("wgmma.mma_async"), "mma_sync": ptx.count("mma.sync"),
            "tma_load": ptx.count("cp.async.bulk.tensor"), "ex2": ptx.count("ex2.approx"),
            "ex2_f16x2": ptx.count("ex2.approx.f16x2"), "n_regs": getattr(ck, "n_regs", None),
            "n_spills": getattr(ck, "n_spills", None),
            "shared": getattr(ck.metadata, "shared", None)}, ptx


def grid_section(quick):
    """Correctness over dtypes, head dims, causal, odd S; for each head dim the default,
    a second block shape with fp16 exponentials, the pointer path and every tuning
    candidate."""
    rows, torch_gen = [], torch.Generator(device="cuda").manual_seed(0)
    seqs = [(2, 3, 77), (2, 3, 128), (2, 3, 1000), (1, 2, 2048), (1, 2, 8192)]
    if quick:
        seqs = seqs[:3]
    # Per head dim: the default, another block shape with fp16 exponentials, and the
    # pointer (non-TMA) path at the default. Each runs on every case.
    cfgs = {64: [(ta.DEFAULT_CONFIGS[64], None),
                 ({"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3,
                   "EXP_F16": True}, None),
                 (ta.DEFAULT_CONFIGS[64], False)],
            128: [(ta.DEFAULT_CONFIGS[128], None),
                  ({"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2,
                    "EXP_F16": True}, None),
                  (ta.DEFAULT_CONFIGS[128], False)]}
    # Every configuration the tuner may pick (persistent grid, row halves, register cap,
    # no empty masked loop, ...), since the sweep times whichever it picks.
    for D, listed in cfgs.items():
        listed[:] = [({**ta._VARIANT_OFF, **cfg}, tma) for cfg, tma in listed]
        for cand in ta._candidates(D):
            if (cand, None) not in listed:
                listed.append((cand, None))
    for dtype in (torch.float16, torch.bfloat16):
        for D in (64, 128):
            for causal in (False, True):
                for B, H, S in seqs:
                    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype,
                                           generator=torch_gen) for _ in range(3))
                    ref = reference(q, k, v, causal)
                    flash = rel_err(sdpa("flash", causal)(q, k, v), ref)
                    for cfg, tma in cfgs[D]:
                        out = torch.full_like(q, float("nan"))
                        ta._launch(q, k, v, out, causal, D ** -0.5 * ta.LOG2E, cfg, tma=tma)
                        torch.cuda.synchronize()
                        nan = bool(torch.isnan(out).any())
                        err = rel_err(out, ref)
                        ok = (not nan) and err < TOL[dtype]
                        rows.append({"dtype": str(dtype).split(".")[1], "D": D,
                                     "causal": causal, "B": B, "H": H, "S": S,
                                     "config": cfg, "tma": tma is None, "err": err,
                                     "nan": nan,
                                     "flash_err": flash, "ok": ok})
                        if not ok:
                            log("FAIL", rows[-1])
    n_bad = sum(not r["ok"] for r in rows)
    for dt in ("float16", "bfloat16"):
        for e16 in (False, True):
            sel = [r for r in rows if r["dtype"] == dt and r["config"]["EXP_F16"] == e16]
            log(f"grid {dt} EXP_F16={e16}: {len(sel)} runs, max err ours "
                f"{max(r['err'] for r in sel):.2e}, max err SDPA flash on the same inputs "
                f"{max(r['flash_err'] for r in sel):.2e}, tol {TOL[DT[dt]]:.1e}")
    log(f"grid: {len(rows) - n_bad}/{len(rows)} passed")
    return rows


def speed_configs(quick):
    cfgs = list(configs.matrix("reports-v1")) + list(configs.matrix("long-v1"))
    cfgs += [configs.Config(32, 8, 2048, 64, causal=True),
             configs.Config(32, 8, 2048, 128, causal=True)]
    return cfgs[:3] if quick else cfgs


def speed_section(quick, out_dir):
    rows, ptx_saved = [], set()
    for c in speed_configs(quick):
        dtype = DT[c.dtype]
        q, k, v = (torch.randn(c.batch, c.heads, c.seq_len, c.head_dim, device="cuda",
                               dtype=dtype) for _ in range(3))
        t0 = time.perf_counter()
        fn, tuning = ta.build(q, k, v, causal=c.causal)
        tune_s = time.perf_counter() - t0
        cfg = {key: tuning[key] for key in ta.CONFIG_KEYS}
        # Correctness of the tuned config on batch element 0 (poisoned buffer).
        out = torch.full_like(q, float("nan"))
        ta.attention(q, k, v, causal=c.causal, config=cfg, out=out)
        err = rel_err(out[:1], reference(q[:1], k[:1], v[:1], c.causal))
        ok = err < TOL[dtype] and not bool(torch.isnan(out).any())
        rep, ptx = kernel_report(q, cfg, c.causal)
        name = f"ptx_D{c.head_dim}_{'c' if c.causal else 'n'}.ptx"
        if name not in ptx_saved and len(ptx_saved) < 4:
            ptx_saved.add(name)
            with open(os.path.join(out_dir, name), "w") as f:
                f.write(ptx)
        row = {"key": c.key, **c.as_dict(), "tuning": tuning, "tune_s": tune_s,
               "err": err, "ok": ok, "compile": rep,
               "flops": 4 * c.batch * c.heads * c.seq_len ** 2 * c.head_dim
               / (2 if c.causal else 1)}
        row["ours_ms"] = bench(lambda: fn(q, k, v))
        # Ablations at the tuned block shape: exponentials in the other precision, and
        # the pointer (non-TMA) load path. Each checked like the tuned one.
        qk = c.head_dim ** -0.5 * ta.LOG2E
        for name, acfg, tma in (("exp_flipped", {**cfg, "EXP_F16": not cfg["EXP_F16"]}, None),
                                ("ptr_path", cfg, False)):
            try:
                out.fill_(float("nan"))
                ta._launch(q, k, v, out, c.causal, qk, acfg, tma=tma)
                a_err = rel_err(out[:1], reference(q[:1], k[:1], v[:1], c.causal))
                a_ms = bench(lambda: ta._launch(q, k, v, out, c.causal, qk, acfg, tma=tma))
                row[name] = {"ms": a_ms, "err": a_err, "config": acfg}
            except Exception as e:  # noqa: BLE001
                row[name] = {"ms": None, "error": f"{type(e).__name__}: {str(e)[:200]}"}
        # Host cost of one launch of ours (no sync): the work per call beside the GPU's.
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            fn(q, k, v)
        row["ours_host_us"] = (time.perf_counter() - t0) / 200 * 1e6
        torch.cuda.synchronize()
        lib = {}
        for name, _ in BACKENDS.items():
            f = sdpa(name, c.causal)
            try:
                o = f(q, k, v)
                torch.cuda.synchronize()
                lib_err = rel_err(o[:1], reference(q[:1], k[:1], v[:1], c.causal))
                lib[name] = {"ms": bench(lambda: f(q, k, v)), "err": lib_err}
            except RuntimeError as e:  # backend does not support this shape
                lib[name] = {"ms": None, "error": str(e).splitlines()[0][:200]}
        row["lib"] = lib
        timed = {n: d["ms"] for n, d in lib.items() if d.get("ms")}
        best = min(timed, key=timed.get)
        row["best_lib"], row["best_lib_ms"] = best, timed[best]
        row["ratio"] = row["ours_ms"] / timed[best]  # < 1: ours faster
        row["ours_TFLOPS"] = row["flops"] / row["ours_ms"] / 1e9
        row["best_lib_TFLOPS"] = row["flops"] / timed[best] / 1e9
        log("speed", c.key, json.dumps({k: row[k] for k in (
            "ours_ms", "best_lib", "best_lib_ms", "ratio", "err", "tune_s", "ours_host_us")}),
            json.dumps(cfg), json.dumps(rep), {n: d.get("ms") for n, d in lib.items()},
            {n: (row[n].get("ms"), row[n].get("err")) for n in ("exp_flipped", "ptr_path")},
            {n: d.get("err") for n, d in lib.items()})
        rows.append(row)
        del q, k, v, out
        torch.cuda.empty_cache()
    return rows


def host_section():
    """Host (CPU) cost of one call, no synchronisation, at the target shape: what each
    launch costs beside the GPU's work (hidden while the GPU is busy, exposed when not)."""
    q, k, v = (torch.randn(32, 8, 512, 64, device="cuda", dtype=torch.float16)
               for _ in range(3))
    out = torch.empty_like(q)
    cfg = ta._config_iv(None, 64)
    fn, tuning = ta.build(q, k, v)
    B, H, S, D = q.shape
    shape, strides = [B * H, S, D], [S * D, D, 1]
    TD = ta.TensorDescriptor

    def descs():
        return (TD(q, shape, strides, [1, 128, D]), TD(k, shape, strides, [1, 64, D]),
                TD(v, shape, strides, [1, 64, D]), TD(out, shape, strides, [1, 128, D]))

    dd = descs()
    grid = (triton.cdiv(S, 128), B * H)
    kw = dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=D, CAUSAL=False, TMA=True, EXP16=False,
              INTERP=False, num_warps=8, num_stages=3)
    grid = grid + (1,)
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    odd = tuple(t[:, :, :500].contiguous() for t in (q, k, v))
    flip = [0]

    def alternate():  # new tensor objects each call: the descriptors are rebuilt
        flip[0] ^= 1
        return fn(q, k, v) if flip[0] else fn(q2, k2, v2)

    calls = {"build fn(q, k, v)": lambda: fn(q, k, v),
             "build fn, alternating inputs": alternate,
             "build fn, other shape (slow path)": lambda: fn(*odd),
             "attention(config=default)": lambda: ta.attention(q, k, v, config=cfg),
             "_attention_iv (validation)": lambda: ta._attention_iv(q, k, v, False, None,
                                                                    cfg, None),
             "torch.empty_like": lambda: torch.empty_like(q),
             "4 TensorDescriptors": descs,
             "jit launch, args given": lambda: ta._attn_fwd[grid](*dd, S, 0.18, **kw),
             "_launch, out given": lambda: ta._launch(q, k, v, out, False, 0.18, cfg),
             "_launch ptr path": lambda: ta._launch(q, k, v, out, False, 0.18, cfg, tma=False),
             "sdpa cudnn": lambda: sdpa("cudnn", False)(q, k, v),
             "sdpa flash": lambda: sdpa("flash", False)(q, k, v),
             "F.sdpa (default)": lambda: F.scaled_dot_product_attention(q, k, v)}
    host = {}
    for name, f in calls.items():
        try:
            f()
        except Exception as e:  # noqa: BLE001
            log("host fail", name, type(e).__name__, str(e)[:300])
            continue
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(300):
            f()
        host[name] = (time.perf_counter() - t0) / 300 * 1e6
        torch.cuda.synchronize()
    host["fast_launch"] = tuning["fast_launch"]
    log("host us per call", json.dumps({k: round(v, 1) for k, v in host.items()}))
    return host


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="env,grid,host,speed")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    out_dir = os.environ.get("OUT", ".")
    sections = args.sections.split(",")
    result = {}
    if "env" in sections:
        result["env"] = env_section()
    if "grid" in sections:
        result["grid"] = grid_section(args.quick)
    if "host" in sections:
        result["host_us"] = host_section()
    if "speed" in sections:
        result["speed"] = speed_section(args.quick, out_dir)
    name = "triton_check" + ("" if args.sections == "env,grid,host,speed" else
                             "_" + args.sections.replace(",", "_")) + ".json"
    checks.write(os.path.join(out_dir, name), result, "triton_check")
    bad = [r for r in result.get("grid", []) + result.get("speed", []) if not r["ok"]]
    if "grid" in result:
        log(f"\ncorrectness grid: {len(result['grid']) - sum(not r['ok'] for r in result['grid'])}"
            f"/{len(result['grid'])} ok; speed-shape checks: "
            f"{sum(r['ok'] for r in result.get('speed', []))}/{len(result.get('speed', []))} ok")
    if "speed" in result:
        log(f"{'config':28s} {'ours ms':>8s} {'lib':>9s} {'lib ms':>8s} {'ratio':>6s} "
            f"{'ours TF':>7s} {'lib TF':>7s}  tuned (BM,BN,warps,stages,exp)")
        for r in result["speed"]:
            t = r["tuning"]
            log(f"{r['key']:28s} {r['ours_ms']:8.4f} {r['best_lib']:>9s} "
                f"{r['best_lib_ms']:8.4f} {r['ratio']:6.3f} {r['ours_TFLOPS']:7.1f} "
                f"{r['best_lib_TFLOPS']:7.1f}  ({t['BLOCK_M']},{t['BLOCK_N']},"
                f"{t['num_warps']},{t['num_stages']},{'e16' if t['EXP_F16'] else 'e32'})"
                f"{'' if r['ok'] else ' WRONG'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
