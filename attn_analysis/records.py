"""The run folder and the recorded-data format: units, layout, consolidation, verify, load.

This module owns a run folder: every name in it is built (and parsed) here, and nothing
else reads or writes inside it except through these functions. A run lives in
``data/runs/<run-id>/``:

``journal/*.json``
    One self-checksummed file per finished unit of work, written atomically (temporary
    name, then rename) the moment the unit completes. Units are ``timing`` (one
    configuration x candidate x mode x trial), ``correctness``, ``kernels`` (profiler
    evidence), ``trial`` (a trial process's fingerprint) and ``ceilings``; the fields of
    each kind, with their types, are declared in ``UNIT_SCHEMA`` and checked when a unit
    is written and when it is read. A unit's file name is its identity
    (:func:`unit_name`, :func:`parse_unit_name`). The journal is what a resumed sweep
    reads to skip finished work.
``plan.json``
    The sweep's plan (:func:`write_plan`), written before the first unit; a resumed
    sweep compares it with its own.
``.fatal``, ``.current-t<trial>``
    Markers of a sweep in progress: why a trial process gave up (:func:`write_fatal`),
    and which configuration and candidates a trial process is on, so that a crash is
    recorded against them (:func:`write_current`).
``samples.parquet``
    Tidy long table, one row per raw sample: configuration fields, candidate, mode,
    trial, sample index, milliseconds.
``placements.parquet`` (format 2)
    One row per memory placement of each timing unit: its median, the profiler's kernel
    time per call there, the pad in front of the inputs, SM clock and temperature.
``units.parquet``, ``correctness.parquet``, ``kernels.parquet``, ``ceilings.json``,
``fingerprint.json``
    Consolidated views of the journal; their columns are declared beside the unit fields
    they come from (``UNITS_TABLE``, ``CORRECTNESS_TABLE``, ``KERNELS_TABLE``). ``verify``
    rebuilds each of them (and ``samples.parquet``) from the journal and requires what is
    on disk to equal it.
``run.json``
    How the run was invoked (plan, package version), plus the format version, the run id
    and the content hash (:func:`content_hash`: the measurements, whatever the folder is
    called). ``verify`` refuses a folder whose name is not the recorded run id, and a
    content hash that is not the journal's; ``distinct_runs`` refuses to pool two runs
    with the same id or the same content.
``manifest.json``
    SHA-256 of every other file, and the format version.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from . import RECORD_FORMAT_VERSION, verify_memo
from .configs import CONFIG_FIELDS, MODES, Config

KNOWN_FORMAT_VERSIONS = (1, 2, 3)
# From this format on, run.json must hold `run_id` and `content_hash` (attn_analysis's
# RECORD_FORMAT_VERSION comment); earlier runs are checked where they hold them.
IDENTITY_FORMAT = 3
STATUSES = ("ok", "unsupported", "failed_correctness", "oom", "error", "crashed")
# The run folder's own names.
JOURNAL = "journal"
PLAN = "plan.json"
RUN_INFO = "run.json"
MANIFEST = "manifest.json"
FATAL = ".fatal"
CURRENT_PREFIX = ".current-t"
TEMPORARY_PREFIX = ".tmp-"
JSON_VIEWS = ("ceilings.json", "fingerprint.json", RUN_INFO)


class RecordError(ValueError):
    """A recorded run is malformed, corrupted or of an unknown format; the message says which file."""


# ----------------------------------------------------------------------- unit schema

@dataclasses.dataclass(frozen=True)
class Field:
    """One key of a journal unit (or of a record in one of its lists).

    ``types`` are JSON types (a bool is never an int, an int is a number where ``float``
    is allowed); ``allowed`` closes the set of values; ``check`` raises ValueError on a
    bad value; ``items`` declares the values of a list: a tuple of types, or the fields
    of each record in it.
    """

    name: str
    types: tuple
    required: bool = False
    nullable: bool = False
    allowed: tuple = ()
    check: object = None
    items: tuple = ()


_NUMBER = (int, float)


def _trial_check(value: int) -> None:
    if value < 0:
        raise ValueError(f"must be >= 0; got {value}")


def _config_check(value: str) -> None:
    Config.from_key(value)


_KIND = Field("kind", (str,), True)
_TRIAL = Field("trial", (int,), True, check=_trial_check)
_CONFIG = Field("config", (str,), True, check=_config_check)
_CANDIDATE = Field("candidate", (str,), True)
_MODE = Field("mode", (str,), True, allowed=MODES)
_STATUS = Field("status", (str,), True, allowed=STATUSES)
_REASON = Field("reason", (str,), nullable=True)
_COMMON = (Field("format_version", (int,), True, allowed=KNOWN_FORMAT_VERSIONS),
           Field("started_utc", (str,)), Field("measurement_id", (str,)))
# Identity of each kind of unit: the fields its file name is made of, in name order.
UNIT_IDENTITY = {"timing": (_TRIAL, _CONFIG, _CANDIDATE, _MODE),
                 "correctness": (_TRIAL, _CONFIG, _CANDIDATE),
                 "kernels": (_CONFIG, _CANDIDATE),
                 "trial": (_TRIAL,),
                 "ceilings": ()}
UNIT_KINDS = tuple(UNIT_IDENTITY)
_GPU_STATE = ("gpu_state_start", "gpu_state_end")  # env.gpu_state(), None where not read
_PLACEMENT = (Field("placement", (int,), True), Field("times_ms", (list,), True, items=_NUMBER),
              Field("round", (int,)), Field("position", (int,)), Field("pad_bytes", (int,)),
              Field("kernel_ms", _NUMBER, nullable=True), Field("timing", (dict,)),
              Field("elapsed_s", _NUMBER),
              *(Field(name, (dict,), nullable=True) for name in _GPU_STATE))
_KERNEL = (Field("name", (str,), True), Field("calls_per_call", _NUMBER, True),
           Field("device_ms_per_call", _NUMBER, True))
UNIT_SCHEMA: dict[str, tuple[Field, ...]] = {
    "timing": (*UNIT_IDENTITY["timing"], _STATUS, _REASON,
               Field("times_ms", (list,), True, items=_NUMBER),
               Field("timing", (dict,)),  # timing.TimingSample's settings
               Field("info", (dict,)),  # what the candidate's build chose (backend, tuning)
               *(Field(name, (dict,), nullable=True) for name in _GPU_STATE),
               Field("elapsed_s", _NUMBER), Field("protocol", (int,)),
               Field("placements", (list,), items=_PLACEMENT)),  # protocol 2
    "correctness": (*UNIT_IDENTITY["correctness"], _STATUS, _REASON,
                    Field("result", (dict,)),  # candidates.CorrectnessResult
                    Field("input_seed", (int,))),
    "kernels": (*UNIT_IDENTITY["kernels"], _STATUS, _REASON,
                Field("evidence", (dict,)),  # timing.profile_device_time()
                Field("kernels", (list,), items=_KERNEL)),
    "trial": (*UNIT_IDENTITY["trial"], Field("fingerprint", (dict,), True),  # env.fingerprint()
              Field("pid", (int,))),
    "ceilings": (Field("ceilings", (dict,), True),),  # ceilings.measure_ceilings()
}
UNIT_SCHEMA = {kind: (_KIND, *fields, *_COMMON) for kind, fields in UNIT_SCHEMA.items()}


def _is_a(value, types: tuple) -> bool:
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


_TYPE_WORDS = {str: ("a string", "strings"), int: ("an integer", "integers"),
               float: ("a number", "numbers"), dict: ("an object", "objects"),
               list: ("a list", "lists"), bool: ("true or false", "true or false")}


def _type_names(types: tuple, plural: bool = False) -> str:
    """``types`` in words; an int where a float is allowed is just a number."""
    return " or ".join(_TYPE_WORDS[t][plural] for t in types
                       if not (t is int and float in types))


def _field_problems(obj: dict, fields: tuple, where: str) -> list[str]:
    """One line per way ``obj`` breaks ``fields``: unknown, missing or ill-typed keys."""
    declared = {f.name for f in fields}
    problems = [f"`{where}{k}` is not a declared field" for k in obj if k not in declared]
    for f in fields:
        name = f"`{where}{f.name}`"
        if f.name not in obj:
            if f.required:
                problems.append(f"{name} is missing")
            continue
        value = obj[f.name]
        if value is None and f.nullable:
            continue
        if not _is_a(value, f.types):
            problems.append(f"{name} must be {_type_names(f.types)}; got {value!r:.80}")
        elif f.allowed and value not in f.allowed:
            problems.append(f"{name} must be one of {f.allowed}; got {value!r}")
        elif f.check is not None:
            try:
                f.check(value)
            except ValueError as exc:
                problems.append(f"{name} {exc}".rstrip("."))
        elif f.items and isinstance(f.items[0], Field):
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    problems.append(f"{name}[{i}] must be an object; got {item!r:.80}")
                else:
                    problems += _field_problems(item, f.items, f"{where}{f.name}[{i}].")
        elif f.items and not all(_is_a(x, f.items) for x in value):
            bad = next(x for x in value if not _is_a(x, f.items))
            problems.append(f"{name} must hold only {_type_names(f.items, plural=True)}; "
                            f"got {bad!r:.80}")
    return problems


def unit_problems(unit) -> list[str]:
    """What is wrong with ``unit`` (sealed with its format version, without its checksum)
    against ``UNIT_SCHEMA``; empty when it conforms."""
    if not isinstance(unit, dict):
        return [f"a unit must be a JSON object; got {type(unit).__name__}"]
    kind = unit.get("kind")
    if not isinstance(kind, str) or kind not in UNIT_SCHEMA:
        return [f"`kind` must be one of {UNIT_KINDS}; got {kind!r}"]
    return _field_problems(unit, UNIT_SCHEMA[kind], "")


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
    for t in range(int(plan["trials"])):
        names = [unit_name("trial", trial=t)]
        if t == 0 and plan.get("ceilings"):
            names.append(unit_name("ceilings"))
        for config in plan["configs"]:
            for cand in plan["candidates"]:
                names += candidate_unit_names(config, cand, t, plan["modes"],
                                              bool(plan.get("profile")))
        out[t] = names
    return out


# ------------------------------------------------------------------ the run folder

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


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, dir=path.parent)
    try:
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
        raise ValueError(f"`unit` must fit the journal's schema (records.UNIT_SCHEMA): "
                         + "; ".join(problems) + ".")
    body["sha256"] = _sha256_bytes(_canonical(body))
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
    if _sha256_bytes(_canonical(unit)) != claimed:
        raise RecordError(f"{path.name}: checksum mismatch (file edited or corrupted)")
    problems = unit_problems(unit)
    if problems:
        raise RecordError(f"{path.name}: does not fit the journal's schema: "
                          + "; ".join(problems))
    if path.name != _name_of(unit):
        raise RecordError(f"{path.name}: file name does not match its contents")
    return unit


def finished_units(run_dir) -> tuple[set[str], list[str]]:
    """Names of journal units that verify, and one-line complaints about those that do not."""
    units, bad = _read_journal(run_dir)
    return set(units), bad


def _read_journal(run_dir) -> tuple[dict[str, dict], list[str]]:
    """Journal units that verify, by file name in sorted order, and complaints about the rest."""
    journal = Path(run_dir) / JOURNAL
    good, bad = {}, []
    if not journal.is_dir():
        return good, bad
    for path in sorted(journal.glob("*.json")):
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


# ----------------------------------------------------------------------- consolidate

@dataclasses.dataclass(frozen=True)
class Column:
    """A column of a consolidated table: its name, the unit field it is read from (a
    dotted path; ``<list>.<key>`` for a table with one row per record of a unit's list)
    and how the value is read, ``value(unit, record)``."""

    name: str
    source: str
    value: object


def _col(name: str, path: str | None = None, default=None, *, falsy: bool = False,
         convert=None, within: str | None = None) -> Column:
    """The column ``name`` read at ``path`` (default: ``name``) in the unit, or in the
    record of the unit's list ``within``; ``default`` where the key is absent (and, with
    ``falsy``, where its value is empty), then ``convert``."""
    path = path or name
    *parents, leaf = path.split(".")

    def value(unit: dict, record: dict | None = None):
        obj = unit if within is None else record
        for key in parents:
            obj = obj.get(key) or {}
        found = obj.get(leaf, default)
        if falsy and not found:
            found = default
        return found if convert is None else convert(found)
    return Column(name, path if within is None else f"{within}.{path}", value)


def _median(times: list) -> float:
    """Median that skips NaN, as ``pd.Series(times).median()`` does; NaN for no times."""
    values = np.asarray(times, dtype=np.float64)
    values = values[~np.isnan(values)]
    return float(np.median(values)) if values.size else math.nan


def _number(value) -> float:
    return math.nan if value is None else float(value)


def _json_text(value) -> str:
    return json.dumps(value, sort_keys=True)


_IDENTITY = (_col("config"), _col("candidate"), _col("mode"), _col("trial"))
# units.parquet: one row per timing unit.
UNITS_TABLE = (
    *_IDENTITY, _col("status"), _col("reason", default="", falsy=True),
    _col("n_samples", "times_ms", [], falsy=True, convert=len),
    _col("median_ms", "times_ms", [], falsy=True, convert=_median),
    _col("clock", "timing.clock", ""), _col("stop_reason", "timing.stop_reason", ""),
    _col("ci_rel_halfwidth", "timing.ci_rel_halfwidth", math.nan),
    _col("calls_per_sample", "timing.calls_per_sample", 0, falsy=True),
    _col("sm_clock_start_mhz", "gpu_state_start.sm_clock_mhz"),
    _col("sm_clock_end_mhz", "gpu_state_end.sm_clock_mhz"),
    _col("temperature_start_c", "gpu_state_start.temperature_c"),
    _col("temperature_end_c", "gpu_state_end.temperature_c"),
    _col("started_utc", default=""), _col("elapsed_s", default=math.nan),
    _col("measurement_id", default=""), _col("info", default={}, falsy=True, convert=_json_text))
# placements.parquet (format 2): one row per placement record of an ``ok`` timing unit.
PLACEMENTS_TABLE = (
    *_IDENTITY[:3], _col("trial", convert=int),
    _col("placement", within="placements", convert=int),
    Column("round", "placements.round", lambda u, r: int(r.get("round", r["placement"]))),
    _col("position", default=0, convert=int, within="placements"),
    _col("pad_bytes", default=0, convert=int, within="placements"),
    _col("n_samples", "times_ms", convert=len, within="placements"),
    _col("median_ms", "times_ms", convert=_median, within="placements"),
    _col("kernel_ms", convert=_number, within="placements"),
    _col("calls_per_sample", "timing.calls_per_sample", 0, falsy=True, convert=int,
         within="placements"),
    *(_col(f"{what}_{edge}_{unit}", f"gpu_state_{edge}.{what}_{unit}", convert=_number,
           within="placements")
      for what, unit in (("sm_clock", "mhz"), ("temperature", "c"))
      for edge in ("start", "end")))
# correctness.parquet: one row per correctness unit.
CORRECTNESS_TABLE = (
    _col("config"), _col("candidate"), _col("trial"), _col("status"),
    _col("passed", "result.passed", False, convert=bool),
    *(_col(name, f"result.{name}", math.nan) for name in ("rel_error", "max_abs_error",
                                                          "threshold")),
    _col("nonfinite", "result.nonfinite", 0, convert=int),
    Column("reason", "reason", lambda u, r: (u.get("reason") or (u.get("result") or {})
                                              .get("reason") or "")))
# kernels.parquet: one row per kernel of a kernels unit.
KERNELS_TABLE = (_col("config"), _col("candidate"), _col("kernel", "name", within="kernels"),
                 _col("calls_per_call", within="kernels"),
                 _col("device_ms_per_call", within="kernels"))
# samples.parquet: one row per sample of an ``ok`` timing unit (placement: format 2).
SAMPLE_COLUMNS_V1 = ("config", *CONFIG_FIELDS, "candidate", "mode", "trial", "sample", "ms")
SAMPLE_COLUMNS = SAMPLE_COLUMNS_V1[:10] + ("placement",) + SAMPLE_COLUMNS_V1[10:]
UNIT_COLUMNS = tuple(c.name for c in UNITS_TABLE)
PLACEMENT_COLUMNS = tuple(c.name for c in PLACEMENTS_TABLE)
CORRECTNESS_COLUMNS = tuple(c.name for c in CORRECTNESS_TABLE)
KERNEL_COLUMNS = tuple(c.name for c in KERNELS_TABLE)


def table_columns(version: int = RECORD_FORMAT_VERSION) -> dict[str, tuple]:
    """The Parquet tables a run of format ``version`` holds, with their columns."""
    tables = {"samples.parquet": SAMPLE_COLUMNS if version >= 2 else SAMPLE_COLUMNS_V1,
              "units.parquet": UNIT_COLUMNS, "correctness.parquet": CORRECTNESS_COLUMNS,
              "kernels.parquet": KERNEL_COLUMNS}
    if version >= 2:
        tables["placements.parquet"] = PLACEMENT_COLUMNS
    return tables


def _row(table: tuple, unit: dict, record: dict | None = None) -> dict:
    return {c.name: c.value(unit, record) for c in table}


def _units(run_dir) -> list[dict]:
    return [read_unit(path) for path in sorted((Path(run_dir) / JOURNAL).glob("*.json"))]


def _placement_index(unit: dict) -> np.ndarray:
    """Placement index of each of a timing unit's samples (0 throughout before protocol 2)."""
    placements = unit.get("placements")
    if not placements:
        return np.zeros(len(unit["times_ms"]), dtype=np.int64)
    return np.concatenate([np.full(len(rec["times_ms"]), int(rec["placement"]), dtype=np.int64)
                           for rec in placements])


