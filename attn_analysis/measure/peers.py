"""Peer candidates: other projects' attention kernels, as their authors ship them (a plugin).

Load with ``python -m attn_analysis sweep --plugin attn_analysis.measure.peers ...``. It registers

- ``fa4``: FlashAttention-4's CuTe DSL kernel (``flash_attn.cute.flash_attn_func``, package
  ``flash-attn-4``); on Hopper it runs the FlashAttention-3 design (warp-specialised
  producer and consumer warpgroups, TMA, wgmma), compiled at run time. Our (B, H, S, D)
  tensors are handed over as (B, S, H, D) views, no copy.
- ``flashinfer``: FlashInfer's batch prefill over a ragged KV cache
  (``BatchPrefillWithRaggedKVCacheWrapper``, package ``flashinfer-python``), backend
  "auto" (its FlashAttention-3 template on sm90); its kernels are compiled by FlashInfer's
  JIT at build time. Its API takes (tokens, heads, dim) tensors, so its inputs are
  allocated in (B, S, H, D) memory order (``Built.layout``), which that API views without
  a copy; ``sdpa_bshd`` times SDPA on the same memory order.
- ``cudnn_frontend``: cuDNN's SDPA graph built and executed through NVIDIA's Python
  frontend (``nvidia-cudnn-frontend``, default heuristics), so neither SDPA's dispatch nor
  its output memset is in the call. Which engine served the graph is recorded.
- ``xformers``: xFormers' ``memory_efficient_attention_forward`` with its default operator
  dispatch.
- ``fa3``: FlashAttention-3's Hopper forward (the C++/CUTLASS build of flash-attention's
  ``hopper/``, ``flash_attn_interface.flash_attn_func``) from the binary wheel
  ``tokenspeed-fa3`` (torch's stable C ABI, CUDA 13, sm90a; forward only); where it does
  not import, the forward-only wheel ``fa3-fwd`` (``fa3_fwd_interface``, no fp16 kernels).
  The build flags the wheel records (``flash_attn_config.CONFIG``) go into ``info``.
- ``flex_flash``: FlexAttention under ``torch.compile`` with ``kernel_options={"BACKEND":
  "FLASH"}``, which lowers to FlashAttention-4's CuTe DSL kernel (needs flash-attn-4).
- ``sdpa_fa4``: SDPA's flash backend after ``torch.nn.attention.activate_flash_attention_impl
  ("FA4")``. torch 2.11's wrapper unpacks ``(out, lse)`` from ``_flash_attn_fwd``, which
  flash-attn-4 returns up to 4.0.0b18 (b19 on return more values).
- ``fa4_bshd`` (a control): ``fa4`` on contiguous (B, S, H, D) memory (``Built.layout``), the
  layout FlashAttention-4's API is written for, beside ``fa4`` fed transposed views.
- ``sdpa_bshd`` (a control): SDPA's default dispatch on inputs in (B, S, H, D) memory.
- ``cudnn_oss`` (a control): the same cuDNN graph as ``cudnn_frontend``, planned with the
  frontend's ``heur_mode.OPENSOURCE`` only, so it runs the open-source sm90 prefill engine
  of cudnn-frontend (compiled through NVRTC at build time) and never a closed kernel: beside
  SDPA it tells whether SDPA's closed cuDNN kernel runs the open engine's schedule. Some
  frontend releases ship the engine (1.23.0), others not (1.32.0: "No execution plans
  support the graph"), so it runs in an environment of its own. Its execute needs the rows'
  score max and sum of exponentials bound, so the graph writes them too; its inputs are
  (B, S, H, D) memory (``Built.layout``), as in the frontend's own test of the engine.

``flex_flash`` and ``sdpa_fa4`` are switches a PyTorch user turns on; any failure of their
first call (a compile error, a wrapper at odds with the installed FA4) makes them
``Unsupported`` with the exception's first line, since that failure is the finding.
``sdpa_fa4`` activates FA4 only inside its ``Built.context`` and restores PyTorch's own
flash kernel on leaving it, so no other candidate in the process sees the swap.

Nothing is tuned against a peer and none of its settings is changed from its default:
each is called as its documentation shows, built (compiled, planned) once outside any
timed region, checked against float64 like every candidate, and its package version is
recorded in every unit's ``info``. A package that is missing or refuses a configuration
makes the candidate ``Unsupported`` with the reason, and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import math
import os

import torch
import torch.nn.functional as F

from . import candidates as cands
from ..analyse import catalog
from ..configs import Config

__all__ = ["PACKAGES", "FALLBACKS", "FLASHINFER_WORKSPACE_BYTES", "package", "PEER_NAMES",
           "CONTROL_NAMES", "SDPA_FA4_RELEASE", "META"]

# candidate -> (module to import, distribution whose version is recorded, how to install)
PACKAGES = {
    "fa4": ("flash_attn.cute", "flash-attn-4", "pip install flash-attn-4"),
    "flashinfer": ("flashinfer", "flashinfer-python", "pip install flashinfer-python"),
    "cudnn_frontend": ("cudnn", "nvidia-cudnn-frontend", "pip install nvidia-cudnn-frontend"),
    "xformers": ("xformers", "xformers", "pip install xformers"),
    "fa3": ("flash_attn_interface", "tokenspeed-fa3", "pip install tokenspeed-fa3"),
    # PyTorch's two switches run FlashAttention-4's kernel: its package is what they need
    "flex_flash": ("flash_attn.cute", "flash-attn-4", "pip install flash-attn-4"),
    "sdpa_fa4": ("flash_attn.cute.interface", "flash-attn-4",
                 "pip install flash-attn-4==4.0.0b18"),
}
# candidate -> packages tried, in order, when the first one does not import
FALLBACKS = {
    "fa3": (("fa3_fwd_interface", "fa3-fwd", "pip install fa3-fwd"),),
}
# The flash-attn-4 release whose _flash_attn_fwd returns the (out, lse) pair that torch
# 2.11's FA4 wrapper (torch/nn/attention/_fa4.py) unpacks: the last before b19.
SDPA_FA4_RELEASE = "4.0.0b18"
# Exceptions a peer raises when it does not support a configuration (an assertion or a
# ValueError on a shape or dtype, a NotImplementedError); others (a TypeError from a
# wrong call, a CUDA error) are recorded by the sweep as errors, not as unsupported.
_REFUSALS = (AssertionError, NotImplementedError, ValueError)
FLASHINFER_WORKSPACE_BYTES = 128 * 2**20  # FlashInfer's documented recommendation


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}"


def _import(module: str, dist: str, install: str):
    """Import ``module``; return (module, {"package", "version"}) or raise Unsupported."""
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # ImportError, or a package that fails while importing
        raise cands.Unsupported(f"{dist} is not importable ({module}: {_first_line(exc)}); "
                                f"install it with `{install}`") from None
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = str(getattr(mod, "__version__", "unknown"))
    return mod, {"package": dist, "version": version}


def package(candidate: str):
    """Import the package of peer ``candidate``; return (module, {"package", "version"}).

    Where the first package does not import, those of ``FALLBACKS[candidate]`` are tried in
    order. Raises ``Unsupported`` naming each package tried, the reason and how to install
    it.
    """
    if candidate not in PACKAGES:
        raise ValueError(f"`candidate` must be one of {sorted(PACKAGES)}; got {candidate!r}.")
    reasons = []
    for module, dist, install in (PACKAGES[candidate], *FALLBACKS.get(candidate, ())):
        try:
            return _import(module, dist, install)
        except cands.Unsupported as exc:
            reasons.append(str(exc))
    raise cands.Unsupported("; ".join(reasons))


def _first_call(fn, config: Config, device: str, layout: str = "BHSD") -> None:
    """Call a peer once (compiling it); a refusal of the configuration becomes Unsupported."""
    try:
        cands._try_once(fn, config, device, layout=layout)
    except _REFUSALS as exc:
        raise cands.Unsupported(_first_line(exc)) from None


def _current_stream(device: str) -> int:
    """The raw handle of torch's current CUDA stream (0, the default stream, on a CPU)."""
    return torch.cuda.current_stream().cuda_stream if device == "cuda" else 0


