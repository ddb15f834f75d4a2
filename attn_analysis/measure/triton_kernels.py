"""The Triton kernels of our attention forward (:mod:`.triton_attention` holds what launches,
tunes and checks them): the online-softmax loop over key tiles, unmasked and masked, one or
two query-row halves per program, and the persistent grid. ``INTERP`` (Triton's CPU
interpreter, ``TRITON_INTERPRET=1`` before import) replaces what the interpreter lacks.
"""

import triton
import triton.language as tl

# Nothing public: triton_attention launches _attn_fwd and _attn_fwd_persist.
__all__: list[str] = []


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
