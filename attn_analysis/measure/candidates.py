"""Registry of forward-attention implementations (the float64 gate is in :mod:`.gate`).

Each candidate is *built* once for a configuration and device into a ready callable
``fn(q, k, v) -> out``: backend selection, compilation and autotuning happen in
``build``, never inside a timed region. Before any candidate is timed, ``check`` runs it
on fresh random inputs against a float64 reference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import zlib
from typing import Callable, ContextManager

import torch
import torch.nn.functional as F

from ..analyse import catalog
from ..configs import DEVICES, Config, plugin_modules
from . import compile_settings
from .gate import (REL_ERROR_THRESHOLD, CorrectnessResult, _device_iv,  # noqa: F401 (re-exported)
                   check, make_inputs, reference)

__all__ = ["REL_ERROR_THRESHOLD", "Unsupported", "Built", "Candidate", "CorrectnessResult",
           "CANDIDATES", "register", "load_plugins", "get", "make_inputs", "reference",
           "check", "DEFAULT_CANDIDATES", "accepts_hint", "build"]


class Unsupported(Exception):
    """A candidate cannot run this configuration on this device; the message says why."""


@dataclasses.dataclass(frozen=True)
class Built:
    """A candidate built for one configuration: the callable and what was chosen to build it.

    ``fn`` computes the candidate only inside ``with context():``. The context holds state
    that must not be paid for inside a timed call (SDPA's forced backend is a global
    setting): the sweep enters it once around the check, every timing mode and the
    profiler, so that entering and leaving it stays outside the timed region.
    """

    fn: Callable
    info: dict
    accepts_out: bool = False  # fn(q, k, v, out=buffer) writes into a caller's buffer
    context: Callable[[], ContextManager] = contextlib.nullcontext
    # Memory order of the inputs fn is handed (``make_inputs``); fn always sees logical
    # (B, H, S, D) tensors. "BSHD" is for kernels whose API takes (tokens, heads, dim)
    # without a copy (FlashInfer's ragged prefill).
    layout: str = "BHSD"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One implementation: a name, what it is, when it applies, and how to build it.

    ``meta`` (label, origin, kernel family, kernel-name pattern) defaults to the catalog's
    entry for ``name`` (:func:`catalog.meta_for`); a plugin candidate may bring its own.
    """

    name: str
    description: str
    build: Callable[[Config, str], Built]
    devices: tuple = DEVICES
    min_capability: tuple | None = None  # CUDA compute capability, e.g. (8, 0)
    meta: catalog.Meta | None = None
    # warm(config, device): compile what ``build`` compiles into the machine's caches on
    # disk, timing nothing, so that a later build in another process loads it (the sweep's
    # parallel prebuild, :mod:`.prebuild`); None for a candidate that compiles nothing. A
    # torch.compile candidate's own build does that (it compiles and runs twice); what it
    # returns is dropped.
    warm: Callable[[Config, str], object] | None = None

    def __post_init__(self):
        if self.meta is None:
            object.__setattr__(self, "meta", catalog.meta_for(self.name))
        elif not isinstance(self.meta, catalog.Meta):
            raise ValueError(f"`meta` must be a catalog.Meta; got {type(self.meta).__name__}.")

    def unsupported_reason(self, config: Config, device: str) -> str | None:
        """None when this candidate can be tried on ``config`` and ``device``, else why not."""
        if device not in self.devices:
            return f"{self.name} runs on {'/'.join(self.devices)} only, not {device}"
        if device == "cuda" and self.min_capability is not None:
            cap = torch.cuda.get_device_capability()
            if cap < self.min_capability:
                return (f"{self.name} needs compute capability >= "
                        f"{self.min_capability[0]}.{self.min_capability[1]}, device has "
                        f"{cap[0]}.{cap[1]}")
        return None


CANDIDATES: dict[str, Candidate] = {}


def register(candidate: Candidate) -> Candidate:
    """Add a candidate to the registry (names are unique)."""
    if candidate.name in CANDIDATES:
        raise ValueError(f"`name` {candidate.name!r} is already registered.")
    CANDIDATES[candidate.name] = candidate
    return candidate


def load_plugins(modules) -> None:
    """Import modules that register extra candidates (e.g. a user's own kernel); a module
    that moved is imported at its new path (``configs.RENAMED_MODULES``), so a recorded
    plan or command line naming the old one still loads."""
    for name in plugin_modules(modules or ()):
        importlib.import_module(name)


def get(name: str) -> Candidate:
    """Look a candidate up by name."""
    if name not in CANDIDATES:
        raise ValueError(f"`candidate` must be one of {sorted(CANDIDATES)}; got {name!r}.")
    return CANDIDATES[name]


