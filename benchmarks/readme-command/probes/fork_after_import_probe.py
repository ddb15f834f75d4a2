"""Which modules a fork server may import before forking trial processes, on a GPU.

For each module (the sweep's ``FORKSERVER_PRELOAD`` and any named on the command line), a
fresh interpreter imports torch and the module, forks, and the child starts CUDA
(``torch.zeros(1, device="cuda")``). A module that asks the CUDA runtime for its devices
when imported leaves the child unable to start CUDA ("Cannot re-initialize CUDA in forked
subprocess"), although ``torch.cuda.is_initialized()`` stays False in the parent: on an
H200 ``torch._inductor.compile_fx`` did (``benchmarks/readme-command/probes/``). The
interpreters get the fork server's environment (``sweep.FORKSERVER_ENV``: torch counts
devices through NVML), under which it does not (H100, 2026-11-27); ``--plain`` leaves it
out.

Usage on the GPU machine, from the repository root:
    PYTHONPATH=. python3 benchmarks/readme-command/probes/fork_after_import_probe.py [MODULE ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CHILD = r"""
import importlib, os, sys, torch
importlib.import_module(sys.argv[1])
pid = os.fork()
if pid == 0:
    try:
        torch.cuda.init(); torch.zeros(1, device="cuda"); os._exit(0)
    except Exception as exc:
        print(type(exc).__name__, str(exc)[:80]); os._exit(1)
_, status = os.waitpid(pid, 0)
print("fork-ok" if os.waitstatus_to_exitcode(status) == 0 else "fork-BAD")
"""


def probe(module: str, env: dict | None = None) -> str:
    """'fork-ok', 'fork-BAD' or the import's error, for one module imported in an
    interpreter with environment ``env`` (None: this one's)."""
    done = subprocess.run([sys.executable, "-c", CHILD, module], capture_output=True,
                          text=True, check=False, env=env)
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else f"error: {done.stderr.strip()[-200:]}"


def main(argv=None) -> int:
    from attn_analysis.measure.sweep import FORKSERVER_ENV, FORKSERVER_PRELOAD
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help="modules to try beside FORKSERVER_PRELOAD")
    ap.add_argument("--plain", action="store_true",
                    help="this environment as it is, without the fork server's FORKSERVER_ENV")
    args = ap.parse_args(argv)
    env = None if args.plain else dict(os.environ, **FORKSERVER_ENV)
    bad = 0
    for module in dict.fromkeys((*FORKSERVER_PRELOAD, *args.modules)):
        result = probe(module, env)
        bad += result != "fork-ok"
        print(module, result, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
