"""What a configuration of our Gluon attention kernel may be, and what it launches: the
configuration keys and their allowed values, the default per head dim, the ablation's
variants (:data:`VARIANTS`), the shared memory a configuration needs, and the launch plan
(grid and tile counts).

Why a module of its own: all of it is pure Python, checked by the CPU tests and read by
``scripts/gluon_check.py``, while the kernel (:mod:`.gluon_kernels`) needs Gluon and its
launcher (:mod:`.gluon_attention`) a GPU. The keys are the kernel's constexpr switches:

* ``PERSIST``: 0 = one program per tile; n > 0 = n programs per multiprocessor looping over
  tiles; the next tile's Q and first K/V loads are issued before this tile's epilogue and
  the O store is waited for only when its buffer is needed again.
* ``WARP_SPEC``: a producer partition of one warp (``gl.warp_specialize``) issues every
  TMA load; the consumer warps do only wgmma, softmax and the epilogue.
* ``PINGPONG`` (needs WARP_SPEC): two consumer warpgroups (4 warps each, ``BLOCK_M`` rows
  each) share each K/V slot; a pair of mbarriers orders their matrix products so that one
  warpgroup's softmax runs while the other's products use the tensor cores (FA3's
  inter-warpgroup overlap).
* ``OVERLAP``: inside a warpgroup, the scores of key tile j are issued (async wgmma) with
  the PV product of tile j-1, so the exponentials of tile j overlap PV of tile j-1 (FA3's
  intra-warpgroup overlap; P of one tile is kept in registers across an iteration).

* ``QBUF`` (issue 43; needs WARP_SPEC): Q buffers per consumer; 2 lets the producer load
  the next tile's Q while this tile's last products still read the other (cuDNN's
  sm90 engine holds two).
* ``PP_TURN`` (issue 43; needs PINGPONG, not OVERLAP): what a ping-pong turn covers. 0: the
  scores' product only (the ``pingpong`` variant); 1: both products, one turn around each
  product's issue (FlashAttention-3's order without the intra-warpgroup overlap); 2: the
  exponentials (cuDNN's engine: the two warpgroups take turns on the SFU, and the products
  run outside the turn). With OVERLAP one turn already covers both products.
* ``EXP_SPLIT`` (issue 43): 0: every exponential on the SFU (``ex2``); 1: odd key columns
  through a polynomial on the FMA pipe (half); 2: a quarter of the columns
  (:mod:`.gluon_tile`'s ``_exp2_poly``, FlashAttention-4's idea on Hopper).
* ``KV_SPLIT`` (issue 43, second round; needs WARP_SPEC): 1 gives K and V of a ring slot
  mbarriers of their own, so a consumer starts the scores' product when K has landed
  and waits for V only before the PV product (cuDNN's engine and FlashAttention-3 keep K
  and V apart); 0 waits for both at once.
* ``LSUM`` (issue 43, sixth round; needs WARP_SPEC and OVERLAP): 1 takes the row sum of P
  on the tensor cores, as P times a ones block in shared memory issued after each PV, in
  place of a sum on the FMA pipe.

All of these are off in the default, "plain", variant; ``BLOCK_M``, ``BLOCK_N``, ``STAGES``
(slots of the K/V ring), ``num_warps`` and ``MAXNREG`` (0: the compiler's register count)
complete a configuration.
"""

from __future__ import annotations

import torch

from ..configs import GLUON_DEFAULT_CONFIGS

__all__ = ["HEAD_DIMS", "DTYPES", "CONFIG_KEYS", "SMEM_BYTES", "DEFAULT_CONFIGS", "VARIANTS",
           "CHECKED_VARIANTS", "NEXT_CHECKED", "ABLATION_VARIANTS", "ROUND2_VARIANTS",
           "ROUND3_VARIANTS", "ROUND4_VARIANTS",
           "ROUND5_VARIANTS", "ROUND6_VARIANTS", "HEAD_DIM_OVERRIDES",
           "variant_changes", "config_for", "tuning_space", "variant_of", "shared_bytes",
           "full_config", "cdiv", "plan"]

HEAD_DIMS = (64, 128)
DTYPES = (torch.float16, torch.bfloat16)
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "STAGES", "num_warps", "PERSIST", "WARP_SPEC",
               "PINGPONG", "OVERLAP", "MAXNREG", "QBUF", "PP_TURN", "EXP_SPLIT", "KV_SPLIT",
               "XTILE", "RESCALE", "LSUM")