# --------------------------------------------------------------------------- builders

def _sdpa_fn(config: Config):
    """SDPA as a user calls it; which backends it may use is set by the caller's context."""
    causal = config.causal

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return fn


def _try_once(fn, config: Config, device: str, context=contextlib.nullcontext,
              layout: str = "BHSD"):
    """Call fn once on random inputs; a 'no kernel' refusal becomes Unsupported."""
    q, k, v = make_inputs(config, device, seed=0, layout=layout)
    try:
        with context():
            fn(q, k, v)
    except RuntimeError as exc:
        text = str(exc)
        if "No available kernel" in text or "not supported" in text.lower():
            raise Unsupported(text.splitlines()[0][:300]) from None
        raise
    if device == "cuda":
        torch.cuda.synchronize()


def _build_sdpa(backend_name: str | None):
    def build(config: Config, device: str) -> Built:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        fn = _sdpa_fn(config)
        if backend_name is None:
            context = contextlib.nullcontext
        else:
            backend = getattr(SDPBackend, backend_name)

            def context():
                return sdpa_kernel(backend)
        _try_once(fn, config, device, context)
        info = {"backend": backend_name or "default dispatch"}
        if backend_name is not None:
            # Runs recorded before this key existed entered sdpa_kernel inside each call,
            # so their per_call and cold_l2 times include its host cost (graph replay not).
            info["backend_selection"] = "outside the timed call"
        return Built(fn, info, context=context)
    return build


def _eager(config: Config):
    scale = 1.0 / math.sqrt(config.head_dim)
    causal, s = config.causal, config.seq_len

    def fn(q, k, v):
        scores = (q @ k.transpose(-1, -2)) * scale
        if causal:
            mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v
    return fn


def _build_eager(config: Config, device: str) -> Built:
    fn = _eager(config)
    _try_once(fn, config, device)
    return Built(fn, {"implementation": "matmul, softmax, matmul"})


def _build_eager_compiled(config: Config, device: str) -> Built:
    threads = compile_settings.prepare()
    fn = torch.compile(_eager(config), dynamic=False, fullgraph=True)
    _try_once(fn, config, device)  # compiles here, outside any timed region
    _try_once(fn, config, device)
    return Built(fn, {"implementation": "torch.compile(eager)", "dynamic": False,
                      "compile_threads": threads})