def _torch_dtype(config: Config):
    return getattr(torch, config.dtype)


# ------------------------------------------------------------------------------ fa4

def _bshd_call(func, causal: bool):
    """fn(q, k, v) handing ``func`` (B, S, H, D) views of our logical (B, H, S, D) tensors
    (no copy: on (B, S, H, D) memory the views are contiguous) and returning its output
    seen as (B, H, S, D). ``func`` may return the output alone or (output, lse, ...)."""
    def fn(q, k, v):
        out = func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal)
        out = out[0] if isinstance(out, tuple) else out
        return out.transpose(1, 2)
    return fn


def _fa4_built(config: Config, device: str, layout: str) -> cands.Built:
    cute, pkg = package("fa4")
    fn = _bshd_call(cute.flash_attn_func, config.causal)
    _first_call(fn, config, device, layout=layout)  # the CuTe DSL compile happens here
    _first_call(fn, config, device, layout=layout)
    cache = os.environ.get("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "0") == "1"
    inputs = ("contiguous (B, S, H, D) tensors" if layout == "BSHD"
              else "(B, S, H, D) views of (B, H, S, D) tensors")
    return cands.Built(fn, {"implementation": "flash_attn.cute.flash_attn_func", **pkg,
                            "inputs": inputs,
                            "compiled_kernel_cache": "disk" if cache else "process"},
                       layout=layout)


def _build_fa4(config: Config, device: str) -> cands.Built:
    return _fa4_built(config, device, "BHSD")


def _build_fa4_bshd(config: Config, device: str) -> cands.Built:
    """FA4 on its own (B, S, H, D) layout: the layout control beside ``fa4``."""
    return _fa4_built(config, device, "BSHD")


# ------------------------------------------------------------------------------ fa3

def _build_fa3(config: Config, device: str) -> cands.Built:
    fa3, pkg = package("fa3")
    fn = _bshd_call(fa3.flash_attn_func, config.causal)
    _first_call(fn, config, device)
    _first_call(fn, config, device)
    flags = {}
    config_module = {"flash_attn_interface": "flash_attn_config",
                     "fa3_fwd_interface": "fa3_fwd_config"}.get(fa3.__name__)
    with contextlib.suppress(Exception):  # the wheel's record of its build, where it has one
        flags = dict(importlib.import_module(config_module).CONFIG.get("build_flags", {}))
    return cands.Built(fn, {"implementation": f"{fa3.__name__}.flash_attn_func", **pkg,
                            "inputs": "(B, S, H, D) views of (B, H, S, D) tensors",
                            "build_flags": {k: bool(v) for k, v in flags.items()}})


# -------------------------------------------------------- PyTorch's switches to FA4

def _switch_first_call(fn, config: Config, device: str, context=contextlib.nullcontext) -> None:
    """First call of a PyTorch switch: any failure is the finding, recorded as Unsupported."""
    try:
        cands._try_once(fn, config, device, context)
    except cands.Unsupported:
        raise
    except Exception as exc:
        raise cands.Unsupported(_first_line(exc)) from None


def _build_flex_flash(config: Config, device: str) -> cands.Built:
    """FlexAttention's FLASH backend under torch.compile, as torch's documentation shows."""
    _, pkg = package("flex_flash")
    try:
        fn, threads = cands.compiled_flex(config, device, kernel_options={"BACKEND": "FLASH"})
    except ImportError as exc:
        raise cands.Unsupported(f"torch {torch.__version__} has no FlexAttention: {exc}") from None
    _switch_first_call(fn, config, device)  # compiles here
    _switch_first_call(fn, config, device)
    return cands.Built(fn, {"implementation": "torch.compile(flex_attention), "
                            "kernel_options BACKEND=FLASH", "torch": torch.__version__,
                            **pkg, "dynamic": False,
                            "block_mask": "causal" if config.causal else None,
                            "compile_threads": threads})


def _fa4_sdpa_context():
    """A context factory: FA4 activated into SDPA's flash backend, and that backend forced;
    PyTorch's own flash kernel is restored on leaving."""
    from torch.nn.attention import (SDPBackend, activate_flash_attention_impl,
                                    restore_flash_attention_impl, sdpa_kernel)

    @contextlib.contextmanager
    def context():
        activate_flash_attention_impl("FA4")
        try:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                yield
        finally:
            restore_flash_attention_impl(_raise_warn=False)
    return context


def _build_sdpa_fa4(config: Config, device: str) -> cands.Built:
    attention = importlib.import_module("torch.nn.attention")
    if not hasattr(attention, "activate_flash_attention_impl"):
        raise cands.Unsupported(f"torch {torch.__version__} has no "
                                "torch.nn.attention.activate_flash_attention_impl")
    _, pkg = package("sdpa_fa4")
    if "FA4" not in attention.list_flash_attention_impls():
        raise cands.Unsupported(f"torch {torch.__version__} lists no FA4 impl "
                                f"({attention.list_flash_attention_impls()})")
    context = _fa4_sdpa_context()
    fn = cands._sdpa_fn(config)
    _switch_first_call(fn, config, device, context)  # the CuTe DSL compile happens here
    _switch_first_call(fn, config, device, context)
    return cands.Built(fn, {"implementation": "SDPA flash backend after "
                            "activate_flash_attention_impl('FA4')", "torch": torch.__version__,
                            **pkg, "backend_selection": "outside the timed call"},
                       context=context)


# ------------------------------------------------------------------------ flashinfer

def _build_flashinfer(config: Config, device: str) -> cands.Built:
    fi, pkg = package("flashinfer")
    b, h, s, d = config.batch, config.heads, config.seq_len, config.head_dim
    dtype = _torch_dtype(config)
    workspace = torch.empty(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    try:
        wrapper = fi.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD")
        indptr = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device=device)
        wrapper.plan(indptr, indptr, h, h, d, causal=config.causal, q_data_type=dtype,
                     kv_data_type=dtype)
    except _REFUSALS as exc:
        raise cands.Unsupported(_first_line(exc)) from None

    def fn(q, k, v):
        # (B, S, H, D) memory seen as (B, H, S, D): view() refuses to copy, so fn runs
        # only on the layout the API takes without one.
        qf, kf, vf = (t.transpose(1, 2).view(b * s, h, d) for t in (q, k, v))
        return wrapper.run(qf, kf, vf).view(b, s, h, d).transpose(1, 2)
    _first_call(fn, config, device, layout="BSHD")  # the JIT compile happens here
    _first_call(fn, config, device, layout="BSHD")
    backend = getattr(wrapper, "_backend", "unknown")
    return cands.Built(fn, {"implementation": "flashinfer.BatchPrefillWithRaggedKVCacheWrapper",
                            **pkg, "backend": str(backend), "kv_layout": "NHD",
                            "workspace_bytes": FLASHINFER_WORKSPACE_BYTES,
                            "inputs": "(B*S, H, D) views of (B, S, H, D) memory"},
                       layout="BSHD")


# -------------------------------------------------------------------- cudnn_frontend

def _cudnn_graph(config: Config, device: str, heuristics, implementation: str,
                 layout: str = "BHSD") -> cands.Built:
    """cuDNN's SDPA graph for ``config`` through the Python frontend, planned with
    ``heuristics`` (None: the frontend's default), built once, then executed per call. With
    ``heuristics`` the graph also outputs each row's score max and sum of exponentials into
    buffers made once (fp32, B x H x S each): the open engine's execute needs both bound.
    ``layout``: the inputs' memory order (the graph takes their strides)."""
    cudnn, pkg = package("cudnn_frontend")
    io_type = {"float16": cudnn.data_type.HALF, "bfloat16": cudnn.data_type.BFLOAT16}[config.dtype]
    template = cands.make_inputs(config, device, seed=0, layout=layout)[0]
    handle = cudnn.create_handle()
    try:
        graph = cudnn.pygraph(io_data_type=io_type, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=handle)
        q_t, k_t, v_t = (graph.tensor_like(template) for _ in range(3))
        stats = {}
        if heuristics is not None:
            B, H, S, _ = template.shape
            stats = {name: graph.tensor(name=name, dim=[B, H, S, 1], stride=[H * S, S, 1, 1],
                                        data_type=cudnn.data_type.FLOAT)
                     for name in ("score_max", "score_sum_exp")}
        o_t, _ = graph.sdpa(name="sdpa", q=q_t, k=k_t, v=v_t, generate_stats=False,
                            attn_scale=1.0 / math.sqrt(config.head_dim),
                            use_causal_mask=config.causal, **stats)
        o_t.set_output(True).set_dim(list(template.shape)).set_stride(list(template.stride()))
        if heuristics is None:
            graph.build()
        else:  # the steps of graph.build, spelled out as the frontend's own OSS test does
            graph.validate()
            graph.build_operation_graph()
            graph.create_execution_plans(heuristics(cudnn))
            graph.check_support()
            graph.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    except _REFUSALS + (getattr(cudnn, "cudnnGraphNotSupportedError", AssertionError),) as exc:
        raise cands.Unsupported(_first_line(exc)) from None
    workspace = torch.empty(max(int(graph.get_workspace_size()), 1), dtype=torch.uint8,
                            device=device)
    bound = {t: torch.empty(template.shape[:3] + (1,), dtype=torch.float32, device=device)
             for t in stats.values()}

    def fn(q, k, v):
        out = torch.empty_like(q)
        # kernels launch on the handle's stream: torch's current one (a graph capture's too)
        cudnn.set_stream(handle=handle, stream=_current_stream(device))
        graph.execute({q_t: q, k_t: k, v_t: v, o_t: out, **bound}, workspace, handle=handle)
        return out
    _first_call(fn, config, device, layout=layout)
    _first_call(fn, config, device, layout=layout)
    engine = getattr(graph, "selected_engine", None)
    return cands.Built(fn, {"implementation": implementation, **pkg,
                            "cudnn_backend": str(cudnn.backend_version()),
                            "engine": "cuDNN backend" if engine is None else str(engine),
                            "workspace_bytes": int(workspace.numel()),
                            "outputs": ["O"] + sorted(stats)}, layout=layout)


def _build_cudnn_frontend(config: Config, device: str) -> cands.Built:
    return _cudnn_graph(config, device, None, "cudnn.pygraph sdpa (default heuristics)")


def _build_cudnn_oss(config: Config, device: str) -> cands.Built:
    return _cudnn_graph(config, device, lambda cudnn: [cudnn.heur_mode.OPENSOURCE],
                        "cudnn.pygraph sdpa, heur_mode OPENSOURCE (the open sm90 engine)",
                        layout="BSHD")


# -------------------------------------------------------------------------- xformers

def _build_xformers(config: Config, device: str) -> cands.Built:
    xf, pkg = package("xformers")
    # A wheel built for another PyTorch imports, but its compiled operators do not load;
    # xFormers keeps the reason (which PyTorch it was built for).
    failure = getattr(getattr(xf, "_cpp_lib", None), "_cpp_library_load_exception", None)
    if failure is not None:
        lines = [ln.strip() for ln in str(failure).splitlines() if ln.strip()]
        raise cands.Unsupported(f"xformers {pkg['version']}: " + " ".join(lines[:3])[:300])
    try:
        xops = importlib.import_module("xformers.ops")
    except Exception as exc:
        raise cands.Unsupported(f"xformers.ops is not importable: {_first_line(exc)}") from None
    bias = xops.LowerTriangularMask() if config.causal else None

    def fn(q, k, v):
        out = xops.memory_efficient_attention_forward(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_bias=bias)
        return out.transpose(1, 2)
    _first_call(fn, config, device)
    _first_call(fn, config, device)
    return cands.Built(fn, {"implementation": "xformers.ops.memory_efficient_attention_forward",
                            **pkg, "inputs": "(B, S, H, D) views of (B, H, S, D) tensors"})


# ------------------------------------------------------------------------- sdpa_bshd

def _build_sdpa_bshd(config: Config, device: str) -> cands.Built:
    causal = config.causal

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    cands._try_once(fn, config, device, layout="BSHD")
    return cands.Built(fn, {"control": "sdpa on (B, S, H, D) memory",
                            "backend": "default dispatch"}, layout="BSHD")


PEER_NAMES = ("fa4", "flashinfer", "cudnn_frontend", "xformers", "fa3", "flex_flash",
              "sdpa_fa4")
CONTROL_NAMES = ("fa4_bshd", "sdpa_bshd", "cudnn_oss")
_BUILDERS = {"fa4": _build_fa4, "flashinfer": _build_flashinfer,
             "cudnn_frontend": _build_cudnn_frontend, "xformers": _build_xformers,
             "fa3": _build_fa3, "flex_flash": _build_flex_flash, "sdpa_fa4": _build_sdpa_fa4,
             "fa4_bshd": _build_fa4_bshd, "cudnn_oss": _build_cudnn_oss}
_DESCRIPTIONS = {
    "fa4": "FlashAttention-4 (CuTe DSL; the FA3 design on Hopper), as shipped",
    "flashinfer": "FlashInfer batch prefill, ragged KV, backend auto, as shipped",
    "cudnn_frontend": "cuDNN SDPA graph through the cuDNN Python frontend, as shipped",
    "xformers": "xFormers memory_efficient_attention_forward, default dispatch, as shipped",
    "fa3": "FlashAttention-3's Hopper forward (C++ build, flash_attn_interface), as shipped",
    "flex_flash": "FlexAttention with kernel_options BACKEND=FLASH (FA4's kernel), as shipped",
    "sdpa_fa4": "SDPA flash backend after activate_flash_attention_impl('FA4'), as shipped",
    "fa4_bshd": "control: FlashAttention-4 on contiguous (B, S, H, D) memory",
    "cudnn_oss": "control: cuDNN's SDPA graph on cudnn-frontend's open sm90 engine",
}
# Candidates the catalog (analyse.catalog.CATALOG) does not know carry their own metadata.
_FA3_KERNEL = r"FlashAttnFwdSm90"
META = {
    "fa3": catalog.Meta("FlashAttention-3 (Hopper C++)", "peer", "FlashAttention-3 (C++)",
                        _FA3_KERNEL),
    "flex_flash": catalog.Meta("FlexAttention, FLASH backend", "peer",
                               "FlashAttention-4 (CuTe DSL)", catalog.CATALOG["fa4"].kernel_pattern),
    "sdpa_fa4": catalog.Meta("SDPA with FA4 activated", "peer", "FlashAttention-4 (CuTe DSL)",
                             catalog.CATALOG["fa4"].kernel_pattern),
    "fa4_bshd": catalog.Meta("FlashAttention-4 on (B, S, H, D) memory", "control",
                             "FlashAttention-4 (CuTe DSL)", catalog.CATALOG["fa4"].kernel_pattern),
    "cudnn_oss": catalog.Meta("cuDNN open-source engine (direct)", "control",
                              "cuDNN attention", r"cudnn_generated_oss_sdpa"),
}
# FA3's Hopper kernels and PyTorch's FA4 route need sm90 or later; the others sm80.
_MIN_CAPABILITY = {"fa3": (9, 0), "sdpa_fa4": (9, 0), "flex_flash": (9, 0),
                   "fa4_bshd": (8, 0), "cudnn_oss": (9, 0)}

for _name in PEER_NAMES + ("fa4_bshd", "cudnn_oss"):
    if _name not in cands.CANDIDATES:
        cands.register(cands.Candidate(_name, _DESCRIPTIONS[_name], _BUILDERS[_name],
                                       devices=("cuda",),
                                       min_capability=_MIN_CAPABILITY.get(_name, (8, 0)),
                                       meta=META.get(_name)))
if "sdpa_bshd" not in cands.CANDIDATES:
    cands.register(cands.Candidate("sdpa_bshd", "control: SDPA default dispatch on (B, S, H, D) "
                                   "memory", _build_sdpa_bshd))
