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
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

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


# --------------------------------------------------------------------------- kernel


@triton.jit
def _poly_exp2(x):
    """2**x of an fp32 tile with x <= 0 on the FMA and integer pipes, not the MUFU unit.

    x is clamped to -125 (2**-125 instead of smaller values or 0 for -inf: far below what
    fp16/bf16 P or the fp32 row sum resolve). Cody-Waite split x = j + f with j = round(x)
    by the 1.5 * 2**23 trick, f in [-1/2, 1/2]; 2**f by a degree-3 polynomial (relative
    error 1.0e-4, a fifth of fp16's half ulp); 2**j by adding j to the exponent bits."""
    x = tl.maximum(x, -125.0)
    t = x + 12582912.0  # low mantissa bits of t hold round(x)
    f = x - (t - 12582912.0)
    p = f * 0.05500893 + 0.24221098
    p = p * f + 0.6932829
    p = p * f + 1.0
    bits = p.to(tl.int32, bitcast=True) + (t.to(tl.int32, bitcast=True) << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _exp2(x, EXP16: tl.constexpr, POLY: tl.constexpr, INTERP: tl.constexpr):
    """2**x of an fp32 tile. EXP16: two at a time in fp16 (``ex2.approx.f16x2``, half the
    special-function work, fp16 result); under the interpreter, emulated by rounding.
    POLY (fp32 only): the odd columns by ``_poly_exp2``, the even ones by the MUFU unit
    (each thread holds column pairs of the wgmma accumulator, so the split is free)."""
    if EXP16:
        if INTERP:
            return tl.math.exp2(x.to(tl.float16).to(tl.float32)).to(tl.float16)
        else:
            return tl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r",
                                             [x.to(tl.float16)], dtype=tl.float16,
                                             is_pure=True, pack=2)
    elif POLY:
        BM: tl.constexpr = x.shape[0]
        BN: tl.constexpr = x.shape[1]
        even, odd = x.reshape([BM, BN // 2, 2]).split()
        return tl.join(tl.math.exp2(even), _poly_exp2(odd)).reshape([BM, BN])
    else:
        return tl.math.exp2(x)


@triton.jit
def _tile(src, bh, base, start, S, ROWS: tl.constexpr, HEAD_DIM: tl.constexpr,
          TMA: tl.constexpr, MASKED: tl.constexpr):
    """Rows ``[start, start + ROWS)`` of one head as a (ROWS, HEAD_DIM) tile, zero past S.

    TMA: ``src`` is a descriptor over the (B*H, S, D) view; the copy engine zero-fills
    rows past S. Otherwise ``src`` is a pointer and ``base`` the head's element offset."""
    if TMA:
        return src.load([bh, start, 0]).reshape(ROWS, HEAD_DIM)
    else:
        rows = start + tl.arange(0, ROWS)
        ptrs = src + base + rows[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
        if MASKED:
            return tl.load(ptrs, mask=rows[:, None] < S, other=0.0)
        else:
            return tl.load(ptrs)


@triton.jit
def _masked_scores(qk, offs_m, start_n, S, qk_scale, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr):
    """Scaled scores of a key tile with the keys past ``S`` (and, if causal, above the
    diagonal) set to -inf."""
    cols = start_n + tl.arange(0, BLOCK_N)
    keep = cols[None, :] < S
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= cols[None, :])
    return tl.where(keep, qk * qk_scale, float("-inf"))


@triton.jit
def _kv_loop(acc, l_i, m_i, q, Ks, Vs, bh, base, offs_m, lo, hi, S, qk_scale,
             BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr,
             CAUSAL: tl.constexpr, TMA: tl.constexpr, EXP16: tl.constexpr,
             INTERP: tl.constexpr, LAZY: tl.constexpr = False, POLY: tl.constexpr = False,
             WS: tl.constexpr = False):
    """Fold key/value tiles ``[lo, hi)`` into the running (acc, l, m) of one query tile.

    LAZY: the running maximum m moves (and acc, l are rescaled) only in iterations where
    some row's tile maximum exceeds it by more than 8 (log2 units); otherwise P is taken
    against the stale m, so P <= 2**8 and the result is the same up to rounding."""
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        k = _tile(Ks, bh, base, start_n, S, BLOCK_N, HEAD_DIM, TMA, MASKED)
        v = _tile(Vs, bh, base, start_n, S, BLOCK_N, HEAD_DIM, TMA, MASKED)
        qk = tl.dot(q, k.T)  # (BLOCK_M, BLOCK_N), fp32 accumulation
        if LAZY:
            if MASKED:
                qk = _masked_scores(qk, offs_m, start_n, S, qk_scale, BLOCK_N, CAUSAL)
                m_tile = tl.max(qk, 1)
            else:
                m_tile = tl.max(qk, 1) * qk_scale
            if tl.max(m_tile - m_i, 0) > 8.0:  # block-wide: one uniform branch
                m_new = tl.maximum(m_i, m_tile)
                alpha = tl.math.exp2(m_i - m_new)
                acc = acc * alpha[:, None]
                l_i = l_i * alpha
                m_i = m_new
            if MASKED:
                p = _exp2(qk - m_i[:, None], EXP16, POLY, INTERP)
            else:
                p = _exp2(qk * qk_scale - m_i[:, None], EXP16, POLY, INTERP)
            l_i = l_i + tl.sum(p.to(tl.float32), 1)
            acc = tl.dot(p.to(v.dtype), v, acc)
        else:
            # As _softmax_pv, but acc is rescaled before P is converted for the product:
            # the order of the measured default kernel (the PTX differs otherwise).
            if MASKED:
                qk = _masked_scores(qk, offs_m, start_n, S, qk_scale, BLOCK_N, CAUSAL)
                m_new = tl.maximum(m_i, tl.max(qk, 1))
                p = _exp2(qk - m_new[:, None], EXP16, POLY, INTERP)
            else:  # scale and subtract fuse into one FMA per score
                m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                p = _exp2(qk * qk_scale - m_new[:, None], EXP16, POLY, INTERP)
            alpha = tl.math.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p.to(tl.float32), 1)
            acc = acc * alpha[:, None]
            acc = tl.dot(p.to(v.dtype), v, acc)
            m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _softmax_pv(qk, acc, l_i, m_i, v, offs_m, start_n, S, qk_scale, BLOCK_N: tl.constexpr,
                MASKED: tl.constexpr, CAUSAL: tl.constexpr, EXP16: tl.constexpr,
                POLY: tl.constexpr, INTERP: tl.constexpr):
    """One key tile's online-softmax update of (acc, l, m) from the scores ``qk``."""
    if MASKED:
        qk = _masked_scores(qk, offs_m, start_n, S, qk_scale, BLOCK_N, CAUSAL)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = _exp2(qk - m_new[:, None], EXP16, POLY, INTERP)
    else:  # scale and subtract fuse into one FMA per score
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = _exp2(qk * qk_scale - m_new[:, None], EXP16, POLY, INTERP)
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p.to(tl.float32), 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def _kv_loop_dual(acc_a, l_a, m_a, acc_b, l_b, m_b, q_a, q_b, Ks, Vs, bh, base, offs_a,
                  offs_b, lo, hi, S, qk_scale, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                  MASKED: tl.constexpr, CAUSAL: tl.constexpr, TMA: tl.constexpr,
                  EXP16: tl.constexpr, POLY: tl.constexpr, INTERP: tl.constexpr):
    """``_kv_loop`` for two independent row halves sharing each K/V tile: both QK^T
    products are issued first, so half a's softmax can overlap half b's product and
    half b's softmax half a's PV product."""
    for start_n in range(lo, hi, BLOCK_N):
        k = _tile(Ks, bh, base, start_n, S, BLOCK_N, HEAD_DIM, TMA, MASKED)
        v = _tile(Vs, bh, base, start_n, S, BLOCK_N, HEAD_DIM, TMA, MASKED)
        qk_a = tl.dot(q_a, k.T)
        qk_b = tl.dot(q_b, k.T)
        acc_a, l_a, m_a = _softmax_pv(qk_a, acc_a, l_a, m_a, v, offs_a, start_n, S, qk_scale,
                                      BLOCK_N, MASKED, CAUSAL, EXP16, POLY, INTERP)
        acc_b, l_b, m_b = _softmax_pv(qk_b, acc_b, l_b, m_b, v, offs_b, start_n, S, qk_scale,
                                      BLOCK_N, MASKED, CAUSAL, EXP16, POLY, INTERP)
    return acc_a, l_a, m_a, acc_b, l_b, m_b


@triton.jit
def _store_rows(Os, o, bh, base, start, S, ROWS: tl.constexpr, HEAD_DIM: tl.constexpr,
                TMA: tl.constexpr):
    if TMA:  # the copy engine clips rows past S
        Os.store([bh, start, 0], o.reshape(1, ROWS, HEAD_DIM))
    else:
        offs = start + tl.arange(0, ROWS)
        tl.store(Os + base + offs[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :], o,
                 mask=offs[:, None] < S)


@triton.jit
def _key_range(start_m, S, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr):
    """Keys a query tile starting at row ``start_m`` reads: ``end`` (exclusive) and
    ``full_end``, the end of the key tiles that need no mask (whole, and below the
    diagonal if causal); the masked loop covers ``[full_end, end)``."""
    if CAUSAL:
        end = tl.minimum(start_m + BLOCK_M, S)
        full_end = (tl.minimum(start_m, S) // BLOCK_N) * BLOCK_N
    else:
        end = S
        full_end = (S // BLOCK_N) * BLOCK_N
    return end, full_end


@triton.jit
def _one_tile_dual(Qs, Ks, Vs, Os, bh, pid_m, S, qk_scale,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                   CAUSAL: tl.constexpr, TMA: tl.constexpr, EXP16: tl.constexpr,
                   INTERP: tl.constexpr, EVEN: tl.constexpr, POLY: tl.constexpr):
    """``_one_tile`` with the rows as two halves of BLOCK_M // 2 (see ``_kv_loop_dual``);
    Q and O descriptors then have BLOCK_M // 2 rows."""
    HALF: tl.constexpr = BLOCK_M // 2
    base = bh.to(tl.int64) * S * HEAD_DIM
    start_m = pid_m * BLOCK_M
    offs_a = start_m + tl.arange(0, HALF)
    offs_b = start_m + HALF + tl.arange(0, HALF)
    q_a = _tile(Qs, bh, base, start_m, S, HALF, HEAD_DIM, TMA, True)
    q_b = _tile(Qs, bh, base, start_m + HALF, S, HALF, HEAD_DIM, TMA, True)
    m_a = tl.full([HALF], float("-inf"), dtype=tl.float32)
    l_a = tl.zeros([HALF], dtype=tl.float32)
    acc_a = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
    m_b = tl.full([HALF], float("-inf"), dtype=tl.float32)
    l_b = tl.zeros([HALF], dtype=tl.float32)
    acc_b = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
    end, full_end = _key_range(start_m, S, BLOCK_M, BLOCK_N, CAUSAL)
    acc_a, l_a, m_a, acc_b, l_b, m_b = _kv_loop_dual(
        acc_a, l_a, m_a, acc_b, l_b, m_b, q_a, q_b, Ks, Vs, bh, base, offs_a, offs_b, 0,
        full_end, S, qk_scale, BLOCK_N, HEAD_DIM, False, CAUSAL, TMA, EXP16, POLY, INTERP)
    if not EVEN:
        acc_a, l_a, m_a, acc_b, l_b, m_b = _kv_loop_dual(
            acc_a, l_a, m_a, acc_b, l_b, m_b, q_a, q_b, Ks, Vs, bh, base, offs_a, offs_b,
            full_end, end, S, qk_scale, BLOCK_N, HEAD_DIM, True, CAUSAL, TMA, EXP16, POLY,
            INTERP)
    _store_rows(Os, (acc_a / l_a[:, None]).to(q_a.dtype), bh, base, start_m, S, HALF,
                HEAD_DIM, TMA)
    _store_rows(Os, (acc_b / l_b[:, None]).to(q_b.dtype), bh, base, start_m + HALF, S, HALF,
                HEAD_DIM, TMA)


@triton.jit
def _one_tile(Qs, Ks, Vs, Os, bh, pid_m, S, qk_scale,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
              CAUSAL: tl.constexpr, TMA: tl.constexpr, EXP16: tl.constexpr,
              INTERP: tl.constexpr, EVEN: tl.constexpr, LAZY: tl.constexpr,
              POLY: tl.constexpr, WS: tl.constexpr):
    """Query rows ``[pid_m * BLOCK_M, +BLOCK_M)`` of head ``bh``: load, both key loops, store.
    EVEN (not causal, S a multiple of BLOCK_N): the masked loop would be empty; left out."""
    base = bh.to(tl.int64) * S * HEAD_DIM
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = _tile(Qs, bh, base, start_m, S, BLOCK_M, HEAD_DIM, TMA, True)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    end, full_end = _key_range(start_m, S, BLOCK_M, BLOCK_N, CAUSAL)
    # Unmasked tiles first, so every row has seen key 0 (a finite max) before masking.
    acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q, Ks, Vs, bh, base, offs_m, 0, full_end, S,
                             qk_scale, BLOCK_N, HEAD_DIM, False, CAUSAL, TMA, EXP16, INTERP,
                             LAZY, POLY, WS)
    if not EVEN:
        acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q, Ks, Vs, bh, base, offs_m, full_end, end,
                                 S, qk_scale, BLOCK_N, HEAD_DIM, True, CAUSAL, TMA, EXP16,
                                 INTERP, LAZY, POLY, False)
    o = (acc / l_i[:, None]).to(q.dtype)
    if TMA:  # the copy engine clips rows past S
        Os.store([bh, start_m, 0], o.reshape(1, BLOCK_M, HEAD_DIM))
    else:
        tl.store(Os + base + offs_m[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :], o,
                 mask=offs_m[:, None] < S)


@triton.jit
def _attn_fwd(Qs, Ks, Vs, Os, S, qk_scale,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
              CAUSAL: tl.constexpr, TMA: tl.constexpr, EXP16: tl.constexpr,
              INTERP: tl.constexpr, EVEN: tl.constexpr = False, LAZY: tl.constexpr = False,
              POLY: tl.constexpr = False, WS: tl.constexpr = False, DUAL: tl.constexpr = False):
    """Grid (cdiv(S, BLOCK_M), B*H) over contiguous (B, H, S, D) tensors (or descriptors)."""
    pid_m = tl.program_id(0)
    if CAUSAL:  # longest rows first: better tail balance
        pid_m = tl.num_programs(0) - 1 - pid_m
    if DUAL:
        _one_tile_dual(Qs, Ks, Vs, Os, tl.program_id(1), pid_m, S, qk_scale, BLOCK_M,
                       BLOCK_N, HEAD_DIM, CAUSAL, TMA, EXP16, INTERP, EVEN, POLY)
    else:
        _one_tile(Qs, Ks, Vs, Os, tl.program_id(1), pid_m, S, qk_scale, BLOCK_M, BLOCK_N,
                  HEAD_DIM, CAUSAL, TMA, EXP16, INTERP, EVEN, LAZY, POLY, WS)


@triton.jit
def _attn_fwd_persist(Qs, Ks, Vs, Os, S, qk_scale, n_m, n_tiles,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                      CAUSAL: tl.constexpr, TMA: tl.constexpr, EXP16: tl.constexpr,
                      INTERP: tl.constexpr, EVEN: tl.constexpr, LAZY: tl.constexpr,
                      POLY: tl.constexpr, WS: tl.constexpr, DUAL: tl.constexpr):
    """Persistent grid: program p handles tiles p, p + P, p + 2P, ... of the n_tiles =
    n_m * B*H (query tile fastest, so programs running together share K/V in L2; causal:
    query tiles in reverse, longest rows first). (``tl.range(..., flatten=True)`` here,
    to pipeline across tiles, failed to compile with descriptors and gave wrong results
    with pointers on Triton 3.6: notes/triton_kernel.md, session i17.)"""
    for tile in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        bh = tile // n_m
        pid_m = tile % n_m
        if CAUSAL:
            pid_m = n_m - 1 - pid_m
        if DUAL:
            _one_tile_dual(Qs, Ks, Vs, Os, bh, pid_m, S, qk_scale, BLOCK_M, BLOCK_N,
                           HEAD_DIM, CAUSAL, TMA, EXP16, INTERP, EVEN, POLY)
        else:
            _one_tile(Qs, Ks, Vs, Os, bh, pid_m, S, qk_scale, BLOCK_M, BLOCK_N, HEAD_DIM,
                      CAUSAL, TMA, EXP16, INTERP, EVEN, LAZY, POLY, WS)


# --------------------------------------------------------------------------- validation


def _tensor_iv(name: str, t, ref=None) -> None:
    """Check one of q, k, v, out: a 4-D contiguous fp16/bf16 tensor on an allowed device."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"`{name}` must be a torch.Tensor; got {type(t).__name__}.")
    if ref is None:
        if t.dtype not in DTYPES:
            raise ValueError(f"`{name}` dtype must be torch.float16 or torch.bfloat16; "
                             f"got {t.dtype}.")
        if t.dim() != 4:
            raise ValueError(f"`{name}` must be 4-D (B, H, S, D); got shape {tuple(t.shape)}.")
        if t.shape[3] not in HEAD_DIMS:
            raise ValueError(f"`{name}` head dim (last axis) must be one of {HEAD_DIMS}; "
                             f"got {t.shape[3]}.")
        if min(t.shape) < 1:
            raise ValueError(f"`{name}` must have B, H, S >= 1; got shape {tuple(t.shape)}.")
        if t.device.type != "cuda" and not (INTERPRETED and t.device.type == "cpu"):
            raise ValueError(f"`{name}` must be a CUDA tensor (CPU only under "
                             f"TRITON_INTERPRET=1); got device {t.device}.")
    else:
        if t.dtype != ref.dtype:
            raise ValueError(f"`{name}` dtype must equal `q` dtype {ref.dtype}; got {t.dtype}.")
        if t.shape != ref.shape:
            raise ValueError(f"`{name}` shape must equal `q` shape {tuple(ref.shape)}; "
                             f"got {tuple(t.shape)}.")
        if t.device != ref.device:
            raise ValueError(f"`{name}` must be on `q`'s device {ref.device}; got {t.device}.")
    if not t.is_contiguous():
        raise ValueError(f"`{name}` must be contiguous; call .contiguous() first.")


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
    _attention_iv(q, k, v, causal, None, None, None)
    D, S = q.shape[3], q.shape[2]
    if candidates is None:
        candidates = _candidates(D)
    if not isinstance(candidates, (list, tuple)) or not candidates:
        raise ValueError("`candidates` must be a non-empty list of config dicts or None.")
    cands = [_config_iv(c, D) for c in candidates]
    if INTERPRETED:
        raise RuntimeError("`tune` times on a GPU; under TRITON_INTERPRET=1 use `build`.")
    cap = max(16, _next_pow2(S))
    fitting = [c for c in cands if c["BLOCK_M"] <= cap and c["BLOCK_N"] <= cap]
    cands = fitting or cands
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
