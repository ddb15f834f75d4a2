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
of ``gluon_tile._consume_tile``'s OVERLAP path, whose pieces (``_lone_scores``,
``_overlap_step``, ``_last_pv``) it calls; the arithmetic per tile is the same, so
``gluon_attention.emulate`` covers it.

Like :mod:`.gluon_tile`, importing this module needs neither triton nor a GPU; the
``@gluon.jit`` functions exist only where Gluon imports.
"""

from __future__ import annotations

from .gluon_tile import GLUON_IMPORT_ERROR

__all__: list = []

if GLUON_IMPORT_ERROR is None:
    from .gluon_tile import (_acc_layout, _epilogue, _exp2_mixed, _last_pv, _lone_scores,
                             _n_kv, _overlap_step, _p_layout, _tile_range, _tile_rows,
                             _tile_start, _wait_q, gl, gluon, mbarrier, tma)

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
        qk_layout: gl.constexpr = _acc_layout(NW, BLOCK_N)
        o_layout: gl.constexpr = _acc_layout(NW, HEAD_DIM)
        p_layout: gl.constexpr = _p_layout(o_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        row_s: gl.constexpr = gl.SliceLayout(1, qk_layout)
        qk0 = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, qk_layout)
        zero_acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
        fresh_m = gl.full([BLOCK_M], float("-inf"), gl.float32, row_s)
        fresh_l = gl.zeros([BLOCK_M], gl.float32, row_s)
        first, step = _tile_range(n_m, n_tiles, True)  # persistent

        # The program's first tile: its first scores overlap nothing (as in OVERLAP).
        bh, start_m = _tile_start(first, n_m, ROWS, CAUSAL)
        row0 = start_m + WG * BLOCK_M
        n_kv = _n_kv(start_m, S, ROWS, BLOCK_N, CAUSAL)
        offs_m, mask_from = _tile_rows(row0, S, BLOCK_M, CAUSAL, qk_layout)
        qi, q2 = _wait_q(q_bufs, q_ready, first * 0, BLOCK_M, HEAD_DIM, QBUF, CONSUMERS, WG)
        cs = 0
        qk = _lone_scores(q2, k_bufs, ready_bars, pp_bars, cs, qk0, 0, offs_m, mask_from, S,
                          HEAD_DIM, BLOCK_N, STAGES, CAUSAL, PINGPONG, WG)
        m_i = gl.max(qk, 1) * qk_scale
        p = _exp2_mixed(qk * qk_scale - gl.expand_dims(m_i, 1), EXP_SPLIT)
        l_i = gl.sum(p, 1)
        acc = zero_acc
        p16 = gl.convert_layout(p.to(dtype), p_layout)
        prev = first * 0
        cs = 1
        for j in range(1, n_kv):
            acc, p, alpha, m_i, l_i = _overlap_step(
                q2, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, cs, prev, acc, p16, m_i,
                l_i, qk0, j * BLOCK_N, offs_m, mask_from, S, qk_scale, HEAD_DIM, BLOCK_N,
                STAGES, CAUSAL, True, PINGPONG, WG, EXP_SPLIT, KV_SPLIT)
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
            offs_m, mask_from = _tile_rows(row0, S, BLOCK_M, CAUSAL, qk_layout)
            qi, q2 = _wait_q(q_bufs, q_ready, t_local, BLOCK_M, HEAD_DIM, QBUF, CONSUMERS, WG)
            acc, p, alpha, m_i, l_i = _overlap_step(
                q2, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, cs, prev, acc, p16,
                fresh_m, fresh_l, qk0, 0, offs_m, mask_from, S, qk_scale, HEAD_DIM, BLOCK_N,
                STAGES, CAUSAL, True, PINGPONG, WG, EXP_SPLIT, KV_SPLIT)
            _epilogue(acc, done_l, o_bufs.index(WG), o_desc, done_bh, done_row0, BLOCK_M,
                      HEAD_DIM, True)
            acc = zero_acc
            p16 = gl.convert_layout(p.to(dtype), p_layout)
            prev = cs % STAGES
            cs += 1
            for j in range(1, n_kv):
                acc, p, alpha, m_i, l_i = _overlap_step(
                    q2, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, cs, prev, acc, p16,
                    m_i, l_i, qk0, j * BLOCK_N, offs_m, mask_from, S, qk_scale, HEAD_DIM,
                    BLOCK_N, STAGES, CAUSAL, True, PINGPONG, WG, EXP_SPLIT, KV_SPLIT)
                acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
                p16 = gl.convert_layout(p.to(dtype), p_layout)
                prev = cs % STAGES
                cs += 1
            t_local += 1
        # The last tile's last PV, alone, then its output.
        mbarrier.arrive(q_empty.index(qi), count=1)
        acc = _last_pv(acc, p16, v_bufs, ready_bars, empty_bars, prev, cs, HEAD_DIM, BLOCK_N,
                       STAGES, KV_SPLIT, True)
        _epilogue(acc, l_i, o_bufs.index(WG), o_desc, bh, row0, BLOCK_M, HEAD_DIM, True)
        tma.store_wait(0)
