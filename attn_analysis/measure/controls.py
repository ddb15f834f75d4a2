"""Negative and positive controls for calibrating the comparison protocol (a plugin).

Load with ``python -m attn_analysis sweep --plugin attn_analysis.measure.controls ...``. It
registers:

- ``sdpa_twin``: the default SDPA dispatch again, built and timed as a separate
  candidate. Comparing ``sdpa`` with ``sdpa_twin`` is an A/A comparison: any difference
  a protocol reports is a false positive.
- ``sdpa_spin<N>`` for N in :data:`SPIN_CYCLES`: the same SDPA call followed, on the
  same stream, by a kernel that spins for N GPU clock cycles (``torch.cuda._sleep``).
  The output is SDPA's, so the correctness gate passes, and the true slowdown is the
  spin kernel's own cost, which the run's kernel evidence (``torch.profiler``) measures
  separately. These are positive controls of known small size, around the equivalence
  margin.
- ``sdpa_spin<N>e<M>`` for (N, M) in :data:`SPARSE_SPINS`: the same, but the spin kernel
  follows only every M-th call (a counter in the callable; a CUDA graph of several calls
  captures the spins where the counter puts them). Per call the control costs 1/M of a
  spin: at the target an extra kernel costs more than the 2 % margin per call (its
  launch gap included), so controls below the margin at the call level need the spin to
  be shared between calls. The true size of each control is measured, not assumed
  (pooled medians at the call level, the profiler's extra kernel time at the kernel
  level); which calls of a graph carry a spin depends on the counter at its capture, an
  extra spread of at most one spin per graph that the calibration measures with the
  rest.

On a CPU the spin is a busy wait of N nanoseconds, so the plugin also runs in the CPU
tests; those times are wall-clock and say nothing about a GPU.
"""

from __future__ import annotations

import dataclasses
import itertools
import time

import torch
import torch.nn.functional as F

from . import candidates as cands
from ..configs import Config

__all__ = ["SPIN_CYCLES", "SPARSE_SPINS", "spin_name", "CONTROL_NAMES"]

# Spin lengths in clock cycles. At the H100's ~1.98 GHz boost clock 1000 cycles are
# about 0.5 us, 1% of the target shape's ~48 us: the four levels bracket the 2% margin
# (the 0-cycle spin costs only the extra kernel launch).
SPIN_CYCLES = (0, 1000, 2500, 6000)
# (cycles, every M-th call) of the sparse spin controls. On the H100 at the target a
# 1000-cycle spin after every call costs about 3.7 % per call and 2.7 % of kernel time:
# every 3rd call it aims at about 0.5 margins, a 2000-cycle spin every 2nd at about 1.
SPARSE_SPINS = ((1000, 3), (2000, 2))


def _spin_cpu(n_ns: int) -> None:
    """Busy-wait ``n_ns`` nanoseconds on the host (the CPU stand-in for the spin kernel)."""
    end = time.perf_counter_ns() + n_ns
    while time.perf_counter_ns() < end:
        pass


def _build_twin(config: Config, device: str) -> cands.Built:
    built = cands.CANDIDATES["sdpa"].build(config, device)
    return dataclasses.replace(built, info={"control": "A/A twin of sdpa", **built.info})


def _build_spin(cycles: int, every: int = 1):
    def build(config: Config, device: str) -> cands.Built:
        causal = config.causal
        spin = torch.cuda._sleep if device == "cuda" else _spin_cpu

        if every == 1:
            def fn(q, k, v):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                spin(cycles)
                return out
        else:
            calls = itertools.count()

            def fn(q, k, v):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                if next(calls) % every == 0:
                    spin(cycles)
                return out
        cands._try_once(fn, config, device)
        return cands.Built(fn, {"control": "sdpa plus a spin kernel",
                                "spin_cycles": cycles, "spin_every_calls": every,
                                "spin_kernel": "torch.cuda._sleep" if device == "cuda"
                                else "host busy wait (ns)"})
    return build


def spin_name(cycles: int, every: int = 1) -> str:
    """The registered name of the positive control with ``cycles`` spin cycles after
    every ``every``-th call (``sdpa_spin<N>``, or ``sdpa_spin<N>e<M>`` for M > 1)."""
    return f"sdpa_spin{int(cycles)}" + (f"e{int(every)}" if every != 1 else "")


CONTROL_NAMES = (("sdpa_twin",) + tuple(spin_name(c) for c in SPIN_CYCLES)
                 + tuple(spin_name(c, m) for c, m in SPARSE_SPINS))

if "sdpa_twin" not in cands.CANDIDATES:
    cands.register(cands.Candidate("sdpa_twin", "A/A control: the default SDPA dispatch again",
                                   _build_twin))
for _cycles in SPIN_CYCLES:
    if spin_name(_cycles) not in cands.CANDIDATES:
        cands.register(cands.Candidate(
            spin_name(_cycles),
            f"positive control: SDPA plus a {_cycles}-cycle spin kernel",
            _build_spin(_cycles)))
for _cycles, _every in SPARSE_SPINS:
    if spin_name(_cycles, _every) not in cands.CANDIDATES:
        cands.register(cands.Candidate(
            spin_name(_cycles, _every),
            f"positive control: SDPA plus a {_cycles}-cycle spin kernel after every "
            f"{_every}th call", _build_spin(_cycles, _every)))
