"""Write the bytecode of what a sweep imports, in parallel, before the sweep starts.

The GPU machines' image sets ``PYTHONDONTWRITEBYTECODE`` and its packages ship no
bytecode, so the first interpreter of a run compiles every module it imports from source,
one after another (``import torch`` 15.3 s the first time, 3.3-3.7 s after, on an H100:
``benchmarks/readme-command/probes/cost_probe_h100_r2.log``). A pip install writes the
bytecode when it installs; this does the same for the packages below, with one process per
core, under ``sys.pycache_prefix`` (``PYTHONPYCACHEPREFIX``, which ``scripts/campaign.sh``
sets) when there is one. Test folders are left out. It changes nothing a module does.

Usage: python3 scripts/compile_bytecode.py [PACKAGE ...]   (default: SWEEP_PACKAGES)
Prints one line: what it compiled, where, and how long it took.
"""

from __future__ import annotations

import compileall
import importlib.util
import re
import sys
import sysconfig
import time
from pathlib import Path

# Top-level packages a sweep imports, by modules imported (torch's compile stack pulls
# sympy, networkx and mpmath; torch imports torchgen; the timers' intervals import
# scipy.stats, which imports charset_normalizer), and the measuring package itself.
# scipy, torchgen and charset_normalizer were missing until 2026-11-27: a fresh H100's
# command line compiled about 450 modules from source (benchmarks/readme-command/, "What
# the command line did before the sweep").
SWEEP_PACKAGES = ("torch", "triton", "sympy", "pandas", "networkx", "numpy", "mpmath",
                  "jinja2", "dateutil", "pyarrow", "tqdm", "filelock", "scipy", "torchgen",
                  "charset_normalizer", "attn_analysis")
# Folders a sweep never imports: test suites (not torch.testing._internal, which dynamo
# imports); in the standard library also its tools and the installed packages' folder
# inside it (those are compiled as packages, or not at all).
SKIP = re.compile(r"[/\\]tests?[/\\]")
STDLIB_SKIP = re.compile(r"[/\\](tests?|idlelib|tkinter|turtledemo|lib2to3|ensurepip|"
                         r"site-packages|dist-packages)[/\\]")


def package_dirs(names) -> list[Path]:
    """The folders of the installed packages ``names`` (found without importing them);
    names not installed are left out."""
    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found.extend(Path(p) for p in spec.submodule_search_locations)
    return found


def compile_all(dirs, workers: int = 0, stdlib: bool = True) -> bool:
    """Compile every module under ``dirs``, and the standard library's with ``stdlib``
    (``workers`` 0: one process per core); True when every file compiled."""
    ok = True
    if stdlib:
        ok = bool(compileall.compile_dir(sysconfig.get_paths()["stdlib"], quiet=2,
                                         workers=workers, rx=STDLIB_SKIP))
    for folder in dirs:
        ok &= bool(compileall.compile_dir(folder, quiet=2, workers=workers, rx=SKIP))
    return ok


def main(argv=None) -> int:
    names = (sys.argv[1:] if argv is None else argv) or SWEEP_PACKAGES
    dirs = package_dirs(names)
    started = time.monotonic()
    ok = compile_all(dirs)
    where = sys.pycache_prefix or "beside the sources"
    print(f"bytecode: {len(dirs)} packages and the standard library compiled under {where} "
          f"in {time.monotonic() - started:.1f} s" + ("" if ok else " (some files failed)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
