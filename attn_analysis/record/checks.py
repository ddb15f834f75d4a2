"""The instrument checks in ``data/checks/``: the JSON a script in ``scripts/`` writes on
the GPU machine, sealed with a format version and a SHA-256 checksum of its contents.

A check file is one JSON object: the script's own keys at the top level, plus three keys
this module owns (:data:`SEAL_KEYS`):

- ``check``: the script that wrote it, one of :data:`KINDS`;
- ``format_version``: :data:`CHECK_FORMAT_VERSION` when it was written;
- ``sha256``: the SHA-256 of the canonical JSON (keys sorted, no spaces, NaN allowed) of
  every other key, ``check`` and ``format_version`` included.

:func:`write` seals and writes (a temporary file, then a rename), :func:`read` refuses a
file that does not verify and returns the script's keys, :func:`verify` names every bad
file (``python -m attn_analysis verify data/checks``). Audit verdicts rest on these files,
so a file edited by hand, cut short or written by an unknown version is an error, never
read as if it were data.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .journal import atomic_write_bytes, canonical_json

__all__ = ["CHECK_FORMAT_VERSION", "KNOWN_FORMAT_VERSIONS", "KINDS", "SEAL_KEYS",
           "CheckFileError", "seal", "write", "read", "is_check_path", "verify"]

# Version of the check-file format. Every change is listed here; the reader refuses any
# version it does not know.
#   1: first format: the script's JSON object plus ``check``, ``format_version`` and
#      ``sha256``. The files recorded before it (2026-11-22 and -23) were sealed as they
#      were, their values unchanged.
CHECK_FORMAT_VERSION = 1
KNOWN_FORMAT_VERSIONS = (1,)
# One kind per script of scripts/ that writes a check file.
KINDS = ("audit_extras", "check_timer", "crossover_ncu", "gluon_check", "gluon_probe",
         "graph_anatomy", "graph_variability", "peers_check", "timers", "triton_check")
SEAL_KEYS = ("check", "format_version", "sha256")


class CheckFileError(ValueError):
    """A check file that is unreadable, unsealed, edited or of another kind."""


def _kind_iv(kind) -> str:
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}; got {kind!r}.")
    return kind


def seal(payload: dict, kind: str) -> dict:
    """``payload`` as JSON reads it back (keys as strings; what JSON cannot hold written
    as ``str``), with ``check``, ``format_version`` and ``sha256`` added."""
    if not isinstance(payload, dict):
        raise ValueError(f"`payload` must be a dict; got {type(payload).__name__}.")
    clash = sorted(set(payload) & set(SEAL_KEYS))
    if clash:
        raise ValueError(f"`payload` must not hold the keys {clash}; this module owns them.")
    body = json.loads(json.dumps(payload, allow_nan=True, default=str))
    body.update(check=_kind_iv(kind), format_version=CHECK_FORMAT_VERSION)
    body["sha256"] = hashlib.sha256(canonical_json(body)).hexdigest()
    return body


def write(path, payload: dict, kind: str) -> Path:
    """Seal ``payload`` (:func:`seal`) and write it to ``path`` atomically; return the path."""
    path = Path(path)
    atomic_write_bytes(path, json.dumps(seal(payload, kind), indent=1,
                                        allow_nan=True).encode())
    return path


def _problem(path: Path, kind) -> tuple[str | None, dict | None]:
    """What is wrong with the check file ``path`` (None if nothing), and its payload."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"unreadable ({type(exc).__name__}: {exc})", None
    if not isinstance(doc, dict) or "sha256" not in doc:
        return ("not a sealed check file (no sha256; write it with "
                "attn_analysis.record.checks)"), None
    if doc.get("format_version") not in KNOWN_FORMAT_VERSIONS:
        return (f"unknown format version {doc.get('format_version')!r} (this code reads "
                f"{KNOWN_FORMAT_VERSIONS})"), None
    claimed = doc.pop("sha256")
    if hashlib.sha256(canonical_json(doc)).hexdigest() != claimed:
        return "checksum mismatch (file edited or corrupted)", None
    if doc.get("check") not in KINDS:
        return f"unknown check {doc.get('check')!r} (known: {KINDS})", None
    if kind is not None and doc["check"] != kind:
        return f"holds a {doc['check']} check, not {kind}", None
    for key in ("check", "format_version"):
        doc.pop(key)
    return None, doc


def read(path, kind: str | None = None) -> dict:
    """The script's keys of the check file ``path``, after checking its format version,
    checksum and (when given) ``kind``; :class:`CheckFileError` names what is wrong."""
    if kind is not None:
        _kind_iv(kind)
    path = Path(path)
    problem, doc = _problem(path, kind)
    if problem:
        raise CheckFileError(f"{path}: {problem}.")
    return doc


def is_check_path(path) -> bool:
    """True for a ``.json`` file, or a folder of them that is not a run folder (no
    manifest, plan or journal): what ``verify`` hands to :func:`verify`."""
    path = Path(path)
    if path.is_file():
        return path.suffix == ".json"
    return (path.is_dir() and any(path.glob("*.json"))
            and not any((path / n).exists() for n in ("manifest.json", "plan.json", "journal")))


def verify(path) -> list[str]:
    """Every problem of the check file ``path``, or of each ``*.json`` in the folder
    ``path``, one line each naming the file; an empty list when all verify."""
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        return [f"{path}: no check files (*.json)"]
    problems = []
    for f in files:
        problem, _ = _problem(f, None)
        if problem:
            problems.append(f"{f.name}: {problem}")
    return problems
