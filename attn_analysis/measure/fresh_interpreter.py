"""Python code run in a fresh interpreter, its result read back as one JSON record: how the
probes of ``scripts/`` measure what a new process pays (importing torch, starting CUDA, a
first compile) without the probe's own interpreter having paid it already.

:func:`run_record` is the one copy of that step; torch-free, like the code it starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

__all__ = ["ERROR_TAIL_CHARS", "run_record"]

# How much of the child's output an error record keeps (the end, where a traceback ends).
ERROR_TAIL_CHARS = 2000


def run_record(code: str, *args: str, env_extra: dict | None = None,
               base_env: dict | None = None) -> dict:
    """Run ``python -c code *args`` in a fresh interpreter (this one's executable) and return
    the JSON object its last line of standard output holds, with ``wall_s``, the seconds
    from before the child started to after it ended.

    The child's environment is ``base_env`` (default this process's) updated with
    ``env_extra``. A child that ends with a non-zero code after printing its record keeps
    the record and gains ``returncode``; a child whose last line is not a JSON object gives
    ``{"error": the end of its output, "returncode", "wall_s"}``. ValueError when ``code``
    is not a non-empty string or an argument is not a string.
    """
    if not isinstance(code, str) or not code.strip():
        raise ValueError(f"`code` must be a non-empty string of Python; got {code!r:.60}.")
    if not all(isinstance(a, str) for a in args):
        raise ValueError(f"`args` must be strings; got {args!r:.80}.")
    env = dict(os.environ if base_env is None else base_env, **(env_extra or {}))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, env=env, check=False)
    wall = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    try:
        record = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        return {"error": (done.stdout + done.stderr)[-ERROR_TAIL_CHARS:],
                "returncode": done.returncode, "wall_s": wall}
    if done.returncode != 0:
        record["returncode"] = done.returncode
    record["wall_s"] = wall
    return record
