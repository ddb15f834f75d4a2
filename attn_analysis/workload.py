"""Work and traffic of forward attention, device peaks, and roofline ceilings. Pure, no I/O.

A :class:`~attn_analysis.configs.Config` fixes the work: ``flops`` counts the two matrix
products, ``min_bytes`` the least device-memory traffic (Q, K, V read once, O written once).
``HARDWARE`` holds datasheet peaks with the source of every figure, and ``roofline_bound``
turns a peak and a bandwidth into the fastest time either ceiling allows.
"""

from __future__ import annotations

import dataclasses
import re

from . import _validate
from .configs import Config

ELEMENT_BYTES = {"float16": 2, "bfloat16": 2}


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
    c = _config_iv(config)
    return 4.0 * c.batch * c.heads * c.seq_len * c.head_dim * ELEMENT_BYTES[c.dtype]


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


# Each figure names the datasheet it comes from and the public page it was checked against
# (stored copies; the datasheet PDFs themselves were not in reach). "Measured" means read with
# torch.cuda.get_device_properties(0) and nvidia-smi on this project's device machines
# (torch 2.11.0+cu130). data/reference/SOURCES.md lists the same sources.
_L4 = DeviceSpec(
    name="NVIDIA L4",
    fp16_tflops_dense=121.0,  # datasheet 242 with sparsity, halved
    bf16_tflops_dense=121.0,  # datasheet 242 with sparsity, halved
    mem_bandwidth_gbs=300.0,
    l2_mb=48.0,
    sm_count=58,
    fp32_tflops=30.3,  # CUDA cores; FP16 without tensor cores runs at the same rate (1:1)
    torch_names=("NVIDIA L4",),
    sources=(
        "fp16_tflops_dense=121: NVIDIA L4 datasheet (https://www.nvidia.com/en-us/data-center/"
        "l4/), FP16 Tensor Core 242 TFLOPS marked 'with sparsity'; halved. Checked: "
        "grokipedia.com/page/NVIDIA_L4_vs_L40S ('242 TFLOPS in FP16 Tensor Core operations "
        "(with sparsity)'); 58 SMs x 1024 dense FP16 FLOP/clock/SM x 2.04 GHz = 121.2 "
        "(hmc-tech.com lists 125.34 dense for 60 SMs at the same clock, the same rate).",
        "bf16_tflops_dense=121: same datasheet, BFLOAT16 Tensor Core 242 TFLOPS with "
        "sparsity; halved (hmc-tech.com lists BF16 at the FP16 rate).",
        "fp32_tflops=30.3: same datasheet, FP32 30.3 TFLOPS; 58 SMs x 128 cores x 2 x "
        "2.04 GHz = 30.29; fpsbench.com lists FP32 30.29 and FP16 (non-tensor) 30.29 (1:1). "
        "This is the '30 TFLOPS FP16' the original reports divided by.",
        "mem_bandwidth_gbs=300: same datasheet, GPU memory bandwidth 300 GB/s; checked: "
        "store.sourcecode.com L4 spec ('Max Memory Bandwidth 300 GB/s'), fpsbench.com "
        "(192-bit GDDR6 at 12.5 Gbps, 300.1 GB/s). The reports' '242 GB/s' is not it.",
        "l2_mb=48: deviceQuery output for 'NVIDIA L4' in a public GitHub README "
        "('L2 Cache Size: 50331648 bytes'); fpsbench.com lists 48 MB.",
        "sm_count=58: the same deviceQuery output ('(58) Multiprocessors, (128) CUDA "
        "Cores/MP: 7424 CUDA Cores'); some aggregators list 60 SMs / 7680 cores (full AD104).",
    ),
    notes="Ada Lovelace (sm_89), 72 W, 24 GB GDDR6. Not measured on this project's machines.",
)

_A100 = DeviceSpec(
    name="NVIDIA A100 SXM4 80GB",
    fp16_tflops_dense=312.0,
    bf16_tflops_dense=312.0,
    mem_bandwidth_gbs=2039.0,
    l2_mb=40.0,
    sm_count=108,
    fp32_tflops=19.5,
    torch_names=("NVIDIA A100-SXM4-80GB",),
    sources=(
        "fp16_tflops_dense=312: NVIDIA A100 datasheet "
        "(nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), FP16 Tensor Core 312 TFLOPS, "
        "624 with sparsity; the dense figure is stated. Checked: glennklockwood.com/garden/"
        "processors/A100 (FP16 matrix 312, sparse 624, citing that datasheet).",
        "bf16_tflops_dense=312: same datasheet, BFLOAT16 Tensor Core 312 TFLOPS (624 sparse).",
        "fp32_tflops=19.5: same datasheet, FP32 19.5 TFLOPS.",
        "mem_bandwidth_gbs=2039: same datasheet, A100 80GB SXM GPU memory bandwidth "
        "2,039 GB/s (the 40GB part: 1,555 GB/s); checked: glennklockwood.com A100 page.",
        "l2_mb=40: NVIDIA Ampere architecture whitepaper, 40 MB L2 (40960 KB, as quoted by "
        "fudzilla.com); an A100 deviceQuery (upb-pc2 wiki) reports 'L2 Cache Size: "
        "41943040 bytes'.",
        "sm_count=108: Ampere whitepaper (108 SMs); the same deviceQuery reports "
        "'(108) Multiprocessors'.",
    ),
    notes="Ampere (sm_80). Not measured on this project's machines.",
)

