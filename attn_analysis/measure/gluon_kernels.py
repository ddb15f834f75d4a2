"""The Gluon kernel of our FA3-style Hopper attention forward: its schedules and its entry
point ``_gluon_attn_fwd`` (:data:`KERNEL_NAME`, the name the profiler reports).

One schedule a partition layout: without a producer warp every warp loads and computes
(``_single_partition``); with WARP_SPEC a one-warp producer partition issues every TMA
load (``_producer``) while one consumer warpgroup, or two with PINGPONG, run the products,
the softmax and the epilogue (``_consumer``). The entry allocates the shared buffers and
mbarriers and picks the schedule from its constexpr switches. The pieces of one tile
(loads, mask, softmax step, the key walk, the epilogue) are in :mod:`.gluon_tile`; what
validates, configures and launches it is :mod:`.gluon_attention`.

Importing this module needs neither triton nor a GPU: the ``@gluon.jit`` functions are
defined only where Gluon imports (``gluon_tile.GLUON_IMPORT_ERROR`` is None). Written against
Triton 3.6's Gluon API; every schedule has run on a GPU and passed a float64 grid
(``notes/gluon-plan.md``), KV_SPLIT (issue 43's second round) the quick grid and, in
``cudnn_kv``, the full one; no KV_SPLIT variant has run under the sanitizer yet.
"""

from __future__ import annotations

from .gluon_tile import GLUON_IMPORT_ERROR

# Nothing here is called from Python but by gluon_attention, which launches the entry
# point (``_gluon_attn_fwd``, defined only where Gluon imports).
__all__ = ["KERNEL_NAME", "PRODUCER_REGS", "CONSUMER_REGS"]

KERNEL_NAME = "_gluon_attn_fwd"  # the profiler's name of the kernel (catalog pattern)
# Registers per thread of the producer warp, and of the second consumer warpgroup with
# PINGPONG (``gl.warp_specialize``'s worker_num_regs; FA3 uses 24-32 and 240).
PRODUCER_REGS = 24
CONSUMER_REGS = 240

# ------------------------------------------------------------------------- the schedules
# Everything below is defined only where Gluon imports.