_FLAGS = ("WARP_SPEC", "PINGPONG", "OVERLAP")
_ALLOWED = {"BLOCK_M": (64, 128), "BLOCK_N": (64, 128), "STAGES": (1, 2, 3, 4),
            "num_warps": (4, 8), "PERSIST": (0, 1, 2), "WARP_SPEC": (False, True),
            "PINGPONG": (False, True), "OVERLAP": (False, True),
            "MAXNREG": (0, 128, 152, 168, 200, 232, 240),
            "QBUF": (1, 2), "PP_TURN": (0, 1, 2), "EXP_SPLIT": (0, 1, 2),
            "KV_SPLIT": (0, 1), "XTILE": (0, 1), "RESCALE": (0, 1),
            "LSUM": (0, 1)}
SMEM_BYTES = 227 * 1024  # usable shared memory per block on sm90 (H100, H200)

# Default configuration per head dim: the plain variant, the one to test first
# (configs.GLUON_DEFAULT_CONFIGS, its one copy, which the torch-free chapters read too).
DEFAULT_CONFIGS = GLUON_DEFAULT_CONFIGS
# The ablation, in the order of the schedule steps; each names the keys it changes
# from the default of its head dim (rounds 2 and 3, below, the keys they change from a
# variant before them). "overlap_only" isolates the intra-warpgroup overlap on
# the plain kernel. PINGPONG's BLOCK_M is per consumer warpgroup (a tile is 2 x 64 rows).
VARIANTS = {
    "plain": {},
    "persist": {"PERSIST": 1},
    "warp_spec": {"PERSIST": 1, "WARP_SPEC": True, "MAXNREG": 168},
    "pingpong": {"PERSIST": 1, "WARP_SPEC": True, "PINGPONG": True, "BLOCK_M": 64,
                 "num_warps": 4, "MAXNREG": 168},
    "fa3": {"PERSIST": 1, "WARP_SPEC": True, "PINGPONG": True, "OVERLAP": True,
            "BLOCK_M": 64, "num_warps": 4, "MAXNREG": 168},
    "overlap_only": {"OVERLAP": True, "STAGES": 3},
    # Issue 43's ablation (notes/kernel-schedules.md). Not in the tuning space until each
    # has passed the float64 grid on a GPU (:data:`CHECKED_VARIANTS`). Register split of
    # the warp-specialised launches: MAXNREG 168 over 3 warpgroups (the producer warp takes
    # a whole warpgroup's allocation) is 64,512 registers; with the producer at 24 each
    # consumer thread gets 240, which holds a 64 x 128 (PINGPONG) or 128 x 128 (8 warps)
    # fp32 score tile (64 registers), its fp16 P (32) and O (32 at D64).
    "ws_q2": {"PERSIST": 1, "WARP_SPEC": True, "MAXNREG": 168, "QBUF": 2},
    "ws_n128": {"PERSIST": 1, "WARP_SPEC": True, "MAXNREG": 168, "BLOCK_N": 128,
                "STAGES": 2, "QBUF": 2},
    "pp_gemms": {"PERSIST": 1, "WARP_SPEC": True, "PINGPONG": True, "BLOCK_M": 64,
                 "num_warps": 4, "MAXNREG": 168, "PP_TURN": 1},
    "pp_exp": {"PERSIST": 1, "WARP_SPEC": True, "PINGPONG": True, "BLOCK_M": 64,
               "num_warps": 4, "MAXNREG": 168, "PP_TURN": 2},
    "cudnn_tile": {"PERSIST": 1, "WARP_SPEC": True, "PINGPONG": True, "BLOCK_M": 64,
                   "num_warps": 4, "MAXNREG": 168, "BLOCK_N": 128, "STAGES": 2,
                   "QBUF": 2, "PP_TURN": 2},
    "fa3_n128": {"PERSIST": 1, "WARP_SPEC": True, "PINGPONG": True, "OVERLAP": True,
                 "BLOCK_M": 64, "num_warps": 4, "MAXNREG": 168, "BLOCK_N": 128,
                 "STAGES": 2, "QBUF": 2},
    "cudnn_exp": {"PERSIST": 1, "WARP_SPEC": True, "PINGPONG": True, "BLOCK_M": 64,
                  "num_warps": 4, "MAXNREG": 168, "BLOCK_N": 128, "STAGES": 2,
                  "QBUF": 2, "PP_TURN": 2, "EXP_SPLIT": 2},
    "overlap_exp": {"OVERLAP": True, "STAGES": 3, "EXP_SPLIT": 2},
    "fa3_exp": {"PERSIST": 1, "WARP_SPEC": True, "PINGPONG": True, "OVERLAP": True,
                "BLOCK_M": 64, "num_warps": 4, "MAXNREG": 168, "EXP_SPLIT": 1},
}