def _samples(timed: list[dict], version: int = RECORD_FORMAT_VERSION) -> pd.DataFrame:
    """One row per raw sample of the ``ok`` timing units, built column by column."""
    columns = table_columns(version)["samples.parquet"]
    if not timed:
        return pd.DataFrame([], columns=list(columns))
    counts = [len(u["times_ms"]) for u in timed]

    def repeat(values):
        return np.repeat(np.array(values, dtype=object), counts)
    fields = [Config.from_key(u["config"]).as_dict() for u in timed]
    cols = {"config": repeat([u["config"] for u in timed])}
    for key in CONFIG_FIELDS:
        cols[key] = repeat([f[key] for f in fields])
    for key in ("candidate", "mode", "trial"):
        cols[key] = repeat([u[key] for u in timed])
    if version >= 2:
        cols["placement"] = np.concatenate([_placement_index(u) for u in timed])
    cols["sample"] = np.concatenate([np.arange(n) for n in counts])
    cols["ms"] = np.fromiter((float(ms) for u in timed for ms in u["times_ms"]),
                             dtype=np.float64, count=sum(counts))
    s = pd.DataFrame({c: pd.Series(v).infer_objects() for c, v in cols.items()},
                     columns=list(columns))
    s["causal"] = s["causal"].astype(bool)
    for col in ("batch", "heads", "seq_len", "head_dim", "trial", "sample") + (
            ("placement",) if version >= 2 else ()):
        s[col] = s[col].astype("int64")
    return s


