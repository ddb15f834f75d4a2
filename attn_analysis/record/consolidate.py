"""The consolidated views of a run's journal: Parquet tables, JSON views and the manifest.

Each table's columns are declared beside the unit fields they are read from
(``UNITS_TABLE``, ``PLACEMENTS_TABLE``, ``CORRECTNESS_TABLE``, ``KERNELS_TABLE``; samples:
``SAMPLE_COLUMNS``). :func:`finalize` writes the tables, ``ceilings.json``,
``fingerprint.json`` and ``run.json`` (with the run id and :func:`content_hash`) from the
journal alone, then the manifest of every file's SHA-256 (:func:`write_manifest`);
``verification`` rebuilds the same views from the journal and requires what is on disk to
equal them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..configs import CONFIG_FIELDS, Config
from .journal import atomic_write_bytes, read_unit
from .schema import JOURNAL, MANIFEST, RECORD_FORMAT_VERSION, RUN_INFO, TEMPORARY_PREFIX

__all__ = ["Column", "UNITS_TABLE", "PLACEMENTS_TABLE", "CORRECTNESS_TABLE", "KERNELS_TABLE",
           "SAMPLE_COLUMNS_V1", "SAMPLE_COLUMNS", "UNIT_COLUMNS", "PLACEMENT_COLUMNS",
           "CORRECTNESS_COLUMNS", "KERNEL_COLUMNS", "table_columns", "journal_tables",
           "placements_from_samples", "journal_views", "view_bytes", "finalize", "file_sha256",
           "content_hash", "run_files", "write_manifest"]


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


def journal_tables(units: list[dict], version: int = RECORD_FORMAT_VERSION
                   ) -> dict[str, pd.DataFrame]:
    """The Parquet tables of format ``version`` built from a run's journal ``units`` (what
    :func:`finalize` writes and ``verification`` compares the files on disk with)."""
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


def journal_views(units: list[dict]) -> dict[str, dict]:
    """The JSON views derived from the journal alone (run.json also records the invocation)."""
    trials = {str(u["trial"]): u["fingerprint"] for u in units if u["kind"] == "trial"}
    hashes = sorted({fp.get("fingerprint_hash") for fp in trials.values()})
    ceilings = next((u["ceilings"] for u in units if u["kind"] == "ceilings"), {})
    return {"ceilings.json": ceilings,
            "fingerprint.json": {"fingerprint_hashes": hashes, "trials": trials}}


def view_bytes(obj) -> bytes:
    """A JSON view as :func:`finalize` writes it (indented, keys sorted, NaN allowed)."""
    return json.dumps(obj, indent=1, sort_keys=True, allow_nan=True).encode()


def finalize(run_dir, run_info: dict) -> Path:
    """Write the consolidated tables, the JSON views and the manifest from the journal."""
    run_dir = Path(run_dir)
    units = _units(run_dir)
    for name, frame in journal_tables(units, RECORD_FORMAT_VERSION).items():
        tmp = run_dir / f"{TEMPORARY_PREFIX}{name}"
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, run_dir / name)
    journal = {rel: file_sha256(run_dir / rel) for rel in run_files(run_dir)
               if rel.startswith(f"{JOURNAL}/")}
    views = {**journal_views(units),
             RUN_INFO: dict(run_info, format_version=RECORD_FORMAT_VERSION,
                            run_id=run_dir.name, content_hash=content_hash(journal))}
    for name, obj in views.items():
        atomic_write_bytes(run_dir / name, view_bytes(obj))
    return write_manifest(run_dir)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in blocks (the manifest's digest)."""
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


def run_files(run_dir: Path) -> list[str]:
    """Every file of a run folder but the manifest, as sorted relative POSIX paths."""
    return sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*")
                  if p.is_file() and p.name != MANIFEST)


def write_manifest(run_dir) -> Path:
    """Record the SHA-256 of every file of the run (except the manifest itself)."""
    run_dir = Path(run_dir)
    files = {rel: file_sha256(run_dir / rel) for rel in run_files(run_dir)}
    body = {"format_version": RECORD_FORMAT_VERSION, "algorithm": "sha256", "files": files}
    path = run_dir / MANIFEST
    atomic_write_bytes(path, json.dumps(body, indent=1, sort_keys=True).encode())
    return path
