"""Compute rates of attention candidates: TFLOP/s and the fraction of the GPU's dense peak. Pure.

For each (GPU, configuration, candidate) time, ``rate_table`` gives

- ``flops``: forward attention FLOPs, ``4*B*H*S**2*D`` (two matrix products, ``Q @ K^T`` and
  ``P @ V``, of ``B*H*S*S*D`` multiply-adds each at 2 FLOPs), halved for causal attention
  (:func:`.workload.flops`; softmax, scaling and masking are not counted);
- ``tflops``: ``flops / time`` in 1e12 FLOP/s (:func:`.workload.tflops_rate`);
- ``peak_tflops``: the GPU model's dense fp16 or bf16 tensor-core peak (the configuration's
  dtype) from the datasheet table :data:`.workload.HARDWARE`, NaN for a GPU it does not
  hold;
- ``fraction_of_peak``: ``tflops / peak_tflops``.

A rate computed from a time that includes launch overhead (a per-call time) understates the
kernel's own rate; the caller chooses which time to convert and says so.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..configs import Config
from . import workload

__all__ = ["RATE_COLUMNS", "rate_table"]

RATE_COLUMNS = ("flops", "tflops", "peak_tflops", "fraction_of_peak")
_REQUIRED = ("gpu", "config", "candidate", "ms")


def _times_iv(times) -> pd.DataFrame:
    """Check ``times``: a DataFrame with the required columns and positive finite ``ms``."""
    if not isinstance(times, pd.DataFrame):
        raise ValueError(f"`times` must be a pandas DataFrame; got {type(times).__name__}.")
    missing = [c for c in _REQUIRED if c not in times.columns]
    if missing:
        raise ValueError(f"`times` must have columns {list(_REQUIRED)}; missing {missing}.")
    ms = pd.to_numeric(times["ms"], errors="coerce")
    bad = ~(np.isfinite(ms) & (ms > 0))
    if bool(bad.any()):
        raise ValueError(f"`times` column `ms` must be positive and finite; got "
                         f"{times.loc[bad, 'ms'].tolist()[:3]}.")
    return times


def _peak(gpu: str, dtype: str) -> float:
    spec = workload.device_spec_or_none(gpu)
    return math.nan if spec is None else spec.peak_tflops(dtype)


def rate_table(times: pd.DataFrame) -> pd.DataFrame:
    """Add ``flops``, ``tflops``, ``peak_tflops`` and ``fraction_of_peak`` to ``times``.

    Parameters
    ----------
    times : DataFrame
        One row per time: ``gpu`` (the name torch reports, or a :data:`.workload.HARDWARE`
        key), ``config`` (a :attr:`Config.key`), ``candidate`` and ``ms`` (milliseconds,
        > 0); other columns are kept.

    Returns
    -------
    DataFrame
        A copy of ``times`` with the four rate columns, rows in the same order.
    """
    df = _times_iv(times).copy()
    configs = [Config.from_key(key) for key in df["config"]]
    df["flops"] = [workload.flops(c) for c in configs]
    df["tflops"] = workload.tflops_rate(df["flops"].to_numpy(float),
                                        pd.to_numeric(df["ms"]).to_numpy(float))
    df["peak_tflops"] = [_peak(str(g), c.dtype) for g, c in zip(df["gpu"], configs)]
    df["fraction_of_peak"] = df["tflops"] / df["peak_tflops"]
    return df