def _tables(units: list[dict], version: int = RECORD_FORMAT_VERSION) -> dict[str, pd.DataFrame]:
    timed, rows, corr, kern, places = [], [], [], [], []
    for u in units:
        if u["kind"] == "timing":
            rows.append(_row(UNITS_TABLE, u))
            if u["status"] == "ok" and u.get("times_ms"):
                timed.append(u)
                places += [_row(PLACEMENTS_TABLE, u, rec) for rec in u.get("placements") or []]
        elif u["kind"] == "correctness":
            corr.append(_row(CORRECTNESS_TABLE, u))
        elif u["kind"] == "kernels":
            kern += [_row(KERNELS_TABLE, u, k) for k in u.get("kernels") or []]
    columns = table_columns(version)
    tables = {
        "samples.parquet": _samples(timed, version),
        "units.parquet": pd.DataFrame(rows, columns=list(columns["units.parquet"])),
        "correctness.parquet": pd.DataFrame(corr, columns=list(columns["correctness.parquet"])),
        "kernels.parquet": pd.DataFrame(kern, columns=list(columns["kernels.parquet"])),
    }
    if version >= 2:
        tables["placements.parquet"] = _placement_frame(places)
    return tables


def _placement_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(PLACEMENT_COLUMNS))
    for col in ("trial", "placement", "round", "position", "pad_bytes", "n_samples",
                "calls_per_sample"):
        frame[col] = frame[col].astype("int64")
    for col in ("median_ms", "kernel_ms", "sm_clock_start_mhz", "sm_clock_end_mhz",
                "temperature_start_c", "temperature_end_c"):
        frame[col] = frame[col].astype("float64")
    return frame


