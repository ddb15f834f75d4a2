"""A content-addressed memo of the runs that passed every check of ``record.verify``.

Every notebook of the book loads, and so verifies, every recorded run: each in its own
kernel, so a cold build verified each run once per notebook, and most of a notebook's
start-up went there. ``record.verify`` always checks the manifest against every file
(SHA-256, files listed and present) and the folder's name against the run id. Its deeper
checks (each journal unit's checksum and schema, every table and JSON view rebuilt from
the journal and compared, the plan against the journal) are a pure function of the run's
bytes and of the code that checks them. Once the manifest is checked, its bytes pin every
file's bytes; so a run whose manifest bytes already passed the deeper checks, under the
same checking code and library versions (:func:`verifier_id`), passes them again.

The memo is a folder of empty-named marker files, one per (manifest bytes, verifier)
key, written only after the deeper checks passed; it is used only where the environment
variable ``ATTN_VERIFIED_CACHE`` names a folder (the book sets it to
``_build/.attn_verified``, beside the notebook cache, and empties it with that cache).
Without it, every ``verify`` runs every check.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

__all__ = ["ENV", "verifier_id", "marker", "seen", "remember"]

ENV = "ATTN_VERIFIED_CACHE"
_HERE = Path(__file__).resolve().parent
# The modules whose code decides what the deeper checks accept: the run format (this
# package, format versions included) and the configuration keys it parses (configs,
# _validate), as paths relative to this folder.
_CHECKING_CODE = ("__init__.py", "schema.py", "journal.py", "consolidate.py", "verification.py",
                  "run.py", "verify_memo.py", "../configs.py", "../_validate.py")


@functools.lru_cache(maxsize=1)
def verifier_id() -> str:
    """SHA-256 of what the deeper checks depend on besides a run's bytes: the checking
    modules' source and the versions of Python, numpy, pandas and pyarrow."""
    import sys

    import numpy
    import pandas
    import pyarrow
    h = hashlib.sha256()
    for name in _CHECKING_CODE:
        h.update(name.encode() + b"\0" + (_HERE / name).read_bytes())
    h.update(f"python {sys.version} numpy {numpy.__version__} pandas {pandas.__version__} "
             f"pyarrow {pyarrow.__version__}".encode())
    return h.hexdigest()


def marker(manifest_bytes: bytes) -> Path | None:
    """The memo's marker for a run with this manifest, or None where no memo folder is
    set (``ATTN_VERIFIED_CACHE``)."""
    folder = os.environ.get(ENV, "").strip()
    if not folder:
        return None
    key = hashlib.sha256(verifier_id().encode() + b"\0" + bytes(manifest_bytes)).hexdigest()
    return Path(folder) / key


def seen(manifest_bytes: bytes) -> bool:
    """Whether a run with exactly these manifest bytes passed the deeper checks before."""
    path = marker(manifest_bytes)
    return path is not None and path.is_file()


def remember(manifest_bytes: bytes) -> None:
    """Record that a run with these manifest bytes passed the deeper checks (atomically;
    nothing where no memo folder is set)."""
    path = marker(manifest_bytes)
    if path is not None:
        from .journal import atomic_write_bytes
        atomic_write_bytes(path, b"")
