"""What a recorded run holds: the format versions, the run folder's file names, and the
fields of each kind of journal unit with their types (``UNIT_SCHEMA``).

Every other module of :mod:`attn_analysis.record` builds on these names; nothing else in
the package spells a file name of a run folder. A unit is checked against its kind's
fields when it is written and when it is read (:func:`unit_problems`).
"""

from __future__ import annotations

import dataclasses

from ..configs import MODES, Config

__all__ = ["RECORD_FORMAT_VERSION", "KNOWN_FORMAT_VERSIONS", "IDENTITY_FORMAT", "STATUSES",
           "JOURNAL", "PLAN", "RUN_INFO", "MANIFEST", "FATAL", "CURRENT_PREFIX",
           "TEMPORARY_PREFIX", "JSON_VIEWS", "RECORDED_START_METHOD", "RecordError", "Field",
           "UNIT_IDENTITY", "UNIT_KINDS", "UNIT_SCHEMA", "unit_problems"]

# Version of the recorded-data format written here. Every change is listed here; the
# loader refuses any version it does not know.
#   1: first format (units journal, consolidated Parquet tables, SHA-256 manifest).
#   2: protocol v2. Timing units hold ``placements`` (one record per memory placement:
#      its samples, pad, kernel time, clocks and temperature); samples.parquet gains a
#      ``placement`` column and placements.parquet one row per placement. Version-1 runs
#      still verify as written and load with placement 0 throughout.
#   3: run identity. run.json must hold ``run_id`` (verify refuses a folder whose name is
#      not it) and ``content_hash`` (consolidate.content_hash: SHA-256 over the journal
#      files' names and checksums, so a copy under another name or id has the same hash;
#      verify checks it, and pooling refuses two runs with the same id or hash). Units and
#      tables are as in 2. Runs of versions 1 and 2 are not rewritten: each one recorded so
#      far holds ``run_id`` and is checked the same way; one without it is legacy (its
#      folder name is not checked, verification.is_legacy_identity), and a missing content
#      hash is computed from the manifest's journal entries when a run is loaded.
RECORD_FORMAT_VERSION = 3
KNOWN_FORMAT_VERSIONS = (1, 2, 3)
# From this format on, run.json must hold `run_id` and `content_hash` (the
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
# How the trial processes of a run whose plan names no ``start_method`` were started: every
# run recorded before 2026-11-25 spawned a fresh interpreter per trial.
RECORDED_START_METHOD = "spawn"


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
_GPU_STATE = ("gpu_state_start", "gpu_state_end")  # machine.gpu_state(), None where not read
_PLACEMENT = (Field("placement", (int,), True), Field("times_ms", (list,), True, items=_NUMBER),
              Field("round", (int,)), Field("position", (int,)), Field("pad_bytes", (int,)),
              Field("kernel_ms", _NUMBER, nullable=True),
              # the calls kernel_ms is a mean over (profiler.PLACEMENT_CALLS); absent in
              # runs recorded before it was (ten calls there too)
              Field("kernel_calls", (int,), nullable=True), Field("timing", (dict,)),
              Field("elapsed_s", _NUMBER),
              # graph mode: whether this placement sized its calls per replay (the unit's
              # first) or kept the first's; absent in runs that sized at every placement
              Field("calls_per_sample_sized", (bool,)),
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
                Field("evidence", (dict,)),  # profiler.profile_device_time()
                Field("kernels", (list,), items=_KERNEL)),
    "trial": (*UNIT_IDENTITY["trial"], Field("fingerprint", (dict,), True),  # machine.fingerprint()
              Field("pid", (int,)),
              # what the process inherited from the fork server (measure.forkserver_warm);
              # None when it was not forked from one
              Field("preloaded", (dict,), nullable=True),
              Field("budget", (dict,)),  # measure.budget.PhaseClock.as_record(), at its end
              # torch.cuda.memory_allocated() after each configuration, in plan order
              Field("allocated_after_config_bytes", (list,), items=(int,)),
              # seconds of the build phase per candidate, over the process's configurations
              Field("build_s_by_candidate", (dict,)),
              # the CUDA_VISIBLE_DEVICES the sweep pinned this process to (None: not
              # pinned) and how many trial processes the sweep ran at once on the host
              Field("cuda_visible_devices", (str,), nullable=True),
              Field("concurrent_processes", (int,))),
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