def placements_from_samples(samples: pd.DataFrame) -> pd.DataFrame:
    """placements.parquet's rows for a run recorded before protocol 2: each unit's samples
    are one placement (index 0); kernel time, pad and clocks were not recorded (NaN, 0)."""
    keys = ["config", "candidate", "mode", "trial", "placement"]
    s = samples if "placement" in samples else samples.assign(placement=0)
    if s.empty:
        return _placement_frame([])
    g = s.groupby(keys, sort=True).agg(median_ms=("ms", "median"),
                                       n_samples=("ms", "size")).reset_index()
    rows = [dict(r._asdict(), round=r.placement, position=0, pad_bytes=0, kernel_ms=math.nan,
                 calls_per_sample=0, sm_clock_start_mhz=math.nan, sm_clock_end_mhz=math.nan,
                 temperature_start_c=math.nan, temperature_end_c=math.nan)
            for r in g.itertuples(index=False)]
    return _placement_frame(rows)


def _journal_views(units: list[dict]) -> dict[str, dict]:
    """The JSON views derived from the journal alone (run.json also records the invocation)."""
    trials = {str(u["trial"]): u["fingerprint"] for u in units if u["kind"] == "trial"}
    hashes = sorted({fp.get("fingerprint_hash") for fp in trials.values()})
    ceilings = next((u["ceilings"] for u in units if u["kind"] == "ceilings"), {})
    return {"ceilings.json": ceilings,
            "fingerprint.json": {"fingerprint_hashes": hashes, "trials": trials}}


