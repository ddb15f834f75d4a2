"""Our FlashAttention-3-style forward kernel for Hopper (sm90) in Gluon: what checks its
arguments, says why it cannot run here, launches it, compiles it without a GPU, and mirrors
its schedule in torch.

**Status: drafted on a machine without a GPU, then run on H100 and H200 GPUs.** Every
variant compiles to sm_90a PTX/cubin with Triton 3.6.0 on a CPU (:func:`compile_only`,
tested where Triton 3.6 is importable), which checks syntax, layouts, types and
shared-memory fit; ``scripts/gluon_check.py`` checks each variant against float64 on the
device. Every variant of ``gluon_config.CHECKED_VARIANTS`` has passed the full float64
grid on a GPU (the multi-tile row included); issue 43's ablation variants pass the quick
grid before they are timed (``scripts/gluon_ablation.py``; the second round's, KV_SPLIT's
included, ran on an H200, ``data/checks/gluon_ablation2_h200.json``; the third round's
await their first run). Triton's concurrency sanitizer has run every case
of ``warp_spec``, ``pingpong`` and ``fa3`` with no race reported:
``data/checks/gluon_check_*.json``. The ``gluon``
candidate tunes over the variants per shape (:func:`tune`) and was measured under protocol
2 on an H100 and an H200 (runs ``*-gluon-target``, ``*-gluon-long``): slower than cuDNN's
kernel at the target.
``notes/gluon-plan.md`` lists the variants, what to measure and the open risks.

Layout of the work. Q, K, V, O are contiguous (B, H, S, D) fp16/bf16 tensors, seen by the
copy engine (TMA) as (B*H, S, D) through 3-D tensor descriptors with boxes of
``[1, rows, D]``, so rows past S read as zeros and are never written. One *tile* is
``BLOCK_M`` query rows of one (batch, head) (``2 * BLOCK_M`` with PINGPONG: one half per
consumer warpgroup). Its keys run in ``BLOCK_N`` tiles through a ring of ``STAGES`` shared
memory slots (K and V of one key tile per slot), each with a "ready" mbarrier (the TMA
arrival) and, with a producer warp, an "empty" one (consumers release the slot). Scores
(QK^T, Q and K from shared memory) and the PV product (P from registers, V from shared
memory) are ``warpgroup_mma`` (wgmma); the online softmax runs in fp32, base 2 with
``log2(e) / sqrt(D)`` folded into one scale; the output is divided by the row sum once,
written to shared memory and stored by TMA.

Where the rest lives: the configurations, the ablation's variants and the launch plan in
:mod:`.gluon_config` (pure Python); the ``@gluon.jit`` code in :mod:`.gluon_kernels` (the
schedules and the entry point) and :mod:`.gluon_tile` (the pieces of one tile, and the
guarded Gluon import).

Public API: :func:`attention` (validates, then launches), :func:`tune` (times the variants
on given inputs), :func:`build` (what the ``gluon`` candidate calls),
:func:`unavailable_reason` (why not here, or None),
:func:`emulate` (the schedule in torch, for the CPU tests) and :func:`compile_only`.
Importing this module needs neither triton nor a GPU; calling the kernel needs both
(:class:`GluonUnavailable` says which is missing).
"""

from __future__ import annotations

import math

import torch

from . import gluon_kernels, gluon_tile
from .attention_args import tensor_iv
from .gluon_config import DTYPES, HEAD_DIMS, cdiv, full_config, plan, tuning_space, variant_of
from .gluon_tile import GLUON_IMPORT_ERROR, TRITON_VERSION

__all__ = ["LOG2E", "SUPPORTED_TRITON", "TUNE_SAMPLES", "GluonUnavailable",
           "unavailable_reason", "attention", "tune", "build", "emulate", "compile_only",
           "exp2_poly_reference"]

LOG2E = 1.4426950408889634
# The kernel is written against Triton 3.6's Gluon API (the device's version). Triton 3.9
# renamed or removed parts of it (tma.async_copy_global_to_shared -> async_load,
# gl.thread_barrier, warp_specialize's list form), so other versions are refused up front.
SUPPORTED_TRITON = ("3.6.",)
# Graph-mode samples per variant in :func:`tune` (replays of >= 0.1 ms each, as the
# sweep's graph mode takes them; 20 is the sweep's own count per placement).
TUNE_SAMPLES = 20


