"""Who each candidate is: its label, its origin and the name pattern of its kernels.

Tables and figures must say what a candidate is (PyTorch's own library path, our kernel,
a peer's shipped kernel, or a control) and recognise its kernels in the profiler's list,
without a hand-written list of names per notebook and without importing torch. This
module holds that metadata for every candidate the package registers; a plugin candidate
brings its own :class:`Meta`, and the sweep writes each candidate's metadata into its
units (``info["meta"]``), so a run labels itself (:func:`meta_for` prefers what a run
recorded). Torch-free.
"""

from __future__ import annotations

import dataclasses
import re

from .. import _validate

__all__ = ["ORIGINS", "Meta", "SDPA_DEFAULT_FAMILY", "SDPA_BACKENDS", "CATALOG",
           "OTHER_KERNELS", "spin_spec", "spin_order", "meta_for", "kernel_families",
           "kernel_family", "by_origin"]

# Where a candidate comes from. "library": what PyTorch ships (SDPA and its backends,
# eager, torch.compile, FlexAttention); "ours": this project's kernels; "peer": another
# project's shipped attention kernel (FlashAttention-4, FlashInfer, cuDNN called directly,
# xFormers); "control": a candidate whose true difference from SDPA is known by
# construction (the A/A twin, SDPA plus a spin kernel, SDPA on another memory layout).
ORIGINS = ("library", "ours", "peer", "control")


@dataclasses.dataclass(frozen=True)
class Meta:
    """What a candidate is, for labelling.

    ``label`` is the short name in tables and figures; ``family`` names the attention
    kernel it runs (two candidates that run the same kernel share a family, e.g. SDPA's
    default dispatch and cuDNN called directly on Hopper); ``kernel_pattern`` is a regular
    expression (case-insensitive, ``re.search``) matching the profiler's name of that
    kernel, empty where the candidate has no single attention kernel (eager, math).
    """

    label: str
    origin: str
    family: str
    kernel_pattern: str = ""

    def __post_init__(self):
        for name in ("label", "family"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"`{name}` must be a non-empty string; got {value!r}.")
        _validate.choice("origin", self.origin, ORIGINS)
        if not isinstance(self.kernel_pattern, str):
            raise ValueError(f"`kernel_pattern` must be a string (a regular expression); "
                             f"got {self.kernel_pattern!r}.")
        try:
            re.compile(self.kernel_pattern)
        except re.error as exc:
            raise ValueError(f"`kernel_pattern` must be a regular expression; "
                             f"{self.kernel_pattern!r} does not compile: {exc}.") from None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Meta":
        """Rebuild from :meth:`as_dict` (what a run recorded); unknown keys are refused."""
        if not isinstance(d, dict):
            raise ValueError(f"`meta` must be a dict; got {type(d).__name__}.")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"`meta` keys must be drawn from {sorted(names)}; "
                             f"got {sorted(unknown)}.")
        return cls(**d)


# Kernel-name patterns of the attention kernels. Read off the profiler's kernel lists of
# the recorded runs (``kernels.parquet``) on the H100 and the H200.
_CUDNN = r"cudnn.*(sdpa|fmha|attn)|fmha.*cudnn"
_FLASH2 = r"pytorch_flash|flash_fwd_kernel|flash_fwd_splitkv"
_MEM_EFF = r"fmha_cutlass|MemEffAttention|mem_eff"
_FLEX = r"flex_attention"
_OURS_TRITON = r"^_attn_fwd"
_OURS_GLUON = r"^_gluon_attn_fwd"  # measure.gluon_kernels.KERNEL_NAME
_FA4 = r"flash_attncute|FlashAttentionForwardSm90|flash_fwd_sm90"
_FLASHINFER = r"flashinfer|PrefillWithKVCacheKernel|BatchPrefillWithRaggedKVCache"
_XFORMERS = r"xformers|flash3::"

SDPA_DEFAULT_FAMILY = "SDPA default dispatch"
# SDPA's fused entry points: the default dispatch and the three backends it can pick. A
# kernel is raced against the fastest of them ("the fastest library backend").
SDPA_BACKENDS = ("sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn")