def compiled_flex(config: Config, device: str, kernel_options: dict | None = None):
    """FlexAttention under ``torch.compile`` at ``config`` (the causal block mask built once,
    outside any timed call), and the compile threads used: ``(fn, threads)``.

    One copy for both Flex candidates: ours (``flex``, Triton backend) and the peer
    ``flex_flash`` (``kernel_options={"BACKEND": "FLASH"}``)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    threads = compile_settings.prepare()
    compiled = torch.compile(flex_attention, dynamic=False)
    block_mask = None
    if config.causal:
        def causal_mask(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx
        block_mask = create_block_mask(causal_mask, B=None, H=None, Q_LEN=config.seq_len,
                                       KV_LEN=config.seq_len, device=device)
    extra = {} if kernel_options is None else {"kernel_options": dict(kernel_options)}

    def fn(q, k, v):
        return compiled(q, k, v, block_mask=block_mask, **extra)
    return fn, threads


def _build_flex(config: Config, device: str) -> Built:
    fn, threads = compiled_flex(config, device)
    _try_once(fn, config, device)
    _try_once(fn, config, device)
    return Built(fn, {"implementation": "torch.compile(flex_attention)", "dynamic": False,
                      "block_mask": "causal" if config.causal else None,
                      "compile_threads": threads})


def _warm_triton(config: Config, device: str) -> dict:
    """Compile what our Triton kernel's tuning tries at ``config``, from its key's CRC-32."""
    from . import triton_attention
    q, k, v = make_inputs(config, device, seed=0)
    return triton_attention.precompile(q, k, v, causal=config.causal,
                                       start=zlib.crc32(config.key.encode()))


def _build_triton(config: Config, device: str, hint: dict | None = None) -> Built:
    """Autotune on this shape, or reuse the configuration an earlier trial tuned (``hint``)."""
    try:
        from . import triton_attention
    except ImportError as exc:  # triton missing on this machine
        raise Unsupported(f"triton is not importable: {exc}") from None
    tuned = (hint or {}).get("tuning")
    reuse = tuned if tuned and all(key in tuned for key in triton_attention.CONFIG_KEYS) else None
    q, k, v = make_inputs(config, device, seed=0)
    fn, tuning = triton_attention.build(q, k, v, causal=config.causal, config=reuse)
    return Built(fn, {"implementation": "attn_analysis.triton_attention", "tuning": tuning},
                 accepts_out="out" in _parameters(fn))


def _parameters(fn) -> tuple[str, ...]:
    import inspect
    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return ()


register(Candidate("sdpa", "SDPA, default dispatch", _build_sdpa(None)))
register(Candidate("sdpa_flash", "SDPA forced to the flash backend",
                   _build_sdpa("FLASH_ATTENTION"), devices=("cuda",), min_capability=(8, 0)))
register(Candidate("sdpa_efficient", "SDPA forced to the memory-efficient backend",
                   _build_sdpa("EFFICIENT_ATTENTION"), devices=("cuda",)))
register(Candidate("sdpa_cudnn", "SDPA forced to the cuDNN backend",
                   _build_sdpa("CUDNN_ATTENTION"), devices=("cuda",), min_capability=(8, 0)))
register(Candidate("sdpa_math", "SDPA forced to the math (reference) backend",
                   _build_sdpa("MATH")))
register(Candidate("eager", "matmul, softmax, matmul in eager PyTorch", _build_eager))
register(Candidate("eager_compiled", "the eager version under torch.compile",
                   _build_eager_compiled, warm=_build_eager_compiled))
register(Candidate("flex", "FlexAttention under torch.compile, one compile per shape",
                   _build_flex, devices=("cuda",), min_capability=(8, 0),
                   warm=_build_flex))
register(Candidate("triton", "our FlashAttention-style Triton kernel (autotuned at build)",
                   _build_triton, devices=("cuda",), min_capability=(8, 0),
                   warm=_warm_triton))

DEFAULT_CANDIDATES = tuple(CANDIDATES)


def _build_gluon(config: Config, device: str, hint: dict | None = None) -> Built:
    """Our Gluon kernel, tuned on this shape over its variants (each of which passed the
    float64 grid on a GPU), or at the configuration an earlier trial's tuning chose
    (``hint``), so every process of a sweep times the same kernel. Where Gluon (Triton 3.6)
    or an sm90 GPU is missing it is Unsupported with the reason."""
    from . import gluon_attention
    from .gluon_config import CONFIG_KEYS
    reason = gluon_attention.unavailable_reason(device)
    if reason:
        raise Unsupported(reason)
    earlier = (hint or {}).get("config") or {}
    reuse = ({key: earlier[key] for key in CONFIG_KEYS}
             if all(key in earlier for key in CONFIG_KEYS) else None)
    q, k, v = make_inputs(config, device, seed=0)
    try:
        fn, info = gluon_attention.build(q, k, v, causal=config.causal, config=reuse,
                                         tuned=reuse is None)
    except gluon_attention.GluonUnavailable as exc:
        raise Unsupported(str(exc)) from None
    return Built(fn, {"implementation": "attn_analysis.measure.gluon_attention", "config": info})


# Registered after DEFAULT_CANDIDATES: a sweep runs it only when asked (``--candidates
# gluon``, the Gluon campaigns of configs.GLUON_PLANS). Its variants have passed the
# float64 grid on the device (scripts/gluon_check.py, data/checks/gluon_check_*); the
# candidate tunes among them per shape, as ``triton`` tunes its tiles.
register(Candidate("gluon", "our FA3-style Gluon kernel for Hopper (sm90 only; tuned at "
                   "build over its variants)",
                   _build_gluon, devices=("cuda",), min_capability=(9, 0)))


def accepts_hint(name: str) -> bool:
    """Whether candidate ``name``'s builder reuses an earlier build's choice (``hint``)."""
    return "hint" in _parameters(get(name).build)


def build(name: str, config: Config, device: str, hint: dict | None = None) -> Built:
    """Build candidate ``name`` for ``config`` on ``device``; raise Unsupported with a reason.

    ``hint`` is what an earlier build of the same candidate and configuration recorded
    (its ``Built.info``); builders that autotune may reuse it instead of tuning again.
    """
    candidate = get(name)
    _device_iv(device)
    reason = candidate.unsupported_reason(config, device)
    if reason:
        raise Unsupported(reason)
    if hint is not None and "hint" in _parameters(candidate.build):
        built = candidate.build(config, device, hint=hint)
    else:
        built = candidate.build(config, device)
    # What the candidate is and how its inputs were laid out travel with every unit.
    return dataclasses.replace(built, info={**built.info, "meta": candidate.meta.as_dict(),
                                            "layout": built.layout})
