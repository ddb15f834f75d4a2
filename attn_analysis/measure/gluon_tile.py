"""The Gluon pieces of one tile of our FA3-style Hopper attention forward: which tiles a
program works on, its layouts, rows and Q buffer, TMA loads of a key tile into the K/V ring,
the mask, the online-softmax step, the steps of the intra-warpgroup overlap, the walk over a
tile's key tiles (``_consume_tile``, with or without a producer warp, ping-pong turns and
the overlap) and the epilogue's TMA store.

Why a module of its own: these are the building blocks every schedule of
:mod:`.gluon_kernels` (the partitions and the entry point) and the cross-tile consumer of
:mod:`.gluon_xtile` call, one copy each; keeping them apart keeps each file about one
thing and under the size limit. The Gluon import lives here, guarded: importing this module
needs neither triton nor a GPU (:data:`GLUON_IMPORT_ERROR` says what is missing, and the
``@gluon.jit`` functions are then not defined). The code is written against Triton 3.6's
Gluon API; every piece has run on a GPU and passed a float64 grid (``notes/gluon-plan.md``),
KV_SPLIT's V barriers (issue 43's second round) included; those have not yet run under the
concurrency sanitizer.
"""

from __future__ import annotations

__all__ = ["GLUON_IMPORT_ERROR", "TRITON_VERSION", "EXP2_POLY"]

# 2**f on [0, 1) as 1 + c1 f + c2 f^2 + c3 f^3: a degree-3 fit of the relative error with
# the constant held at 1 (Lawson's iteration on Chebyshev points, float32 coefficients).
# Its largest relative error is 8.6e-5, under fp16's rounding of P (4.9e-4); holding c0 at 1
# keeps p >= 1, so x = -127 gives exactly 0 and no exponent underflows into the sign bit.
# gluon_attention.exp2_poly_reference is its torch twin; tests/test_gluon_attention.py
# checks both.
EXP2_POLY = (1.0, 0.6951168179512024, 0.22764495015144348, 0.077067069709301)


GLUON_IMPORT_ERROR: str | None  # why Gluon's Hopper API is not importable, or None
TRITON_VERSION: str | None  # triton.__version__ where Gluon imports, else None

try:  # Gluon ships with Triton >= 3.4; the package's analysis side must not need it.
    import triton
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    GLUON_IMPORT_ERROR = None
    TRITON_VERSION = triton.__version__
except Exception as _exc:  # ImportError, or a Triton without Gluon's Hopper API  # noqa: BLE001
    triton = gluon = gl = None
    GLUON_IMPORT_ERROR = f"{type(_exc).__name__}: {_exc}"
    TRITON_VERSION = None

# ------------------------------------------------------------------- the tile's pieces
# Everything below is defined only where Gluon imports.