def _steps(variants: dict, steps: tuple) -> dict:
    """The variants of ``steps``, ``(name, base, changes)`` in order: each is its base's
    entry (of ``variants`` or an earlier step) with ``changes`` applied, so a variant states
    only what it changes. ValueError naming ``steps`` for a name given twice or an unknown
    base."""
    out = {}
    for name, base, changes in steps:
        if name in variants or name in out:
            raise ValueError(f"`steps` names the variant {name!r} twice.")
        known = {**variants, **out}
        if base not in known:
            raise ValueError(f"`steps`: the base {base!r} of {name!r} is not an earlier "
                             f"variant.")
        out[name] = {**known[base], **changes}
    return out


VARIANTS.update(_steps(VARIANTS, (
    # Issue 43's second round (notes/kernel-schedules.md, "second round"): the H100
    # round's winners combined. Shared memory at D64 (Q and O 16 KiB each per consumer,
    # a 128-key slot 32 KiB): overlap_n128 128 KiB, one program per SM where overlap_only's
    # 80 KiB allowed two; cudnn_s3 144 KiB; ws_n128_s3 and ws_ovl_n128 144 KiB.
    ("overlap_n128", "overlap_only", {"BLOCK_N": 128}),
    ("overlap_n128_p1", "overlap_n128", {"PERSIST": 1}),
    ("overlap_n128_m64", "overlap_n128", {"BLOCK_M": 64, "num_warps": 4}),
    ("overlap_p2", "overlap_only", {"PERSIST": 2}),
    ("cudnn_s3", "cudnn_tile", {"STAGES": 3}),
    ("fa3_n128_s3", "fa3_n128", {"STAGES": 3}),
    ("ws_n128_s3", "ws_n128", {"STAGES": 3}),
    ("ws_ovl_n128", "ws_n128_s3", {"OVERLAP": True}),
    # K and V on barriers of their own, on the two warp-specialised schedules closest to
    # cuDNN's engine (same shared memory as their bases: barriers aside).
    ("cudnn_kv", "cudnn_tile", {"KV_SPLIT": 1}),
    ("ws_ovl_kv", "ws_ovl_n128", {"KV_SPLIT": 1}),
    # Issue 43's third round (notes/kernel-schedules.md, "Round 3"): round 2's fastest,
    # fa3_n128_s3, with K and V apart (144 KiB), then with a fourth slot (176 KiB: a whole
    # tile's four key tiles in the ring); overlap_p2 with a fourth slot (96 KiB, still two
    # programs per SM), which doubles its single-partition prefetch lead (STAGES - 2 key
    # tiles ahead).
    ("fa3_kv_s3", "fa3_n128_s3", {"KV_SPLIT": 1}),
    ("fa3_kv_s4", "fa3_kv_s3", {"STAGES": 4}),
    ("overlap_p2_s4", "overlap_p2", {"STAGES": 4}),
    # Issue 43's fourth round (notes/kernel-schedules.md, "Round 4"): fa3_n128_s3 with the
    # overlap carried over tile boundaries (same shared memory and registers' live values).
    ("fa3_xt", "fa3_n128_s3", {"XTILE": 1}),
    # Issue 43's fifth round (notes/kernel-schedules.md, "Round 5"): fa3_n128_s3 with the
    # output's rescale moved before PV's issue (same shared memory).
    ("fa3_rs", "fa3_n128_s3", {"RESCALE": 1}),
    # Issue 43's sixth round (notes/kernel-schedules.md, "Round 6"): fa3_n128_s3 with the
    # row sum as a product of P and a ones block on the tensor cores (2 KiB more).
    ("fa3_ls", "fa3_n128_s3", {"LSUM": 1}),
)))

