"""Whether a run folder is what its journal says: ``verify`` and its checks.

A run verifies when its manifest lists exactly its files with their SHA-256, its folder
is named by its recorded run id and its content hash is the journal's, every journal
unit checks out, every derived file equals what ``consolidate`` builds from the journal,
and its plan calls for exactly the journal's units. The deeper checks are remembered per
manifest where a memo folder is set (:mod:`attn_analysis.record.verify_memo`).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import consolidate, journal, verify_memo
from .schema import (IDENTITY_FORMAT, JSON_VIEWS, KNOWN_FORMAT_VERSIONS, MANIFEST, RUN_INFO,
                     RecordError)

__all__ = ["verify", "read_info", "is_legacy_identity"]


def verify(run_dir) -> list[str]:
    """Check a run's manifest, checksums, journal, table schemas and derived files.

    Every file that ``finalize`` derives from the journal (the four tables,
    ``ceilings.json`` and ``fingerprint.json``) is rebuilt from the verified journal and
    must equal what is on disk: same columns, dtypes and rows, strings and integers
    exactly, floats bit for bit. A consistent manifest therefore does not hide an edited
    table. A sweep's plan, in ``run.json`` and ``plan.json`` alike, must call for exactly
    the journal's units, so trials or candidates cannot be added to or dropped from the
    plan after the fact. The folder's name must be the run id recorded in ``run.json``,
    and its content hash the journal's (:func:`_identity_problems`; a legacy run without
    a recorded id is not checked by name). Returns one line per problem, each naming the
    file (and for a derived file its first differing column or key); an empty list means
    the run verifies. The manifest and identity checks run every time; the checks after
    them are skipped for manifest bytes that passed them before under the same checking
    code, where a memo folder is set (:mod:`attn_analysis.record.verify_memo`; the book sets one).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return [f"{run_dir}: no such run folder"]
    problems = []
    manifest_path = run_dir / MANIFEST
    if not manifest_path.is_file():
        return [f"{MANIFEST}: missing (the run was never finalized)"]
    try:
        manifest_bytes = manifest_path.read_bytes()
        manifest = json.loads(manifest_bytes)
        files = manifest["files"]
        version = manifest["format_version"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"{MANIFEST}: unreadable ({exc})"]
    if version not in KNOWN_FORMAT_VERSIONS:
        return [f"{MANIFEST}: unknown format version {version!r} "
                f"(this code reads {KNOWN_FORMAT_VERSIONS})"]
    present = set(consolidate.run_files(run_dir))
    for rel, digest in sorted(files.items()):
        if rel not in present:
            problems.append(f"{rel}: listed in the manifest but missing")
        elif consolidate.file_sha256(run_dir / rel) != digest:
            problems.append(f"{rel}: SHA-256 does not match the manifest")
    for rel in sorted(present - set(files)):
        problems.append(f"{rel}: present but not listed in the manifest")
    expected = consolidate.table_columns(version)
    for name in tuple(expected) + JSON_VIEWS:
        if name not in present:
            problems.append(f"{name}: missing")
    if problems:
        return problems
    problems += _identity_problems(run_dir, files, version)
    if not problems and verify_memo.seen(manifest_bytes):
        return []  # these exact bytes passed every check below (verify_memo says when)
    units, bad = journal.read_journal(run_dir)
    problems += [f"journal/{b}" for b in bad]
    stored = {}
    for name, columns in expected.items():
        try:
            frame = pd.read_parquet(run_dir / name)
        except Exception as exc:  # pyarrow raises several types for damaged files
            problems.append(f"{name}: unreadable ({exc})")
            continue
        stored[name] = frame
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            problems.append(f"{name}: missing columns {missing}")
        if name == "samples.parquet" and not missing and len(frame):
            if not (frame["ms"] > 0).all() or frame["ms"].isna().any():
                problems.append(f"{name}: latencies must be positive and finite")
    if not problems:
        problems += _journal_agrees(run_dir, list(units.values()), stored, version)
        problems += _plan_agrees(run_dir, set(units))
    if not problems:
        verify_memo.remember(manifest_bytes)
    return problems


def read_info(run_dir) -> dict:
    """run.json as a dict; RecordError (a ValueError) naming the file where it is
    unreadable, not an object, or records a ``format_version`` this code does not read
    (absent: a format 1 run). Every reader of run.json goes through here (``verify``,
    ``load``, ``show``, ``compare``, ``merge``), so a bad version is refused in one place."""
    path = Path(run_dir) / RUN_INFO
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: unreadable ({exc})") from None
    if not isinstance(info, dict):
        raise RecordError(f"{path}: must be a JSON object")
    version = info.get("format_version", 1)
    if isinstance(version, bool) or version not in KNOWN_FORMAT_VERSIONS:
        raise RecordError(f"{path}: `format_version` must be one of {KNOWN_FORMAT_VERSIONS}; "
                          f"got {version!r}")
    return info


def is_legacy_identity(run_dir) -> bool:
    """Whether ``run_dir`` is a run finalized before run ids were checked (format <
    ``IDENTITY_FORMAT``) whose run.json records no ``run_id``: its folder name is not
    checked. Every run in ``data/runs`` records its id and is checked."""
    info = read_info(Path(run_dir))
    return info.get("format_version", 1) < IDENTITY_FORMAT and "run_id" not in info


