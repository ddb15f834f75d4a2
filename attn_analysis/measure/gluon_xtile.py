"""The cross-tile consumer of our Gluon attention kernel (``XTILE``, issue 43's fourth
round): the intra-warpgroup overlap carried over tile boundaries.

Why: with OVERLAP, a consumer issues the scores of key tile j together with PV of key
tile j - 1, but each tile still starts with a scores product that overlaps nothing of its
own and ends with a PV product alone, followed by the epilogue. At the reports' shape a
tile walks only four key tiles (S = 512, 128 keys a step), so these two lone products are
a third of a tile's product issues. Here a persistent consumer issues the next tile's first
scores together with this tile's last PV, runs the next tile's first exponentials while
that PV is on the tensor cores, and only then writes this tile's output. The walk inside a
tile, the ping-pong turns (one per consumed K/V slot), the ring and the producer are those
of ``gluon_tile._consume_tile``'s OVERLAP path; the arithmetic per tile is the same, so
``gluon_attention.emulate`` covers it.

Like :mod:`.gluon_tile`, importing this module needs neither triton nor a GPU; the
``@gluon.jit`` functions exist only where Gluon imports.
"""

from __future__ import annotations

from .gluon_tile import GLUON_IMPORT_ERROR

__all__: list = []

if GLUON_IMPORT_ERROR is None:
    from .gluon_tile import (_epilogue, _exp2_mixed, _n_kv, _pp_take, _scores, _tile_start,
                             _wait_v, gl, gluon, mbarrier, tma, warpgroup_mma,
                             warpgroup_mma_wait)

    @gluon.jit
    def _xt_step(q2, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, cs, prev, acc, p16,
                 m_i, l_i, qk0, start_n, offs_m, mask_from, S, qk_scale,
                 HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                 CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, WG: gl.constexpr,
                 EXP_SPLIT: gl.constexpr, KV_SPLIT: gl.constexpr):
        """One consumed K/V slot: in one ping-pong turn, the scores of slot ``cs % STAGES``
        (Q in ``q2``) and PV of the slot ``prev`` (P in ``p16``, into ``acc``); then the
        exponentials of the new scores while PV runs; then PV's wait and the slot's release.
        ``m_i``/``l_i`` are the running max and sum of the scores' rows (-inf and 0 at a
        tile's first key tile). Returns (acc, p, alpha, m_new, l_new); the caller rescales
        ``acc`` by alpha, or, at a tile's first key tile, writes it out and starts at 0."""
        qk_layout: gl.constexpr = qk0.type.layout
        KV: gl.constexpr = [BLOCK_N, HEAD_DIM]
        slot = cs % STAGES
        mbarrier.wait(ready_bars.index(slot), (cs // STAGES) & 1)
        if PINGPONG:
            _pp_take(pp_bars, cs, WG)
        qk_tok = warpgroup_mma(q2, k_bufs.index(slot).reshape(KV).permute((1, 0)), qk0,
                               use_acc=False, is_async=True)
        _wait_v(ready_bars, prev, cs - 1, STAGES, KV_SPLIT)
        acc_tok = warpgroup_mma(p16, v_bufs.index(prev).reshape(KV), acc, is_async=True)
        if PINGPONG:
            mbarrier.arrive(pp_bars.index(1 - WG), count=1)
        # wgmma groups retire in order: waiting down to one leaves PV running.
        qk = warpgroup_mma_wait(1, deps=[qk_tok])
        qk = _scores(qk, start_n, offs_m, mask_from, S, CAUSAL, BLOCK_N, qk_layout)
        m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
        p = _exp2_mixed(qk * qk_scale - gl.expand_dims(m_new, 1), EXP_SPLIT)
        alpha = gl.exp2(m_i - m_new)
        l_new = l_i * alpha + gl.sum(p, 1)
        acc = warpgroup_mma_wait(0, deps=[acc_tok])
        mbarrier.arrive(empty_bars.index(prev), count=1)
        return acc, p, alpha, m_new, l_new

    @gluon.jit
    def _consumer_xtile(q_desc, k_desc, v_desc, o_desc, q_bufs, o_bufs, k_bufs, v_bufs,
                        q_ready, q_empty, ready_bars, empty_bars, pp_bars, S, qk_scale, n_m,
                        n_tiles, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                        BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                        CONSUMERS: gl.constexpr, QBUF: gl.constexpr,
                        EXP_SPLIT: gl.constexpr, KV_SPLIT: gl.constexpr, WG: gl.constexpr):
        """Consumer warpgroup WG of a persistent program: rows ``[start_m + WG * BLOCK_M,
        +BLOCK_M)`` of each of its tiles, every tile's last PV issued with the next tile's
        first scores, and the tile's output written after that PV (module docstring)."""
        NW: gl.constexpr = gl.num_warps()
        ROWS: gl.constexpr = BLOCK_M * CONSUMERS
        PINGPONG: gl.constexpr = CONSUMERS == 2
        dtype: gl.constexpr = k_desc.dtype
        qk_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout,
                                                     k_width=2)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        row_s: gl.constexpr = gl.SliceLayout(1, qk_layout)
        KV: gl.constexpr = [BLOCK_N, HEAD_DIM]
        qk0 = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, qk_layout)
        zero_acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
        fresh_m = gl.full([BLOCK_M], float("-inf"), gl.float32, row_s)
        fresh_l = gl.zeros([BLOCK_M], gl.float32, row_s)
        first = gl.program_id(0)
        step = gl.num_programs(0)

        # The program's first tile: its first scores overlap nothing (as in OVERLAP).
        bh, start_m = _tile_start(first, n_m, ROWS, CAUSAL)
        row0 = start_m + WG * BLOCK_M
        n_kv = _n_kv(start_m, S, ROWS, BLOCK_N, CAUSAL)
        offs_m = row0 + gl.arange(0, BLOCK_M, layout=row_s)
        if CAUSAL:
            mask_from = gl.minimum(row0, S)
        else:
            mask_from = S
        qi = first * 0 + WG
        q2 = q_bufs.index(qi).reshape([BLOCK_M, HEAD_DIM])
        mbarrier.wait(q_ready.index(qi), 0)
        cs = 0
        slot = 0
        mbarrier.wait(ready_bars.index(slot), 0)
        if PINGPONG:
            _pp_take(pp_bars, cs, WG)
        qk = warpgroup_mma(q2, k_bufs.index(slot).reshape(KV).permute((1, 0)), qk0,
                           use_acc=False, is_async=True)
        if PINGPONG:
            mbarrier.arrive(pp_bars.index(1 - WG), count=1)
        qk = warpgroup_mma_wait(0, deps=[qk])
        qk = _scores(qk, 0, offs_m, mask_from, S, CAUSAL, BLOCK_N, qk_layout)
        m_i = gl.max(qk, 1) * qk_scale
        p = _exp2_mixed(qk * qk_scale - gl.expand_dims(m_i, 1), EXP_SPLIT)
        l_i = gl.sum(p, 1)
        acc = zero_acc
        p16 = gl.convert_layout(p.to(dtype), p_layout)
        prev = first * 0
        cs = 1
        for j in range(1, n_kv):
            acc, p, alpha, m_i, l_i = _xt_step(
                q2, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, cs, prev, acc, p16, m_i,
                l_i, qk0, j * BLOCK_N, offs_m, mask_from, S, qk_scale, HEAD_DIM, BLOCK_N,
                STAGES, CAUSAL, PINGPONG, WG, EXP_SPLIT, KV_SPLIT)
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
            p16 = gl.convert_layout(p.to(dtype), p_layout)
            prev = cs % STAGES
            cs += 1
        # Every later tile: its first scores go out with the last PV of the tile before.
        t_local = 1
        for tile in range(first + step, n_tiles, step):
            done_bh = bh
            done_row0 = row0
            done_l = l_i
            mbarrier.arrive(q_empty.index(qi), count=1)  # the last scores of it retired
            bh, start_m = _tile_start(tile, n_m, ROWS, CAUSAL)
            row0 = start_m + WG * BLOCK_M
            n_kv = _n_kv(start_m, S, ROWS, BLOCK_N, CAUSAL)
            offs_m = row0 + gl.arange(0, BLOCK_M, layout=row_s)
            if CAUSAL:
                mask_from = gl.minimum(row0, S)
            else:
                mask_from = S
            qi = (t_local % QBUF) * CONSUMERS + WG
            q2 = q_bufs.index(qi).reshape([BLOCK_M, HEAD_DIM])
            mbarrier.wait(q_ready.index(qi), (t_local // QBUF) & 1)
            acc, p, alpha, m_i, l_i = _xt_step(
                q2, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, cs, prev, acc, p16,
                fresh_m, fresh_l, qk0, 0, offs_m, mask_from, S, qk_scale, HEAD_DIM, BLOCK_N,
                STAGES, CAUSAL, PINGPONG, WG, EXP_SPLIT, KV_SPLIT)
            _epilogue(acc, done_l, o_bufs.index(WG), o_desc, done_bh, done_row0, BLOCK_M,
                      HEAD_DIM, True)
            acc = zero_acc
            p16 = gl.convert_layout(p.to(dtype), p_layout)
            prev = cs % STAGES
            cs += 1
            for j in range(1, n_kv):
                acc, p, alpha, m_i, l_i = _xt_step(
                    q2, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, cs, prev, acc, p16,
                    m_i, l_i, qk0, j * BLOCK_N, offs_m, mask_from, S, qk_scale, HEAD_DIM,
                    BLOCK_N, STAGES, CAUSAL, PINGPONG, WG, EXP_SPLIT, KV_SPLIT)
                acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
                p16 = gl.convert_layout(p.to(dtype), p_layout)
                prev = cs % STAGES
                cs += 1
            t_local += 1
        # The last tile's last PV, alone, then its output.
        mbarrier.arrive(q_empty.index(qi), count=1)
        _wait_v(ready_bars, prev, cs - 1, STAGES, KV_SPLIT)
        acc = warpgroup_mma(p16, v_bufs.index(prev).reshape(KV), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(empty_bars.index(prev), count=1)
        _epilogue(acc, l_i, o_bufs.index(WG), o_desc, bh, row0, BLOCK_M, HEAD_DIM, True)
        tma.store_wait(0)
