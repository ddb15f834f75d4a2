"""The journal of a run folder: one self-checksummed file per finished unit of work.

A unit's file name is its identity (:func:`unit_name`, :func:`parse_unit_name`), and a
sweep plan's units are named here too (:func:`plan_unit_names`), so a resumed sweep and
``verify`` agree on what a plan calls for. Units are written atomically (temporary name,
then rename) the moment they finish (:func:`write_unit`) and checked when read back
(:func:`read_unit`: checksum, format version, schema, name). The markers of a sweep in
progress (``.fatal``, ``.current-t<trial>``) and the recorded plan (``plan.json``) live
beside the journal and are written here as well.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .schema import (CURRENT_PREFIX, FATAL, JOURNAL, KNOWN_FORMAT_VERSIONS, PLAN,
                     RECORD_FORMAT_VERSION, TEMPORARY_PREFIX, UNIT_IDENTITY, UNIT_KINDS,
                     RecordError, unit_problems)

__all__ = ["unit_name", "parse_unit_name", "candidate_unit_names", "plan_unit_names",
           "shard_trials", "shard_iv",
           "unit_path", "journal_paths", "read_plan", "write_plan", "write_fatal", "read_fatal",
           "write_current", "read_current", "clear_current", "canonical_json",
           "atomic_write_bytes", "write_unit", "read_unit", "finished_units", "read_journal",
           "clean_temporaries", "outside_git_iv", "file_mode"]


# ----------------------------------------------------------------------- unit names

def unit_name(kind: str, *, config: str = "", candidate: str = "", mode: str = "",
              trial: int | None = None) -> str:
    """File name of a journal unit; the name is the unit's identity (``UNIT_IDENTITY``)."""
    if kind not in UNIT_KINDS:
        raise ValueError(f"`kind` must be one of {UNIT_KINDS}; got {kind!r}.")
    parts = [kind]
    if trial is not None:
        parts.append(f"t{trial}")
    parts += [p for p in (config, candidate, mode) if p]
    return "__".join(parts) + ".json"


def _name_of(unit: dict) -> str:
    return unit_name(unit["kind"], config=unit.get("config", ""),
                     candidate=unit.get("candidate", ""), mode=unit.get("mode", ""),
                     trial=unit.get("trial"))


def parse_unit_name(name: str) -> dict:
    """The identity a journal file name holds: ``kind`` and the ``UNIT_IDENTITY`` fields of
    that kind (``trial`` an int), the inverse of :func:`unit_name`."""
    parts = name.removesuffix(".json").split("__") if name.endswith(".json") else []
    kind = parts[0] if parts else None
    fields = UNIT_IDENTITY.get(kind)
    if fields is None or len(parts) != 1 + len(fields):
        raise ValueError(f"`name` must be a journal unit's file name, such as "
                         f"'timing__t0__B32-H8-S512-D64-fp16__sdpa__graph.json'; got {name!r}.")
    out = {"kind": kind}
    for field, part in zip(fields, parts[1:]):
        if field.name == "trial":
            if not (part.startswith("t") and part[1:].isdigit()):
                raise ValueError(f"`name` must carry the trial as t<number>; got {name!r}.")
            part = int(part[1:])
        out[field.name] = part
    return out


def candidate_unit_names(config: str, candidate: str, trial: int, modes, profile: bool
                         ) -> list[str]:
    """Journal units of one candidate at one configuration in one trial, in sweep order."""
    names = [unit_name("correctness", config=config, candidate=candidate, trial=trial)]
    names += [unit_name("timing", config=config, candidate=candidate, mode=m, trial=trial)
              for m in modes]
    if trial == 0 and profile:
        names.append(unit_name("kernels", config=config, candidate=candidate))
    return names


def plan_unit_names(plan: dict) -> dict[int, list[str]]:
    """Every journal unit a sweep plan (its JSON form, as in ``plan.json``) calls for, by
    trial; the sweep measures them and ``verify`` checks the journal against them."""
    out = {}
    for t in shard_trials(int(plan["trials"]), plan.get("shard")):
        names = [unit_name("trial", trial=t)]
        if t == 0 and plan.get("ceilings"):
            names.append(unit_name("ceilings"))
        for config in plan["configs"]:
            for cand in plan["candidates"]:
                names += candidate_unit_names(config, cand, t, plan["modes"],
                                              bool(plan.get("profile")))
        out[t] = names
    return out


