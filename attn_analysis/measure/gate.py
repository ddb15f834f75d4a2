"""The float64 correctness gate: fresh random inputs, attention in float64, and the check
every candidate passes before it is timed.

Each candidate runs on fresh N(0, 1) inputs (never zeros) with its output poisoned by
NaN, and is compared with float64 attention; a non-finite element or a relative error
over :data:`REL_ERROR_THRESHOLD` fails it. The registry of candidates
(:mod:`.candidates`) re-exports these names, where most callers reach them.
"""

from __future__ import annotations

import dataclasses
import math
import torch

from ..configs import DEVICES, LAYOUTS, Config

__all__ = ["REL_ERROR_THRESHOLD", "CorrectnessResult", "make_inputs", "reference", "check"]

# Relative-error thresholds ||out - ref|| / ||ref|| against a float64 reference, for
# N(0, 1) inputs. fp16 keeps 11 significant bits (unit roundoff 4.9e-4), bf16 keeps 8
# (3.9e-3); a correct kernel with fp32 accumulation lands at a small multiple of the
# roundoff, while a wrong scale, a missing mask or a skipped tile gives errors of order
# 0.1 to 1. The thresholds sit about ten roundoffs up.
REL_ERROR_THRESHOLD = {"float16": 5e-3, "bfloat16": 4e-2}


@dataclasses.dataclass(frozen=True)
class CorrectnessResult:
    """Outcome of the float64 correctness gate for one candidate at one configuration."""

    candidate: str
    config: str
    passed: bool
    rel_error: float
    max_abs_error: float
    threshold: float
    nonfinite: int
    reason: str



def _device_iv(device: str) -> str:
    """Check the device name and that CUDA is present when asked for."""
    if device not in DEVICES:
        raise ValueError(f"`device` must be one of {DEVICES}; got {device!r}.")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("`device` is 'cuda' but no CUDA device is available.")
    return device


def make_inputs(config: Config, device: str, seed: int, layout: str = "BHSD"
                ) -> tuple[torch.Tensor, ...]:
    """Fresh N(0, 1) query, key and value tensors (never zeros), reproducible by seed.

    Each is a logical (B, H, S, D) tensor; ``layout`` is its memory order: "BHSD"
    contiguous, or "BSHD" (a (B, S, H, D) allocation seen through a transpose, as a model's
    projections hand attention its inputs).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"`layout` must be one of {LAYOUTS}; got {layout!r}.")
    gen = torch.Generator(device=device).manual_seed(int(seed))
    b, h, s, d = config.batch, config.heads, config.seq_len, config.head_dim
    dtype = getattr(torch, config.dtype)
    if layout == "BSHD":
        return tuple(torch.randn((b, s, h, d), generator=gen, device=device, dtype=dtype)
                     .transpose(1, 2) for _ in range(3))
    return tuple(torch.randn((b, h, s, d), generator=gen, device=device, dtype=dtype)
                 for _ in range(3))


def reference(q, k, v, causal: bool, max_chunk_bytes: int = 1 << 30) -> torch.Tensor:
    """Attention in float64, chunked over batch*heads so the score matrix stays bounded."""
    b, h, s, d = q.shape
    qf, kf, vf = (t.reshape(b * h, s, d) for t in (q, k, v))
    out = torch.empty((b * h, s, d), dtype=torch.float64, device=q.device)
    step = max(1, int(max_chunk_bytes // (s * s * 8)))
    mask = None
    if causal:
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    for i in range(0, b * h, step):
        qi, ki, vi = (t[i:i + step].double() for t in (qf, kf, vf))
        scores = qi @ ki.transpose(-1, -2) / math.sqrt(d)
        if mask is not None:
            scores.masked_fill_(mask, float("-inf"))
        out[i:i + step] = torch.softmax(scores, dim=-1) @ vi
    return out.reshape(b, h, s, d)


# The last float64 reference computed in this process, keyed by what determines it
# (configuration, input seed, layout): the candidates of one configuration are checked on
# the same inputs, so the reference is computed once per configuration, not per candidate.
_last_reference: dict = {}


def _reference_for(q, k, v, config: Config, seed: int, layout: str) -> torch.Tensor:
    """:func:`reference` of ``make_inputs(config, ..., seed, layout)``, computed once."""
    key = (config.key, q.device.type, int(seed), layout)
    if key not in _last_reference:
        _last_reference.clear()  # hold one reference at a time (it can be large)
        _last_reference[key] = reference(q, k, v, config.causal)
    return _last_reference[key]


def _poison_allocator(like: torch.Tensor, copies: int = 4) -> None:
    """Leave NaN-filled blocks of the output's size in the caching allocator.

    A candidate that allocates its own output gets one of these blocks back for a
    same-sized request, so elements it never writes read as NaN instead of stale data.
    """
    blocks = [torch.full_like(like, float("nan")) for _ in range(copies)]
    del blocks


def check(built, config: Config, device: str, seed: int, name: str = "") -> CorrectnessResult:
    """Run a built candidate (a :class:`.candidates.Built`) on fresh random inputs and compare
    with float64 attention.

    The output is poisoned with NaN first (a caller's buffer when the candidate accepts
    one, otherwise the allocator's free blocks), so unwritten elements are caught; any
    non-finite element fails the check, and so does a relative error over the threshold.
    """
    q, k, v = make_inputs(config, device, seed, layout=built.layout)
    with built.context():
        if built.accepts_out:
            out = torch.full_like(q, float("nan"))
            result = built.fn(q, k, v, out=out)
            out = out if result is None else result
        else:
            _poison_allocator(q)
            out = built.fn(q, k, v)
    if device == "cuda":
        torch.cuda.synchronize()
    threshold = REL_ERROR_THRESHOLD[config.dtype]
    if tuple(out.shape) != tuple(q.shape):
        return CorrectnessResult(name, config.key, False, math.inf, math.inf, threshold, 0,
                                 f"output shape {tuple(out.shape)} != {tuple(q.shape)}")
    nonfinite = int((~torch.isfinite(out)).sum().item())
    ref = _reference_for(q, k, v, config, seed, built.layout)
    diff = out.double() - ref
    finite = torch.isfinite(diff)
    rel = float(torch.linalg.vector_norm(torch.where(finite, diff, 0.0)) /
                torch.linalg.vector_norm(ref))
    max_abs = float(diff[finite].abs().max()) if bool(finite.any()) else math.inf
    if nonfinite:
        return CorrectnessResult(name, config.key, False, math.inf if rel == 0 else rel,
                                 max_abs, threshold, nonfinite,
                                 f"{nonfinite} non-finite output elements (unwritten or NaN)")
    passed = rel < threshold
    reason = "" if passed else f"relative error {rel:.3g} >= threshold {threshold:.3g}"
    return CorrectnessResult(name, config.key, passed, rel, max_abs, threshold, 0, reason)
