"""The argument checks every module shares (STYLE habit 1: validate, then compute).

Each function checks one argument, returns it normalised (a plain ``int``, ``float``,
tuple, or the DataFrame itself) and otherwise raises ``ValueError`` naming the argument
in backticks with what it must be, so every module words the same fault the same way.
A check that only one module needs stays in that module as its private ``_<name>_iv``.

Pure and light: numbers, numpy arrays and, inside :func:`frame`, pandas; never torch.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable

import numpy as np

__all__ = ["SAMPLE_KEYS", "frame", "samples", "integer", "positive_integer", "number_in",
           "positive", "finite", "choice", "flag", "distinct", "drawn_from", "confidence",
           "rng", "array_1d", "per_trial", "per_process", "ratio_arms"]

SAMPLE_KEYS = ("config", "candidate", "mode", "trial", "ms")


def frame(name: str, df, columns=(), *, rows: bool = False):
    """``df`` if it is a DataFrame holding ``columns`` (and, with ``rows``, at least one row)."""
    import pandas as pd
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"`{name}` must be a pandas DataFrame; got {type(df).__name__}.")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"`{name}` must have columns {list(columns)}; missing {missing}.")
    if rows and df.empty:
        raise ValueError(f"`{name}` must hold at least one row; got none.")
    return df


def samples(df, columns=SAMPLE_KEYS):
    """A tidy samples table (``columns``) whose ``ms`` are positive and finite."""
    df = frame("samples", df, columns)
    ms = df["ms"].to_numpy(dtype=float)
    if len(ms) and not (np.isfinite(ms) & (ms > 0)).all():
        raise ValueError("`samples` column `ms` must hold positive finite times.")
    return df


def _is_integer(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


def _is_real(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def integer(name: str, value, minimum: int = 1, *, allow_none: bool = False) -> int | None:
    """``value`` as an ``int`` of at least ``minimum`` (or None where ``allow_none``)."""
    if value is None and allow_none:
        return None
    if not _is_integer(value) or value < minimum:
        extra = " or None" if allow_none else ""
        raise ValueError(f"`{name}` must be an integer >= {minimum}{extra}; got {value!r}.")
    return int(value)


def positive_integer(name: str, value) -> int:
    """``value`` as an ``int`` > 0 (numpy integers too; bools refused)."""
    if not _is_integer(value) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer; got {value!r}.")
    return int(value)


def number_in(name: str, value, low: float = 0.0, high: float = 1.0) -> float:
    """``value`` as a ``float`` strictly inside (``low``, ``high``)."""
    if not _is_real(value) or not low < float(value) < high:
        raise ValueError(f"`{name}` must be a number in ({low:g}, {high:g}); got {value!r}.")
    return float(value)


def positive(name: str, value) -> float:
    """``value`` as a finite ``float`` > 0, worded "a positive finite number"."""
    if not _is_real(value) or not math.isfinite(float(value)) or float(value) <= 0:
        raise ValueError(f"`{name}` must be a positive finite number; got {value!r}.")
    return float(value)


def finite(name: str, value, *, strict: bool = False) -> float:
    """``value`` as a finite ``float`` >= 0 (> 0 where ``strict``)."""
    ok = _is_real(value) and math.isfinite(value) and (value > 0 if strict else value >= 0)
    if not ok:
        raise ValueError(f"`{name}` must be a finite number {'>' if strict else '>='} 0; "
                         f"got {value!r}.")
    return float(value)


def choice(name: str, value, allowed: tuple):
    """``value`` if it is one of ``allowed`` (strings are compared as strings)."""
    if not isinstance(value, Hashable) or value not in tuple(allowed):
        raise ValueError(f"`{name}` must be one of {allowed}; got {value!r}.")
    return value


def flag(name: str, value) -> bool:
    """``value`` if it is ``True`` or ``False`` (not 0, 1 or a numpy bool)."""
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False; got {value!r}.")
    return value


def distinct(name: str, values, what: str = "an entry") -> tuple:
    """``values`` as a tuple if none repeats (a repeated shape or mode would be measured,
    and counted, twice); the message names the repeated ones."""
    values = tuple(values)
    seen, repeated = set(), []
    for value in values:
        if value in seen and value not in repeated:
            repeated.append(value)
        seen.add(value)
    if repeated:
        raise ValueError(f"`{name}` must not repeat {what}; {repeated} repeated in "
                         f"{list(values)}.")
    return values


def drawn_from(name: str, value, allowed: tuple) -> tuple:
    """``value`` (one name, or a sequence of names, each one of ``allowed``) as a non-empty
    tuple: the timing modes a table covers, say, with ``allowed`` = ``configs.MODES``."""
    value = (value,) if isinstance(value, str) else tuple(value)
    if not value or any(m not in allowed for m in value):
        raise ValueError(f"`{name}` must be drawn from {allowed}; got {value!r}.")
    return value


# ------------------------------------------------------------ samples of a statistic

def confidence(value) -> float:
    """``value`` as a coverage strictly between 0 and 1, worded for ``confidence``."""
    return number_in("confidence", value, 0.0, 1.0)


def rng(seed) -> np.random.Generator:
    """A Generator seeded with ``seed`` (a non-negative integer, or None for fresh entropy)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)
                             or seed < 0):
        raise ValueError(f"`seed` must be a non-negative integer or None; got {seed!r}.")
    return np.random.default_rng(seed)