# Where a variant's setting does not fit an sm90 block at a head dim (the second round is
# tuned for D64; the float64 grid still checks D128, where a 128-key slot is 64 KiB): the
# keys it takes there instead. The warp-specialised ones keep their schedule with 2 slots
# (224 KiB); the plain overlap needs 3 slots, so at D128 it keeps key step 64.
HEAD_DIM_OVERRIDES = {128: {"overlap_n128": {"BLOCK_N": 64},
                            "overlap_n128_p1": {"BLOCK_N": 64},
                            "cudnn_s3": {"STAGES": 2}, "fa3_n128_s3": {"STAGES": 2},
                            "ws_n128_s3": {"STAGES": 2}, "ws_ovl_n128": {"STAGES": 2},
                            "ws_ovl_kv": {"STAGES": 2}, "fa3_kv_s3": {"STAGES": 2},
                            "fa3_kv_s4": {"STAGES": 2}, "fa3_xt": {"STAGES": 2},
                            "fa3_rs": {"STAGES": 2}, "fa3_ls": {"STAGES": 2}}}
# Variants that have passed the full float64 grid on a GPU but not yet every case of the
# concurrency sanitizer (``scripts/gluon_check.py --sections consan``): fa3_n128_s3's grid is
# data/checks/gluon_check_h200d_grid_round2.json. Not tuned yet. Once a sanitizer file
# with every case ok is in data/checks, the one-line change that makes them the ``gluon``
# candidate's is appending ``+ NEXT_CHECKED`` to CHECKED_VARIANTS below (a round-3 winner
# that passes both joins this tuple first); the plan GLUON_PLANS["gluon-v2-target"] of
# configs.py runs only after that change.
NEXT_CHECKED = ("fa3_n128_s3",)
# The variants that have passed the float64 grid on a GPU: the tuning space of the
# ``gluon`` candidate (issue 43's variants join once their grid has passed).
CHECKED_VARIANTS = ("plain", "persist", "warp_spec", "pingpong", "fa3",
                    "overlap_only") + NEXT_CHECKED
# Issue 43's ablation: each new variant beside the one it changes (for the ablation table).
ABLATION_VARIANTS = ("warp_spec", "ws_q2", "ws_n128", "pingpong", "pp_gemms", "pp_exp",
                     "cudnn_tile", "cudnn_exp", "fa3", "fa3_n128", "fa3_exp",
                     "overlap_only", "overlap_exp")
# The second round (``scripts/gluon_ablation.py --variants round2``): the H100 round's best
# two, then each combination of its winners (hypotheses in notes/kernel-schedules.md).
ROUND2_VARIANTS = ("overlap_only", "cudnn_tile", "overlap_n128", "overlap_n128_m64",
                   "overlap_n128_p1", "overlap_p2", "cudnn_s3", "fa3_n128_s3", "ws_n128_s3",
                   "ws_ovl_n128", "cudnn_kv", "ws_ovl_kv")
# The third round (``--variants round3``): round 2's fastest two of their schedules
# (fa3_n128_s3, overlap_p2), then each one-step change of them (hypotheses in
# notes/kernel-schedules.md, written before the run).
ROUND3_VARIANTS = ("fa3_n128_s3", "overlap_p2", "fa3_kv_s3", "fa3_kv_s4", "overlap_p2_s4")
# The fourth round (``--variants round4``): fa3_n128_s3 and its cross-tile overlap.
ROUND4_VARIANTS = ("fa3_n128_s3", "fa3_xt")
# The fifth round (``--variants round5``): fa3_n128_s3 and its early rescale.
ROUND5_VARIANTS = ("fa3_n128_s3", "fa3_rs")
# The sixth round (``--variants round6``): fa3_n128_s3 and its row sum on the tensor cores.
ROUND6_VARIANTS = ("fa3_n128_s3", "fa3_ls")


# --------------------------------------------------------------------------- configuration


def variant_changes(variant: str, head_dim: int) -> dict:
    """The keys ``variant`` changes from the default at ``head_dim``: its entry of
    :data:`VARIANTS` with :data:`HEAD_DIM_OVERRIDES` at that head dim applied."""
    return {**VARIANTS[variant], **HEAD_DIM_OVERRIDES.get(head_dim, {}).get(variant, {})}