def _json_bytes(obj) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True, allow_nan=True).encode()


def finalize(run_dir, run_info: dict) -> Path:
    """Write the consolidated tables, the JSON views and the manifest from the journal."""
    run_dir = Path(run_dir)
    units = _units(run_dir)
    for name, frame in _tables(units, RECORD_FORMAT_VERSION).items():
        tmp = run_dir / f"{TEMPORARY_PREFIX}{name}"
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, run_dir / name)
    journal = {rel: _hash_file(run_dir / rel) for rel in _run_files(run_dir)
               if rel.startswith(f"{JOURNAL}/")}
    views = {**_journal_views(units),
             RUN_INFO: dict(run_info, format_version=RECORD_FORMAT_VERSION,
                            run_id=run_dir.name, content_hash=content_hash(journal))}
    for name, obj in views.items():
        atomic_write_bytes(run_dir / name, _json_bytes(obj))
    return write_manifest(run_dir)


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def content_hash(file_digests: dict[str, str]) -> str:
    """SHA-256 of a run's measurements: over the names and SHA-256 of its journal files
    (``journal/...`` keys of ``file_digests``, as the manifest lists them).

    The journal is what was measured; the tables are derived from it, and ``run.json``
    (which holds the run id and the time of finalizing) is left out, so a copy of a run
    under another name or id has the same content hash.
    """
    h = hashlib.sha256()
    for rel in sorted(k for k in file_digests if k.startswith(f"{JOURNAL}/")):
        h.update(rel.encode() + b"\0" + str(file_digests[rel]).encode() + b"\n")
    return h.hexdigest()