_H100 = DeviceSpec(
    name="NVIDIA H100 SXM5 80GB",
    fp16_tflops_dense=989.4,  # datasheet 1,979 with sparsity; whitepaper dense 989.4
    bf16_tflops_dense=989.4,
    mem_bandwidth_gbs=3350.0,
    l2_mb=50.0,
    sm_count=132,
    fp32_tflops=67.0,
    torch_names=("NVIDIA H100 80GB HBM3",),
    sources=(
        "fp16_tflops_dense=989.4: NVIDIA H100 datasheet (https://www.nvidia.com/en-us/"
        "data-center/h100/), H100 SXM FP16 Tensor Core 1,979 TFLOPS with sparsity; the H100 "
        "architecture whitepaper gives 989.4 dense / 1978.9 sparse. Checked: "
        "archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html ('1,979 TFLOPS*', '* Shown "
        "with sparsity. Specifications 1/2 lower without sparsity'); glennklockwood.com/"
        "garden/processors/h100 (FP16 matrix 989.4, sparse 1978.9).",
        "bf16_tflops_dense=989.4: same sources, BFLOAT16 at the FP16 rate.",
        "fp32_tflops=67: same datasheet, FP32 67 TFLOPS (hpctech.co.jp table: 67).",
        "mem_bandwidth_gbs=3350: same datasheet, 3.35 TB/s (hpctech.co.jp: 3,350 GB/sec).",
        "l2_mb=50: hpctech.co.jp table 'L2 Cache Size 50 MB' (from NVIDIA's spec); measured "
        "L2_cache_size = 52428800 B on 'NVIDIA H100 80GB HBM3'.",
        "sm_count=132: hpctech.co.jp table 'SMs 132'; measured multi_processor_count = 132.",
    ),
    notes="Hopper (sm_90). torch reports 'NVIDIA H100 80GB HBM3' for the SXM5 part; the "
          "PCIe part ('NVIDIA H100 PCIe', 114 SMs, 2.0 TB/s) would need its own entry.",
)

_H200 = DeviceSpec(
    name="NVIDIA H200 SXM 141GB",
    fp16_tflops_dense=989.4,  # datasheet 1,979 with sparsity; same GH100 SXM as H100
    bf16_tflops_dense=989.4,
    mem_bandwidth_gbs=4800.0,
    l2_mb=60.0,
    sm_count=132,
    fp32_tflops=67.0,
    torch_names=("NVIDIA H200",),
    sources=(
        "fp16_tflops_dense=989.4: NVIDIA H200 datasheet (https://www.nvidia.com/en-us/"
        "data-center/h200/), H200 SXM FP16 Tensor Core 1,979 TFLOPS with sparsity; halved "
        "(989.5) and set to the H100 SXM5 whitepaper's 989.4, the same die and SM count, "
        "both at 1980 MHz max SM clock (nvidia-smi clocks.max.sm, measured on both). Some "
        "pages (ai-hpc.github.io) call 1,979 'dense'; the H100 whitepaper contradicts that.",
        "bf16_tflops_dense=989.4: as for FP16.",
        "fp32_tflops=67: same datasheet, FP32 67 TFLOPS.",
        "mem_bandwidth_gbs=4800: same datasheet, 4.8 TB/s; checked: aiminingco.com/gpu/h200/"
        "specs, geektopia.es (six 1024-bit HBM3e stacks at 6.2 Gb/s).",
        "l2_mb=60: measured L2_cache_size = 62914560 B on 'NVIDIA H200' (the datasheet gives "
        "no L2 size; pages that assume the H100's 50 MB are contradicted by this).",
        "sm_count=132: measured multi_processor_count = 132 (saulelectric.com lists 132).",
    ),
    notes="Hopper (sm_90), HBM3e. The H200 NVL (PCIe) part has other clocks and peaks.",
)

HARDWARE: dict[str, DeviceSpec] = {s.name: s for s in (_L4, _A100, _H100, _H200)}


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