def config_for(head_dim: int, variant: str = "plain", dtype=torch.float16,
               causal: bool = False) -> dict:
    """The full configuration of ``variant`` (:data:`VARIANTS`) at ``head_dim``.

    dtype and causal do not change the choice today (both dtypes are 2 bytes; a causal
    tile walks fewer keys, not other ones); they are arguments so that a measured
    per-(D, dtype, causal) choice can land here without changing callers."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"`head_dim` must be one of {HEAD_DIMS}; got {head_dim!r}.")
    if variant not in VARIANTS:
        raise ValueError(f"`variant` must be one of {tuple(VARIANTS)}; got {variant!r}.")
    if dtype not in DTYPES:
        raise ValueError(f"`dtype` must be torch.float16 or torch.bfloat16; got {dtype}.")
    if not isinstance(causal, bool):
        raise ValueError(f"`causal` must be True or False; got {causal!r}.")
    return full_config(variant_changes(variant, head_dim), head_dim)


def tuning_space(head_dim: int) -> dict:
    """Variant name -> full configuration at ``head_dim``: what the ``gluon`` candidate's
    tuning times (:func:`.gluon_attention.tune`), one entry per distinct configuration, in
    :data:`VARIANTS`' order. Only the variants, each of which has passed the float64 grid on
    a GPU (``data/checks/gluon_check_*``): no untested tile setting is tried."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"`head_dim` must be one of {HEAD_DIMS}; got {head_dim!r}.")
    space = {}
    for name in CHECKED_VARIANTS:
        cfg = full_config(variant_changes(name, head_dim), head_dim)
        if cfg not in space.values():
            space[name] = cfg
    return space


def variant_of(cfg: dict, head_dim: int) -> str:
    """The name of the variant whose full configuration at ``head_dim`` is ``cfg``, or
    "custom" for any other configuration. Where head-dim overrides make two variants one
    configuration (fa3_n128 and fa3_n128_s3 at D128), a checked variant's name wins, so a
    tuned build is recorded under the name it was tuned as."""
    full = full_config(cfg, head_dim)
    return next((n for n in (*CHECKED_VARIANTS, *VARIANTS)
                 if full_config(variant_changes(n, head_dim), head_dim) == full), "custom")


def shared_bytes(cfg: dict, head_dim: int) -> int:
    """Shared memory the kernel allocates for ``cfg`` (2-byte elements; barriers aside):
    Q and O buffers per consumer warpgroup, and the K/V ring."""
    consumers = 2 if cfg["PINGPONG"] else 1
    q_and_o = consumers * (cfg["QBUF"] + 1) * cfg["BLOCK_M"] * head_dim * 2
    ring = cfg["STAGES"] * 2 * cfg["BLOCK_N"] * head_dim * 2
    ones = cfg["LSUM"] * 8 * cfg["BLOCK_N"] * 2  # LSUM's ones block, B of the row sum
    return q_and_o + ring + ones


