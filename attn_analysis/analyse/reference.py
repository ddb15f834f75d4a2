"""The original reports' L4 figures, transcribed: load and validate ``data/reference/``.

``l4_reported.csv`` holds one row per value the five original reports state, with the
report and heading it comes from. Every row is a claim ("as reported"), never a
measurement of ours; the loader refuses a table that says otherwise or does not parse.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .. import _validate
from ..configs import BASELINE, DTYPES, Config
from .sample_groups import with_config_fields

__all__ = ["DEFAULT_PATH", "SEED_FILES", "COLUMNS", "SHAPE_COLUMNS", "BACKENDS", "STATUS",
           "QUANTITY_UNITS", "load_reported", "reported_latency", "cross_device_table"]

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "data" / "reference" / "l4_reported.csv"

# The five original reports, as listed in shared/seeds/README.md.
SEED_FILES = (
    "000_44c3bd26a4df8292.txt",
    "001_0e44ae329ee121b7.txt",
    "002_9fc1ab7010bcab52.txt",
    "003_04cdc5003c5d4b4d.txt",
    "004_1779078fa30ca0a4.txt",
)

COLUMNS = ("quantity", "value", "unit", "reported_text", "batch", "heads", "seq_len",
           "head_dim", "dtype", "backend", "label", "statistic_note", "source_file",
           "source_section", "status", "device", "software")
SHAPE_COLUMNS = ("batch", "heads", "seq_len", "head_dim")
BACKENDS = ("auto", "flash", "memory_efficient", "unknown")
STATUS = "as reported"

# Every quantity the table may hold, with its one unit.
QUANTITY_UNITS = {
    "median_latency_ms": "ms", "mean_latency_ms": "ms", "std_latency_ms": "ms",
    "min_latency_ms": "ms", "max_latency_ms": "ms", "ci_low_ms": "ms", "ci_high_ms": "ms",
    "ci_width_ms": "ms", "latency_per_head_batch_ms": "ms", "estimated_latency_ms": "ms",
    "expected_latency_ms": "ms",
    "n_samples": "count", "warmup_iterations": "count", "bootstrap_resamples": "count",
    "gflops": "GFLOP/s", "tflops": "TFLOP/s", "bandwidth_gbs": "GB/s", "peak_memory_mb": "MB",
    "speedup": "x", "slowdown": "x", "speedup_ci_low": "x", "speedup_ci_high": "x",
    "expected_slowdown": "x", "efficiency_ratio": "x",
    "hedges_g": "1", "cliffs_delta": "1", "p_value": "1",
    "improvement_percent": "%", "slowdown_percent": "%", "cv_percent": "%",
    "pct_of_peak_tflops": "%", "pct_of_peak_bandwidth": "%",
    "assumed_peak_tflops": "TFLOP/s", "assumed_peak_bandwidth_gbs": "GB/s",
    "flops": "FLOP", "bytes": "B", "arithmetic_intensity": "FLOP/B",
}


def _lines(mask) -> str:
    """CSV line numbers (header is line 1) of the rows where ``mask`` is true, first ten."""
    idx = [int(i) + 2 for i in mask[mask].index[:10]]
    more = int(mask.sum()) - len(idx)
    return ", ".join(map(str, idx)) + (f" and {more} more" if more > 0 else "")


def _path_iv(path) -> Path:
    """Resolve ``path`` (None means the packaged table) and check that it is a file."""
    path = DEFAULT_PATH if path is None else Path(path)
    if not path.is_file():
        raise ValueError(f"`path` must be an existing CSV file; got {str(path)!r}.")
    return path


def _float_or_nan(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _table_iv(raw: pd.DataFrame, name: str) -> pd.DataFrame:
    """Check the text table ``raw`` column by column and return it typed."""
    def fail(msg):
        raise ValueError(f"{name}: {msg}")

    missing = [c for c in COLUMNS if c not in raw.columns]
    extra = [c for c in raw.columns if c not in COLUMNS]
    if missing or extra:
        fail(f"columns must be exactly {list(COLUMNS)}; missing {missing}, unexpected {extra}.")
    if raw.empty:
        fail("holds no rows.")
    raw = raw.loc[:, list(COLUMNS)]

    bad = raw["status"] != STATUS
    if bad.any():
        fail(f"column `status` must be {STATUS!r} on every row; lines {_lines(bad)} differ.")
    bad = ~raw["source_file"].isin(SEED_FILES)
    if bad.any():
        fail(f"column `source_file` must be one of {list(SEED_FILES)}; lines {_lines(bad)}.")
    bad = ~raw["quantity"].isin(list(QUANTITY_UNITS))
    if bad.any():
        fail(f"column `quantity` must be one of {sorted(QUANTITY_UNITS)}; lines {_lines(bad)}.")
    bad = raw["unit"] != raw["quantity"].map(QUANTITY_UNITS)
    if bad.any():
        fail(f"column `unit` must match the quantity ({QUANTITY_UNITS}); lines {_lines(bad)}.")
    bad = ~raw["backend"].isin(BACKENDS)
    if bad.any():
        fail(f"column `backend` must be one of {list(BACKENDS)}; lines {_lines(bad)}.")
    bad = ~raw["dtype"].isin(DTYPES)
    if bad.any():
        fail(f"column `dtype` must be one of {list(DTYPES)}; lines {_lines(bad)}.")
    for col in ("source_section", "device", "software", "reported_text"):
        bad = raw[col].str.strip() == ""
        if bad.any():
            fail(f"column `{col}` must not be empty; lines {_lines(bad)}.")

    value = raw["value"].map(_float_or_nan)
    bad = ~value.map(math.isfinite)
    if bad.any():
        fail(f"column `value` must hold finite numbers; lines {_lines(bad)}.")
    printed = raw["reported_text"].str.replace(",", "", regex=False).map(_float_or_nan)
    bad = ~(printed == value)
    if bad.any():
        fail(f"column `value` must equal `reported_text` without thousands separators; "
             f"lines {_lines(bad)}.")

    out = raw.copy()
    out["value"] = value
    for col in SHAPE_COLUMNS:
        text = raw[col].str.strip()
        ok = (text == "") | text.str.fullmatch(r"[1-9][0-9]*")
        if not ok.all():
            fail(f"column `{col}` must be empty or a positive integer; lines {_lines(~ok)}.")
        out[col] = pd.array([int(t) if t else pd.NA for t in text], dtype="Int64")
    return out


def load_reported(path=None) -> pd.DataFrame:
    """Load the transcribed report figures as a tidy DataFrame, refusing a bad table.

    Parameters
    ----------
    path : str or Path, optional
        CSV to read; default ``data/reference/l4_reported.csv`` of this repository.

    Returns
    -------
    pandas.DataFrame
        One row per reported value, columns ``COLUMNS``; ``value`` is float and the four
        shape columns are nullable integers (empty for device-level figures).

    Raises
    ------
    ValueError
        If the file is missing, a column is missing or unexpected, a ``status`` is not
        "as reported", a ``source_file`` is not one of the five reports, a quantity, unit,
        backend or dtype is unknown, or a value does not parse or disagree with
        ``reported_text``. The message names the column and the CSV lines.
    """
    path = _path_iv(path)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{path.name}: not a readable CSV table ({exc}).") from exc
    return _table_iv(raw, path.name)


# ------------------------------------------------------ the reports' latencies beside ours

def reported_latency(reported: pd.DataFrame, device: str = "NVIDIA L4",
                     exclude_backends=("memory_efficient",)) -> pd.DataFrame:
    """The reports' median latencies on ``device``: one row per distinct value per report.

    The same figure restated in several sections of one report counts once
    (``n_mentions`` says how often it was stated); different reports' values stay apart.
    Rows for a backend in ``exclude_backends`` are left out (by default the forced
    memory-efficient backend, which is not the default dispatch). Every row is a claim
    "as reported", never our measurement.
    """
    df = _validate.frame("reported", reported, ("quantity", "value", "batch", "heads", "seq_len",
                                                 "head_dim", "dtype", "source_file", "device",
                                                 "backend", "status"))
    df = df[(df["quantity"] == "median_latency_ms") & (df["device"] == device)
            & ~df["backend"].isin(list(exclude_backends))]
    df = df.dropna(subset=["batch", "heads", "seq_len", "head_dim"])
    if df.empty:
        return pd.DataFrame(columns=["config", "source_file", "value_ms", "n_mentions",
                                     "status", "device"])
    keys = [Config(int(b), int(h), int(s), int(d), dt).key for b, h, s, d, dt in
            zip(df["batch"], df["heads"], df["seq_len"], df["head_dim"], df["dtype"])]
    df = df.assign(config=keys)
    out = (df.groupby(["config", "source_file", "value"]).size().rename("n_mentions")
           .reset_index().rename(columns={"value": "value_ms"}))
    out["status"] = "as reported"
    out["device"] = device
    return with_config_fields(out)


def cross_device_table(latency_by_run: pd.DataFrame, reported: pd.DataFrame,
                       candidate: str = BASELINE) -> pd.DataFrame:
    """Every run's ``candidate`` median per configuration and mode beside the L4 values
    the reports give for the same shape (their minimum, maximum and count, as reported).

    ``latency_by_run`` is :func:`latency_table` output with ``run`` and ``device`` columns.
    ``l4_over_ours`` is the reports' smallest L4 median over ours: how many times slower
    the L4 figure is (not a like-for-like timing: the reports used one process and a
    synchronise after every call, closest to our ``per_call``).
    """
    lat = _validate.frame("latency_by_run", latency_by_run,
                          ("run", "device", "config", "candidate", "mode", "median_ms"))
    rep = reported_latency(reported)
    agg = (rep.groupby("config")["value_ms"].agg(l4_min_ms="min", l4_max_ms="max",
                                                 l4_n_values="size").reset_index())
    wide = lat[lat["candidate"] == candidate][["run", "device", "config", "mode", "median_ms"]]
    out = wide.merge(agg, on="config", how="left")
    out["l4_over_ours"] = out["l4_min_ms"] / out["median_ms"]
    return with_config_fields(out)
