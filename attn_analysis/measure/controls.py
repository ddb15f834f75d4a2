"""Negative and positive controls for calibrating the comparison protocol (a plugin).

Load with ``python -m attn_analysis sweep --plugin attn_analysis.controls ...``. It
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

- ``sdpa_plus<N>h`` for N in :data:`EXTRA_HEADS`: SDPA's default dispatch over the
  B*H heads of the inputs and N more heads of fresh inputs allocated after them
  (``Built.spare_heads``), in ONE call, of which the caller gets the B*H heads it asked
  for. The extra work runs inside the same attention kernel, so the control adds no kernel
  and no launch: its slowdown can be smaller than the spin controls' (at the target an
  extra kernel alone costs more than the 2 % margin per call), and it is the same at the
  call and the kernel level. Its true size is measured, not assumed (the profiler's
  kernel time and the pooled medians): wave quantisation makes it uneven in N.

On a CPU the spin is a busy wait of N nanoseconds, so the plugin also runs in the CPU
tests; those times are wall-clock and say nothing about a GPU.
"""

from __future__ import annotations

import dataclasses
import time

import torch
import torch.nn.functional as F

from . import candidates as cands
from ..configs import Config

__all__ = ["SPIN_CYCLES", "EXTRA_HEADS", "spin_name", "extra_heads_name", "CONTROL_NAMES"]

# Spin lengths in clock cycles. At the H100's ~1.98 GHz boost clock 1000 cycles are
# about 0.5 us, 1% of the target shape's ~48 us: the four levels bracket the 2% margin
# (the 0-cycle spin costs only the extra kernel launch).
SPIN_CYCLES = (0, 1000, 2500, 6000)
# Extra heads of the extra-heads controls. At the target (B*H = 256 heads) one head is
# about 0.4 % more work: 3, 5 and 8 heads aim at about 0.5, 1 and 1.5 times the 2 % margin.
EXTRA_HEADS = (3, 5, 8)


def _spin_cpu(n_ns: int) -> None:
    """Busy-wait ``n_ns`` nanoseconds on the host (the CPU stand-in for the spin kernel)."""
    end = time.perf_counter_ns() + n_ns
    while time.perf_counter_ns() < end:
        pass


def _build_twin(config: Config, device: str) -> cands.Built:
    built = cands.CANDIDATES["sdpa"].build(config, device)
    return dataclasses.replace(built, info={"control": "A/A twin of sdpa", **built.info})


def _build_spin(cycles: int):
    def build(config: Config, device: str) -> cands.Built:
        causal = config.causal

        if device == "cuda":
            def fn(q, k, v):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.cuda._sleep(cycles)
                return out
        else:
            def fn(q, k, v):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                _spin_cpu(cycles)
                return out
        cands._try_once(fn, config, device)
        return cands.Built(fn, {"control": "sdpa plus a spin kernel",
                                "spin_cycles": cycles,
                                "spin_kernel": "torch.cuda._sleep" if device == "cuda"
                                else "host busy wait (ns)"})
    return build


def _build_extra_heads(extra: int):
    def build(config: Config, device: str) -> cands.Built:
        causal = config.causal
        heads = config.batch * config.heads
        shape = (1, heads + extra, config.seq_len, config.head_dim)
        strides = ((heads + extra) * config.seq_len * config.head_dim,
                   config.seq_len * config.head_dim, config.head_dim, 1)

        def fn(q, k, v):
            # the logical inputs and the spare heads after them, as one (1, B*H+N, S, D)
            # tensor over the same memory (as_strided refuses inputs without the spares)
            qf, kf, vf = (t.as_strided(shape, strides, t.storage_offset()) for t in (q, k, v))
            out = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal)
            return out[0, :heads].view(q.shape)
        cands._try_once(fn, config, device, spare_heads=extra)
        return cands.Built(fn, {"control": "sdpa over extra heads in the same call",
                                "extra_heads": extra, "heads": heads}, spare_heads=extra)
    return build


def extra_heads_name(extra: int) -> str:
    """The registered name of the positive control with ``extra`` extra heads."""
    return f"sdpa_plus{int(extra)}h"


def spin_name(cycles: int) -> str:
    """The registered name of the positive control with ``cycles`` spin cycles."""
    return f"sdpa_spin{int(cycles)}"


CONTROL_NAMES = (("sdpa_twin",) + tuple(spin_name(c) for c in SPIN_CYCLES)
                 + tuple(extra_heads_name(n) for n in EXTRA_HEADS))

if "sdpa_twin" not in cands.CANDIDATES:
    cands.register(cands.Candidate("sdpa_twin", "A/A control: the default SDPA dispatch again",
                                   _build_twin))
for _cycles in SPIN_CYCLES:
    if spin_name(_cycles) not in cands.CANDIDATES:
        cands.register(cands.Candidate(
            spin_name(_cycles),
            f"positive control: SDPA plus a {_cycles}-cycle spin kernel",
            _build_spin(_cycles)))
for _extra in EXTRA_HEADS:
    if extra_heads_name(_extra) not in cands.CANDIDATES:
        cands.register(cands.Candidate(
            extra_heads_name(_extra),
            f"positive control: SDPA over {_extra} extra heads in the same call",
            _build_extra_heads(_extra)))
