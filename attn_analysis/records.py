"""The recorded-data format: write units atomically, consolidate, verify, load.

A run lives in ``data/runs/<run-id>/``:

``journal/*.json``
    One self-checksummed file per finished unit of work, written atomically (temporary
    name, then rename) the moment the unit completes. Units are ``timing`` (one
    configuration x candidate x mode x trial), ``correctness``, ``kernels`` (profiler
    evidence), ``trial`` (a trial process's fingerprint) and ``ceilings``. The journal is
    what a resumed sweep reads to skip finished work.
``samples.parquet``
    Tidy long table, one row per raw sample: configuration fields, candidate, mode,
    trial, sample index, milliseconds.
``placements.parquet`` (format 2)
    One row per memory placement of each timing unit: its median, the profiler's kernel
    time per call there, the pad in front of the inputs, SM clock and temperature.
``units.parquet``, ``correctness.parquet``, ``kernels.parquet``, ``ceilings.json``,
``fingerprint.json``
    Consolidated views of the journal. ``verify`` rebuilds each of them (and
    ``samples.parquet``) from the journal and requires what is on disk to equal it.
``run.json``
    How the run was invoked (plan, package version), plus the format version and run id.
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

from . import RECORD_FORMAT_VERSION
from .configs import Config

KNOWN_FORMAT_VERSIONS = (1, 2)
UNIT_KINDS = ("timing", "correctness", "kernels", "trial", "ceilings")
STATUSES = ("ok", "unsupported", "failed_correctness", "oom", "error", "crashed")
MANIFEST = "manifest.json"
TABLES_V1 = ("samples.parquet", "units.parquet", "correctness.parquet", "kernels.parquet")
TABLES = TABLES_V1 + ("placements.parquet",)
JSON_VIEWS = ("ceilings.json", "fingerprint.json", "run.json")

SAMPLE_COLUMNS_V1 = ("config", "batch", "heads", "seq_len", "head_dim", "dtype", "causal",
                     "candidate", "mode", "trial", "sample", "ms")
SAMPLE_COLUMNS = SAMPLE_COLUMNS_V1[:10] + ("placement",) + SAMPLE_COLUMNS_V1[10:]
PLACEMENT_COLUMNS = ("config", "candidate", "mode", "trial", "placement", "round", "position",
                     "pad_bytes", "n_samples", "median_ms", "kernel_ms", "calls_per_sample",
                     "sm_clock_start_mhz", "sm_clock_end_mhz", "temperature_start_c",
                     "temperature_end_c")
UNIT_COLUMNS = ("config", "candidate", "mode", "trial", "status", "reason", "n_samples",
                "median_ms", "clock", "stop_reason", "ci_rel_halfwidth", "calls_per_sample",
                "sm_clock_start_mhz", "sm_clock_end_mhz", "temperature_start_c",
                "temperature_end_c", "started_utc", "elapsed_s", "measurement_id", "info")
CORRECTNESS_COLUMNS = ("config", "candidate", "trial", "status", "passed", "rel_error",
                       "max_abs_error", "threshold", "nonfinite", "reason")
KERNEL_COLUMNS = ("config", "candidate", "kernel", "calls_per_call", "device_ms_per_call")


class RecordError(ValueError):
    """A recorded run is malformed, corrupted or of an unknown format; the message says which file."""


# ----------------------------------------------------------------------------- units

def unit_name(kind: str, *, config: str = "", candidate: str = "", mode: str = "",
              trial: int | None = None) -> str:
    """File name of a journal unit; the name is the unit's identity."""
    if kind not in UNIT_KINDS:
        raise ValueError(f"`kind` must be one of {UNIT_KINDS}; got {kind!r}.")
    parts = [kind]
    if trial is not None:
        parts.append(f"t{trial}")
    parts += [p for p in (config, candidate, mode) if p]
    return "__".join(parts) + ".json"


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


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
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
    """Seal a unit with the format version and its own checksum, and write it atomically."""
    kind = unit.get("kind")
    name = unit_name(kind, config=unit.get("config", ""), candidate=unit.get("candidate", ""),
                     mode=unit.get("mode", ""), trial=unit.get("trial"))
    body = dict(unit, format_version=RECORD_FORMAT_VERSION)
    body.pop("sha256", None)
    body["sha256"] = _sha256_bytes(_canonical(body))
    path = Path(run_dir) / "journal" / name
    atomic_write_bytes(path, json.dumps(body, indent=1, allow_nan=True).encode())
    return path


def read_unit(path) -> dict:
    """Read a journal unit and check its checksum and format version."""
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
    if path.name != unit_name(unit["kind"], config=unit.get("config", ""),
                              candidate=unit.get("candidate", ""), mode=unit.get("mode", ""),
                              trial=unit.get("trial")):
        raise RecordError(f"{path.name}: file name does not match its contents")
    return unit


