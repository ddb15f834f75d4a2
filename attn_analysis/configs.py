"""Attention configurations, the named experiment matrices, and the names every module shares.

What a run measures is configurations x candidates x timing modes on a device; the
configurations live here, and so do the few names the other modules agree on:
``MODES`` (the timing protocols of :mod:`attn_analysis.timing`), ``DEVICES`` and
``BASELINE`` (the candidate every speedup is taken against). Torch-free.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from . import _validate

MODES = ("per_call", "cold_l2", "graph")
DEVICES = ("cuda", "cpu")
BASELINE = "sdpa"  # the default SDPA dispatch, what a user gets without asking
DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (64, 128)
DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16"}
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2}  # bytes per element of each dtype
# Memory orders of a candidate's inputs: logical (B, H, S, D) either way.
LAYOUTS = ("BHSD", "BSHD")
_SHORT_DTYPE = {v: k for k, v in DTYPE_SHORT.items()}


def _config_iv(batch, heads, seq_len, head_dim, dtype, causal) -> dict:
    """Check and normalise every field of ``Config`` to plain Python values."""
    out = {name: _validate.positive_integer(name, value) for name, value in
           (("batch", batch), ("heads", heads), ("seq_len", seq_len), ("head_dim", head_dim))}
    if out["head_dim"] not in HEAD_DIMS:
        raise ValueError(f"`head_dim` must be one of {HEAD_DIMS}; got {head_dim!r}.")
    _validate.choice("dtype", dtype, DTYPES)
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError(f"`causal` must be True or False; got {causal!r}.")
    out.update(dtype=str(dtype), causal=bool(causal))
    return out


@dataclasses.dataclass(frozen=True, order=True)
class Config:
    """One forward-attention workload: Q, K, V of shape (batch, heads, seq_len, head_dim).

    Validated when built: sizes are positive integers, ``dtype`` is one of
    ``DTYPES``, ``head_dim`` one of ``HEAD_DIMS`` and ``causal`` a bool. numpy integers
    and bools (as pandas hands them out) are accepted and stored as plain ``int`` and
    ``bool``, so equal configurations compare, hash and serialise alike; floats (even
    ``32.0``) and bools as sizes are refused.
    """

    batch: int
    heads: int
    seq_len: int
    head_dim: int = 64
    dtype: str = "float16"
    causal: bool = False

    def __post_init__(self):
        fields = _config_iv(self.batch, self.heads, self.seq_len, self.head_dim, self.dtype,
                            self.causal)
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @property
    def key(self) -> str:
        """Stable text key, e.g. ``B32-H8-S512-D64-fp16`` (``-causal`` appended if causal)."""
        text = (f"B{self.batch}-H{self.heads}-S{self.seq_len}-D{self.head_dim}-"
                f"{DTYPE_SHORT[self.dtype]}")
        return text + ("-causal" if self.causal else "")

    @classmethod
    def from_key(cls, key: str) -> "Config":
        """Parse a key made by :attr:`key`; raise ValueError on anything else.

        Only the canonical spelling is accepted (``from_key(k).key == k``): no leading
        zeros, no other digits than ASCII, sizes and head_dim as ``Config`` allows.
        """
        match = (re.fullmatch(r"B(\d+)-H(\d+)-S(\d+)-D(\d+)-(fp16|bf16)(-causal)?", key)
                 if isinstance(key, str) else None)
        if match is None:
            raise ValueError(
                f"`config` must look like 'B32-H8-S512-D64-fp16[-causal]'; got {key!r}.")
        b, h, s, d, dt, causal = match.groups()
        config = cls(int(b), int(h), int(s), int(d), _SHORT_DTYPE[dt], causal is not None)
        if config.key != key:
            raise ValueError(f"`config` must be spelled as Config.key spells it "
                             f"({config.key!r}); got {key!r}.")
        return config

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def tensor_bytes(self) -> int:
        """Bytes of one of Q, K, V or the output: ``B*H*S*D*element size``."""
        return (self.batch * self.heads * self.seq_len * self.head_dim
                * ELEMENT_BYTES[self.dtype])


CONFIG_FIELDS = tuple(f.name for f in dataclasses.fields(Config))  # batch ... causal


def _reports_v1() -> tuple[Config, ...]:
    """The original reports' ten configurations (B=32, H=8, S=512, D=64 is the target)."""
    seq = [Config(32, 8, s) for s in (128, 256, 512, 1024, 2048)]
    batch = [Config(b, 8, 512) for b in (8, 16, 64)]
    heads = [Config(32, h, 512) for h in (4, 16)]
    return tuple(seq + batch + heads)