CATALOG: dict[str, Meta] = {
    # PyTorch's own paths ("library").
    "sdpa": Meta("SDPA (default dispatch)", "library", SDPA_DEFAULT_FAMILY, ""),
    "sdpa_flash": Meta("SDPA flash backend", "library", "FlashAttention-2 (PyTorch's copy)",
                       _FLASH2),
    "sdpa_efficient": Meta("SDPA memory-efficient backend", "library",
                           "memory-efficient (CUTLASS)", _MEM_EFF),
    "sdpa_cudnn": Meta("SDPA cuDNN backend", "library", "cuDNN attention", _CUDNN),
    "sdpa_math": Meta("SDPA math backend", "library", "unfused (matmul, softmax, matmul)", ""),
    "eager": Meta("eager matmul-softmax-matmul", "library", "unfused (matmul, softmax, matmul)",
                  ""),
    "eager_compiled": Meta("torch.compile(eager)", "library", "torch.compile (Inductor)", ""),
    "flex": Meta("FlexAttention", "library", "FlexAttention (Triton)", _FLEX),
    # This project's kernels.
    "triton": Meta("our Triton kernel", "ours", "attn_analysis Triton kernel", _OURS_TRITON),
    "gluon": Meta("our Gluon kernel (FA3-style)", "ours", "attn_analysis Gluon kernel",
                  _OURS_GLUON),
    # Other projects' shipped kernels (attn_analysis.measure.peers).
    "fa4": Meta("FlashAttention-4 (CuTe DSL)", "peer", "FlashAttention-4 (CuTe DSL)", _FA4),
    "flashinfer": Meta("FlashInfer (batch prefill)", "peer", "FlashInfer prefill", _FLASHINFER),
    "cudnn_frontend": Meta("cuDNN frontend (direct)", "peer", "cuDNN attention", _CUDNN),
    "xformers": Meta("xFormers memory_efficient_attention", "peer", "xFormers", _XFORMERS),
    # Controls: their true difference from SDPA is known by construction.
    "sdpa_twin": Meta("SDPA again (A/A twin)", "control", SDPA_DEFAULT_FAMILY, ""),
    "sdpa_bshd": Meta("SDPA on (B, S, H, D) memory", "control", SDPA_DEFAULT_FAMILY, ""),
}
_SPIN = re.compile(r"sdpa_spin(\d+)(?:e([1-9]\d*))?")

# Kernels that are not attention kernels, for naming the rest of a call's kernel list.
OTHER_KERNELS = (
    (r"gemm|nvjet|xmma|cutlass", "GEMM"),
    (r"softmax", "softmax"),
    (r"^Memset|memset|fill", "memset / fill"),
)


def spin_spec(name: str) -> tuple[int, int] | None:
    """(cycles, every M-th call) of a spin control's name, None for any other name."""
    spin = _SPIN.fullmatch(name) if isinstance(name, str) else None
    return (int(spin.group(1)), int(spin.group(2) or 1)) if spin else None


def spin_order(name: str) -> tuple[float, int]:
    """Sort key of spin controls, cheapest first: spin cycles per call (cycles / M), then
    the sparser spin first (its extra launch is shared between more calls)."""
    cycles, every = spin_spec(name)
    return cycles / every, -every


def meta_for(name: str, recorded=None) -> Meta:
    """The metadata of candidate ``name``: what a run recorded for it, if anything (a dict,
    as the sweep writes it, or a :class:`Meta`), else the catalog's entry.

    Spin controls (``sdpa_spin<N>``, and ``sdpa_spin<N>e<M>`` with the spin after every
    M-th call) are recognised by name. A name neither recorded nor
    in the catalog is labelled by itself with origin "ours" (a plugin candidate that ran
    before metadata was recorded is a user's own kernel).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a candidate name; got {name!r}.")
    if isinstance(recorded, Meta):
        return recorded
    if isinstance(recorded, dict) and recorded:
        return Meta.from_dict(recorded)
    if name in CATALOG:
        return CATALOG[name]
    spin = spin_spec(name)
    if spin:
        every = f" every {spin[1]} calls" if spin[1] > 1 else ""
        return Meta(f"SDPA + {spin[0]}-cycle spin{every}", "control", SDPA_DEFAULT_FAMILY, "")
    return Meta(name, "ours", name, "")


def kernel_families() -> tuple[tuple[str, str], ...]:
    """(pattern, family) pairs, first match wins: every catalogued attention kernel, then
    the non-attention kernels (``OTHER_KERNELS``)."""
    seen, out = set(), []
    for meta in CATALOG.values():
        if meta.kernel_pattern and meta.family not in seen:
            seen.add(meta.family)
            out.append((meta.kernel_pattern, meta.family))
    return tuple(out) + OTHER_KERNELS


def kernel_family(kernel: str) -> str:
    """Which family a profiled kernel name belongs to ("other" when none matches)."""
    if not isinstance(kernel, str):
        raise ValueError(f"`kernel` must be a string; got {type(kernel).__name__}.")
    for pattern, family in kernel_families():
        if re.search(pattern, kernel, flags=re.IGNORECASE):
            return family
    return "other"


def by_origin(names, origin: str, recorded: dict | None = None) -> list[str]:
    """The names among ``names`` whose origin is ``origin``, in the given order;
    ``recorded`` maps a name to what a run recorded for it."""
    _validate.choice("origin", origin, ORIGINS)
    recorded = recorded or {}
    return [n for n in names if meta_for(n, recorded.get(n)).origin == origin]