def finished_units(run_dir) -> tuple[set[str], list[str]]:
    """Names of journal units that verify, and one-line complaints about those that do not."""
    units, bad = _read_journal(run_dir)
    return set(units), bad


def _read_journal(run_dir) -> tuple[dict[str, dict], list[str]]:
    """Journal units that verify, by file name in sorted order, and complaints about the rest."""
    journal = Path(run_dir) / "journal"
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
    for path in Path(run_dir).rglob(".tmp-*"):
        path.unlink()
        n += 1
    return n


# ----------------------------------------------------------------------- consolidate

def _units(run_dir) -> list[dict]:
    return [read_unit(path) for path in sorted((Path(run_dir) / "journal").glob("*.json"))]


def _config_fields(key: str) -> dict:
    return Config.from_key(key).as_dict()


def _median(times: list) -> float:
    """Median that skips NaN, as ``pd.Series(times).median()`` does."""
    values = np.asarray(times, dtype=np.float64)
    values = values[~np.isnan(values)]
    return float(np.median(values)) if values.size else math.nan


def _placement_index(unit: dict) -> np.ndarray:
    """Placement index of each of a timing unit's samples (0 throughout before protocol 2)."""
    placements = unit.get("placements")
    if not placements:
        return np.zeros(len(unit["times_ms"]), dtype=np.int64)
    return np.concatenate([np.full(len(rec["times_ms"]), int(rec["placement"]), dtype=np.int64)
                           for rec in placements])


def _samples(timed: list[dict], version: int = RECORD_FORMAT_VERSION) -> pd.DataFrame:
    """One row per raw sample of the ``ok`` timing units, built column by column."""
    columns = SAMPLE_COLUMNS if version >= 2 else SAMPLE_COLUMNS_V1
    if not timed:
        return pd.DataFrame([], columns=list(columns))
    counts = [len(u["times_ms"]) for u in timed]

    def repeat(values):
        return np.repeat(np.array(values, dtype=object), counts)
    fields = [_config_fields(u["config"]) for u in timed]
    cols = {"config": repeat([u["config"] for u in timed])}
    for key in ("batch", "heads", "seq_len", "head_dim", "dtype", "causal"):
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


def _placement_rows(u: dict) -> list[dict]:
    """placements.parquet rows of one ``ok`` timing unit of protocol 2."""
    rows = []
    for rec in u.get("placements") or []:
        start, end = rec.get("gpu_state_start") or {}, rec.get("gpu_state_end") or {}
        times = rec["times_ms"]
        kernel = rec.get("kernel_ms")
        rows.append({"config": u["config"], "candidate": u["candidate"], "mode": u["mode"],
                     "trial": int(u["trial"]), "placement": int(rec["placement"]),
                     "round": int(rec.get("round", rec["placement"])),
                     "position": int(rec.get("position", 0)),
                     "pad_bytes": int(rec.get("pad_bytes", 0)), "n_samples": len(times),
                     "median_ms": _median(times) if times else math.nan,
                     "kernel_ms": math.nan if kernel is None else float(kernel),
                     "calls_per_sample": int((rec.get("timing") or {}).get("calls_per_sample")
                                             or 0),
                     "sm_clock_start_mhz": _number(start.get("sm_clock_mhz")),
                     "sm_clock_end_mhz": _number(end.get("sm_clock_mhz")),
                     "temperature_start_c": _number(start.get("temperature_c")),
                     "temperature_end_c": _number(end.get("temperature_c"))})
    return rows


def _number(value) -> float:
    return math.nan if value is None else float(value)