def _run_files(run_dir: Path) -> list[str]:
    return sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*")
                  if p.is_file() and p.name != MANIFEST)


def write_manifest(run_dir) -> Path:
    """Record the SHA-256 of every file of the run (except the manifest itself)."""
    run_dir = Path(run_dir)
    files = {rel: _hash_file(run_dir / rel) for rel in _run_files(run_dir)}
    body = {"format_version": RECORD_FORMAT_VERSION, "algorithm": "sha256", "files": files}
    path = run_dir / MANIFEST
    atomic_write_bytes(path, json.dumps(body, indent=1, sort_keys=True).encode())
    return path


# ---------------------------------------------------------------------------- verify

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
    code, where a memo folder is set (:mod:`attn_analysis.verify_memo`; the book sets one).
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
    present = set(_run_files(run_dir))
    for rel, digest in sorted(files.items()):
        if rel not in present:
            problems.append(f"{rel}: listed in the manifest but missing")
        elif _hash_file(run_dir / rel) != digest:
            problems.append(f"{rel}: SHA-256 does not match the manifest")
    for rel in sorted(present - set(files)):
        problems.append(f"{rel}: present but not listed in the manifest")
    expected = table_columns(version)
    for name in tuple(expected) + JSON_VIEWS:
        if name not in present:
            problems.append(f"{name}: missing")
    if problems:
        return problems
    problems += _identity_problems(run_dir, files, version)
    if not problems and verify_memo.seen(manifest_bytes):
        return []  # these exact bytes passed every check below (verify_memo says when)
    units, bad = _read_journal(run_dir)
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
    """run.json as a dict (RecordError where it is unreadable or not an object)."""
    try:
        info = json.loads((Path(run_dir) / RUN_INFO).read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"{RUN_INFO}: unreadable ({exc})") from None
    if not isinstance(info, dict):
        raise RecordError(f"{RUN_INFO}: must be a JSON object")
    return info