def array_1d(name: str, x, min_size: int = 1, positive: bool = False) -> np.ndarray:
    """``x`` as a 1-D float array of at least ``min_size`` finite (optionally positive)
    values."""
    what = "positive finite" if positive else "finite"
    rule = f"`{name}` must be a 1-D array of at least {min_size} {what} value(s)"
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{rule}; got {type(x).__name__} that is not numeric.") from None
    if arr.ndim != 1:
        raise ValueError(f"{rule}; got an array of shape {arr.shape}.")
    if arr.size < min_size:
        raise ValueError(f"{rule}; got {arr.size} value(s).")
    bad = ~np.isfinite(arr) | ((arr <= 0) if positive else False)
    if bad.any():
        raise ValueError(f"{rule}; got {int(bad.sum())} value(s) that are not {what}.")
    return arr


def per_trial(name: str, x) -> list[np.ndarray]:
    """``x`` (one 1-D sample, or one 1-D sample per trial) as a list of positive samples."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):  # ragged: trials of different lengths
        arr = None
    if arr is not None and arr.ndim == 1:
        return [array_1d(name, arr, positive=True)]
    if arr is not None and arr.ndim != 2:
        raise ValueError(f"`{name}` must be a 1-D array of times or a sequence of 1-D arrays "
                         f"(one per trial); got an array of shape {arr.shape}.")
    parts = list(x) if arr is None else list(arr)
    if not parts:
        raise ValueError(f"`{name}` must hold at least one trial; got none.")
    return [array_1d(f"{name}[{i}]", p, positive=True) for i, p in enumerate(parts)]


def per_process(name: str, x) -> list[list[np.ndarray]]:
    """``x`` as processes -> placements -> samples.

    Accepts one 1-D sample (one process, one placement), a sequence of 1-D samples (one per
    process, one placement each: the layout of runs before protocol 2) or a sequence of
    sequences of 1-D samples (processes, then placements).
    """
    if isinstance(x, (list, tuple)) and x and all(isinstance(p, (list, tuple)) for p in x) \
            and all(len(p) and not np.isscalar(p[0]) for p in x):
        return [[array_1d(f"{name}[{i}][{j}]", pl, positive=True)
                 for j, pl in enumerate(proc)] for i, proc in enumerate(x)]
    return [[t] for t in per_trial(name, x)]


def ratio_arms(baseline, candidate, n_resamples, seed) -> tuple:
    """The arguments every speedup interval shares: both arms as processes -> placements
    -> samples (:func:`per_process`), the resample count and the Generator."""
    return (per_process("baseline", baseline), per_process("candidate", candidate),
            positive_integer("n_resamples", n_resamples), rng(seed))

