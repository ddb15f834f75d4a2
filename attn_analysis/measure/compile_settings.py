"""How a sweep process runs ``torch.compile`` for the candidates built with it
(``eager_compiled``, ``flex``): one process compiles every shape of a sweep, and compiles
Inductor's kernels itself rather than in a pool of workers. Neither setting changes the
kernels compiled; both change what a process's build costs.
"""

from __future__ import annotations

import os

import torch

__all__ = ["RECOMPILE_LIMIT", "prepare", "raise_recompile_limits", "compile_in_process"]

# Shapes one process may compile per function (dynamo's defaults stop at 8).
RECOMPILE_LIMIT = 256


def raise_recompile_limits(limit: int = RECOMPILE_LIMIT) -> None:
    """Let one process compile every shape of a sweep without hitting dynamo's limit."""
    cfg = torch._dynamo.config
    for key in ("recompile_limit", "cache_size_limit",
                "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(cfg, key):
            setattr(cfg, key, max(getattr(cfg, key), limit))


def compile_in_process() -> int:
    """Have Inductor compile its kernels in this process (``compile_threads`` 1) unless
    ``TORCHINDUCTOR_COMPILE_THREADS`` says otherwise; return the setting in force.

    Its default starts a pool of compile workers in every process that compiles, each
    worker importing torch anew: on an H100 the warm-cache build of three configurations
    took 16.9 s with the pool and 8.6 s without
    (``benchmarks/readme-command/probes/sweep_cost_probe.py``), cold
    builds took as long either way, and the pool's start competed with the process for
    the CPU. Where the kernels are compiled does not change them.
    """
    import torch._inductor.config as inductor_config
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        inductor_config.compile_threads = 1
    return int(inductor_config.compile_threads)


def prepare() -> int:
    """Both settings, before a candidate's first compile; returns ``compile_threads``,
    which the candidate records in its ``info``."""
    raise_recompile_limits()
    return compile_in_process()
