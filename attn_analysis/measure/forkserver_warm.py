"""What every process that compiles does first, done once in the trial processes' fork
server: importing this module (the last of ``sweep.FORKSERVER_PRELOAD``) imports
Inductor's ``compile_fx`` and computes the source hashes that Inductor and Triton key
their on-disk caches with (``torch_key``, ``triton_key``; each hashes its package's
files and keeps the result for the life of the process). Every trial process and prebuild
worker forked from the server inherits them instead of paying them at its first build: on
an H100 with warm caches, 1.2-1.4 s for the import and 0.6 s for the two hashes of each
process (``benchmarks/readme-command/probes/trial_overhead_probe.py``).

None of it changes what is compiled or timed: the same modules and the same hashes, only
computed before the fork. A forked child cannot start CUDA if its parent asked the CUDA
runtime for its devices, and importing ``compile_fx`` does (through the device count of
``torch._inductor.runtime.triton_heuristics``) unless ``PYTORCH_NVML_BASED_CUDA_CHECK``
is 1, under which torch counts devices through NVML without starting CUDA (checked on an
H100 by forking after each module:
``benchmarks/readme-command/probes/fork_after_import_probe.py``). So the
import happens only under that setting, which ``sweep.trial_context`` gives the fork
server; the hashes start nothing and are computed either way.

It runs where a sweep compiles for a GPU: on a machine with the NVIDIA driver, seen by
its ``/proc`` entry or its control device (:func:`wanted`). Elsewhere a sweep's
candidates compile nothing, and every fork server (each command-line sweep starts one)
would pay the import and the hashes for nothing: 1.5-1.7 s on a 2-core machine, times
every sweep the tests start. ``ATTN_FORKSERVER_WARM`` = 1 or 0 decides instead.

``WARMED`` says what this process did, in how many seconds, under which setting; a trial
process forked from the server records it (``preloaded`` in its trial unit).
"""

from __future__ import annotations

import os
import time

from .device_memory import NVIDIA_DRIVER
from .trial_pool import NVML_CHECK  # the fork server imported trial_pool (via trial) before this

__all__ = ["NVML_CHECK", "WARM_ENV", "DRIVER_SIGNS", "WARMED", "wanted"]
# "1" or "0": warm up or not, whatever the machine (default: where the NVIDIA driver is).
WARM_ENV = "ATTN_FORKSERVER_WARM"
# Signs of the NVIDIA driver, any one enough: its /proc entry, or the control device that
# NVML and CUDA open (a container may show one without the other).
DRIVER_SIGNS = (NVIDIA_DRIVER, "/dev/nvidiactl")


def wanted() -> bool:
    """Whether this process warms up: ``WARM_ENV`` if it is 1 or 0, else whether one of
    ``DRIVER_SIGNS`` is there."""
    setting = os.environ.get(WARM_ENV)
    if setting in ("0", "1"):
        return setting == "1"
    return any(os.path.exists(path) for path in DRIVER_SIGNS)


def _warm() -> dict:
    """Where :func:`wanted`, import ``compile_fx`` (only under ``NVML_CHECK`` = 1) and
    compute the two hashes; return the setting and the seconds of each step, None for a
    step not done. A step that cannot run here (no Triton) is skipped: a trial then does
    it itself, as without this module."""
    done: dict = {"nvml_check": os.environ.get(NVML_CHECK)}
    if not wanted():
        return dict(done, compile_fx=None, torch_key=None, triton_key=None)
    started = time.perf_counter()
    if os.environ.get(NVML_CHECK) == "1":
        import torch._inductor.compile_fx  # noqa: F401  (imported for its children)
        done["compile_fx"] = round(time.perf_counter() - started, 3)
    else:
        done["compile_fx"] = None  # importing it would leave forked children without CUDA
    for name, load in (("torch_key", _torch_key), ("triton_key", _triton_key)):
        step = time.perf_counter()
        try:
            load()()
        except ImportError:
            done[name] = None
        else:
            done[name] = round(time.perf_counter() - step, 3)
    return done


def _torch_key():
    from torch._inductor.codecache import torch_key
    return torch_key


def _triton_key():
    from triton.runtime.cache import triton_key
    return triton_key


WARMED: dict = _warm()
