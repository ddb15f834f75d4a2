"""Measured ceilings of this device: a large matrix product and a large copy.

The roofline uses these beside the datasheet's figures: datasheet rates are leads, and
the device's real ceilings are what a kernel can be held to.
"""

from __future__ import annotations

import statistics

import torch

from ..analyse import workload

__all__ = ["MATMUL_N", "COPY_BYTES", "MATMUL_DTYPE", "measure_ceilings"]

# Sizes per device kind: large enough to fill a GPU, small enough for a CPU test.
MATMUL_N = {"cuda": 8192, "cpu": 512}
COPY_BYTES = {"cuda": 2 << 30, "cpu": 32 << 20}
MATMUL_DTYPE = {"cuda": torch.float16, "cpu": torch.float32}


def measure_ceilings(device: str, n_samples: int = 20) -> dict:
    """Matrix-product TFLOPS on random data and copy GB/s (bytes read plus written)."""
    from . import timing
    if device not in MATMUL_N:
        raise ValueError(f"`device` must be one of {tuple(MATMUL_N)}; got {device!r}.")
    n, dtype = MATMUL_N[device], MATMUL_DTYPE[device]
    gen = torch.Generator(device=device).manual_seed(1234)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    c = torch.empty(n, n, device=device, dtype=dtype)
    mm = timing.measure(lambda: torch.mm(a, b, out=c), mode="cold_l2", device=device,
                        n_samples=n_samples)
    del a, b, c
    elems = COPY_BYTES[device] // 2
    src = torch.randn(elems, device=device, dtype=torch.float16, generator=gen)
    dst = torch.empty_like(src)
    cp = timing.measure(lambda: dst.copy_(src), mode="cold_l2", device=device,
                        n_samples=n_samples)
    del src, dst
    mm_ms, cp_ms = statistics.median(mm.times_ms), statistics.median(cp.times_ms)
    copy_bytes = 2 * elems * 2  # each element read once and written once
    return {
        "matmul": {"n": n, "dtype": str(dtype).replace("torch.", ""), "flops": 2 * n**3,
                   "median_ms": mm_ms, "tflops": workload.tflops_rate(2 * n**3, mm_ms),
                   "times_ms": list(mm.times_ms), "clock": mm.clock, "mode": mm.mode},
        "copy": {"bytes_moved": copy_bytes, "median_ms": cp_ms,
                 "gbs": workload.gbs_rate(copy_bytes, cp_ms), "times_ms": list(cp.times_ms),
                 "clock": cp.clock, "mode": cp.mode},
        "device": device,
    }