def shard_trials(trials: int, shard=None) -> list[int]:
    """The trials of shard ``shard`` = (K, N) of a plan of ``trials`` processes: those with
    ``t % N == K - 1`` (every trial when ``shard`` is None).

    Deterministic and independent of where or when a shard runs, so N machines (a Slurm
    array, a Kubernetes job) each record one shard, and ``merge`` joins them into the run
    the unsharded plan records: trial t is seeded as it would be there, and shard 1 holds
    trial 0 (the ceilings and the profiler's evidence).
    """
    if shard is None:
        return list(range(trials))
    k, n = shard_iv(shard)
    return [t for t in range(trials) if t % n == k - 1]


def shard_iv(shard, name: str = "shard") -> tuple[int, int]:
    """``shard`` as (K, N) with 1 <= K <= N, from a pair or the text "K/N"; ValueError
    naming ``name`` otherwise."""
    pair = shard
    if isinstance(shard, str):
        parts = shard.split("/")
        pair = tuple(int(p) for p in parts) if (
            len(parts) == 2 and all(p.strip().isdigit() for p in parts)) else None
    ok = (isinstance(pair, (tuple, list)) and len(pair) == 2
          and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
          and 1 <= pair[0] <= pair[1])
    if not ok:
        raise ValueError(f"`{name}` must be K/N with 1 <= K <= N (shard K of N); got {shard!r}.")
    return int(pair[0]), int(pair[1])


# ------------------------------------------------------------------ the run folder

def outside_git_iv(path, name: str = "out_dir") -> Path:
    """``path`` as a Path, refused (ValueError naming ``name``) where it lies inside a
    ``.git`` folder: a run written there is hidden from git and from the data folder."""
    path = Path(path)
    if ".git" in path.resolve().parts or ".git" in path.parts:
        raise ValueError(f"`{name}` must not lie inside a .git folder (git's own store); got "
                         f"{str(path)!r}. Name a run folder, e.g. data/runs/<run-id>.")
    return path


def unit_path(run_dir, name: str) -> Path:
    """Where the journal unit ``name`` lives in ``run_dir``."""
    return Path(run_dir) / JOURNAL / name


def journal_paths(run_dir, kind: str, **identity) -> list[Path]:
    """The journal files of one ``kind`` whose identity matches ``identity`` (e.g.
    ``config=...``, ``candidate=...``), in name order; unreadable names are skipped."""
    out = []
    for path in sorted((Path(run_dir) / JOURNAL).glob(f"{kind}__*.json")):
        try:
            ident = parse_unit_name(path.name)
        except ValueError:
            continue
        if ident["kind"] == kind and all(ident.get(k) == v for k, v in identity.items()):
            out.append(path)
    return out


def read_plan(run_dir) -> dict | None:
    """The sweep plan recorded in ``run_dir`` (``plan.json``), or None before the first."""
    path = Path(run_dir) / PLAN
    return json.loads(path.read_text()) if path.exists() else None


def write_plan(run_dir, plan: dict) -> Path:
    """Record a sweep plan (its JSON form) in ``run_dir`` (``plan.json``)."""
    path = Path(run_dir) / PLAN
    atomic_write_bytes(path, json.dumps(plan, indent=1).encode())
    return path


def write_fatal(run_dir, reason: str) -> Path:
    """Say why a trial process gave up (``.fatal``), for the sweep that started it."""
    path = Path(run_dir) / FATAL
    atomic_write_bytes(path, str(reason).encode())
    return path


def read_fatal(run_dir) -> str:
    """The reason :func:`write_fatal` left."""
    return (Path(run_dir) / FATAL).read_text().strip()


def _current_path(run_dir, trial: int) -> Path:
    return Path(run_dir) / f"{CURRENT_PREFIX}{trial}"


def write_current(run_dir, trial: int, config: str, candidates) -> Path:
    """Say which configuration and candidates trial ``trial``'s process is on, so that a
    crash is recorded against them (:func:`read_current`)."""
    path = _current_path(run_dir, trial)
    atomic_write_bytes(path, json.dumps({"config": config,
                                         "candidates": list(candidates)}).encode())
    return path