def full_config(config, head_dim: int) -> dict:
    """A full configuration dict from ``config`` (None: the default for ``head_dim``),
    checked: every key allowed, the switches consistent, the shared memory within
    :data:`SMEM_BYTES`; raises ValueError naming the key otherwise."""
    if config is None:
        return dict(DEFAULT_CONFIGS[head_dim])
    if not isinstance(config, dict):
        raise ValueError(f"`config` must be a dict with keys among {CONFIG_KEYS} or None; "
                         f"got {type(config).__name__}.")
    unknown = sorted(set(config) - set(CONFIG_KEYS) - {"variant", "interpreted"})
    if unknown:
        raise ValueError(f"`config` keys must be among {CONFIG_KEYS}; got {unknown}.")
    full = {**DEFAULT_CONFIGS[head_dim], **{k: config[k] for k in CONFIG_KEYS if k in config}}
    for key, allowed in _ALLOWED.items():
        is_flag = key in _FLAGS  # (1 == True: a bool is refused for a number and back)
        if isinstance(full[key], bool) != is_flag or full[key] not in allowed:
            raise ValueError(f"`config['{key}']` must be one of {allowed}; got {full[key]!r}.")
    if full["PINGPONG"] and not full["WARP_SPEC"]:
        raise ValueError("`config['PINGPONG']` needs WARP_SPEC (the second consumer "
                         "warpgroup is a warp_specialize partition).")
    if full["PINGPONG"] and (full["num_warps"] != 4 or full["BLOCK_M"] != 64):
        raise ValueError("`config['PINGPONG']` needs num_warps 4 and BLOCK_M 64 (one "
                         "warpgroup of 64 rows per consumer).")
    if full["BLOCK_M"] != 16 * full["num_warps"] * (full["BLOCK_M"] // (16 * full["num_warps"])) \
            or full["BLOCK_M"] < 16 * full["num_warps"]:
        raise ValueError(f"`config['BLOCK_M']` must be a multiple of 16 * num_warps "
                         f"({16 * full['num_warps']}); got {full['BLOCK_M']}.")
    if full["QBUF"] == 2 and not full["WARP_SPEC"]:
        raise ValueError("`config['QBUF']` 2 needs WARP_SPEC (the producer warp loads the "
                         "next Q while the consumers read this one).")
    if full["KV_SPLIT"] and not full["WARP_SPEC"]:
        raise ValueError("`config['KV_SPLIT']` 1 needs WARP_SPEC (the producer warp issues "
                         "K and V on barriers of their own).")
    if full["PP_TURN"] and (not full["PINGPONG"] or full["OVERLAP"]):
        raise ValueError("`config['PP_TURN']` 1 or 2 needs PINGPONG without OVERLAP (with "
                         "OVERLAP one turn already covers both products).")
    if full["XTILE"] and not (full["WARP_SPEC"] and full["OVERLAP"] and full["PERSIST"]):
        raise ValueError("`config['XTILE']` 1 needs WARP_SPEC, OVERLAP and PERSIST (a "
                         "persistent consumer carries the overlap into its next tile).")
    if full["RESCALE"] and not (full["WARP_SPEC"] and full["OVERLAP"]) or \
            full["RESCALE"] and full["XTILE"]:
        raise ValueError("`config['RESCALE']` 1 needs WARP_SPEC and OVERLAP, without XTILE "
                         "(it moves a step of the consumer's overlapped key walk).")
    if full["LSUM"] and not (full["WARP_SPEC"] and full["OVERLAP"]) or \
            full["LSUM"] and full["XTILE"]:
        raise ValueError("`config['LSUM']` 1 needs WARP_SPEC and OVERLAP, without XTILE "
                         "(the row-sum product rides with PV in the overlapped key walk).")
    if full["STAGES"] < 2 and full["WARP_SPEC"]:
        raise ValueError("`config['STAGES']` must be >= 2 with WARP_SPEC.")
    if full["STAGES"] < 3 and full["OVERLAP"] and not full["WARP_SPEC"]:
        raise ValueError("`config['STAGES']` must be >= 3 with OVERLAP and no WARP_SPEC "
                         "(two key tiles are in use while a third loads).")
    need = shared_bytes(full, head_dim)
    if need > SMEM_BYTES:
        raise ValueError(f"`config` needs {need} bytes of shared memory at D={head_dim}, "
                         f"more than the {SMEM_BYTES} an sm90 block has; lower STAGES, "
                         f"BLOCK_N or BLOCK_M.")
    return full


# --------------------------------------------------------------------------- launch plan


def cdiv(a: int, b: int) -> int:
    """Ceiling of a / b for positive integers."""
    return -(-a // b)


def plan(shape, causal: bool, cfg: dict, num_sms: int) -> dict:
    """Grid and tile counts of a launch, pure Python (no GPU): ``rows_per_tile`` query rows
    of one head per tile, ``n_m`` tiles per head, ``n_tiles`` in all, ``grid`` (a
    persistent grid holds at most PERSIST programs per multiprocessor), ``kv_tiles_first``
    and ``kv_tiles_last``: the key tiles the first and the last query tile of a head walk
    (causal: only up to its diagonal), and ``warps`` (consumers and producer together)."""
    B, H, S, D = shape
    rows = cfg["BLOCK_M"] * (2 if cfg["PINGPONG"] else 1)
    n_m = cdiv(S, rows)
    n_tiles = n_m * B * H
    grid = (min(n_tiles, cfg["PERSIST"] * num_sms),) if cfg["PERSIST"] else (n_m, B * H)
    last_end = min(n_m * rows, S) if causal else S
    return {"rows_per_tile": rows, "n_m": n_m, "n_tiles": n_tiles, "grid": grid,
            "kv_tiles_last": cdiv(last_end, cfg["BLOCK_N"]),
            "kv_tiles_first": cdiv(min(rows, S), cfg["BLOCK_N"]) if causal
            else cdiv(S, cfg["BLOCK_N"]),
            "warps": cfg["num_warps"] * (2 if cfg["PINGPONG"] else 1)
            + (1 if cfg["WARP_SPEC"] else 0)}

