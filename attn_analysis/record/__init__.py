"""Record: the run folder and the recorded-data format (the second stage of the data flow).

This package owns a run folder: every name in it is built (and parsed) here, and nothing
else reads or writes inside it except through these functions. Its modules, one concept
each: :mod:`.schema` (format versions, file names, the fields of each unit),
:mod:`.journal` (unit names, atomic unit files, the markers of a sweep in progress),
:mod:`.consolidate` (Parquet tables, JSON views, manifest, content hash),
:mod:`.verification` (``verify``), :mod:`.run` (``load``, the loaded :class:`Run`),
:mod:`.verify_memo` (each run verified in depth once per book build) and :mod:`.checks`
(the sealed instrument checks of ``data/checks/``). Torch-free: a run is read and checked
on any machine. The names below are the public API, importable from here. A run lives in
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

from .consolidate import (CORRECTNESS_COLUMNS, CORRECTNESS_TABLE, KERNEL_COLUMNS, KERNELS_TABLE,
                          PLACEMENT_COLUMNS, PLACEMENTS_TABLE, SAMPLE_COLUMNS, SAMPLE_COLUMNS_V1,
                          UNIT_COLUMNS, UNITS_TABLE, Column, content_hash, finalize,
                          placements_from_samples, table_columns, write_manifest)
from .journal import (atomic_write_bytes, candidate_unit_names, clean_temporaries, clear_current,
                      file_mode, finished_units, outside_git_iv, journal_paths, parse_unit_name, plan_unit_names,
                      read_current, read_fatal, read_plan, read_unit, shard_iv, shard_trials,
                      unit_name, unit_path,
                      write_current, write_fatal, write_plan, write_unit)
from .merge import merge
from .run import Run, distinct_runs, find_runs, load
from .schema import (CURRENT_PREFIX, FATAL, IDENTITY_FORMAT, JOURNAL, JSON_VIEWS,
                     KNOWN_FORMAT_VERSIONS, MANIFEST, PLAN, RECORD_FORMAT_VERSION,
                     RECORDED_START_METHOD, RUN_INFO,
                     STATUSES, TEMPORARY_PREFIX, UNIT_IDENTITY, UNIT_KINDS, UNIT_SCHEMA, Field,
                     RecordError, unit_problems)
from .verification import is_legacy_identity, read_info, verify

__all__ = [
    # schema
    "RECORD_FORMAT_VERSION", "KNOWN_FORMAT_VERSIONS", "IDENTITY_FORMAT", "STATUSES", "JOURNAL",
    "PLAN", "RUN_INFO", "MANIFEST", "FATAL", "CURRENT_PREFIX", "TEMPORARY_PREFIX", "JSON_VIEWS",
    "RECORDED_START_METHOD", "RecordError", "Field", "UNIT_IDENTITY", "UNIT_KINDS",
    "UNIT_SCHEMA", "unit_problems",
    # journal
    "unit_name", "parse_unit_name", "candidate_unit_names", "plan_unit_names", "unit_path",
    "journal_paths", "read_plan", "write_plan", "write_fatal", "read_fatal", "write_current",
    "read_current", "clear_current", "atomic_write_bytes", "write_unit", "read_unit",
    "finished_units", "clean_temporaries", "outside_git_iv", "file_mode",
    # consolidate
    "Column", "UNITS_TABLE", "PLACEMENTS_TABLE", "CORRECTNESS_TABLE", "KERNELS_TABLE",
    "SAMPLE_COLUMNS_V1", "SAMPLE_COLUMNS", "UNIT_COLUMNS", "PLACEMENT_COLUMNS",
    "CORRECTNESS_COLUMNS", "KERNEL_COLUMNS", "table_columns", "placements_from_samples",
    "finalize", "content_hash", "write_manifest",
    # verification and loading
    "verify", "read_info", "is_legacy_identity", "Run", "load", "distinct_runs", "find_runs",
]
