"""Work and traffic of forward attention, device peaks, and roofline ceilings. Pure functions.

A :class:`~attn_analysis.configs.Config` fixes the work: ``flops`` counts the two matrix
products, ``min_bytes`` the least device-memory traffic (Q, K, V read once, O written once).
``HARDWARE`` holds datasheet peaks with the source of every figure (read from
``hardware.json``, the only file this module reads), and ``roofline_bound``
turns a peak and a bandwidth into the fastest time either ceiling allows.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from .. import _validate
from ..configs import ELEMENT_BYTES, Config

__all__ = ["flops", "min_bytes", "intensity", "tflops_rate", "gbs_rate", "roof_tflops",
           "RooflineBound", "roofline_bound", "DeviceSpec", "HARDWARE",
           "device_spec_or_none"]


# --------------------------------------------------------------------------- validation

def _config_iv(config) -> Config:
    """Check that ``config`` is a :class:`Config`."""
    if not isinstance(config, Config):
        raise ValueError(
            f"`config` must be an attn_analysis.configs.Config; got {type(config).__name__}.")
    return config


# --------------------------------------------------------------------------- work, traffic

def flops(config: Config) -> float:
    """Floating-point operations of one forward attention, ``4*B*H*S**2*D``.

    Two matrix products, ``Q @ K^T`` and ``P @ V``, each ``B*H*S*S*D`` multiply-adds at
    2 FLOPs per multiply-add. Causal attention is counted as half of that (the usual
    convention; the exact count keeps the diagonal, ``S*(S+1)/2`` pairs). Softmax, scaling
    and masking are not counted: they are O(S**2) per head rather than O(S**2*D).
    """
    c = _config_iv(config)
    total = 4.0 * c.batch * c.heads * c.seq_len * c.seq_len * c.head_dim
    return total / 2 if c.causal else total


def min_bytes(config: Config) -> float:
    """Fewest bytes that must cross device memory: ``4*B*H*S*D*element_size``.

    Q, K and V are read once and O written once; fp16 and bf16 elements are 2 bytes, so
    the target shape B=32, H=8, S=512, D=64 moves 67,108,864 B (16,777,216 B per tensor).
    Causal masking does not change it. The original reports' roofline table used 25.6e6 B
    at S=512 (and 6.4e6 ... 102.4e6 B at S=128 ... 2048), which matches no tensor count;
    their GB/s columns, by contrast, imply this count.
    """
    return 4.0 * _config_iv(config).tensor_bytes


def intensity(config: Config) -> float:
    """Arithmetic intensity ``flops / min_bytes`` in FLOP/byte (``S/2`` for fp16 non-causal)."""
    return flops(config) / min_bytes(config)


def tflops_rate(flop, ms):
    """TFLOP/s (1e12 FLOP/s) of ``flop`` operations done in ``ms`` milliseconds.

    The one conversion from a time to a compute rate, for numbers, numpy arrays and
    pandas columns alike; unchecked (a zero or NaN time gives inf or NaN), so a table
    converts a whole column at once. With ``flops(config)`` it is the rate a run achieved.
    """
    return flop / (ms * 1e-3) / 1e12


def gbs_rate(nbytes, ms):
    """GB/s (1e9 B/s) of ``nbytes`` bytes moved in ``ms`` milliseconds (as :func:`tflops_rate`).

    With ``min_bytes(config)`` it is a rate of useful bytes, not a measured DRAM
    bandwidth: when inputs are served from L2 (small shapes fit in it, and timing loops
    re-read the same tensors) it can exceed the DRAM peak without anything running faster
    than the hardware allows; it is then not a bandwidth at all.
    """
    return nbytes / (ms * 1e-3) / 1e9


def roof_tflops(intensity, bandwidth_gbs):
    """TFLOP/s that ``bandwidth_gbs`` feeds at ``intensity`` FLOP/byte: the memory roof."""
    return intensity * bandwidth_gbs * 1e9 / 1e12


# --------------------------------------------------------------------------- roofline

@dataclasses.dataclass(frozen=True)
class RooflineBound:
    """Lower bound on time from a compute ceiling and a memory ceiling.

    ``bound_ms`` is the larger of the two times; ``limiter`` names the ceiling that sets
    it ("compute" on a tie). ``ridge_intensity`` is the intensity (FLOP/byte) where the
    ceilings meet; ``intensity`` is the workload's; ``attainable_tflops`` is the roofline
    ceiling ``min(peak, intensity * bandwidth)`` in TFLOP/s.
    """

    compute_time_ms: float
    memory_time_ms: float
    bound_ms: float
    limiter: str
    ridge_intensity: float
    intensity: float
    attainable_tflops: float


def roofline_bound(config: Config, peak_tflops: float, bandwidth_gbs: float) -> RooflineBound:
    """Fastest time the roofline model allows for ``config`` on a device.

    Parameters
    ----------
    config : Config
        The workload; its ``flops`` and ``min_bytes`` are used.
    peak_tflops : float
        Compute ceiling in TFLOP/s (1e12 FLOP/s), > 0. Use dense tensor-core figures.
    bandwidth_gbs : float
        Memory ceiling in GB/s (1e9 B/s), > 0.

    Returns
    -------
    RooflineBound
        ``compute_time_ms = flops / peak``, ``memory_time_ms = min_bytes / bandwidth``,
        ``bound_ms`` the larger, ``limiter`` "compute" or "memory", and
        ``ridge_intensity = peak / bandwidth`` in FLOP/byte, the workload's ``intensity``
        and ``attainable_tflops = flops / bound``.

    Notes
    -----
    A bound, not a prediction: it ignores softmax, launch overhead and imperfect overlap,
    so a real kernel is slower. The memory ceiling uses the minimum traffic, so a kernel
    that re-reads K and V from DRAM sits further from it.
    """
    c = _config_iv(config)
    peak = _validate.positive("peak_tflops", peak_tflops)
    bw = _validate.positive("bandwidth_gbs", bandwidth_gbs)
    compute_ms = flops(c) / (peak * 1e12) * 1e3
    memory_ms = min_bytes(c) / (bw * 1e9) * 1e3
    limiter = "memory" if memory_ms > compute_ms else "compute"
    bound_ms = max(compute_ms, memory_ms)
    return RooflineBound(compute_ms, memory_ms, bound_ms, limiter, peak * 1e12 / (bw * 1e9),
                         intensity(c), tflops_rate(flops(c), bound_ms))


# --------------------------------------------------------------------------- hardware

@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """Datasheet peaks of one GPU, each figure with its source in ``sources``.

    Tensor-core TFLOP/s are dense (NVIDIA datasheets often quote "with sparsity", twice
    the dense rate; those are halved). ``fp32_tflops`` is the non-tensor (CUDA-core) FP32
    peak. ``l2_mb`` is in MiB (2**20 B), the unit of ``cudaDeviceProp.l2CacheSize`` and of
    the datasheets' "MB". ``torch_names`` are the names ``torch.cuda.get_device_name``
    gives this exact product (other memory sizes or form factors have other peaks).
    """

    name: str
    fp16_tflops_dense: float
    bf16_tflops_dense: float
    mem_bandwidth_gbs: float
    l2_mb: float
    sm_count: int
    sources: tuple[str, ...]
    fp32_tflops: float = float("nan")
    torch_names: tuple[str, ...] = ()
    notes: str = ""

    def peak_tflops(self, dtype: str) -> float:
        """Dense tensor-core peak for ``dtype`` ("float16" or "bfloat16")."""
        if dtype == "float16":
            return self.fp16_tflops_dense
        if dtype == "bfloat16":
            return self.bf16_tflops_dense
        raise ValueError(f"`dtype` must be one of {tuple(ELEMENT_BYTES)}; got {dtype!r}.")


def _hardware() -> dict[str, DeviceSpec]:
    """The datasheet table, ``hardware.json`` beside this module, keyed by device name.

    Each figure there names, in ``sources``, the datasheet it comes from and the public
    page it was checked against (stored copies; the datasheet PDFs themselves were not in
    reach). "Measured" means read with torch.cuda.get_device_properties(0) and nvidia-smi
    on this project's device machines (torch 2.11.0+cu130). data/reference/SOURCES.md
    lists the same sources.
    """
    doc = json.loads(Path(__file__).with_name("hardware.json").read_text(encoding="utf-8"))
    specs = [DeviceSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
             for d in doc["devices"]]
    return {s.name: s for s in specs}


HARDWARE: dict[str, DeviceSpec] = _hardware()


def _norm(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip().casefold()


_BY_NAME = {_norm(n): spec for spec in HARDWARE.values()
            for n in (spec.name, *spec.torch_names)}


def device_spec_or_none(name: str) -> DeviceSpec | None:
    """The ``HARDWARE`` entry for a GPU name (as torch reports it, or a table key), else None.

    Matching ignores case and repeated spaces, nothing else: "NVIDIA H100 PCIe" is not
    the SXM5 entry, because its peaks differ.
    """
    if not isinstance(name, str):
        raise ValueError(f"`name` must be a string; got {type(name).__name__}.")
    return _BY_NAME.get(_norm(name))
