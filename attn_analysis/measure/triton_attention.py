"""Our own contender: a FlashAttention-style forward kernel written in Triton.

One program computes one ``BLOCK_M`` tile of query rows of one (batch, head): it walks
the keys and values in ``BLOCK_N`` tiles, keeps a running row maximum ``m`` and row sum
``l`` (online softmax, base 2 with log2(e) folded into the scale) and an fp32
accumulator, and divides by ``l`` once at the end. Inputs are fp16 or bf16; both
matrix products accumulate in fp32. Key tiles that need no mask (fully inside the
sequence and, if causal, fully below the diagonal) run in a loop without masks; the
at most few tiles on the diagonal or past the sequence end run in a second, masked loop.

Public API (the candidate registry calls exactly these):

* :func:`attention` runs the kernel with a given (or default) configuration.
* :func:`tune` times candidate configurations on given inputs and returns the fastest.
* :func:`build` tunes once and returns ``(fn, tuning)``; the timed region then calls
  ``fn`` only, so autotuning never lands inside it.

Under ``TRITON_INTERPRET=1`` (set before this module is imported) the kernel runs on the
CPU through Triton's interpreter, on CPU tensors, for the tests. The interpreter computes
bf16 ``tl.dot`` wrongly without an error, so CPU tests use fp16 only.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Callable

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from .. import _validate
from .attention_args import tensor_iv
from .triton_kernels import _attn_fwd, _attn_fwd_persist

__all__ = ["INTERPRETED", "LOG2E", "HEAD_DIMS", "DTYPES", "CONFIG_KEYS", "TUNING_KEYS",
           "DEFAULT_CONFIGS", "INTERPRETER_CONFIG", "attention", "tune", "precompile", "build"]

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"
LOG2E = 1.4426950408889634
HEAD_DIMS = (64, 128)
DTYPES = (torch.float16, torch.bfloat16)
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "EXP_F16", "PERSIST",
               "LAZY_RESCALE", "POLY_EXP", "WARP_SPEC", "DUAL", "MAXNREG", "SKIP_TAIL")
# Variant switches (notes/triton_kernel.md, "Session i17"), all off in the defaults:
# PERSIST: 0 = one program per query tile; n > 0 = a persistent grid of n programs per
#   multiprocessor, each looping over (batch*head, query tile) tiles.
# LAZY_RESCALE: rescale the accumulator only when some row maximum grew by more than
#   2**8 (a block-wide test, one branch); the stale maximum keeps P <= 256, so it is exact.
# POLY_EXP: half of the exponentials (odd columns) by a degree-3 polynomial on the FMA
#   pipes (Cody-Waite split, exponent by integer add) instead of the MUFU unit.
# WARP_SPEC: tl.range(..., warp_specialize=True) on the key loop (Triton's automatic WS).
# DUAL: the BLOCK_M rows as two independent halves in one key loop (two QK^T products,
#   then each half's softmax and PV), so the scheduler can run one half's softmax while
#   the other half's wgmma is in flight (FA3's overlap, inside one program).
# MAXNREG: 0 = the compiler's register count; n = at most n registers per thread (Triton's
#   ``maxnreg``), to fit one more program per multiprocessor.
# SKIP_TAIL: leave the masked key loop out of the compiled kernel where the shape makes it
#   empty (not causal, S a multiple of BLOCK_N); the persistent kernel always does. The
#   empty loop still costs: a copy of the kernel without it ran 4 % faster at the target.
_VARIANT_KEYS = {"PERSIST": (0, 1, 2, 3, 4), "LAZY_RESCALE": (False, True),
                 "POLY_EXP": (False, True),
                 "WARP_SPEC": (False, True), "DUAL": (False, True),
                 "MAXNREG": (0, 96, 128, 160, 168, 192, 232, 255),
                 "SKIP_TAIL": (False, True)}
_VARIANT_OFF = {"PERSIST": 0, "LAZY_RESCALE": False, "POLY_EXP": False,
                "WARP_SPEC": False, "DUAL": False, "MAXNREG": 0, "SKIP_TAIL": False}
# Keys that ``tune`` adds to a configuration; ``attention`` accepts and ignores them.
TUNING_KEYS = ("tuned_ms", "n_tried", "n_failed", "interpreted", "TMA", "fast_launch")
_BLOCKS = (16, 32, 64, 128, 256)
_WARPS = (1, 2, 4, 8, 16)

# Defaults (chosen from the H100 runs in notes/triton_kernel.md). EXP_F16 computes the
# softmax exponentials two at a time in fp16 (a larger, still small, error); it measured
# slower on the H100, so it is off by default and out of the default tuning candidates.
DEFAULT_CONFIGS = {
    64: {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3, "EXP_F16": False,
         **_VARIANT_OFF},
    128: {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "EXP_F16": False,
          **_VARIANT_OFF},
}
INTERPRETER_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 1, "num_stages": 1,
                      "EXP_F16": False, **_VARIANT_OFF}


def _candidates(head_dim: int) -> list[dict]:
    """Default search space for ``tune``: block shapes, warps and stages."""
    shapes = {  # (BLOCK_M, BLOCK_N, num_warps, num_stages)
        64: [(128, 64, 8, 3), (128, 64, 4, 3), (128, 128, 8, 3), (64, 64, 4, 3),
             (128, 32, 4, 3), (64, 32, 4, 2), (128, 64, 8, 4)],
        128: [(128, 128, 8, 3), (128, 64, 8, 3), (64, 64, 4, 3), (128, 128, 8, 2),
              (64, 128, 4, 2), (128, 64, 4, 3)],
    }[head_dim]
    # EXP_F16 stays out of the default search: on the H100 it was slower at every shape
    # timed (notes/triton_kernel.md, run 5); pass candidates with it to try it.
    cands = [{**dict(zip(CONFIG_KEYS, s + (False,))), **_VARIANT_OFF} for s in shapes]
    # Session i17 (H200, B32 H8 S512 D64): a persistent grid, and two row halves per
    # program with a register cap, each ~2 % faster than (128, 64, 8, 3); leaving the empty
    # masked loop out ~4 % (measured on a copy of the kernel). The tuner decides per shape.
    cands.append({**cands[0], "SKIP_TAIL": True})
    if head_dim == 64:
        dual = {**cands[0], "num_warps": 4, "DUAL": True, "MAXNREG": 168}
        cands += [{**cands[0], "PERSIST": 2},
                  {**cands[0], "BLOCK_M": 64, "num_warps": 4, "PERSIST": 3},
                  dual, {**dual, "SKIP_TAIL": True}]
    return cands


# --------------------------------------------------------------------------- validation


def _tensor_iv(name: str, t, ref=None) -> None:
    """Check one of q, k, v, out (:func:`attention_args.tensor_iv`) and that q is on an
    allowed device."""
    tensor_iv(name, t, ref, dtypes=DTYPES, head_dims=HEAD_DIMS)
    if ref is None and t.device.type != "cuda" and not (INTERPRETED and t.device.type == "cpu"):
        raise ValueError(f"`{name}` must be a CUDA tensor (CPU only under "
                         f"TRITON_INTERPRET=1); got device {t.device}.")


def _config_iv(config, head_dim: int) -> dict:
    """Return a full configuration dict; None gives the default for ``head_dim``."""
    if config is None:
        return dict(INTERPRETER_CONFIG if INTERPRETED else DEFAULT_CONFIGS[head_dim])
    if not isinstance(config, dict):
        raise ValueError(f"`config` must be a dict with keys {CONFIG_KEYS} or None; "
                         f"got {type(config).__name__}.")
    unknown = set(config) - set(CONFIG_KEYS) - set(TUNING_KEYS)
    if unknown:
        raise ValueError(f"`config` keys must be among {CONFIG_KEYS}; got {sorted(unknown)}.")
    full = {**DEFAULT_CONFIGS[head_dim], **{k: config[k] for k in CONFIG_KEYS if k in config}}
    for key, allowed in (("BLOCK_M", _BLOCKS), ("BLOCK_N", _BLOCKS), ("num_warps", _WARPS),
                         ("num_stages", tuple(range(1, 9))), ("EXP_F16", (False, True)),
                         *_VARIANT_KEYS.items()):
        is_flag = allowed == (False, True)  # (1 == True: a bool is refused for a number)
        if isinstance(full[key], bool) != is_flag or full[key] not in allowed:
            raise ValueError(f"`config['{key}']` must be one of {allowed}; got {full[key]!r}.")
    if full["EXP_F16"] and full["POLY_EXP"]:
        raise ValueError("`config['POLY_EXP']` needs fp32 exponentials (EXP_F16 False).")
    if full["DUAL"] and (full["LAZY_RESCALE"] or full["WARP_SPEC"] or full["BLOCK_M"] < 32):
        raise ValueError("`config['DUAL']` needs BLOCK_M >= 32 and no LAZY_RESCALE or "
                         "WARP_SPEC.")
    return full


def _attention_iv(q, k, v, causal, sm_scale, config, out):
    """Validate every argument of :func:`attention`; return (scale, config)."""
    _tensor_iv("q", q)
    _tensor_iv("k", k, q)
    _tensor_iv("v", v, q)
    if out is not None:
        _tensor_iv("out", out, q)
    if not isinstance(causal, bool):
        raise ValueError(f"`causal` must be True or False; got {causal!r}.")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(q.shape[3])
    elif (isinstance(sm_scale, bool) or not isinstance(sm_scale, (int, float))
          or not math.isfinite(sm_scale) or sm_scale <= 0):
        raise ValueError(f"`sm_scale` must be a finite positive number or None; "
                         f"got {sm_scale!r}.")
    return float(sm_scale), _config_iv(config, q.shape[3])


# --------------------------------------------------------------------------- public API


def attention(q, k, v, *, causal=False, sm_scale=None, config=None, out=None) -> torch.Tensor:
    """Scaled-dot-product attention forward, ``softmax(q k^T * sm_scale [+ causal]) v``.

    Parameters
    ----------
    q, k, v : torch.Tensor
        Contiguous (B, H, S, D) tensors of one dtype (float16 or bfloat16), D in (64, 128),
        on a CUDA device (or the CPU under ``TRITON_INTERPRET=1``).
    causal : bool
        Mask keys after each query (the upper triangle). Default False.
    sm_scale : float or None
        Scale of the scores; None (default) gives ``1 / sqrt(D)``.
    config : dict or None
        ``BLOCK_M``, ``BLOCK_N``, ``num_warps``, ``num_stages``; missing keys take the
        default for D; the keys :func:`tune` adds are ignored. None gives the default
        (a 16x16 tile under the interpreter).
    out : torch.Tensor or None
        Buffer to write into (same shape, dtype, device as ``q``); allocated if None.

    Returns
    -------
    torch.Tensor
        O of shape (B, H, S, D) in the input dtype (``out`` itself when given).
    """
    scale, cfg = _attention_iv(q, k, v, causal, sm_scale, config, out)
    return _launch(q, k, v, out, causal, scale * LOG2E, cfg)


def _launch(q, k, v, out, causal, qk_scale, cfg, tma=None, return_kernel=False):
    """Launch the kernel on validated arguments. ``tma=None`` picks the copy-engine path
    where it works (Hopper or newer, or the interpreter, with 16-byte aligned tensors)."""
    if out is None:
        out = torch.empty_like(q)
    if tma is None:
        tma = _tma_ok(q.device) and all(t.data_ptr() % 16 == 0 for t in (q, k, v, out))
    QR, BN = _q_rows(cfg), cfg["BLOCK_N"]
    args = (*_descriptors(q, k, v, QR, BN), _descriptor(out, QR)) if tma else (q, k, v, out)
    jit_fn, grid, scalars, consts = _plan(q, causal, qk_scale, cfg, tma)
    extra = {"maxnreg": cfg["MAXNREG"]} if cfg["MAXNREG"] and not INTERPRETED else {}
    kernel = jit_fn[grid](*args, *scalars, **consts, num_warps=cfg["num_warps"],
                          num_stages=cfg["num_stages"], **extra)
    return (out, kernel, args) if return_kernel else out


def _plan(q, causal, qk_scale, cfg, tma):
    """(jit function, grid, runtime scalars, constexpr values in signature order)."""
    B, H, S, D = q.shape
    BM, BN = cfg["BLOCK_M"], cfg["BLOCK_N"]
    consts = dict(BLOCK_M=BM, BLOCK_N=BN, HEAD_DIM=D, CAUSAL=causal, TMA=tma,
                  EXP16=cfg["EXP_F16"], INTERP=INTERPRETED)
    variant = dict(LAZY=cfg["LAZY_RESCALE"], POLY=cfg["POLY_EXP"], WS=cfg["WARP_SPEC"])
    even = (not causal) and S % BN == 0  # the masked key loop would be empty
    if not cfg["PERSIST"]:
        grid = (triton.cdiv(S, BM), B * H, 1)
        if any(variant.values()) or cfg["DUAL"] or cfg["SKIP_TAIL"]:
            consts.update(EVEN=cfg["SKIP_TAIL"] and even, **variant, DUAL=cfg["DUAL"])
        return _attn_fwd, grid, (S, qk_scale), consts
    n_m = triton.cdiv(S, BM)
    n_tiles = n_m * B * H
    consts.update(EVEN=even, **variant, DUAL=cfg["DUAL"])
    grid = (min(n_tiles, cfg["PERSIST"] * _num_sms(q.device)), 1, 1)
    return _attn_fwd_persist, grid, (S, qk_scale, n_m, n_tiles), consts


@functools.lru_cache(maxsize=None)
def _num_sms(device) -> int:
    """Multiprocessors of the device; 3 under the interpreter (so that programs of a
    persistent grid loop over several tiles in the CPU tests)."""
    if device.type != "cuda":
        return 3
    return torch.cuda.get_device_properties(device).multi_processor_count


def _q_rows(cfg) -> int:
    """Rows of the Q and O tiles one load or store moves: half the block with DUAL."""
    return cfg["BLOCK_M"] // 2 if cfg["DUAL"] else cfg["BLOCK_M"]


def _descriptor(t, rows):
    """Tensor descriptor of a contiguous (B, H, S, D) tensor as (B*H, S, D), tile 1 x rows x D."""
    B, H, S, D = t.shape
    return TensorDescriptor(t, [B * H, S, D], [S * D, D, 1], [1, rows, D])


def _descriptors(q, k, v, block_m, block_n):
    return _descriptor(q, block_m), _descriptor(k, block_n), _descriptor(v, block_n)


def _fast_fn(q, k, v, causal, cfg):
    """Return ``fn(q, k, v)`` that launches the already compiled kernel directly, skipping
    Triton's per-call argument binding (tens of microseconds of host time), or None.

    The fast path serves only inputs like the ones built with (shape, dtype, device,
    contiguous, 16-byte aligned), for which the compiled specialisation is valid; others go
    through :func:`attention`. Descriptors of the last (q, k, v) are reused when the same
    tensor objects come back (holding references to them, so their memory stays theirs).
    It is checked once here, bit for bit, against :func:`attention`.
    """
    if INTERPRETED:
        return None
    B, H, S, D = shape = q.shape
    dtype, device = q.dtype, q.device
    qk_scale = LOG2E / math.sqrt(D)
    QR, BN = _q_rows(cfg), cfg["BLOCK_N"]
    ref = attention(q, k, v, causal=causal, config=cfg)
    out, kernel, args = _launch(q, k, v, torch.empty_like(q), causal, qk_scale, cfg,
                                return_kernel=True)
    tma = isinstance(args[0], TensorDescriptor)
    _, grid, scalars, const_vals = _plan(q, causal, qk_scale, cfg, tma)
    run = kernel[grid]
    consts = (*scalars, *const_vals.values())
    last = [None, None, None, None]  # q, k, v, their descriptors

    def fn(q, k, v):
        if not (q.shape == shape and k.shape == shape and v.shape == shape
                and q.dtype == dtype and k.dtype == dtype and v.dtype == dtype
                and q.device == device and k.device == device and v.device == device
                and q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
                and q.data_ptr() % 16 == 0 and k.data_ptr() % 16 == 0
                and v.data_ptr() % 16 == 0):
            return attention(q, k, v, causal=causal, config=cfg)
        out = torch.empty_like(q)
        if not tma:
            run(q, k, v, out, *consts)
            return out
        if not (q is last[0] and k is last[1] and v is last[2]):
            last[:] = q, k, v, _descriptors(q, k, v, QR, BN)
        run(*last[3], _descriptor(out, QR), *consts)
        return out

    try:
        got = fn(q, k, v)
        ok = torch.equal(got, ref)
    except Exception:  # noqa: BLE001  (a Triton version whose launcher differs)
        ok = False
    return fn if ok else None


@functools.lru_cache(maxsize=None)
def _tma_ok(device) -> bool:
    """Tensor descriptors: the interpreter, or a CUDA device of compute capability >= 9."""
    if device.type != "cuda":
        return INTERPRETED
    return torch.cuda.get_device_capability(device)[0] >= 9


def _next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def tune(q, k, v, *, causal=False, candidates=None, warmup_ms=10, rep_ms=40) -> dict:
    """Time candidate configurations on these inputs; return the fastest.

    Each candidate is compiled and run once (outside the timing), its output checked for
    NaN, then timed as ``build`` would return it (the direct launcher, see ``_fast_fn``)
    with ``triton.testing.do_bench`` (median, L2 flushed before each call); the three
    fastest are timed again, three times longer, and the fastest of that second look wins.
    Candidates that fail to compile, exceed shared memory or write NaN are skipped.
    Blocks much larger than the sequence are dropped first (at least one candidate stays).

    Returns
    -------
    dict
        The fastest configuration (``CONFIG_KEYS``) plus ``tuned_ms`` (its median ms in
        the second, longer timing of the three fastest), ``n_tried`` (candidates timed),
        ``n_failed`` (candidates skipped on error) and ``TMA`` (copy-engine path used).
    """
    cands = _tuning_candidates(q, k, v, causal, candidates, "tune")
    out = torch.empty_like(q)

    def bench(fn, rep):
        return triton.testing.do_bench(lambda: fn(q, k, v), warmup=warmup_ms, rep=rep,
                                       return_mode="median")

    timed, n_failed = [], 0
    for cfg in cands:
        try:
            out.fill_(float("nan"))
            attention(q, k, v, causal=causal, config=cfg, out=out)  # compiles
            torch.cuda.synchronize()
            if torch.isnan(out).any().item():
                n_failed += 1
                continue
            # Time what `build` would return: the direct launcher where it works, so that
            # Triton's per-call dispatch (tens of us of host time) stays out of the numbers.
            fn = _fast_fn(q, k, v, causal, cfg) or (
                lambda q, k, v, cfg=cfg: attention(q, k, v, causal=causal, config=cfg))
            timed.append((bench(fn, rep_ms), cfg, fn))
        except Exception:  # compile error, out of shared memory or registers  # noqa: BLE001
            n_failed += 1
    if not timed:
        raise RuntimeError(f"every one of {len(cands)} candidate configurations failed.")
    # Second, longer look at the three fastest: one short median is noisy at small shapes.
    timed.sort(key=lambda t: t[0])
    final = sorted(((bench(fn, 3 * rep_ms), cfg) for _, cfg, fn in timed[:3]),
                   key=lambda t: t[0])
    best_ms, best = final[0]
    tma = _tma_ok(q.device) and all(t.data_ptr() % 16 == 0 for t in (q, k, v))
    return {**best, "tuned_ms": float(best_ms), "n_tried": len(timed), "n_failed": n_failed,
            "TMA": tma}


def _tuning_candidates(q, k, v, causal, candidates, verb: str) -> list[dict]:
    """The configurations ``tune`` (and ``precompile``) try on these inputs: ``candidates``
    (None: the default search space for D) validated, without blocks much larger than the
    sequence (at least one candidate stays)."""
    _attention_iv(q, k, v, causal, None, None, None)
    D, S = q.shape[3], q.shape[2]
    if candidates is None:
        candidates = _candidates(D)
    if not isinstance(candidates, (list, tuple)) or not candidates:
        raise ValueError("`candidates` must be a non-empty list of config dicts or None.")
    cands = [_config_iv(c, D) for c in candidates]
    if INTERPRETED:
        raise RuntimeError(f"`{verb}` runs on a GPU; under TRITON_INTERPRET=1 use `build`.")
    cap = max(16, _next_pow2(S))
    fitting = [c for c in cands if c["BLOCK_M"] <= cap and c["BLOCK_N"] <= cap]
    return fitting or cands


def precompile(q, k, v, *, causal=False, candidates=None, start=0) -> dict:
    """Compile every configuration ``tune`` would try on these inputs, into Triton's cache
    on disk, and time nothing: each is run once, as ``tune`` first runs it. A later
    ``tune`` in another process then loads the kernels instead of compiling them
    (:mod:`.prebuild` calls this before a sweep's first process). Returns ``n_compiled``
    and ``n_failed`` (configurations that fail to compile or to run; ``tune`` skips them).

    They are run from the ``start``-th on (an integer >= 0, modulo their number), wrapping
    around. Shapes that differ in batch, heads or a sequence length the blocks divide
    share kernels: the prebuild's workers, which take several shapes at once, each begin
    where their configuration's key says and load from the cache what the others
    compiled, instead of all compiling the same ones side by side.
    """
    start = _validate.integer("start", start, minimum=0)
    cands = _tuning_candidates(q, k, v, causal, candidates, "precompile")
    cands = cands[start % len(cands):] + cands[:start % len(cands)]
    out = torch.empty_like(q)
    n_failed = 0
    for cfg in cands:
        try:
            attention(q, k, v, causal=causal, config=cfg, out=out)
        except Exception:  # the same failures `tune` skips  # noqa: BLE001
            n_failed += 1
    torch.cuda.synchronize()
    return {"n_compiled": len(cands) - n_failed, "n_failed": n_failed}


def build(q, k, v, *, causal=False, config=None) -> tuple[Callable, dict]:
    """Tune once on these inputs; return ``(fn, tuning)`` with ``fn(q, k, v) -> out``.

    With ``config`` (a tuning dict an earlier build returned) no tuning is done: the
    configuration is reused, so every trial of a sweep times the same kernel the same way.

    ``fn`` runs the tuned configuration, so all tuning happens here and never inside a
    timed region. On a GPU ``fn`` launches the compiled kernel directly for inputs like
    these (``tuning['fast_launch']``; see ``_fast_fn``) and calls :func:`attention` for
    any others. Under ``TRITON_INTERPRET=1`` no timing is done
    and the small interpreter configuration is used (``tuning['interpreted']`` is True).
    """
    if INTERPRETED:
        _attention_iv(q, k, v, causal, None, None, None)
        tuning = {**INTERPRETER_CONFIG, "tuned_ms": None, "n_tried": 0, "n_failed": 0,
                  "interpreted": True, "TMA": True}
    elif config is not None:
        _config_iv({key: config[key] for key in CONFIG_KEYS if key in config}, q.shape[-1])
        tuning = dict(config, reused=True)
    else:
        tuning = tune(q, k, v, causal=causal)
    cfg = {key: tuning[key] for key in CONFIG_KEYS}
    fast = _fast_fn(q, k, v, causal, cfg)
    tuning["fast_launch"] = fast is not None
    if fast is not None:
        return fast, tuning

    def fn(q, k, v):
        return attention(q, k, v, causal=causal, config=cfg)

    return fn, tuning
