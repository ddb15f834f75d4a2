"""The software each run was measured with, and the measured durations of the documented
commands: the reproducibility chapter's two tables.

:func:`software_table` reads each run's recorded fingerprints (``fingerprint.json``: torch,
CUDA, cuDNN, driver, Triton and Python of every trial process) and the ``info`` its
timing units recorded (``units.parquet``: each peer package's name and version, as
shipped); where the processes of a run differ, every value is listed. Torch-free, pure
reads of the run folders. :func:`command_durations` reads ``benchmarks/command-durations.csv``,
where each duration names the benchmark file and section it was measured in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .. import _validate
from ..record.schema import RUN_INFO
from .inventory import DEFAULT_RUNS_DIR, FINGERPRINT, gpu_labels, gpu_model

__all__ = ["SOFTWARE_COLUMNS", "BASE_KEYS", "DURATIONS_FILE", "DURATION_COLUMNS",
           "cudnn_version", "peer_versions", "software_table", "base_software", "peer_runs",
           "command_durations"]

# fingerprint key -> column of the table
_FINGERPRINT_KEYS = {"torch": "torch_version", "CUDA": "cuda_version",
                     "cuDNN": "cudnn_version", "driver": "driver_version",
                     "Triton": "triton_version", "Python": "python_version"}
SOFTWARE_COLUMNS = ["run", "GPU", *_FINGERPRINT_KEYS, "peers"]
BASE_KEYS = list(_FINGERPRINT_KEYS)  # the versions every process records
DURATIONS_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "command-durations.csv"
DURATION_COLUMNS = ["name", "command", "scope", "machine", "commit", "measured", "wall_s", "source"]


def cudnn_version(value) -> str:
    """'9.19.0' from cuDNN's integer version 91900 (major*10000 + minor*100 + patch, the
    encoding of cuDNN 9); a string is returned as given, None as ''."""
    if value is None or value == "":
        return ""
    if isinstance(value, str) and not value.isdigit():
        return value
    v = int(value)
    if v < 10000:  # cuDNN 8 and older: major*1000 + minor*100 + patch
        return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"


def peer_versions(infos) -> list[str]:
    """Sorted distinct 'package version' of the units' ``info`` dicts (or their JSON) that
    name a ``package``."""
    out = set()
    for info in infos:
        if isinstance(info, str):
            info = json.loads(info) if info.strip() else {}
        if isinstance(info, dict) and info.get("package"):
            out.add(f"{info['package']} {info.get('version') or '?'}")
    return sorted(out)


def _distinct(values) -> str:
    return ", ".join(dict.fromkeys(str(v) for v in values if v not in (None, ""))) or "?"


def software_table(runs_dir=DEFAULT_RUNS_DIR) -> pd.DataFrame:
    """One row per run (name order): run, GPU (labels of :mod:`.inventory`, else the model),
    torch, CUDA, cuDNN, driver, Triton, Python (every distinct value of its processes) and
    peers (each peer package's version, from its timing units; '' where none ran)."""
    root = Path(runs_dir)
    if not root.is_dir():
        raise ValueError(f"`runs_dir` must be a folder of recorded runs; got {str(runs_dir)!r}.")
    labels = gpu_labels(root)
    rows = []
    for run in sorted(p for p in root.iterdir() if (p / RUN_INFO).is_file()):
        fps = list(((json.loads((run / FINGERPRINT).read_text()).get("trials") or {})
                    if (run / FINGERPRINT).is_file() else {}).values())
        gpus = [labels.get(str(fp.get("gpu_uuid") or "").removeprefix("GPU-"))
                or gpu_model(fp.get("gpu_name")) for fp in fps]
        row = {"run": run.name, "GPU": _distinct(gpus)}
        for col, key in _FINGERPRINT_KEYS.items():
            vals = [fp.get(key) for fp in fps]
            row[col] = _distinct(cudnn_version(v) for v in vals) if col == "cuDNN" \
                else _distinct(vals)
        units = run / "units.parquet"
        infos = pd.read_parquet(units, columns=["info"])["info"] if units.is_file() else []
        row["peers"] = "; ".join(peer_versions(infos))
        rows.append(row)
    return pd.DataFrame(rows, columns=SOFTWARE_COLUMNS)


def _software_iv(table) -> pd.DataFrame:
    return _validate.frame("table", table, SOFTWARE_COLUMNS)


def base_software(table: pd.DataFrame, keys=tuple(BASE_KEYS)) -> pd.DataFrame:
    """One row per distinct set of the versions ``keys`` (default the fingerprint's: torch,
    CUDA, cuDNN, driver, Triton, Python) of a :func:`software_table` (with any added
    column, e.g. the package's own version): the versions, ``n_runs`` and ``runs`` (sorted
    ids), most runs first. Narrow where the runs share their software, as a reader can
    then check one row rather than one per run."""
    keys = list(keys)
    t = _validate.frame("table", table, ["run", *keys])
    out = (t.groupby(keys, sort=False, dropna=False)
           .agg(n_runs=("run", "size"), runs=("run", lambda r: sorted(r))).reset_index())
    return out.sort_values("n_runs", ascending=False, kind="stable").reset_index(drop=True)


def peer_runs(table: pd.DataFrame) -> pd.DataFrame:
    """One row per peer package version of a :func:`software_table` ('package version'
    split into ``package`` and ``version``): ``n_runs`` and ``runs`` that timed it (sorted
    ids), by package and version. Long form, so no row lists every package of a run."""
    t = _software_iv(table)
    rows = {}
    for run, peers in zip(t["run"], t["peers"]):
        for item in (p.strip() for p in str(peers or "").split(";")):
            if item:
                rows.setdefault(item, []).append(run)
    out = [{"package": k.rsplit(" ", 1)[0], "version": k.rsplit(" ", 1)[-1] if " " in k else "?",
            "n_runs": len(v), "runs": sorted(v)} for k, v in sorted(rows.items())]
    return pd.DataFrame(out, columns=["package", "version", "n_runs", "runs"])


def command_durations(path=DURATIONS_FILE) -> pd.DataFrame:
    """The measured wall time of each documented command (one row per measurement):
    name (a short label), command, scope (what the time covers), machine, commit, measured (date), wall_s and
    source (the benchmark file and section it comes from)."""
    df = pd.read_csv(path, dtype={"commit": str})
    df = _validate.frame("durations", df, DURATION_COLUMNS, rows=True)
    if (pd.to_numeric(df["wall_s"], errors="coerce") <= 0).any() or df["wall_s"].isna().any():
        raise ValueError(f"`durations` must hold positive wall times; got {list(df['wall_s'])}.")
    return df[DURATION_COLUMNS]
