"""A candidate's tuning, kept once per machine: what an autotuning build chose for a
configuration, reused by later runs on the same machine, GPU model, software and
measuring code, so that only a machine's first run tunes (issue 23: compile and tune
once per machine, cached and recorded).

A sweep's later processes already reuse the first process's choice (read from the run's
journal); this cache carries the choice across runs. A build that reuses it records so
in its unit (``info["hint_source"]``), beside the choice itself, so a reader can always
tell a tuned build from a reused one. The cache is one JSON file; a damaged or foreign
file is ignored (the candidate tunes again), and writes are atomic.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

__all__ = ["ENV_VAR", "cache_path", "code_hash", "cache_key", "lookup", "store", "store_many"]

# Where the cache lives when set; else ~/.cache/attn_analysis/tuning.json.
ENV_VAR = "ATTN_ANALYSIS_TUNING_CACHE"
_FORMAT = 1


def cache_path() -> Path:
    """The cache file: ``$ATTN_ANALYSIS_TUNING_CACHE``, else under the user's cache folder."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attn_analysis" / "tuning.json"


def code_hash() -> str:
    """SHA-256 of the measuring code (every ``attn_analysis/measure/*.py``): any change to
    a kernel, its launcher or its tuning space makes earlier choices unusable."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(candidate: str, config_key: str, fingerprint_hash: str, code: str) -> str:
    """One entry per candidate, configuration, machine fingerprint (GPU model, driver,
    library versions) and measuring code."""
    for name, value in (("candidate", candidate), ("config_key", config_key),
                        ("fingerprint_hash", fingerprint_hash), ("code", code)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"`{name}` must be a non-empty string; got {value!r}.")
    return "|".join((candidate, config_key, fingerprint_hash, code))


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != _FORMAT \
            or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def lookup(key: str, path: Path | None = None) -> dict | None:
    """The build ``info`` stored under ``key``, or None (no file, no entry, a damaged file)."""
    entry = _read(path or cache_path()).get(key)
    return entry if isinstance(entry, dict) else None


def store(key: str, info: dict, path: Path | None = None) -> None:
    """Keep ``info`` (a JSON-able build record) under ``key``, atomically; a cache that
    cannot be written is skipped silently: it only saves time."""
    store_many({key: info}, path)


def store_many(entries: dict, path: Path | None = None) -> None:
    """Keep every ``{key: info}`` of ``entries`` in one atomic write (one writer for many
    entries: the sweep's prebuild records its compiles so); unwritable is skipped, as in
    :func:`store`."""
    for key, info in entries.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"every key must be a non-empty string; got {key!r}.")
        if not isinstance(info, dict):
            raise ValueError(f"`info` must be a dict; got {type(info).__name__}.")
    if not entries:
        return
    path = path or cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        merged = {**_read(path), **entries}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tuning-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump({"format": _FORMAT, "entries": merged}, fh, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        return