class GluonUnavailable(RuntimeError):
    """Gluon (Triton >= 3.4 with the Hopper API) or an sm90 GPU is missing."""


# --------------------------------------------------------------------------- validation


def _tensor_iv(name: str, t, ref=None) -> None:
    """One of q, k, v, out (:func:`attention_args.tensor_iv`), 16-byte aligned on CUDA (TMA)."""
    tensor_iv(name, t, ref, dtypes=DTYPES, head_dims=HEAD_DIMS)
    if t.device.type == "cuda" and t.data_ptr() % 16:
        raise ValueError(f"`{name}` must start on a 16-byte boundary (TMA); got an offset "
                         f"of {t.data_ptr() % 16} bytes.")


def _attention_iv(q, k, v, causal, config):
    """Validate every argument of :func:`attention`; return the full configuration."""
    _tensor_iv("q", q)
    _tensor_iv("k", k, q)
    _tensor_iv("v", v, q)
    if not isinstance(causal, bool):
        raise ValueError(f"`causal` must be True or False; got {causal!r}.")
    return full_config(config, q.shape[3])


def unavailable_reason(device=None) -> str | None:
    """Why the kernel cannot run here (no Gluon, no CUDA, not sm90), or None."""
    if GLUON_IMPORT_ERROR is not None:
        return (f"Gluon's Hopper API is not importable (triton.experimental.gluon, Triton "
                f">= 3.4; tested against 3.6): {GLUON_IMPORT_ERROR}")
    if not str(TRITON_VERSION).startswith(SUPPORTED_TRITON):
        return (f"the Gluon kernel is written against Triton 3.6's Gluon API; Triton "
                f"{TRITON_VERSION} renamed or removed parts of it")
    if not torch.cuda.is_available():
        return "no CUDA device: the Gluon kernel runs on an sm90 (Hopper) GPU only"
    dev = torch.device("cuda") if device is None else torch.device(device)
    if dev.type != "cuda":
        return f"the Gluon kernel runs on CUDA tensors only, not {dev.type}"
    cap = torch.cuda.get_device_capability(dev)
    if cap[0] != 9:
        return (f"the Gluon kernel uses wgmma and needs compute capability 9.x (Hopper); "
                f"the device has {cap[0]}.{cap[1]}")
    return None


# --------------------------------------------------------------------------- launch


def _gl_dtype(dtype):
    """Gluon's element type of a torch dtype."""
    gl = gluon_tile.gl
    return {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}[dtype]


def _smem_layout(dtype, rows: int, head_dim: int):
    """The shared-memory layout of a TMA box of ``[1, rows, head_dim]``."""
    return gluon_tile.gl.NVMMASharedLayout.get_default_for([1, rows, head_dim],
                                                           _gl_dtype(dtype))


def _descriptor(t, rows: int):
    """TMA descriptor of a contiguous (B, H, S, D) tensor as (B*H, S, D), box 1 x rows x D."""
    B, H, S, D = t.shape
    return gluon_tile.TensorDescriptor(t, [B * H, S, D], [S * D, D, 1], [1, rows, D],
                                       _smem_layout(t.dtype, rows, D))


def _constexprs(head_dim: int, causal: bool, cfg: dict) -> dict:
    """The kernel's constexpr arguments for ``cfg`` (at launch and in :func:`compile_only`)."""
    return dict(HEAD_DIM=head_dim, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
                STAGES=cfg["STAGES"], CAUSAL=causal, PERSIST=bool(cfg["PERSIST"]),
                WARP_SPEC=cfg["WARP_SPEC"], PINGPONG=cfg["PINGPONG"],
                OVERLAP=cfg["OVERLAP"], QBUF=cfg["QBUF"], PP_TURN=cfg["PP_TURN"],
                EXP_SPLIT=cfg["EXP_SPLIT"], KV_SPLIT=cfg["KV_SPLIT"], XTILE=cfg["XTILE"],
                RESCALE=cfg["RESCALE"], LSUM=cfg["LSUM"])