def _identity_problems(run_dir: Path, files: dict, version: int) -> list[str]:
    """The folder's name is the recorded run id, and the recorded content hash is the
    journal's (``files``: the manifest, already checked against the files on disk).

    Format ``IDENTITY_FORMAT`` on requires both keys; earlier runs are checked where they
    hold them: a missing ``run_id`` is a legacy run whose name is not checked
    (:func:`is_legacy_identity`), a missing ``content_hash`` is computed when needed.
    """
    try:
        info = read_info(run_dir)
    except RecordError as exc:
        return [str(exc)]
    problems = []
    run_id = info.get("run_id")
    if run_id is None:
        if version >= IDENTITY_FORMAT:
            problems.append(f"{RUN_INFO}: `run_id` missing (format {version} records it)")
    elif run_id != run_dir.name:
        problems.append(f"{RUN_INFO}: the recorded run id {run_id!r} differs from the "
                        f"folder's name {run_dir.name!r}; a run is known by its id, so a "
                        f"renamed or copied run folder is refused: name the folder "
                        f"{run_id!r} (a copy is not a new run)")
    recorded = info.get("content_hash")
    if recorded is None:
        if version >= IDENTITY_FORMAT:
            problems.append(f"{RUN_INFO}: `content_hash` missing (format {version} records it)")
    elif recorded != consolidate.content_hash(files):
        problems.append(f"{RUN_INFO}: the recorded content hash does not match the journal")
    return problems


def _plan_agrees(run_dir: Path, journal_names: set[str]) -> list[str]:
    """A sweep's plan (in ``run.json`` and ``plan.json``) calls for exactly the journal's units.

    Runs whose ``run.json`` holds no sweep plan (no ``trials``) are not checked.
    """
    try:
        plan = json.loads((run_dir / RUN_INFO).read_text()).get("plan")
    except (OSError, ValueError, AttributeError) as exc:
        return [f"run.json: unreadable ({exc})"]
    if not isinstance(plan, dict) or "trials" not in plan:
        return []
    problems = []
    try:
        recorded = journal.read_plan(run_dir)
    except (OSError, ValueError) as exc:
        problems.append(f"plan.json: missing or unreadable ({exc})")
    else:
        if recorded is None:
            problems.append("plan.json: missing or unreadable (no such file)")
        elif recorded != plan:
            problems.append("plan.json: differs from the plan in run.json")
    try:
        wanted = {n for names in journal.plan_unit_names(plan).values() for n in names}
    except (KeyError, TypeError, ValueError) as exc:
        return problems + [f"run.json: its plan is not a sweep plan ({exc})"]
    missing, extra = sorted(wanted - journal_names), sorted(journal_names - wanted)
    if missing:
        problems.append(f"run.json: the plan calls for {len(missing)} unit(s) the journal "
                        f"lacks, first journal/{missing[0]}")
    if extra:
        problems.append(f"run.json: the journal holds {len(extra)} unit(s) the plan does not "
                        f"call for, first journal/{extra[0]}")
    return problems


def _journal_agrees(run_dir: Path, units: list[dict], stored: dict, version: int) -> list[str]:
    """Every file derived from the journal must be exactly what ``finalize`` writes from it."""
    problems = []
    for name, fresh in consolidate.journal_tables(units, version).items():
        difference = _frame_difference(stored[name], _as_written(fresh))
        if difference:
            problems.append(f"{name}: {difference}")
    for name, obj in consolidate.journal_views(units).items():
        data = (run_dir / name).read_bytes()
        if data == consolidate.view_bytes(obj):
            continue
        try:
            on_disk = json.loads(data)
        except ValueError as exc:
            problems.append(f"{name}: unreadable ({exc})")
            continue
        path = _json_difference(on_disk, obj)
        problems.append(f"{name}: key {path!r} differs from the journal" if path is not None
                        else f"{name}: not formatted as finalize writes it")
    return problems


def _as_written(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as ``finalize`` would store it and ``pd.read_parquet`` read it back."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    buffer.seek(0)
    return pd.read_parquet(buffer)


def _frame_difference(stored: pd.DataFrame, fresh: pd.DataFrame) -> str | None:
    """The first way ``stored`` differs from ``fresh`` (columns, rows, dtype, values), or None."""
    if list(stored.columns) != list(fresh.columns):
        return f"columns {list(stored.columns)}, the journal gives {list(fresh.columns)}"
    if len(stored) != len(fresh):
        return f"{len(stored)} rows, the journal has {len(fresh)}"
    for col in fresh.columns:
        a, b = stored[col], fresh[col]
        if a.dtype != b.dtype:
            return f"column {col!r} is {a.dtype}, the journal gives {b.dtype}"
        differs = ~_same_values(a.to_numpy(), b.to_numpy())
        if differs.any():
            row = int(np.flatnonzero(differs)[0])
            return (f"column {col!r} differs from the journal (first at row {row}: "
                    f"{a.iloc[row]!r} on disk, {b.iloc[row]!r} in the journal)")
    return None


def _same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality: floats bit for bit, anything else exactly, missing equals missing."""
    if a.dtype.kind == "f" and a.dtype == b.dtype:
        unsigned = f"u{a.dtype.itemsize}"
        return a.view(unsigned) == b.view(unsigned)
    same = np.asarray(a == b, dtype=bool)
    return same | (pd.isna(a) & pd.isna(b))


def _json_difference(stored, fresh, path: str = "") -> str | None:
    """Dotted path of the first key where two JSON values differ (NaN equals NaN), or None."""
    if isinstance(stored, dict) and isinstance(fresh, dict):
        for key in sorted(set(stored) | set(fresh)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in stored or key not in fresh:
                return sub
            found = _json_difference(stored[key], fresh[key], sub)
            if found is not None:
                return found
        return None
    if isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            return path or "(top level)"
        for i, (x, y) in enumerate(zip(stored, fresh)):
            found = _json_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    both_nan = (isinstance(stored, float) and isinstance(fresh, float)
                and math.isnan(stored) and math.isnan(fresh))
    if both_nan or (type(stored) is type(fresh) and stored == fresh):
        return None
    return path or "(top level)"
