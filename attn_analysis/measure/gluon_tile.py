"""The Gluon pieces of one tile of our FA3-style Hopper attention forward: which tile a
program works on, TMA loads of a key tile into the K/V ring, the mask, the online-softmax
step, the walk over a tile's key tiles (``_consume_tile``, with or without a producer warp,
ping-pong turns and the intra-warpgroup overlap) and the epilogue's TMA store.

Why a module of its own: these are the building blocks every schedule of
:mod:`.gluon_kernels` (the partitions and the entry point) calls; keeping them apart keeps
each file about one thing and under the size limit. The Gluon import lives here, guarded:
importing this module needs neither triton nor a GPU (:data:`GLUON_IMPORT_ERROR` says what
is missing, and the ``@gluon.jit`` functions are then not defined). The code is written
against Triton 3.6's Gluon API; every variant has run on a GPU and passed a float64
grid (``notes/gluon-plan.md``).
"""

from __future__ import annotations

__all__ = ["GLUON_IMPORT_ERROR", "TRITON_VERSION"]

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
    def _n_kv(start_m, S, ROWS: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        """Key tiles a tile of ROWS query rows starting at ``start_m`` walks."""
        if CAUSAL:
            end = gl.minimum(start_m + ROWS, S)
        else:
            end = S
        return gl.cdiv(end, BLOCK_N)

    @gluon.jit
    def _issue_kv(k_desc, v_desc, k_bufs, v_bufs, ready_bars, bh, n, ld,
                  BLOCK_N: gl.constexpr, STAGES: gl.constexpr, pred=True):
        """TMA loads of key tile ``n`` into ring slot ``ld % STAGES`` (predicated)."""
        slot = ld % STAGES
        bar = ready_bars.index(slot)
        mbarrier.expect(bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes, pred=pred)
        tma.async_copy_global_to_shared(k_desc, [bh, n * BLOCK_N, 0], bar, k_bufs.index(slot),
                                        pred=pred)
        tma.async_copy_global_to_shared(v_desc, [bh, n * BLOCK_N, 0], bar, v_bufs.index(slot),
                                        pred=pred)

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

    @gluon.jit
    def _softmax(qk, m_i, l_i, qk_scale):
        """Online-softmax update from fp32 scores: (p, alpha, m_new, l_new)."""
        m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
        p = gl.exp2(qk * qk_scale - gl.expand_dims(m_new, 1))
        alpha = gl.exp2(m_i - m_new)
        l_new = l_i * alpha + gl.sum(p, 1)
        return p, alpha, m_new, l_new

    @gluon.jit
    def _consume_tile(q_smem, k_desc, v_desc, k_bufs, v_bufs, ready_bars, empty_bars,
                      pp_bars, bh, start_m, n_kv, S, qk_scale, cs, ld,
                      HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                      STAGES: gl.constexpr, CAUSAL: gl.constexpr, OVERLAP: gl.constexpr,
                      PRODUCER: gl.constexpr, PINGPONG: gl.constexpr, WG: gl.constexpr):
        """Walk key tiles 0..n_kv-1 for the BLOCK_M query rows at ``start_m`` (Q in
        ``q_smem``); return (acc, l, cs, ld) with acc unnormalised in the output layout.

        ``cs`` counts K/V slots consumed so far (ring slot and mbarrier phase follow from
        it), ``ld`` slots loaded. PRODUCER: a producer warp loads, this side releases each
        slot on ``empty_bars``; else this side prefetches ``STAGES - 1`` tiles ahead itself
        (the caller has issued the first ones). PINGPONG: warpgroup WG waits for its turn
        on ``pp_bars`` before issuing products and hands the turn over after."""
        NW: gl.constexpr = gl.num_warps()
        dtype: gl.constexpr = k_desc.dtype
        qk_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[NW, 1], instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout,
                                                     k_width=2)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        offs_m = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, qk_layout))
        if CAUSAL:
            mask_from = gl.minimum(start_m, S)
        else:
            mask_from = S
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
                if PINGPONG:
                    mbarrier.wait(pp_bars.index(WG), (cs & 1) ^ (1 - WG), pred=cs > 0 - WG)
                qk = warpgroup_mma(q_smem, k_bufs.index(slot).reshape(KV).permute((1, 0)), qk0,
                                   use_acc=False, is_async=True)
                qk = warpgroup_mma_wait(0, deps=[qk])
                if PINGPONG:
                    mbarrier.arrive(pp_bars.index(1 - WG), count=1)
                qk = _scores(qk, j * BLOCK_N, offs_m, mask_from, S, CAUSAL, BLOCK_N, qk_layout)
                p, alpha, m_i, l_i = _softmax(qk, m_i, l_i, qk_scale)
                acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
                p16 = gl.convert_layout(p.to(dtype), p_layout)
                acc = warpgroup_mma(p16, v_bufs.index(slot).reshape(KV), acc, is_async=True)
                acc = warpgroup_mma_wait(0, deps=[acc])
                if PRODUCER:
                    mbarrier.arrive(empty_bars.index(slot), count=1)
                cs += 1
        else:
            # Scores of tile j are issued together with PV of tile j - 1; the exponentials
            # of tile j then run while PV of tile j - 1 is on the tensor cores.
            slot = cs % STAGES
            mbarrier.wait(ready_bars.index(slot), (cs // STAGES) & 1)
            if PINGPONG:  # every consumed slot takes one turn, so the phases stay paired
                mbarrier.wait(pp_bars.index(WG), (cs & 1) ^ (1 - WG), pred=cs > 0 - WG)
            qk = warpgroup_mma(q_smem, k_bufs.index(slot).reshape(KV).permute((1, 0)), qk0,
                               use_acc=False, is_async=True)
            if PINGPONG:
                mbarrier.arrive(pp_bars.index(1 - WG), count=1)
            qk = warpgroup_mma_wait(0, deps=[qk])
            qk = _scores(qk, 0, offs_m, mask_from, S, CAUSAL, BLOCK_N, qk_layout)
            p, alpha, m_i, l_i = _softmax(qk, m_i, l_i, qk_scale)
            p16 = gl.convert_layout(p.to(dtype), p_layout)
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
                mbarrier.wait(ready_bars.index(slot), (cs // STAGES) & 1)
                if PINGPONG:
                    mbarrier.wait(pp_bars.index(WG), (cs & 1) ^ (1 - WG), pred=cs > 0 - WG)
                qk_tok = warpgroup_mma(q_smem, k_bufs.index(slot).reshape(KV).permute((1, 0)), qk0,
                                       use_acc=False, is_async=True)
                acc_tok = warpgroup_mma(p16, v_bufs.index(prev).reshape(KV), acc, is_async=True)
                if PINGPONG:
                    mbarrier.arrive(pp_bars.index(1 - WG), count=1)
                # wgmma groups retire in order: waiting down to one leaves PV running.
                qk = warpgroup_mma_wait(1, deps=[qk_tok])
                qk = _scores(qk, j * BLOCK_N, offs_m, mask_from, S, CAUSAL, BLOCK_N,
                             qk_layout)
                m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
                p = gl.exp2(qk * qk_scale - gl.expand_dims(m_new, 1))
                alpha = gl.exp2(m_i - m_new)
                l_i = l_i * alpha + gl.sum(p, 1)
                m_i = m_new
                acc = warpgroup_mma_wait(0, deps=[acc_tok])
                if PRODUCER:
                    mbarrier.arrive(empty_bars.index(prev), count=1)
                acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
                p16 = gl.convert_layout(p.to(dtype), p_layout)
                prev = slot
                cs += 1
            acc = warpgroup_mma(p16, v_bufs.index(prev).reshape(KV), acc, is_async=True)
            acc = warpgroup_mma_wait(0, deps=[acc])
            if PRODUCER:
                mbarrier.arrive(empty_bars.index(prev), count=1)
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