def _kernel_args(q, k, v, out, causal, cfg, num_sms):
    """Descriptors, scalars, constexprs and grid of one launch."""
    B, H, S, D = q.shape
    p = plan(q.shape, causal, cfg, num_sms)
    descs = (_descriptor(q, cfg["BLOCK_M"]), _descriptor(k, cfg["BLOCK_N"]),
             _descriptor(v, cfg["BLOCK_N"]), _descriptor(out, cfg["BLOCK_M"]))
    scalars = (S, LOG2E / math.sqrt(D), p["n_m"], p["n_tiles"])
    return descs, scalars, _constexprs(D, causal, cfg), p["grid"]


def attention(q, k, v, *, causal=False, config=None, out=None) -> torch.Tensor:
    """``softmax(q k^T / sqrt(D) [+ causal mask]) v`` on an sm90 GPU through the Gluon kernel.

    Parameters
    ----------
    q, k, v : torch.Tensor
        Contiguous (B, H, S, D) CUDA tensors of one dtype (float16 or bfloat16), D in
        (64, 128), 16-byte aligned; any S >= 1.
    causal : bool
        Mask keys after each query. Default False.
    config : dict or None
        Keys among ``gluon_config.CONFIG_KEYS`` (missing ones from the default for D);
        None gives the default (the plain variant). ``gluon_config.config_for`` gives each
        ablation variant.
    out : torch.Tensor or None
        Buffer of q's shape, dtype and device to write into; allocated if None.

    Raises ValueError for a bad argument (naming it and what is allowed), and
    :class:`GluonUnavailable` where Gluon or an sm90 GPU is missing.
    """
    cfg = _attention_iv(q, k, v, causal, config)
    if out is not None:
        _tensor_iv("out", out, q)
    reason = unavailable_reason(q.device)
    if reason:
        raise GluonUnavailable(reason)
    if out is None:
        out = torch.empty_like(q)
    num_sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    descs, scalars, consts, grid = _kernel_args(q, k, v, out, causal, cfg, num_sms)
    extra = {"maxnreg": cfg["MAXNREG"]} if cfg["MAXNREG"] else {}
    gluon_kernels._gluon_attn_fwd[grid](*descs, *scalars, **consts,
                                        num_warps=cfg["num_warps"], **extra)
    return out


def tune(q, k, v, *, causal=False, space=None, n_samples=TUNE_SAMPLES) -> dict:
    """Time each configuration of ``space`` on these inputs; return the fastest.

    ``space`` maps names to configurations (None: :func:`gluon_config.tuning_space`, the
    variants). Each is compiled and run once outside the timing, its output checked for
    non-finite values, then timed in the instrument's graph mode (:func:`.timing.measure`,
    ``n_samples`` replays): the GPU's time per call without the launch's host time, which
    for this launcher is several times the kernel's (notes/gluon-plan.md, risk 8) and would
    otherwise decide the choice. One that fails to compile or run, or writes a non-finite
    value, is skipped and counted.

    Returns the fastest configuration (``CONFIG_KEYS``) plus ``variant`` (its name),
    ``tuned_ms`` (its median ms per call), ``tried_ms`` (name -> median ms, for every one
    timed), ``n_tried`` and ``n_failed``. RuntimeError if every one failed.
    """
    from . import timing
    _attention_iv(q, k, v, causal, None)
    reason = unavailable_reason(q.device)
    if reason:
        raise GluonUnavailable(reason)
    D = q.shape[3]
    space = tuning_space(D) if space is None else space
    if not isinstance(space, dict) or not space:
        raise ValueError("`space` must be a non-empty dict of name -> configuration, or None.")
    space = {name: full_config(cfg, D) for name, cfg in space.items()}
    out = torch.empty_like(q)
    tried, n_failed = {}, 0
    for name, cfg in space.items():
        try:
            out.fill_(float("nan"))
            attention(q, k, v, causal=causal, config=cfg, out=out)  # compiles
            torch.cuda.synchronize(q.device)
            if not torch.isfinite(out).all().item():
                n_failed += 1
                continue
            # timed as build returns it: a fresh output per call, as the sweep calls it
            sample = timing.measure(lambda cfg=cfg: attention(q, k, v, causal=causal,
                                                              config=cfg),
                                    mode="graph", device="cuda", n_samples=n_samples)
            tried[name] = sample.median_ms
        except Exception:  # compile error, resources, a launch failure  # noqa: BLE001
            n_failed += 1
    if not tried:
        raise RuntimeError(f"every one of {len(space)} Gluon configurations failed.")
    best = min(tried, key=tried.get)
    return {**space[best], "variant": best, "tuned_ms": float(tried[best]),
            "tried_ms": {n: float(t) for n, t in tried.items()}, "n_tried": len(tried),
            "n_failed": n_failed}