# FlashAttention-3's evaluation geometry: tokens per batch (B*S) and hidden size (H*D)
FA3_TOKENS = 16384
FA3_HIDDEN = 2048


def _long_grid_v1() -> tuple[Config, ...]:
    """S = 128, 512, 2048, 8192 at D = 64 and 128, causal and not, fp16, at
    FlashAttention-3's evaluation geometry: 16k tokens per batch (B = 16384 / S) and hidden
    size 2048 (H = 2048 / D). Its S >= 512 rows are among that paper's hidden-2048 shapes."""
    return tuple(Config(FA3_TOKENS // s, FA3_HIDDEN // d, s, d, "float16", causal)
                 for d in HEAD_DIMS for causal in (False, True) for s in (128, 512, 2048, 8192))


def _confirm_v1() -> tuple[Config, ...]:
    """The confirmatory shapes: the target, and every shape at which an exploratory
    state-of-the-art run (the reports and long campaigns of 2026-11-24, one or two processes)
    put a custom kernel ahead of SDPA by more than the 2% margin at the call or attention
    level. Fixed from those runs alone, before any confirmatory sample was taken, so the
    confirmatory family is not chosen by the data it tests."""
    return (Config(32, 8, 512), Config(32, 8, 128), Config(32, 8, 256), Config(8, 8, 512),
            Config(32, 8, 2048), Config(8, 32, 2048), Config(8, 16, 2048, 128),
            Config(8, 16, 2048, 128, causal=True), Config(2, 32, 8192),
            Config(2, 32, 8192, causal=True), Config(2, 16, 8192, 128),
            Config(2, 16, 8192, 128, causal=True))


# Named experiment matrices. A name never changes meaning: a changed matrix gets a new
# name (``-v2``), so a recorded run's matrix name identifies its configurations.
MATRICES: dict[str, tuple[Config, ...]] = {
    "reports-v1": _reports_v1(),
    "fixed-v1": (Config(32, 8, 512),),
    "long-v1": (Config(32, 8, 4096), Config(32, 8, 8192),
                Config(32, 8, 512, 128), Config(32, 8, 2048, 128)),
    "long-grid-v1": _long_grid_v1(),
    # The long-grid rows where FlashAttention-3-design kernels were seen ahead of cuDNN
    # (S = 2048 and 8192): the matrix of the scoped long-sequence plan powered-v2-long.
    "long-v2": tuple(c for c in _long_grid_v1() if c.seq_len >= 2048),
    "confirm-v1": _confirm_v1(),
    # Tiny shapes for CPU smoke runs and tests.
    "tiny-v1": (Config(1, 2, 16, 64), Config(2, 2, 33, 64)),
}

TARGET = Config(32, 8, 512)


def matrix(name: str) -> tuple[Config, ...]:
    """Return the configurations of a named matrix (a name in ``MATRICES``)."""
    return MATRICES[_validate.choice("matrix", name, sorted(MATRICES))]


def parse_shapes(shapes, head_dim: int = 64) -> tuple[Config, ...]:
    """Parse ``"B,H,S[,D];B,H,S[,D]"`` (or a list of such strings, or a matrix name).

    An empty value gives an empty tuple (the caller's default applies).
    """
    if isinstance(shapes, str) and shapes.strip() in MATRICES:
        return MATRICES[shapes.strip()]
    if isinstance(shapes, str):
        parts = [p for p in re.split(r"[;\s]+", shapes.strip()) if p]
    elif isinstance(shapes, (list, tuple)) and all(isinstance(p, str) for p in shapes):
        parts = list(shapes)
    else:
        raise ValueError(f"`shapes` must be a string like '2,2,64;2,2,128' or a matrix name "
                         f"({sorted(MATRICES)}); got {shapes!r}.")
    out = []
    for p in parts:
        nums = p.split(",")
        if len(nums) not in (3, 4) or not all(n.strip().isdigit() for n in nums):
            raise ValueError(f"`shapes` entries must look like B,H,S or B,H,S,D; got {p!r}.")
        b, h, s, *d = (int(n) for n in nums)
        out.append(Config(b, h, s, d[0] if d else head_dim))
    return tuple(out)


# The state-of-the-art campaigns (scripts/sota_campaign.sh runs them on a GPU, and so does
# notebooks/06_state_of_the_art.py with measure=True): the named matrix, the candidates,
# the timing modes and the processes of each. The recorded runs were measured with exactly
# these plans (the H100's reports and long runs kept their first process only).
_PEERS = ("fa4", "flashinfer", "cudnn_frontend", "xformers")
CAMPAIGN_PLANS = {
    # every built-in, every peer, the A/A twin, the layout control and two spin controls
    "target": {"matrix": "fixed-v1", "trials": 4, "modes": ("per_call", "cold_l2", "graph"),
               "candidates": ("sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math",
                              "eager", "eager_compiled", "flex", "triton", *_PEERS,
                              "sdpa_twin", "sdpa_bshd", "sdpa_spin0", "sdpa_spin1000")},
    # the reports' ten configurations: SDPA's fused backends, our kernel, the peers
    "reports": {"matrix": "reports-v1", "trials": 2, "modes": ("graph",),
                "candidates": ("sdpa", "sdpa_flash", "sdpa_cudnn", "triton", *_PEERS,
                               "sdpa_bshd")},
    # S = 128 to 8192, D = 64 and 128, causal and not, 16k tokens, hidden 2048
    "long": {"matrix": "long-grid-v1", "trials": 2, "modes": ("graph",),
             "candidates": ("sdpa", *_PEERS)},
    # confirmatory: the shapes where the exploratory campaigns above saw a custom kernel
    # lead, the custom kernels that led there, the A/A twin, six processes
    "confirm": {"matrix": "confirm-v1", "trials": 6, "modes": ("graph",),
                "candidates": ("sdpa", "triton", "fa4", "flashinfer", "sdpa_twin")},
}
PLUGINS = ("attn_analysis.measure.peers", "attn_analysis.measure.controls")
# Plugin modules that moved, old path -> new: recorded plans (plan.json, run.json) and old
# command lines name them by the old path, which still loads (measure.candidates.load_plugins)
# and compares equal to the new one (plugin_modules).
RENAMED_MODULES = {"attn_analysis.peers": "attn_analysis.measure.peers",
                   "attn_analysis.controls": "attn_analysis.measure.controls"}


def plugin_modules(plugins) -> tuple:
    """``plugins`` (module names) by their current paths (``RENAMED_MODULES``), as a tuple;
    a name that never moved, or anything not a string, is left as it is."""
    return tuple(RENAMED_MODULES.get(p, p) if isinstance(p, str) else p for p in plugins)


# campaign -> the named matrix its runs measure
CAMPAIGNS = {name: plan["matrix"] for name, plan in CAMPAIGN_PLANS.items()}
# The calibration of the comparison design at the target (scripts/calibration_campaign.sh):
# the baseline, its A/A twin and spin controls sized at about 0.5, 1 and 1.5 margins
# (measure.controls: a 1000-cycle spin every 3rd call, 2000 cycles every 2nd, 1000 every
# call; their true sizes are measured from the run), one placement-randomized process per
# trial with its own seed; 144 processes are 72 independent replications of the paper's
# 2-process design.
CALIBRATION_PLANS = {
    "calibration-v3": {"matrix": "fixed-v1", "trials": 144, "modes": ("graph",),
                       "candidates": ("sdpa", "sdpa_twin", "sdpa_spin1000e3",
                                      "sdpa_spin2000e2", "sdpa_spin1000"),
                       "plugins": ("attn_analysis.measure.controls",)},
    # v3 plus a 2500-cycle spin after every call: the kernel level's control of at least
    # 1.5 margins (v3's largest measured 1.1-1.3 margins of kernel time); 288 processes
    # are 72 replications of the 4-process design, accumulated over runs of one GPU model.
    "calibration-v4": {"matrix": "fixed-v1", "trials": 288, "modes": ("graph",),
                       "candidates": ("sdpa", "sdpa_twin", "sdpa_spin1000e3",
                                      "sdpa_spin2000e2", "sdpa_spin1000", "sdpa_spin2500"),
                       "plugins": ("attn_analysis.measure.controls",)},
}

# The Gluon campaigns (issue "Our kernel beats cuDNN"; scripts/sota_campaign.sh names their
# runs PREFIX-CAMPAIGN): our Gluon kernel (tuned per shape over its variants) under the
# protocol at the target, beside SDPA's default (cuDNN on Hopper), SDPA forced to cuDNN,
# our Triton kernel and the A/A twin; and across the long grid beside FlashAttention-4,
# the peer to beat there. Four processes each: the calibrated design.
GLUON_PLANS = {
    "gluon-target": {"matrix": "fixed-v1", "trials": 4, "modes": ("graph",),
                     "candidates": ("sdpa", "sdpa_cudnn", "triton", "gluon", "sdpa_twin"),
                     "plugins": ("attn_analysis.measure.controls",)},
    "gluon-long": {"matrix": "long-grid-v1", "trials": 4, "modes": ("graph",),
                   "candidates": ("sdpa", "gluon", "fa4"),
                   "plugins": ("attn_analysis.measure.peers",)},
}

# The peer campaigns of issue 42 (scripts/sota_campaign.sh names their runs PREFIX-sota-CAMPAIGN):
# FlashAttention-3's Hopper build, PyTorch's two switches to FlashAttention-4 (FlexAttention's
# FLASH backend; SDPA after activating FA4) and FA4 on its own (B, S, H, D) layout, beside
# SDPA's default (cuDNN on Hopper), cuDNN called directly, FA4 and the A/A twin, at the
# target and across the long grid; four processes each, the calibrated design. sdpa_fa4
# needs the flash-attn-4 release torch 2.11's wrapper expects (requirements-peers.txt), so
# it has plans of its own, run under that environment (PEERS_PYTHONPATH_FA4B18).
PEER_PLANS = {
    "peers2-target": {"matrix": "fixed-v1", "trials": 4, "modes": ("graph",),
                      "candidates": ("sdpa", "sdpa_cudnn", "cudnn_frontend", "fa4", "fa4_bshd",
                                     "fa3", "flex_flash", "sdpa_twin")},
    "peers2-long": {"matrix": "long-grid-v1", "trials": 4, "modes": ("graph",),
                    "candidates": ("sdpa", "fa4", "fa4_bshd", "fa3", "flex_flash")},
    "peers2-sdpa-fa4-target": {"matrix": "fixed-v1", "trials": 4, "modes": ("graph",),
                               "candidates": ("sdpa", "fa4", "sdpa_fa4", "sdpa_twin")},
    "peers2-sdpa-fa4-long": {"matrix": "long-grid-v1", "trials": 4, "modes": ("graph",),
                             "candidates": ("sdpa", "fa4", "sdpa_fa4")},
}

# The powered campaigns of issue 45, pre-registered here before any of their runs (commit
# of this entry precedes every run named powered-v1-*). Each names its confirmatory family
# (``family_candidates`` against SDPA's default, ``sdpa``, at every configuration of its
# matrix, at each of ``levels``), so its size m (``family_size``) is fixed before a sample
# is taken, and the rule every comparison in it is judged by:
POWERED_RULE = ("stats.compare, process-t interval (paired by trial) at family-wise 95 % "
                "(Bonferroni over the plan's family m), margin 2 %: faster / slower beyond "
                "the margin, equivalent inside it, else inconclusive; the A/A twin is judged "
                "at the same m and is not a member of the family")
# The custom kernels the family compares with SDPA: ours and every peer as shipped.
POWERED_FAMILY = ("triton", "fa4", "flashinfer", "cudnn_frontend", "fa3", "flex_flash")
# Processes: sized with analyse.power.processes_needed (power 80 % against a candidate 1.5
# margins faster, A/A "equivalent" 90 %, at the family's m) from the per-process SD of the
# exploratory runs' comparisons with these kernels at 8 placements (analyse.power.
# paired_components of the *-sota-target, *-sota-confirm and *-gluon-* runs): 24
# processes decide at m = 120 for an SD up to 0.0088, about the 90th percentile of the
# reports' shapes (0.004-0.010 by GPU model and level). The long grid's SDs are larger
# (75th percentile 0.009-0.014, 90th 0.016-0.022) and no affordable design decides its
# call level, so its family is the kernel level alone (m = 96), decided by 24 processes up
# to an SD of 0.0088 (about its 75th percentile); its call level is reported as exploratory.
# Each runs as ``shards`` shards (--shard K/N), one device call each on a 4-GPU host
# (scripts/powered_campaign.sh), merged with `python -m attn_analysis merge`.
POWERED_PLANS = {
    "powered-v1-reports": {"matrix": "reports-v1", "trials": 24, "modes": ("graph",),
                           "candidates": ("sdpa", *POWERED_FAMILY, "sdpa_twin"),
                           "family_candidates": POWERED_FAMILY, "levels": ("call", "kernel"),
                           "family_size": 120, "shards": 2, "rule": POWERED_RULE},
    "powered-v1-long": {"matrix": "long-grid-v1", "trials": 24, "modes": ("graph",),
                        "candidates": ("sdpa", *POWERED_FAMILY, "sdpa_twin"),
                        "family_candidates": POWERED_FAMILY, "levels": ("kernel",),
                        "family_size": 96, "shards": 2, "rule": POWERED_RULE},
    # powered-v1-long cannot decide (plan --power: 108+ processes at 8 placements). At the
    # long shapes the spread between processes is placement noise (interaction ~0), so it
    # shrinks with the placements per process as the variance components predict
    # (benchmarks/long-placements/: SD at 32 placements half that at 8, run
    # h200x2-long-placements32). This plan, committed before any of its runs, scopes the
    # family to the question the long grid answers (do the FlashAttention-3-design kernels
    # beat cuDNN from S = 2048?) and buys precision with placements: fa3, fa4 and
    # flex_flash against sdpa at the 8 configurations of long-v2, both levels, m = 48; 48
    # placements per process; 36 processes, at least what plan --power asks on each GPU
    # model (H100 call 19 / kernel 31, H200 24 / 29 from data/reference/design_sigmas.json
    # at this commit). Nine shards of 4 processes, each one device call on a 2-GPU host.
    "powered-v2-long": {"matrix": "long-v2", "trials": 36, "placements": 48,
                        "modes": ("graph",),
                        "candidates": ("sdpa", "fa3", "fa4", "flex_flash", "sdpa_twin"),
                        "family_candidates": ("fa3", "fa4", "flex_flash"),
                        "levels": ("call", "kernel"), "family_size": 48, "shards": 9,
                        "rule": POWERED_RULE},
    # Whether running neighbours move the results: the A/A twin and the ~1.9-margin spin
    # control at the target, run once with a process on every GPU at a time (--gpus all)
    # and once one process at a time over the same GPUs (--one-at-a-time), on one host.
    "neighbours-v1": {"matrix": "fixed-v1", "trials": 12, "modes": ("graph",),
                      "candidates": ("sdpa", "sdpa_twin", "sdpa_spin1000"),
                      "plugins": ("attn_analysis.measure.controls",)},
}


# Pre-registered (committed 2026-11-28, before any of its runs): issue 43's confirmatory
# test of our Gluon kernel against SDPA's default at the target (a GLUON_PLANS entry, set
# here because it is judged by POWERED_RULE above). The gluon candidate tunes over
# gluon_config.CHECKED_VARIANTS at the run's commit; the plan runs only after fa3_n128_s3
# (round 2's fastest, full float64 grid passed) and, if one passes its full grid too,
# round 3's winner have joined it with a sanitizer pass (gluon_config.NEXT_CHECKED,
# notes/kernel-schedules.md). The run records the variant its tuning picked; if neither
# passes, the plan is not run. Family: gluon against sdpa at the call and kernel levels,
# m = 2 (one configuration; sdpa_cudnn, the same cuDNN kernel forced, and the A/A twin are
# judged at that m, not members). Processes, from data/reference/design_sigmas.json at this
# commit, 8 placements: plan --power --matrix fixed-v1 --candidates sdpa gluon needs H200
# call 4 / kernel 5, H100 19 / 20; plan --power --campaign gluon-v2-target (the SDs of all
# four candidates, the twin's included) H200 4 / 5, H100 13 / 27. 28 meet every one.
GLUON_PLANS["gluon-v2-target"] = {
    "matrix": "fixed-v1", "trials": 28, "placements": 8, "modes": ("graph",),
    "candidates": ("sdpa", "sdpa_cudnn", "gluon", "sdpa_twin"),
    "plugins": ("attn_analysis.measure.controls",), "family_candidates": ("gluon",),
    "levels": ("call", "kernel"), "family_size": 2, "rule": POWERED_RULE}



# Our Gluon kernel's default configuration per head dim (the "plain" variant, the one to test
# first): one program per tile, 8 warps (two warpgroups, 64 rows each) over 128 query rows.
# Its one copy: measure.gluon_config builds every variant on it, and the chapters read it
# here to say what a variant changed (they never import the measuring side).
GLUON_DEFAULT_CONFIGS = {
    64: {"BLOCK_M": 128, "BLOCK_N": 64, "STAGES": 3, "num_warps": 8, "PERSIST": 0,
         "WARP_SPEC": False, "PINGPONG": False, "OVERLAP": False, "MAXNREG": 0,
         "QBUF": 1, "PP_TURN": 0, "EXP_SPLIT": 0, "KV_SPLIT": 0, "XTILE": 0,
         "RESCALE": 0, "LSUM": 0},
    128: {"BLOCK_M": 128, "BLOCK_N": 64, "STAGES": 2, "num_warps": 8, "PERSIST": 0,
          "WARP_SPEC": False, "PINGPONG": False, "OVERLAP": False, "MAXNREG": 0,
          "QBUF": 1, "PP_TURN": 0, "EXP_SPLIT": 0, "KV_SPLIT": 0, "XTILE": 0,
          "RESCALE": 0, "LSUM": 0},
}

def sweep_arguments(campaign: str) -> list[str]:
    """The ``python -m attn_analysis sweep`` arguments of ``campaign`` (a key of
    ``CAMPAIGN_PLANS``, ``CALIBRATION_PLANS``, ``GLUON_PLANS``, ``PEER_PLANS`` or
    ``POWERED_PLANS``), without ``--out``."""
    plans = {**CAMPAIGN_PLANS, **CALIBRATION_PLANS, **GLUON_PLANS, **PEER_PLANS,
             **POWERED_PLANS}
    plan = plans[_validate.choice("campaign", campaign, sorted(plans))]
    args = [arg for plugin in plan.get("plugins", PLUGINS) for arg in ("--plugin", plugin)]
    placements = ["--placements", str(plan["placements"])] if "placements" in plan else []
    return args + ["--matrix", plan["matrix"], "--trials", str(plan["trials"]), *placements,
                   "--modes", *plan["modes"], "--candidates", *plan["candidates"]]