def is_legacy_identity(run_dir) -> bool:
    """Whether ``run_dir`` is a run finalized before run ids were checked (format <
    ``IDENTITY_FORMAT``) whose run.json records no ``run_id``: its folder name is not
    checked. Every run in ``data/runs`` records its id and is checked."""
    info = read_info(Path(run_dir))
    return int(info.get("format_version", 1)) < IDENTITY_FORMAT and "run_id" not in info


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
    elif recorded != content_hash(files):
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
        recorded = read_plan(run_dir)
    except (OSError, ValueError) as exc:
        problems.append(f"plan.json: missing or unreadable ({exc})")
    else:
        if recorded is None:
            problems.append("plan.json: missing or unreadable (no such file)")
        elif recorded != plan:
            problems.append("plan.json: differs from the plan in run.json")
    try:
        wanted = {n for names in plan_unit_names(plan).values() for n in names}
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
    for name, fresh in _tables(units, version).items():
        difference = _frame_difference(stored[name], _as_written(fresh))
        if difference:
            problems.append(f"{name}: {difference}")
    for name, obj in _journal_views(units).items():
        data = (run_dir / name).read_bytes()
        if data == _json_bytes(obj):
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


# ------------------------------------------------------------------------------ load

@dataclasses.dataclass(frozen=True)
class Run:
    """A verified recorded run as pandas tables plus its JSON views."""

    run_id: str
    path: Path
    samples: pd.DataFrame
    units: pd.DataFrame
    correctness: pd.DataFrame
    kernels: pd.DataFrame
    ceilings: dict
    fingerprint: dict
    info: dict
    placements: pd.DataFrame = None
    # content_hash(): recorded in run.json from format 3, computed for earlier runs
    content_hash: str = ""

    @property
    def protocol(self) -> int:
        """The measurement protocol of the run's timing units (1 before placements)."""
        return 2 if int(self.info.get("format_version", 1)) >= 2 else 1

    @property
    def device(self) -> str:
        """The device name the run was measured on (or 'cpu')."""
        trials = self.fingerprint.get("trials") or {}
        first = next(iter(trials.values()), {})
        return first.get("gpu_name") or first.get("device_kind") or "unknown"