def build(q, k, v, *, causal=False, config=None, tuned=False):
    """``(fn, info)``: ``fn(q, k, v)`` runs the kernel at ``config`` (None: the default, or
    with ``tuned`` the fastest of :func:`tune` on these inputs); the first call
    (compilation) and any tuning happen here, outside any timed region. ``info`` is the
    full configuration, its ``variant`` name, the Triton version and, when tuned, what
    :func:`tune` timed; a ``config`` given (an earlier build's choice) is marked
    ``reused``."""
    if tuned and config is not None:
        raise ValueError("`tuned` and `config` exclude each other: give a configuration "
                         "to reuse, or ask for tuning.")
    cfg = _attention_iv(q, k, v, causal, config)
    reason = unavailable_reason(q.device)
    if reason:
        raise GluonUnavailable(reason)
    extra = {}
    if tuned:
        tuning = tune(q, k, v, causal=causal)
        cfg = full_config({key: tuning[key] for key in cfg}, q.shape[3])
        extra = {key: tuning[key] for key in ("tuned_ms", "tried_ms", "n_tried", "n_failed")}
    elif config is not None:
        extra = {"reused": True}
    attention(q, k, v, causal=causal, config=cfg)
    torch.cuda.synchronize(q.device)

    def fn(q, k, v):
        return attention(q, k, v, causal=causal, config=cfg)

    return fn, {**cfg, "variant": variant_of(cfg, q.shape[3]), "triton": TRITON_VERSION,
                **extra}


def emulate(q, k, v, *, causal=False, config=None) -> torch.Tensor:
    """The kernel's schedule in torch, for the CPU tests (no Gluon): the same tiles (query
    tiles of ``gluon_config.plan``, causal ones reversed), the same key range per tile
    (``n_kv`` key tiles of BLOCK_N, zero rows past S), the same mask rule (only key tiles
    reaching ``mask_from``; keys past S and, causal, after the query set to -inf), the
    online softmax in fp32 base 2 (the EXP_SPLIT columns through the kernel's polynomial)
    with P rounded to the input dtype before PV (LSUM: the row sum of that rounded P), and
    one division by the row sum. With
    PINGPONG each consumer's BLOCK_M rows walk the whole tile's key range, as on the GPU.

    It checks the schedule's arithmetic and masking against the float64 reference at any
    S; it cannot check the Gluon code (barriers, layouts, TMA), which only the GPU runs."""
    cfg = _attention_iv(q, k, v, causal, config)
    B, H, S, D = q.shape
    BM, BN = cfg["BLOCK_M"], cfg["BLOCK_N"]
    consumers = 2 if cfg["PINGPONG"] else 1
    p = plan(q.shape, causal, cfg, num_sms=1)
    rows = p["rows_per_tile"]
    qk_scale = LOG2E / math.sqrt(D)
    pad = p["n_m"] * rows + 2 * BN  # TMA's zero fill past S
    qf, kf, vf = (torch.nn.functional.pad(t.reshape(B * H, S, D).float(), (0, 0, 0, pad - S))
                  for t in (q, k, v))
    out = torch.zeros(B * H, pad, D)
    for tile in range(p["n_tiles"]):
        bh, pid_m = divmod(tile, p["n_m"])
        start = (p["n_m"] - 1 - pid_m if causal else pid_m) * rows
        n_kv = cdiv(min(start + rows, S) if causal else S, BN)
        for c in range(consumers):
            r0 = start + c * BM
            offs_m = torch.arange(r0, r0 + BM)
            mask_from = min(r0, S) if causal else S
            m = torch.full((BM,), -math.inf)
            l = torch.zeros(BM)
            acc = torch.zeros(BM, D)
            for j in range(n_kv):
                kt, vt = kf[bh, j * BN:(j + 1) * BN], vf[bh, j * BN:(j + 1) * BN]
                s = qf[bh, r0:r0 + BM] @ kt.T
                if j * BN + BN > mask_from:
                    cols = torch.arange(j * BN, j * BN + BN)
                    keep = (cols < S)[None, :].expand(BM, BN)
                    if causal:
                        keep = keep & (offs_m[:, None] >= cols[None, :])
                    s = torch.where(keep, s, -math.inf)
                m_new = torch.maximum(m, s.max(1).values * qk_scale)
                pr = _exp2_split(s * qk_scale - m_new[:, None], cfg["EXP_SPLIT"])
                alpha = torch.exp2(m - m_new)
                p16 = pr.to(q.dtype).float()  # the P that PV multiplies
                l = l * alpha + (p16 if cfg["LSUM"] else pr).sum(1)
                acc = acc * alpha[:, None] + p16 @ vt.to(q.dtype).float()
                m = m_new
            out[bh, r0:r0 + BM] = acc / l[:, None]
    return out[:, :S].to(q.dtype).reshape(B, H, S, D)