if GLUON_IMPORT_ERROR is None:
    @gluon.jit
    def _tile_start(tile, n_m, ROWS: gl.constexpr, CAUSAL: gl.constexpr):
        """(batch*head, first query row) of tile number ``tile``; query tiles fastest, so
        programs running together share K/V in L2; causal: longest rows first."""
        bh = tile // n_m
        pid_m = tile % n_m
        if CAUSAL:
            pid_m = n_m - 1 - pid_m
        return bh, pid_m * ROWS

    @gluon.jit
    def _tile_range(n_m, n_tiles, PERSIST: gl.constexpr):
        """(first tile, step) of this program's tiles: persistent, every ``num_programs``-th
        tile from its id; else the one tile of its (query tile, batch*head) grid cell."""
        if PERSIST:
            first = gl.program_id(0)
            step = gl.num_programs(0)
        else:
            first = gl.program_id(1) * n_m + gl.program_id(0)
            step = n_tiles
        return first, step

    @gluon.jit
    def _n_kv(start_m, S, ROWS: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        """Key tiles a tile of ROWS query rows starting at ``start_m`` walks."""
        if CAUSAL:
            end = gl.minimum(start_m + ROWS, S)
        else:
            end = S
        return gl.cdiv(end, BLOCK_N)

    @gluon.constexpr_function
    def _acc_layout(num_warps, cols):
        """wgmma's fp32 accumulator layout of a [rows, cols] tile over ``num_warps`` warps:
        the scores' at cols = BLOCK_N, the output's at cols = HEAD_DIM."""
        return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                         instr_shape=[16, cols, 16])

    @gluon.constexpr_function
    def _p_layout(o_layout):
        """P's layout as the register operand of the PV product into ``o_layout``."""
        return gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)

    @gluon.jit
    def _tile_rows(row0, S, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr,
                   qk_layout: gl.constexpr):
        """(query row of each score row, first key that needs the mask) of the BLOCK_M
        query rows from ``row0``: causal, keys from the first row on; else keys past S."""
        offs_m = row0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, qk_layout))
        if CAUSAL:
            mask_from = gl.minimum(row0, S)
        else:
            mask_from = S
        return offs_m, mask_from

    @gluon.jit
    def _wait_q(q_bufs, q_ready, t_local, BLOCK_M: gl.constexpr, HEAD_DIM: gl.constexpr,
                QBUF: gl.constexpr, CONSUMERS: gl.constexpr, WG: gl.constexpr):
        """(index, 2-D view) of warpgroup WG's Q buffer for the program's tile number
        ``t_local``, once the producer's load has landed (its use count gives the phase)."""
        qi = (t_local % QBUF) * CONSUMERS + WG
        q2 = q_bufs.index(qi).reshape([BLOCK_M, HEAD_DIM])
        mbarrier.wait(q_ready.index(qi), (t_local // QBUF) & 1)
        return qi, q2

    @gluon.jit
    def _issue_kv(k_desc, v_desc, k_bufs, v_bufs, ready_bars, bh, n, ld,
                  BLOCK_N: gl.constexpr, STAGES: gl.constexpr, pred=True,
                  KV_SPLIT: gl.constexpr = 0):
        """TMA loads of key tile ``n`` into ring slot ``ld % STAGES`` (predicated). KV_SPLIT:
        K arrives on the slot's barrier and V on barrier ``STAGES + slot``, so the scores'
        product can start before V has landed; else both on the slot's barrier."""
        slot = ld % STAGES
        bar = ready_bars.index(slot)
        if KV_SPLIT:
            vbar = ready_bars.index(STAGES + slot)
            mbarrier.expect(bar, k_desc.block_type.nbytes, pred=pred)
            mbarrier.expect(vbar, v_desc.block_type.nbytes, pred=pred)
        else:
            vbar = bar
            mbarrier.expect(bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes,
                            pred=pred)
        tma.async_copy_global_to_shared(k_desc, [bh, n * BLOCK_N, 0], bar, k_bufs.index(slot),
                                        pred=pred)
        tma.async_copy_global_to_shared(v_desc, [bh, n * BLOCK_N, 0], vbar,
                                        v_bufs.index(slot), pred=pred)

    @gluon.jit
    def _wait_v(ready_bars, slot, cs, STAGES: gl.constexpr, KV_SPLIT: gl.constexpr):
        """With KV_SPLIT, wait for V of ring slot ``slot`` (consumed as slot count ``cs``);
        without it the slot's one barrier, already waited for, covered V too."""
        if KV_SPLIT:
            mbarrier.wait(ready_bars.index(STAGES + slot), (cs // STAGES) & 1)

    @gluon.jit
    def _scores(qk, start_n, offs_m, mask_from, S, CAUSAL: gl.constexpr,
                BLOCK_N: gl.constexpr, qk_layout: gl.constexpr):
        """Set keys past S (and, causal, after the row's query) to -inf; only key tiles
        reaching ``mask_from`` need it (a uniform branch)."""
        if start_n + BLOCK_N > mask_from:
            cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, qk_layout))
            keep = gl.expand_dims(cols < S, 0)
            if CAUSAL:
                keep = keep & (gl.expand_dims(offs_m, 1) >= gl.expand_dims(cols, 0))
            qk = gl.where(keep, qk, float("-inf"))
        return qk

    _C0 = gl.constexpr(EXP2_POLY[0])
    _C1 = gl.constexpr(EXP2_POLY[1])
    _C2 = gl.constexpr(EXP2_POLY[2])
    _C3 = gl.constexpr(EXP2_POLY[3])

    @gluon.jit
    def _exp2_poly(x):
        """2**x on the FMA and integer pipes (no SFU): ``gluon_attention.exp2_poly_reference``."""
        x = gl.maximum(x, -127.0)
        j = gl.floor(x)
        f = x - j
        p = ((f * _C3 + _C2) * f + _C1) * f + _C0
        bits = p.to(gl.int32, bitcast=True) + (j.to(gl.int32) << 23)
        return bits.to(gl.float32, bitcast=True)

    @gluon.jit
    def _exp2_mixed(x, EXP_SPLIT: gl.constexpr):
        """2**x of a [rows, cols] tile: EXP_SPLIT 0 all on the SFU (ex2); 1 odd columns
        through :func:`_exp2_poly`; 2 a quarter of the columns (the odd columns whose
        column index has bit 3 set). The splits pair columns a thread holds
        (wgmma's accumulator gives a thread column pairs 2i, 2i+1 at strides of 8), so
        they should need no data movement."""
        if EXP_SPLIT == 0:
            y = gl.exp2(x)
        else:
            R: gl.constexpr = x.shape[0]
            C: gl.constexpr = x.shape[1]
            ev, od = x.reshape([R, C // 2, 2]).split()
            if EXP_SPLIT == 1:
                od = _exp2_poly(od)
            else:
                lo, hi = od.reshape([R, C // 16, 2, 4]).permute((0, 1, 3, 2)).split()
                od = gl.join(gl.exp2(lo), _exp2_poly(hi)).permute((0, 1, 3, 2)) \
                    .reshape([R, C // 2])
                od = gl.convert_layout(od, ev.type.layout)  # the same registers
            y = gl.join(gl.exp2(ev), od).reshape([R, C])
            y = gl.convert_layout(y, x.type.layout)
        return y

    @gluon.jit
    def _softmax(qk, m_i, l_i, qk_scale, EXP_SPLIT: gl.constexpr = 0, LSUM: gl.constexpr = 0):
        """Online-softmax update from fp32 scores: (p, alpha, m_new, l_new); LSUM: l_i is
        the row-sum accumulator of the tensor cores, passed through untouched."""
        m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
        p = _exp2_mixed(qk * qk_scale - gl.expand_dims(m_new, 1), EXP_SPLIT)
        alpha = gl.exp2(m_i - m_new)
        l_new = l_i
        if not LSUM:
            l_new = l_i * alpha + gl.sum(p, 1)
        return p, alpha, m_new, l_new

    @gluon.jit
    def _row_sum(p16, ones_smem, l_acc):
        """LSUM: issue ``l_acc += P ones`` (async), the row sums of P (the fp16 P that PV
        multiplies) on the tensor cores; ``ones_smem`` is the [8, keys] ones block."""
        pl = gl.convert_layout(p16, _p_layout(l_acc.type.layout))
        return warpgroup_mma(pl, ones_smem.permute((1, 0)), l_acc, is_async=True)

    @gluon.jit
    def _pp_take(pp_bars, t, WG: gl.constexpr):
        """Wait for ping-pong turn ``t`` of warpgroup WG: warpgroup 0 takes turn t after
        warpgroup 1 handed over turn t - 1 (its first turn is free), warpgroup 1 after
        warpgroup 0 handed over turn t; each hand-over is an arrive on the other's barrier."""
        mbarrier.wait(pp_bars.index(WG), (t & 1) ^ (1 - WG), pred=t > 0 - WG)

    @gluon.jit
    def _lone_scores(q_smem, k_bufs, ready_bars, pp_bars, cs, qk0, start_n, offs_m,
                     mask_from, S, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                     STAGES: gl.constexpr, CAUSAL: gl.constexpr, PINGPONG: gl.constexpr,
                     WG: gl.constexpr):
        """The masked fp32 scores of ring slot ``cs % STAGES`` (keys from ``start_n``), their
        product issued alone in one ping-pong turn: a tile's first key tile with OVERLAP."""
        qk_layout: gl.constexpr = qk0.type.layout
        KV: gl.constexpr = [BLOCK_N, HEAD_DIM]  # a ring slot's 2-D view for wgmma
        slot = cs % STAGES
        mbarrier.wait(ready_bars.index(slot), (cs // STAGES) & 1)
        if PINGPONG:  # every consumed slot takes one turn, so the phases stay paired
            _pp_take(pp_bars, cs, WG)
        qk = warpgroup_mma(q_smem, k_bufs.index(slot).reshape(KV).permute((1, 0)), qk0,
                           use_acc=False, is_async=True)
        if PINGPONG:
            mbarrier.arrive(pp_bars.index(1 - WG), count=1)
        qk = warpgroup_mma_wait(0, deps=[qk])
        return _scores(qk, start_n, offs_m, mask_from, S, CAUSAL, BLOCK_N, qk_layout)

    @gluon.jit
    def _overlap_step(q_smem, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, cs, prev,
                      acc, p16, m_i, l_i, qk0, start_n, offs_m, mask_from, S, qk_scale,
                      HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                      CAUSAL: gl.constexpr, PRODUCER: gl.constexpr, PINGPONG: gl.constexpr,
                      WG: gl.constexpr, EXP_SPLIT: gl.constexpr, KV_SPLIT: gl.constexpr,
                      alpha_o=0, RESCALE: gl.constexpr = 0, ones_smem=0,
                      LSUM: gl.constexpr = 0):
        """One consumed K/V slot with OVERLAP: in one ping-pong turn, the scores of slot
        ``cs % STAGES`` (keys from ``start_n``) and PV of slot ``prev`` (P in ``p16``, into
        ``acc``, first rescaled by ``alpha_o`` with RESCALE); the new scores' exponentials
        while PV runs; then PV's wait and, PRODUCER, the slot's release. ``m_i``/``l_i``:
        the rows' running max and sum (-inf and 0 before a tile's first key tile); LSUM:
        ``l_i`` is the row-sum accumulator, P's sums issued after PV (:func:`_row_sum`).
        Returns (acc, p, alpha, m_new, l_new): the caller rescales acc (LSUM: l) by alpha."""
        qk_layout: gl.constexpr = qk0.type.layout
        KV: gl.constexpr = [BLOCK_N, HEAD_DIM]
        slot = cs % STAGES
        mbarrier.wait(ready_bars.index(slot), (cs // STAGES) & 1)
        if PINGPONG:
            _pp_take(pp_bars, cs, WG)
        qk_tok = warpgroup_mma(q_smem, k_bufs.index(slot).reshape(KV).permute((1, 0)), qk0,
                               use_acc=False, is_async=True)
        if RESCALE:
            acc = acc * gl.expand_dims(alpha_o, 1)
        _wait_v(ready_bars, prev, cs - 1, STAGES, KV_SPLIT)
        acc_tok = warpgroup_mma(p16, v_bufs.index(prev).reshape(KV), acc, is_async=True)
        if LSUM:
            l_tok = _row_sum(p16, ones_smem, l_i)
        if PINGPONG:
            mbarrier.arrive(pp_bars.index(1 - WG), count=1)
        # wgmma groups retire in order: waiting down to one (LSUM: two) leaves PV running.
        qk = warpgroup_mma_wait(1 + LSUM, deps=[qk_tok])
        qk = _scores(qk, start_n, offs_m, mask_from, S, CAUSAL, BLOCK_N, qk_layout)
        p, alpha, m_new, l_new = _softmax(qk, m_i, l_i, qk_scale, EXP_SPLIT, LSUM)
        if LSUM:
            acc, l_new = warpgroup_mma_wait(0, deps=[acc_tok, l_tok])
        else:
            acc = warpgroup_mma_wait(0, deps=[acc_tok])
        if PRODUCER:
            mbarrier.arrive(empty_bars.index(prev), count=1)
        return acc, p, alpha, m_new, l_new

    @gluon.jit
    def _last_pv(acc, p16, v_bufs, ready_bars, empty_bars, prev, cs, HEAD_DIM: gl.constexpr,
                 BLOCK_N: gl.constexpr, STAGES: gl.constexpr, KV_SPLIT: gl.constexpr,
                 PRODUCER: gl.constexpr):
        """A tile's last PV product with OVERLAP, alone: P in ``p16``, V in slot ``prev``
        (consumed as count ``cs - 1``); PRODUCER: then the slot's release."""
        KV: gl.constexpr = [BLOCK_N, HEAD_DIM]
        _wait_v(ready_bars, prev, cs - 1, STAGES, KV_SPLIT)
        acc = warpgroup_mma(p16, v_bufs.index(prev).reshape(KV), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=[acc])
        if PRODUCER:
            mbarrier.arrive(empty_bars.index(prev), count=1)
        return acc

    @gluon.jit
    def _consume_tile(q_smem, k_desc, v_desc, k_bufs, v_bufs, ready_bars, empty_bars,
                      pp_bars, bh, start_m, n_kv, S, qk_scale, cs, ld,
                      HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                      STAGES: gl.constexpr, CAUSAL: gl.constexpr, OVERLAP: gl.constexpr,
                      PRODUCER: gl.constexpr, PINGPONG: gl.constexpr, WG: gl.constexpr,
                      PP_TURN: gl.constexpr = 0, EXP_SPLIT: gl.constexpr = 0,
                      KV_SPLIT: gl.constexpr = 0, RESCALE: gl.constexpr = 0, ones_smem=0,
                      LSUM: gl.constexpr = 0):
        """Walk key tiles 0..n_kv-1 for the BLOCK_M query rows at ``start_m`` (Q in
        ``q_smem``); return (acc, l, cs, ld) with acc unnormalised in the output layout.

        ``cs`` counts K/V slots consumed so far (ring slot and mbarrier phase follow from
        it), ``ld`` slots loaded. PRODUCER: a producer warp loads, this side releases each
        slot on ``empty_bars``; else this side prefetches ``STAGES - 1`` tiles ahead itself
        (the caller has issued the first ones). PINGPONG: warpgroup WG waits for its turn
        on ``pp_bars`` before issuing products and hands the turn over after; PP_TURN says what
        a turn covers (``gluon_config``), EXP_SPLIT where the exponentials run, KV_SPLIT
        whether K and V of a slot arrive on barriers of their own (PRODUCER only).
        RESCALE (OVERLAP only): the output is rescaled for tile j - 1's new row maximum
        after tile j's scores are issued and before PV of tile j - 1, while the scores
        are on the tensor cores (FlashAttention-3's order), not after PV retires. LSUM
        (OVERLAP only): the row sum is P times the ones block ``ones_smem``, a product
        issued beside each PV (:func:`_row_sum`), not a sum on the FMA pipe."""
        NW: gl.constexpr = gl.num_warps()
        dtype: gl.constexpr = k_desc.dtype
        qk_layout: gl.constexpr = _acc_layout(NW, BLOCK_N)
        o_layout: gl.constexpr = _acc_layout(NW, HEAD_DIM)
        p_layout: gl.constexpr = _p_layout(o_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        offs_m, mask_from = _tile_rows(start_m, S, BLOCK_M, CAUSAL, qk_layout)
        m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, gl.SliceLayout(1, qk_layout))
        l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, qk_layout))
        acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
        qk0 = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, qk_layout)
        KV: gl.constexpr = [BLOCK_N, HEAD_DIM]  # a ring slot's 2-D view for wgmma
        if not OVERLAP:
            for j in range(0, n_kv):
                slot = cs % STAGES
                if not PRODUCER:
                    # Refill the slot consumed last iteration (all warps are past it).
                    gl.thread_barrier()
                    _issue_kv(k_desc, v_desc, k_bufs, v_bufs, ready_bars, bh,
                              j + STAGES - 1, ld, BLOCK_N, STAGES, pred=j + STAGES - 1 < n_kv)
                    ld += (j + STAGES - 1 < n_kv).to(gl.int32)
                mbarrier.wait(ready_bars.index(slot), (cs // STAGES) & 1)
                if PINGPONG and PP_TURN == 0:
                    _pp_take(pp_bars, cs, WG)
                if PINGPONG and PP_TURN == 1:
                    _pp_take(pp_bars, 2 * cs, WG)
                qk = warpgroup_mma(q_smem, k_bufs.index(slot).reshape(KV).permute((1, 0)), qk0,
                                   use_acc=False, is_async=True)
                if PINGPONG and PP_TURN == 1:
                    mbarrier.arrive(pp_bars.index(1 - WG), count=1)
                qk = warpgroup_mma_wait(0, deps=[qk])
                if PINGPONG and PP_TURN == 0:
                    mbarrier.arrive(pp_bars.index(1 - WG), count=1)
                qk = _scores(qk, j * BLOCK_N, offs_m, mask_from, S, CAUSAL, BLOCK_N, qk_layout)
                if PINGPONG and PP_TURN == 2:
                    # cuDNN's turn: the warpgroups take turns on the exponentials (SFU);
                    # the products of one run while the other exponentiates.
                    m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
                    _pp_take(pp_bars, cs, WG)
                    p = _exp2_mixed(qk * qk_scale - gl.expand_dims(m_new, 1), EXP_SPLIT)
                    mbarrier.arrive(pp_bars.index(1 - WG), count=1)
                    alpha = gl.exp2(m_i - m_new)
                    l_i = l_i * alpha + gl.sum(p, 1)
                    m_i = m_new
                else:
                    p, alpha, m_i, l_i = _softmax(qk, m_i, l_i, qk_scale, EXP_SPLIT)
                acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
                p16 = gl.convert_layout(p.to(dtype), p_layout)
                _wait_v(ready_bars, slot, cs, STAGES, KV_SPLIT)
                if PINGPONG and PP_TURN == 1:
                    _pp_take(pp_bars, 2 * cs + 1, WG)
                acc = warpgroup_mma(p16, v_bufs.index(slot).reshape(KV), acc, is_async=True)
                if PINGPONG and PP_TURN == 1:
                    mbarrier.arrive(pp_bars.index(1 - WG), count=1)
                acc = warpgroup_mma_wait(0, deps=[acc])
                if PRODUCER:
                    mbarrier.arrive(empty_bars.index(slot), count=1)
                cs += 1
        else:
            # Scores of tile j are issued together with PV of tile j - 1; the exponentials
            # of tile j then run while PV of tile j - 1 is on the tensor cores.
            slot = cs % STAGES
            qk = _lone_scores(q_smem, k_bufs, ready_bars, pp_bars, cs, qk0, 0, offs_m,
                              mask_from, S, HEAD_DIM, BLOCK_N, STAGES, CAUSAL, PINGPONG, WG)
            p, alpha, m_i, l_i = _softmax(qk, m_i, l_i, qk_scale, EXP_SPLIT)
            if LSUM:  # from here l is an accumulator of P ones, 8 equal columns a row
                l_i = gl.zeros([BLOCK_M, 8], gl.float32, _acc_layout(NW, 8))
            p16 = gl.convert_layout(p.to(dtype), p_layout)
            alpha_o = gl.convert_layout(alpha, row_o)  # RESCALE: applied before the next PV
            prev = slot
            cs += 1
            for j in range(1, n_kv):
                slot = cs % STAGES
                if not PRODUCER:
                    # Load tile j + STAGES - 2 into the slot of tile j - 2 (its PV retired
                    # last iteration; the barrier makes sure on every warp). Tiles j - 1
                    # (its PV still to run) to j + STAGES - 3 keep the other slots.
                    gl.thread_barrier()
                    _issue_kv(k_desc, v_desc, k_bufs, v_bufs, ready_bars, bh,
                              j + STAGES - 2, ld, BLOCK_N, STAGES, pred=j + STAGES - 2 < n_kv)
                    ld += (j + STAGES - 2 < n_kv).to(gl.int32)
                acc, p, alpha, m_i, l_i = _overlap_step(
                    q_smem, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, cs, prev, acc,
                    p16, m_i, l_i, qk0, j * BLOCK_N, offs_m, mask_from, S, qk_scale, HEAD_DIM,
                    BLOCK_N, STAGES, CAUSAL, PRODUCER, PINGPONG, WG, EXP_SPLIT, KV_SPLIT,
                    alpha_o, RESCALE, ones_smem, LSUM)
                if LSUM:
                    l_i = l_i * gl.expand_dims(
                        gl.convert_layout(alpha, gl.SliceLayout(1, l_i.type.layout)), 1)
                if RESCALE:
                    alpha_o = gl.convert_layout(alpha, row_o)
                else:
                    acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
                p16 = gl.convert_layout(p.to(dtype), p_layout)
                prev = slot
                cs += 1
            if RESCALE:
                acc = acc * gl.expand_dims(alpha_o, 1)
            if LSUM:
                l_i = _row_sum(p16, ones_smem, l_i)
            acc = _last_pv(acc, p16, v_bufs, ready_bars, empty_bars, prev, cs, HEAD_DIM,
                           BLOCK_N, STAGES, KV_SPLIT, PRODUCER)
            if LSUM:  # retired with PV; every column of a row holds its sum
                l_i = warpgroup_mma_wait(0, deps=[l_i])
                l_i = gl.convert_layout(gl.max(l_i, 1), gl.SliceLayout(1, qk_layout))
        return acc, l_i, cs, ld

    @gluon.jit
    def _epilogue(acc, l_i, o_smem, o_desc, bh, start_m, BLOCK_M: gl.constexpr,
                  HEAD_DIM: gl.constexpr, DEFER: gl.constexpr):
        """acc / l to shared memory, then a TMA store (rows past S are clipped). DEFER:
        leave the store in flight; the next epilogue waits for it before reusing o_smem."""
        o_layout: gl.constexpr = acc.type.layout
        l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
        o = (acc / gl.expand_dims(l_o, 1)).to(o_desc.dtype)
        tma.store_wait(0)  # the previous tile's store has left o_smem (issuing thread)
        gl.thread_barrier()  # ... and every warp knows it before writing
        o_smem.reshape([BLOCK_M, HEAD_DIM]).store(o)
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [bh, start_m, 0], o_smem)
        if not DEFER:
            tma.store_wait(0)
