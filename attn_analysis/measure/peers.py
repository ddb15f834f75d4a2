"""Peer candidates: other projects' attention kernels, as their authors ship them (a plugin).

Load with ``python -m attn_analysis sweep --plugin attn_analysis.peers ...``. It registers

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
- ``sdpa_bshd`` (a control): SDPA's default dispatch on inputs in (B, S, H, D) memory.

Nothing is tuned against a peer and none of its settings is changed from its default:
each is called as its documentation shows, built (compiled, planned) once outside any
timed region, checked against float64 like every candidate, and its package version is
recorded in every unit's ``info``. A package that is missing or refuses a configuration
makes the candidate ``Unsupported`` with the reason, and the sweep goes on.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
import os

import torch
import torch.nn.functional as F

from . import candidates as cands
from ..configs import Config

__all__ = ["PACKAGES", "FLASHINFER_WORKSPACE_BYTES", "package", "PEER_NAMES"]

# candidate -> (module to import, distribution whose version is recorded, how to install)
PACKAGES = {
    "fa4": ("flash_attn.cute", "flash-attn-4", "pip install flash-attn-4"),
    "flashinfer": ("flashinfer", "flashinfer-python", "pip install flashinfer-python"),
    "cudnn_frontend": ("cudnn", "nvidia-cudnn-frontend", "pip install nvidia-cudnn-frontend"),
    "xformers": ("xformers", "xformers", "pip install xformers"),
}
# Exceptions a peer raises when it does not support a configuration (an assertion or a
# ValueError on a shape or dtype, a NotImplementedError); others (a TypeError from a
# wrong call, a CUDA error) are recorded by the sweep as errors, not as unsupported.
_REFUSALS = (AssertionError, NotImplementedError, ValueError)
FLASHINFER_WORKSPACE_BYTES = 128 * 2**20  # FlashInfer's documented recommendation


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}"


def package(candidate: str):
    """Import the package of peer ``candidate``; return (module, {"package", "version"}).

    Raises ``Unsupported`` naming the package, the reason and how to install it.
    """
    if candidate not in PACKAGES:
        raise ValueError(f"`candidate` must be one of {sorted(PACKAGES)}; got {candidate!r}.")
    module, dist, install = PACKAGES[candidate]
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

def _build_fa4(config: Config, device: str) -> cands.Built:
    cute, pkg = package("fa4")
    causal = config.causal

    def fn(q, k, v):
        out = cute.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                   causal=causal)
        out = out[0] if isinstance(out, tuple) else out
        return out.transpose(1, 2)
    _first_call(fn, config, device)  # the CuTe DSL compile happens here
    _first_call(fn, config, device)
    cache = os.environ.get("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "0") == "1"
    return cands.Built(fn, {"implementation": "flash_attn.cute.flash_attn_func", **pkg,
                            "inputs": "(B, S, H, D) views of (B, H, S, D) tensors",
                            "compiled_kernel_cache": "disk" if cache else "process"})


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

def _build_cudnn_frontend(config: Config, device: str) -> cands.Built:
    cudnn, pkg = package("cudnn_frontend")
    io_type = {"float16": cudnn.data_type.HALF, "bfloat16": cudnn.data_type.BFLOAT16}[config.dtype]
    template = cands.make_inputs(config, device, seed=0)[0]
    handle = cudnn.create_handle()
    try:
        graph = cudnn.pygraph(io_data_type=io_type, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=handle)
        q_t, k_t, v_t = (graph.tensor_like(template) for _ in range(3))
        o_t, _ = graph.sdpa(name="sdpa", q=q_t, k=k_t, v=v_t, generate_stats=False,
                            attn_scale=1.0 / math.sqrt(config.head_dim),
                            use_causal_mask=config.causal)
        o_t.set_output(True).set_dim(list(template.shape)).set_stride(list(template.stride()))
        graph.build()
    except _REFUSALS + (getattr(cudnn, "cudnnGraphNotSupportedError", AssertionError),) as exc:
        raise cands.Unsupported(_first_line(exc)) from None
    workspace = torch.empty(max(int(graph.get_workspace_size()), 1), dtype=torch.uint8,
                            device=device)

    def fn(q, k, v):
        out = torch.empty_like(q)
        # kernels launch on the handle's stream: torch's current one (a graph capture's too)
        cudnn.set_stream(handle=handle, stream=_current_stream(device))
        graph.execute({q_t: q, k_t: k, v_t: v, o_t: out}, workspace, handle=handle)
        return out
    _first_call(fn, config, device)
    _first_call(fn, config, device)
    engine = getattr(graph, "selected_engine", None)
    return cands.Built(fn, {"implementation": "cudnn.pygraph sdpa (default heuristics)", **pkg,
                            "cudnn_backend": str(cudnn.backend_version()),
                            "engine": "cuDNN backend" if engine is None else str(engine),
                            "workspace_bytes": int(workspace.numel())})


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


PEER_NAMES = ("fa4", "flashinfer", "cudnn_frontend", "xformers")
_BUILDERS = {"fa4": _build_fa4, "flashinfer": _build_flashinfer,
             "cudnn_frontend": _build_cudnn_frontend, "xformers": _build_xformers}
_DESCRIPTIONS = {
    "fa4": "FlashAttention-4 (CuTe DSL; the FA3 design on Hopper), as shipped",
    "flashinfer": "FlashInfer batch prefill, ragged KV, backend auto, as shipped",
    "cudnn_frontend": "cuDNN SDPA graph through the cuDNN Python frontend, as shipped",
    "xformers": "xFormers memory_efficient_attention_forward, default dispatch, as shipped",
}

for _name in PEER_NAMES:
    if _name not in cands.CANDIDATES:
        cands.register(cands.Candidate(_name, _DESCRIPTIONS[_name], _BUILDERS[_name],
                                       devices=("cuda",), min_capability=(8, 0)))
if "sdpa_bshd" not in cands.CANDIDATES:
    cands.register(cands.Candidate("sdpa_bshd", "control: SDPA default dispatch on (B, S, H, D) "
                                   "memory", _build_sdpa_bshd))