if GLUON_IMPORT_ERROR is None:
    from .gluon_tile import (_consume_tile, _epilogue, _issue_kv, _n_kv, _tile_range,
                             _tile_start, _wait_q, fence_async_shared, gl, gluon, mbarrier,
                             tma)
    from .gluon_xtile import _consumer_xtile

    _PRODUCER_REGS = gl.constexpr(PRODUCER_REGS)
    _CONSUMER_REGS = gl.constexpr(CONSUMER_REGS)

    # ------------------------------------------------------------------ no producer warp

    @gluon.jit
    def _single_partition(q_desc, k_desc, v_desc, o_desc, q_smem, o_smem, k_bufs, v_bufs,
                          q_bar, ready_bars, S, qk_scale, n_m, n_tiles,
                          HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                          BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                          PERSIST: gl.constexpr, OVERLAP: gl.constexpr,
                          EXP_SPLIT: gl.constexpr):
        """Every warp loads and computes. Persistent: the next tile's Q and first K/V
        loads go out before this tile's epilogue, and its O store is left in flight."""
        first, step = _tile_range(n_m, n_tiles, PERSIST)
        q2 = q_smem.reshape([BLOCK_M, HEAD_DIM])
        bh, start_m = _tile_start(first, n_m, BLOCK_M, CAUSAL)
        n_kv = _n_kv(start_m, S, BLOCK_M, BLOCK_N, CAUSAL)
        mbarrier.expect(q_bar, q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [bh, start_m, 0], q_bar, q_smem)
        ld = 0
        for i in gl.static_range(STAGES - 1):
            _issue_kv(k_desc, v_desc, k_bufs, v_bufs, ready_bars, bh, i, ld, BLOCK_N, STAGES,
                      pred=i < n_kv)
            ld += (i < n_kv).to(gl.int32)
        cs = 0
        t_local = 0
        for tile in range(first, n_tiles, step):
            mbarrier.wait(q_bar, t_local & 1)
            acc, l_i, cs, ld = _consume_tile(
                q2, k_desc, v_desc, k_bufs, v_bufs, ready_bars, ready_bars, ready_bars, bh,
                start_m, n_kv, S, qk_scale, cs, ld, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                CAUSAL, OVERLAP, False, False, 0, 0, EXP_SPLIT)
            cur_bh = bh
            cur_m = start_m
            nxt = tile + step
            if PERSIST:
                # Q and every K/V slot are free (all products retired on every warp).
                gl.thread_barrier()
                has_next = nxt < n_tiles
                bh, start_m = _tile_start(nxt, n_m, BLOCK_M, CAUSAL)
                n_kv = _n_kv(start_m, S, BLOCK_M, BLOCK_N, CAUSAL)
                mbarrier.expect(q_bar, q_desc.block_type.nbytes, pred=has_next)
                tma.async_copy_global_to_shared(q_desc, [bh, start_m, 0], q_bar, q_smem,
                                                pred=has_next)
                for i in gl.static_range(STAGES - 1):
                    _issue_kv(k_desc, v_desc, k_bufs, v_bufs, ready_bars, bh, i, ld, BLOCK_N,
                              STAGES, pred=has_next & (i < n_kv))
                    ld += (has_next & (i < n_kv)).to(gl.int32)
            _epilogue(acc, l_i, o_smem, o_desc, cur_bh, cur_m, BLOCK_M, HEAD_DIM, PERSIST)
            t_local += 1
        tma.store_wait(0)

    # --------------------------------------------------------------- with a producer warp

    @gluon.jit
    def _producer(q_desc, k_desc, v_desc, o_desc, q_bufs, o_bufs, k_bufs, v_bufs, q_ready,
                  q_empty, ready_bars, empty_bars, pp_bars, S, qk_scale, n_m, n_tiles,
                  HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  STAGES: gl.constexpr, CAUSAL: gl.constexpr, PERSIST: gl.constexpr,
                  OVERLAP: gl.constexpr, CONSUMERS: gl.constexpr, QBUF: gl.constexpr,
                  PP_TURN: gl.constexpr, EXP_SPLIT: gl.constexpr,
                  KV_SPLIT: gl.constexpr, XTILE: gl.constexpr,
                  RESCALE: gl.constexpr, ones_smem, LSUM: gl.constexpr):
        """One warp: for each tile of this program, Q (one box per consumer) once its
        buffer is released, then every key tile into the ring as slots are released."""
        ROWS: gl.constexpr = BLOCK_M * CONSUMERS
        first, step = _tile_range(n_m, n_tiles, PERSIST)
        ld = 0
        t_local = 0
        for tile in range(first, n_tiles, step):
            bh, start_m = _tile_start(tile, n_m, ROWS, CAUSAL)
            qb = t_local % QBUF  # Q buffer set of this tile; its use count gives the phase
            for c in gl.static_range(CONSUMERS):
                qi = qb * CONSUMERS + c
                mbarrier.wait(q_empty.index(qi), ((t_local // QBUF) & 1) ^ 1)
                mbarrier.expect(q_ready.index(qi), q_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(q_desc, [bh, start_m + c * BLOCK_M, 0],
                                                q_ready.index(qi), q_bufs.index(qi))
            n_kv = _n_kv(start_m, S, ROWS, BLOCK_N, CAUSAL)
            for j in range(0, n_kv):
                slot = ld % STAGES
                mbarrier.wait(empty_bars.index(slot), ((ld // STAGES) & 1) ^ 1)
                _issue_kv(k_desc, v_desc, k_bufs, v_bufs, ready_bars, bh, j, ld, BLOCK_N,
                          STAGES, KV_SPLIT=KV_SPLIT)
                ld += 1
            t_local += 1

    @gluon.jit
    def _consumer(q_desc, k_desc, v_desc, o_desc, q_bufs, o_bufs, k_bufs, v_bufs, q_ready,
                  q_empty, ready_bars, empty_bars, pp_bars, S, qk_scale, n_m, n_tiles,
                  HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  STAGES: gl.constexpr, CAUSAL: gl.constexpr, PERSIST: gl.constexpr,
                  OVERLAP: gl.constexpr, CONSUMERS: gl.constexpr, QBUF: gl.constexpr,
                  PP_TURN: gl.constexpr, EXP_SPLIT: gl.constexpr, KV_SPLIT: gl.constexpr,
                  XTILE: gl.constexpr, RESCALE: gl.constexpr, ones_smem, LSUM: gl.constexpr,
                  WG: gl.constexpr):
        """Consumer warpgroup WG: rows ``[start_m + WG * BLOCK_M, +BLOCK_M)`` of each tile;
        every consumer walks every key tile of the tile (the producer loads each once).
        XTILE: the walk carried over tile boundaries (:mod:`.gluon_xtile`); else one tile
        at a time (``_consume_tile``; LSUM: row sums with ``ones_smem``)."""
        if XTILE:
            _consumer_xtile(q_desc, k_desc, v_desc, o_desc, q_bufs, o_bufs, k_bufs, v_bufs,
                            q_ready, q_empty, ready_bars, empty_bars, pp_bars, S, qk_scale,
                            n_m, n_tiles, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES, CAUSAL,
                            CONSUMERS, QBUF, EXP_SPLIT, KV_SPLIT, WG)
        else:
            ROWS: gl.constexpr = BLOCK_M * CONSUMERS
            first, step = _tile_range(n_m, n_tiles, PERSIST)
            cs = 0
            t_local = 0
            for tile in range(first, n_tiles, step):
                bh, start_m = _tile_start(tile, n_m, ROWS, CAUSAL)
                n_kv = _n_kv(start_m, S, ROWS, BLOCK_N, CAUSAL)
                qi, q2 = _wait_q(q_bufs, q_ready, t_local, BLOCK_M, HEAD_DIM, QBUF,
                                 CONSUMERS, WG)
                acc, l_i, cs, _ = _consume_tile(
                    q2, k_desc, v_desc, k_bufs, v_bufs, ready_bars, empty_bars, pp_bars, bh,
                    start_m + WG * BLOCK_M, n_kv, S, qk_scale, cs, 0, HEAD_DIM, BLOCK_M,
                    BLOCK_N, STAGES, CAUSAL, OVERLAP, True, CONSUMERS == 2, WG, PP_TURN,
                    EXP_SPLIT, KV_SPLIT, RESCALE, ones_smem, LSUM)
                mbarrier.arrive(q_empty.index(qi), count=1)  # all products have retired
                _epilogue(acc, l_i, o_bufs.index(WG), o_desc, bh, start_m + WG * BLOCK_M,
                          BLOCK_M, HEAD_DIM, PERSIST)
                t_local += 1
            tma.store_wait(0)

    # ------------------------------------------------------------------------ the entry

    @gluon.jit
    def _gluon_attn_fwd(q_desc, k_desc, v_desc, o_desc, S, qk_scale, n_m, n_tiles,
                        HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                        STAGES: gl.constexpr, CAUSAL: gl.constexpr, PERSIST: gl.constexpr,
                        WARP_SPEC: gl.constexpr, PINGPONG: gl.constexpr,
                        OVERLAP: gl.constexpr, QBUF: gl.constexpr = 1,
                        PP_TURN: gl.constexpr = 0, EXP_SPLIT: gl.constexpr = 0,
                        KV_SPLIT: gl.constexpr = 0, XTILE: gl.constexpr = 0,
                        RESCALE: gl.constexpr = 0, LSUM: gl.constexpr = 0):
        """Grid (n_m, B*H) or, PERSIST, (programs,); descriptors over (B*H, S, D)."""
        dtype: gl.constexpr = q_desc.dtype
        k_bufs = gl.allocate_shared_memory(dtype, [STAGES] + k_desc.block_type.shape,
                                           k_desc.layout)
        v_bufs = gl.allocate_shared_memory(dtype, [STAGES] + v_desc.block_type.shape,
                                           v_desc.layout)
        # KV_SPLIT: V of slot i arrives on barrier STAGES + i, K on barrier i.
        ready_bars = gl.allocate_shared_memory(gl.int64, [STAGES * (1 + KV_SPLIT), 1],
                                               mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES * (1 + KV_SPLIT)):
            mbarrier.init(ready_bars.index(i), count=1)
        if not WARP_SPEC:
            q_smem = gl.allocate_shared_memory(dtype, q_desc.block_type.shape, q_desc.layout)
            o_smem = gl.allocate_shared_memory(dtype, o_desc.block_type.shape, o_desc.layout)
            q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
            mbarrier.init(q_bar, count=1)
            _single_partition(q_desc, k_desc, v_desc, o_desc, q_smem, o_smem, k_bufs, v_bufs,
                              q_bar, ready_bars, S, qk_scale, n_m, n_tiles, HEAD_DIM, BLOCK_M,
                              BLOCK_N, STAGES, CAUSAL, PERSIST, OVERLAP, EXP_SPLIT)
        else:
            CONSUMERS: gl.constexpr = 2 if PINGPONG else 1
            q_bufs = gl.allocate_shared_memory(dtype, [QBUF * CONSUMERS] + q_desc.block_type.shape,
                                               q_desc.layout)
            o_bufs = gl.allocate_shared_memory(dtype, [CONSUMERS] + o_desc.block_type.shape,
                                               o_desc.layout)
            empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1],
                                                   mbarrier.MBarrierLayout())
            q_ready = gl.allocate_shared_memory(gl.int64, [QBUF * CONSUMERS, 1],
                                                mbarrier.MBarrierLayout())
            q_empty = gl.allocate_shared_memory(gl.int64, [QBUF * CONSUMERS, 1],
                                                mbarrier.MBarrierLayout())
            pp_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
            for i in gl.static_range(STAGES):
                mbarrier.init(empty_bars.index(i), count=CONSUMERS)
            for c in gl.static_range(QBUF * CONSUMERS):
                mbarrier.init(q_ready.index(c), count=1)
                mbarrier.init(q_empty.index(c), count=1)
            for c in gl.static_range(2):
                mbarrier.init(pp_bars.index(c), count=1)
            if LSUM:  # the ones block [8, keys] both consumers read for their row sums
                ones_smem = gl.allocate_shared_memory(
                    dtype, [8, BLOCK_N], gl.NVMMASharedLayout.get_default_for([8, BLOCK_N], dtype))
                ones_smem.store(gl.full([8, BLOCK_N], 1.0, dtype,
                                        gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1],
                                                         [1, 0])))
                fence_async_shared()
                gl.thread_barrier()
            else:  # unused without LSUM; a partition's argument cannot be None
                ones_smem = pp_bars
            # The argument tuples are written out at each call: a tuple held in a variable
            # turns its constexpr entries into tensors (Triton 3.6), and the partitions
            # need them constant.
            if PINGPONG:
                gl.warp_specialize([
                    (_consumer, (q_desc, k_desc, v_desc, o_desc, q_bufs, o_bufs, k_bufs,
                                 v_bufs, q_ready, q_empty, ready_bars, empty_bars, pp_bars, S,
                                 qk_scale, n_m, n_tiles, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                                 CAUSAL, PERSIST, OVERLAP, CONSUMERS, QBUF, PP_TURN, EXP_SPLIT,
                                 KV_SPLIT, XTILE, RESCALE, ones_smem, LSUM, 0)),
                    (_consumer, (q_desc, k_desc, v_desc, o_desc, q_bufs, o_bufs, k_bufs,
                                 v_bufs, q_ready, q_empty, ready_bars, empty_bars, pp_bars, S,
                                 qk_scale, n_m, n_tiles, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                                 CAUSAL, PERSIST, OVERLAP, CONSUMERS, QBUF, PP_TURN, EXP_SPLIT,
                                 KV_SPLIT, XTILE, RESCALE, ones_smem, LSUM, 1)),
                    (_producer, (q_desc, k_desc, v_desc, o_desc, q_bufs, o_bufs, k_bufs,
                                 v_bufs, q_ready, q_empty, ready_bars, empty_bars, pp_bars, S,
                                 qk_scale, n_m, n_tiles, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                                 CAUSAL, PERSIST, OVERLAP, CONSUMERS, QBUF, PP_TURN, EXP_SPLIT,
                                 KV_SPLIT, XTILE, RESCALE, ones_smem, LSUM)),
                ], [4, 1], [_CONSUMER_REGS, _PRODUCER_REGS])
            else:
                gl.warp_specialize([
                    (_consumer, (q_desc, k_desc, v_desc, o_desc, q_bufs, o_bufs, k_bufs,
                                 v_bufs, q_ready, q_empty, ready_bars, empty_bars, pp_bars, S,
                                 qk_scale, n_m, n_tiles, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                                 CAUSAL, PERSIST, OVERLAP, CONSUMERS, QBUF, PP_TURN, EXP_SPLIT,
                                 KV_SPLIT, XTILE, RESCALE, ones_smem, LSUM, 0)),
                    (_producer, (q_desc, k_desc, v_desc, o_desc, q_bufs, o_bufs, k_bufs,
                                 v_bufs, q_ready, q_empty, ready_bars, empty_bars, pp_bars, S,
                                 qk_scale, n_m, n_tiles, HEAD_DIM, BLOCK_M, BLOCK_N, STAGES,
                                 CAUSAL, PERSIST, OVERLAP, CONSUMERS, QBUF, PP_TURN, EXP_SPLIT,
                                 KV_SPLIT, XTILE, RESCALE, ones_smem, LSUM)),
                ], [1], [_PRODUCER_REGS])