def _tables(units: list[dict], version: int = RECORD_FORMAT_VERSION) -> dict[str, pd.DataFrame]:
    timed, rows, corr, kern, places = [], [], [], [], []
    for u in units:
        if u["kind"] == "timing":
            start, end = u.get("gpu_state_start") or {}, u.get("gpu_state_end") or {}
            times = u.get("times_ms") or []
            timing = u.get("timing") or {}
            rows.append({
                "config": u["config"], "candidate": u["candidate"], "mode": u["mode"],
                "trial": u["trial"], "status": u["status"], "reason": u.get("reason") or "",
                "n_samples": len(times),
                "median_ms": _median(times) if times else math.nan,
                "clock": timing.get("clock", ""), "stop_reason": timing.get("stop_reason", ""),
                "ci_rel_halfwidth": timing.get("ci_rel_halfwidth", math.nan),
                "calls_per_sample": timing.get("calls_per_sample", 0) or 0,
                "sm_clock_start_mhz": start.get("sm_clock_mhz"),
                "sm_clock_end_mhz": end.get("sm_clock_mhz"),
                "temperature_start_c": start.get("temperature_c"),
                "temperature_end_c": end.get("temperature_c"),
                "started_utc": u.get("started_utc", ""), "elapsed_s": u.get("elapsed_s", math.nan),
                "measurement_id": u.get("measurement_id", ""),
                "info": json.dumps(u.get("info") or {}, sort_keys=True),
            })
            if u["status"] == "ok" and times:
                timed.append(u)
                places += _placement_rows(u)
        elif u["kind"] == "correctness":
            c = u.get("result") or {}
            corr.append({"config": u["config"], "candidate": u["candidate"], "trial": u["trial"],
                         "status": u["status"], "passed": bool(c.get("passed", False)),
                         "rel_error": c.get("rel_error", math.nan),
                         "max_abs_error": c.get("max_abs_error", math.nan),
                         "threshold": c.get("threshold", math.nan),
                         "nonfinite": int(c.get("nonfinite", 0)),
                         "reason": u.get("reason") or c.get("reason") or ""})
        elif u["kind"] == "kernels":
            for k in u.get("kernels") or []:
                kern.append({"config": u["config"], "candidate": u["candidate"],
                             "kernel": k["name"], "calls_per_call": k["calls_per_call"],
                             "device_ms_per_call": k["device_ms_per_call"]})
    tables = {
        "samples.parquet": _samples(timed, version),
        "units.parquet": pd.DataFrame(rows, columns=list(UNIT_COLUMNS)),
        "correctness.parquet": pd.DataFrame(corr, columns=list(CORRECTNESS_COLUMNS)),
        "kernels.parquet": pd.DataFrame(kern, columns=list(KERNEL_COLUMNS)),
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
        tmp = run_dir / f".tmp-{name}"
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, run_dir / name)
    views = {**_journal_views(units),
             "run.json": dict(run_info, format_version=RECORD_FORMAT_VERSION, run_id=run_dir.name)}
    for name, obj in views.items():
        atomic_write_bytes(run_dir / name, _json_bytes(obj))
    return write_manifest(run_dir)


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
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
    plan after the fact. Returns one line per problem, each naming the file (and for a derived file its
    first differing column or key); an empty list means the run verifies.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return [f"{run_dir}: no such run folder"]
    problems = []
    manifest_path = run_dir / MANIFEST
    if not manifest_path.is_file():
        return [f"{MANIFEST}: missing (the run was never finalized)"]
    try:
        manifest = json.loads(manifest_path.read_text())
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
    for name in _tables_of(version) + JSON_VIEWS:
        if name not in present:
            problems.append(f"{name}: missing")
    if problems:
        return problems
    units, bad = _read_journal(run_dir)
    problems += [f"journal/{b}" for b in bad]
    expected = {"samples.parquet": SAMPLE_COLUMNS if version >= 2 else SAMPLE_COLUMNS_V1,
                "units.parquet": UNIT_COLUMNS,
                "correctness.parquet": CORRECTNESS_COLUMNS, "kernels.parquet": KERNEL_COLUMNS}
    if version >= 2:
        expected["placements.parquet"] = PLACEMENT_COLUMNS
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
    return problems


def _plan_agrees(run_dir: Path, journal_names: set[str]) -> list[str]:
    """A sweep's plan (in ``run.json`` and ``plan.json``) calls for exactly the journal's units.

    Runs whose ``run.json`` holds no sweep plan (no ``trials``) are not checked.
    """
    try:
        plan = json.loads((run_dir / "run.json").read_text()).get("plan")
    except (OSError, ValueError, AttributeError) as exc:
        return [f"run.json: unreadable ({exc})"]
    if not isinstance(plan, dict) or "trials" not in plan:
        return []
    problems = []
    try:
        if json.loads((run_dir / "plan.json").read_text()) != plan:
            problems.append("plan.json: differs from the plan in run.json")
    except (OSError, ValueError) as exc:
        problems.append(f"plan.json: missing or unreadable ({exc})")
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


def _tables_of(version: int) -> tuple:
    """The Parquet tables a run of format ``version`` holds."""
    return TABLES if version >= 2 else TABLES_V1


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
    return Run(run_dir.name, run_dir, samples=samples, placements=placements,
               units=pd.read_parquet(run_dir / "units.parquet"),
               correctness=pd.read_parquet(run_dir / "correctness.parquet"),
               kernels=pd.read_parquet(run_dir / "kernels.parquet"),
               ceilings=read_json("ceilings.json"), fingerprint=read_json("fingerprint.json"),
               info=read_json("run.json"))


def find_runs(root="data/runs") -> list[Path]:
    """Folders under ``root`` that hold a manifest (finalized runs), sorted by name."""
    root = Path(root)
    return sorted(p.parent for p in root.glob(f"*/{MANIFEST}"))