def read_current(run_dir, trial: int) -> dict | None:
    """What :func:`write_current` said for ``trial`` (``config``, ``candidates``), or None."""
    path = _current_path(run_dir, trial)
    if not path.exists():
        return None
    current = json.loads(path.read_text())
    return {"config": current["config"],
            "candidates": current.get("candidates") or [current["candidate"]]}


def clear_current(run_dir, trial: int) -> None:
    """Remove trial ``trial``'s marker of :func:`write_current`."""
    _current_path(run_dir, trial).unlink(missing_ok=True)


def canonical_json(obj) -> bytes:
    """``obj`` as canonical JSON bytes (keys sorted, no spaces, NaN allowed): what a
    checksum of a unit or of a check file is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()

def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_mode() -> int:
    """The mode a new file of a run gets: read-write for its owner, readable by others as
    the umask allows (0644 under the usual 022), as ``open`` and Parquet's writer give."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename.
    The file gets :func:`file_mode` (a temporary file alone would be 0600), so every file
    of a run, JSON or Parquet, has the same mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, dir=path.parent)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_unit(run_dir, unit: dict) -> Path:
    """Check a unit against ``UNIT_SCHEMA``, seal it with the format version and its own
    checksum, and write it atomically under its name (:func:`unit_name`)."""
    body = dict(unit, format_version=RECORD_FORMAT_VERSION)
    body.pop("sha256", None)
    problems = unit_problems(body)
    if problems:
        raise ValueError("`unit` must fit the journal's schema (record.UNIT_SCHEMA): "
                         + "; ".join(problems) + ".")
    body["sha256"] = _sha256_bytes(canonical_json(body))
    path = unit_path(run_dir, _name_of(body))
    atomic_write_bytes(path, json.dumps(body, indent=1, allow_nan=True).encode())
    return path


def read_unit(path) -> dict:
    """Read a journal unit and check its checksum, format version, schema and name."""
    path = Path(path)
    try:
        unit = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path.name}: unreadable ({exc})") from None
    if not isinstance(unit, dict) or "sha256" not in unit:
        raise RecordError(f"{path.name}: not a journal unit (no sha256)")
    if unit.get("format_version") not in KNOWN_FORMAT_VERSIONS:
        raise RecordError(f"{path.name}: unknown format version {unit.get('format_version')!r}")
    claimed = unit.pop("sha256")
    if _sha256_bytes(canonical_json(unit)) != claimed:
        raise RecordError(f"{path.name}: checksum mismatch (file edited or corrupted)")
    problems = unit_problems(unit)
    if problems:
        raise RecordError(f"{path.name}: does not fit the journal's schema: "
                          + "; ".join(problems))
    if path.name != _name_of(unit):
        raise RecordError(f"{path.name}: file name does not match its contents")
    return unit


def finished_units(run_dir, names=None) -> tuple[set[str], list[str]]:
    """Names of journal units that verify, and one-line complaints about those that do not:
    of the whole journal, or of ``names`` only (a unit not written yet is neither). A sweep
    checks one trial's units after its process ends, not the journal of every trial, so
    its bookkeeping does not grow with the run."""
    if names is None:
        units, bad = read_journal(run_dir)
    else:
        paths = (unit_path(run_dir, name) for name in names)
        units, bad = _read_units(p for p in paths if p.exists())
    return set(units), bad


def read_journal(run_dir) -> tuple[dict[str, dict], list[str]]:
    """Journal units that verify, by file name in sorted order, and complaints about the
    rest (one line each)."""
    journal = Path(run_dir) / JOURNAL
    if not journal.is_dir():
        return {}, []
    return _read_units(sorted(journal.glob("*.json")))


def _read_units(paths) -> tuple[dict[str, dict], list[str]]:
    """The units at ``paths`` that verify, by file name, and a complaint about each other."""
    good, bad = {}, []
    for path in paths:
        try:
            good[path.name] = read_unit(path)
        except RecordError as exc:
            bad.append(str(exc))
    return good, bad


def clean_temporaries(run_dir) -> int:
    """Remove temporary files an interrupted writer left behind; return how many."""
    n = 0
    for path in Path(run_dir).rglob(f"{TEMPORARY_PREFIX}*"):
        path.unlink()
        n += 1
    return n