def exp2_poly_reference(x):
    """The kernel's polynomial ``2**x`` (``gluon_tile._exp2_poly``) in torch float32, for the
    CPU tests: x clamped to >= -127, split into floor j and fraction f, 2**f from
    ``gluon_tile.EXP2_POLY`` by Horner, and j added to the float's exponent bits (so
    x <= -127 gives 0)."""
    x = torch.clamp(x.float(), min=-127.0)
    j = torch.floor(x)
    f = x - j
    c0, c1, c2, c3 = (torch.tensor(c, dtype=torch.float32) for c in gluon_tile.EXP2_POLY)
    p = ((c3 * f + c2) * f + c1) * f + c0
    bits = p.view(torch.int32) + (j.to(torch.int32) << 23)
    return bits.view(torch.float32)


def _exp2_split(x, split: int) -> torch.Tensor:
    """2**x of a [rows, BLOCK_N] tile as the kernel's EXP_SPLIT computes it: ex2 (here
    torch.exp2) on every column but the polynomial ones (``gluon_tile._exp2_mixed``):
    split 1 the odd columns, split 2 the odd columns with bit 3 of their index set."""
    y = torch.exp2(x)
    if split:
        cols = torch.arange(x.shape[1])
        poly = (cols % 2 == 1) & ((cols >> 3) % 2 == 1 if split == 2 else True)
        y[:, poly] = exp2_poly_reference(x[:, poly])
    return y


def compile_only(head_dim: int, dtype, causal: bool, cfg: dict, arch: int = 90):
    """Compile the kernel for ``cfg`` to sm_``arch``a without a GPU (Triton's compiler and
    its bundled ptxas); return Triton's compiled kernel (``.asm['ptx']``, ``['cubin']``,
    ``.metadata.shared``). Nothing runs: this checks that the variant compiles."""
    if GLUON_IMPORT_ERROR is not None:
        raise GluonUnavailable(unavailable_reason())
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    cfg = full_config(cfg, head_dim)
    tname = {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]

    def desc_sig(rows):
        return f"tensordesc<{tname}[1,{rows},{head_dim}]>"[:-1] + \
            f",{_smem_layout(dtype, rows, head_dim)!r}>"

    sig = {"q_desc": desc_sig(cfg["BLOCK_M"]), "k_desc": desc_sig(cfg["BLOCK_N"]),
           "v_desc": desc_sig(cfg["BLOCK_N"]), "o_desc": desc_sig(cfg["BLOCK_M"]),
           "S": "i32", "qk_scale": "fp32", "n_m": "i32", "n_tiles": "i32"}
    consts = _constexprs(head_dim, causal, cfg)
    sig.update({name: "constexpr" for name in consts})
    src = GluonASTSource(gluon_kernels._gluon_attn_fwd, signature=sig, constexprs=consts)
    options = {"num_warps": cfg["num_warps"]}
    if cfg["MAXNREG"]:
        options["maxnreg"] = cfg["MAXNREG"]
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)
