"""The (B, H, S, D) tensor arguments of our own attention kernels, checked one way.

:mod:`.triton_attention` and :mod:`.gluon_attention` take the same q, k, v (and out)
tensors and name a bad one with the same messages; :func:`tensor_iv` holds those checks
once. Each kernel adds only what its launch needs on top: the Triton kernel a CUDA device
(or the CPU under Triton's interpreter), the Gluon kernel 16-byte alignment for TMA.
"""

from __future__ import annotations

import torch

__all__ = ["tensor_iv"]


def tensor_iv(name: str, t, ref=None, *, dtypes, head_dims) -> None:
    """Check argument ``name``: without ``ref``, a 4-D (B, H, S, D) tensor of one of
    ``dtypes`` with D in ``head_dims`` and B, H, S >= 1; with ``ref`` (``q``), one of ref's
    dtype, shape and device. Contiguous either way; raises ValueError naming ``name``."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"`{name}` must be a torch.Tensor; got {type(t).__name__}.")
    if ref is None:
        if t.dtype not in dtypes:
            raise ValueError(f"`{name}` dtype must be {' or '.join(map(str, dtypes))}; "
                             f"got {t.dtype}.")
        if t.dim() != 4:
            raise ValueError(f"`{name}` must be 4-D (B, H, S, D); got shape {tuple(t.shape)}.")
        if t.shape[3] not in head_dims:
            raise ValueError(f"`{name}` head dim (last axis) must be one of {head_dims}; "
                             f"got {t.shape[3]}.")
        if min(t.shape) < 1:
            raise ValueError(f"`{name}` must have B, H, S >= 1; got shape {tuple(t.shape)}.")
    else:
        if t.dtype != ref.dtype:
            raise ValueError(f"`{name}` dtype must equal `q` dtype {ref.dtype}; got {t.dtype}.")
        if t.shape != ref.shape:
            raise ValueError(f"`{name}` shape must equal `q` shape {tuple(ref.shape)}; "
                             f"got {tuple(t.shape)}.")
        if t.device != ref.device:
            raise ValueError(f"`{name}` must be on `q`'s device {ref.device}; got {t.device}.")
    if not t.is_contiguous():
        raise ValueError(f"`{name}` must be contiguous; call .contiguous() first.")
