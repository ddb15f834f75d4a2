"""Memory placement: fresh inputs at a random offset, one draw per placement (protocol v2).

Re-allocating the same inputs moves one and the same kernel's time by a few percent (the
GPU case of Mytkowicz et al., ASPLOS 2009: layout is a hidden variable). Protocol v2 makes
placement a sampled factor instead of a fixed accident of the process: before each
placement the caching allocator gives its free memory back to the driver, a pad of a
random size is allocated first, and the inputs are allocated after it, so inputs, outputs,
workspaces and a re-captured CUDA graph's private pool all land at new addresses.

``place`` returns the inputs and the pad; the caller keeps the pad alive while it times
and drops both before the next placement (``release``).
"""

from __future__ import annotations

import dataclasses
import random

__all__ = ["MAX_PAD_BYTES", "PAD_ALIGN_BYTES", "Placement", "pad_bytes_for", "release",
           "place", "placed_calls"]

# Pads are drawn uniformly in [0, MAX_PAD_BYTES) and rounded down to the allocator's 512-byte
# granularity. 256 MiB spans many of the allocator's 2 MiB segments and the driver's pages.
MAX_PAD_BYTES = 256 * 2**20
PAD_ALIGN_BYTES = 512


@dataclasses.dataclass
class Placement:
    """One placement draw: its index, the pad in front of the inputs, and the inputs."""

    index: int
    pad_bytes: int
    inputs: tuple
    pad: object = None

    def as_record(self) -> dict:
        """What the journal keeps of the draw (the tensors themselves are not recorded)."""
        return {"placement": self.index, "pad_bytes": self.pad_bytes}


def pad_bytes_for(rng: random.Random) -> int:
    """A random pad size in [0, MAX_PAD_BYTES), a multiple of PAD_ALIGN_BYTES."""
    return rng.randrange(0, MAX_PAD_BYTES // PAD_ALIGN_BYTES) * PAD_ALIGN_BYTES


def release(device: str) -> None:
    """Return the allocator's cached blocks to the driver, so the next draw starts afresh."""
    import gc
    gc.collect()
    if device == "cuda":
        import torch
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def place(index: int, make_inputs, device: str, rng: random.Random) -> Placement:
    """Allocate a random pad, then ``make_inputs()``; return both as one placement.

    ``make_inputs`` is a zero-argument callable returning the input tensors (fresh random
    values each call). Call :func:`release` after dropping the previous placement.
    """
    import torch
    size = pad_bytes_for(rng)
    pad = torch.empty(max(size, 1), dtype=torch.uint8, device=device)
    return Placement(index, size, tuple(make_inputs()), pad)


def placed_calls(n: int, make_inputs, fn, device: str, rng: random.Random):
    """Yield ``(index, call)`` for ``n`` placements made one after another as a trial makes
    them (:func:`release`, then :func:`place`), for the probes that time or profile a
    candidate the way a sweep does: ``make_inputs(index)`` returns a placement's inputs and
    ``call()`` runs ``fn(*inputs)`` on them. When the next placement is asked for, the last
    one's tensors are let go (a ``call`` the caller still holds has none left) before the
    allocator is released and the next drawn; after the last, the allocator is released."""
    for index in range(n):
        release(device)
        held = [place(index, lambda: make_inputs(index), device, rng)]

        def call(held=held):
            return fn(*held[0].inputs)
        yield index, call
        held.clear()
    release(device)