def load(run_dir) -> Run:
    """Load a recorded run; refuse (RecordError) one that does not verify, saying why."""
    run_dir = Path(run_dir)
    problems = verify(run_dir)
    if problems:
        raise RecordError(f"run {run_dir.name} does not verify: " + "; ".join(problems[:10]))

    def read_json(name):
        return json.loads((run_dir / name).read_text())
    samples = pd.read_parquet(run_dir / "samples.parquet")
    if "placement" in samples:
        placements = pd.read_parquet(run_dir / "placements.parquet")
    else:  # format 1: one placement per unit, index 0
        samples.insert(SAMPLE_COLUMNS.index("placement"), "placement", 0)
        samples["placement"] = samples["placement"].astype("int64")
        placements = placements_from_samples(samples)
    info = read_json(RUN_INFO)
    digest = info.get("content_hash") or content_hash(read_json(MANIFEST)["files"])
    return Run(run_dir.name, run_dir, samples=samples, placements=placements,
               units=pd.read_parquet(run_dir / "units.parquet"),
               correctness=pd.read_parquet(run_dir / "correctness.parquet"),
               kernels=pd.read_parquet(run_dir / "kernels.parquet"),
               ceilings=read_json("ceilings.json"), fingerprint=read_json("fingerprint.json"),
               info=info, content_hash=digest)


def distinct_runs(runs, name: str = "runs") -> list:
    """``runs`` (loaded :class:`Run` objects) as a list, if no two are the same run.

    Pooling a run twice would count its processes twice and narrow every interval with no
    new data, so two runs with the same id, or the same content hash (the same
    measurements under another folder name or id), raise ValueError naming ``name``
    and both runs.
    """
    runs = list(runs)
    seen_ids, seen_content = {}, {}
    for run in runs:
        if not isinstance(run, Run):
            raise ValueError(f"`{name}` must hold loaded runs (records.Run); "
                             f"got {type(run).__name__}.")
        if run.run_id in seen_ids:
            raise ValueError(f"`{name}` must name each run once; {run.run_id!r} is given "
                             f"twice ({seen_ids[run.run_id].path} and {run.path}).")
        if run.content_hash in seen_content:
            other = seen_content[run.content_hash]
            raise ValueError(f"`{name}` must hold distinct runs; {other.run_id!r} and "
                             f"{run.run_id!r} hold the same measurements (content hash "
                             f"{run.content_hash[:12]}...): pooling a copy counts its "
                             f"processes twice.")
        seen_ids[run.run_id] = run
        seen_content[run.content_hash] = run
    return runs


def find_runs(root="data/runs") -> list[Path]:
    """Folders under ``root`` that hold a manifest (finalized runs), sorted by name."""
    root = Path(root)
    return sorted(p.parent for p in root.glob(f"*/{MANIFEST}"))
