"""Which GPUs of the host a sweep spreads its trial processes over, and how each process
is pinned to one (``CUDA_VISIBLE_DEVICES``).

Torch-free and CUDA-free: the sweep's parent never starts CUDA (its trial processes fork
from a server that must not have), so the GPUs are listed from ``CUDA_VISIBLE_DEVICES``
where set, else from ``nvidia-smi -L``. Each entry is what a child's
``CUDA_VISIBLE_DEVICES`` is set to: an index or a UUID as the host names it, so a pinned
process sees exactly one GPU, as its device 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

__all__ = ["ENV", "visible_gpus", "select_gpus"]

ENV = "CUDA_VISIBLE_DEVICES"


def visible_gpus(environ=None, lister=None) -> tuple[str, ...]:
    """The GPUs this process may use, each as a ``CUDA_VISIBLE_DEVICES`` entry.

    ``environ`` (default ``os.environ``) with ``CUDA_VISIBLE_DEVICES`` set: its entries, in
    order (an empty value: none). Otherwise the UUIDs ``lister()`` (default: ``nvidia-smi
    -L``) prints; none where there is no ``nvidia-smi``.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(ENV)
    if value is not None:
        return tuple(p.strip() for p in value.split(",") if p.strip())
    text = (lister or _nvidia_smi_list)()
    return tuple(re.findall(r"\(UUID:\s*(GPU-[0-9A-Za-z-]+)\)", text))


def _nvidia_smi_list() -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ""
    try:
        return subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def select_gpus(spec, visible, name: str = "gpus") -> tuple[str, ...]:
    """The pins of the GPUs ``spec`` picks from ``visible`` (:func:`visible_gpus`).

    ``spec`` None or "all": every visible GPU. Otherwise indices into ``visible``, as
    "0,1" or a sequence of ints; each at most once. ValueError naming ``name`` for an
    index out of range, a repeated one, or no visible GPU at all.
    """
    visible = tuple(visible)
    if spec is None or spec == "all":
        if not visible:
            raise ValueError(f"`{name}`: this machine shows no GPU (no {ENV} entry, no "
                             f"`nvidia-smi -L` line); a CPU sweep runs without --gpus.")
        return visible
    if isinstance(spec, str):
        parts = [p.strip() for p in spec.split(",") if p.strip()]
        if not parts or not all(p.isdigit() for p in parts):
            raise ValueError(f"`{name}` must be 'all' or GPU indices such as '0,1'; "
                             f"got {spec!r}.")
        indices = [int(p) for p in parts]
    else:
        indices = list(spec)
        if not indices or not all(isinstance(i, int) and not isinstance(i, bool)
                                  for i in indices):
            raise ValueError(f"`{name}` must be 'all' or GPU indices such as '0,1'; "
                             f"got {spec!r}.")
    if len(set(indices)) != len(indices):
        raise ValueError(f"`{name}` must name each GPU once; got {spec!r}.")
    bad = [i for i in indices if not 0 <= i < len(visible)]
    if bad:
        raise ValueError(f"`{name}` must name GPUs 0..{len(visible) - 1} of the "
                         f"{len(visible)} this machine shows; got {bad[0]}.")
    return tuple(visible[i] for i in indices)
