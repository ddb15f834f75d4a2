"""Which code measured a run: the git commit of the package's checkout, recorded in run.json.

A run made from a git checkout records ``git rev-parse HEAD`` and whether the tracked files
differed from it (``code_dirty``). A run made from an exported copy without ``.git`` (the
device gets a ``git archive`` snapshot) takes the commit from the environment variable
:data:`ENV`, which the command that made the snapshot sets; with neither, the commit is
None and the book says so rather than guessing.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

__all__ = ["ENV", "code_commit"]

ENV = "ATTN_CODE_COMMIT"
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_commit(package_dir=None, environ=None) -> dict:
    """``{"code_commit": hash or None, "code_dirty": bool or None, "code_commit_source":
    "git" | "env" | None}`` for the package at ``package_dir`` (default: this package).

    Git first (the checkout the code runs from); else :data:`ENV`, which must be a hex
    commit hash (a malformed value raises ``ValueError`` naming it, before a run starts)."""
    environ = os.environ if environ is None else environ
    root = Path(package_dir) if package_dir is not None else _PACKAGE_DIR
    head = _git(root, "rev-parse", "HEAD")
    if head and _HEX.match(head):
        status = _git(root, "status", "--porcelain", "--untracked-files=no", "--", ".")
        return {"code_commit": head, "code_dirty": None if status is None else bool(status),
                "code_commit_source": "git"}
    value = environ.get(ENV, "").strip().lower()
    if value:
        if not _HEX.match(value):
            raise ValueError(f"`{ENV}` must be a git commit hash (7-40 hex digits); "
                             f"got {value!r}.")
        return {"code_commit": value, "code_dirty": None, "code_commit_source": "env"}
    return {"code_commit": None, "code_dirty": None, "code_commit_source": None}
