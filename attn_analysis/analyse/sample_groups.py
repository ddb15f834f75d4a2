"""The samples table of a run, grouped as the statistics want it. Pure, no I/O.

A run's ``samples`` hold one row per raw sample (configuration, candidate, mode, trial,
placement, sample, ms). Every interval of the package treats the process (trial) as the
independent unit and the placement inside it as a nested level, so the arms of a
comparison are handed over as processes -> placements -> 1-D arrays
(:func:`process_groups`, :func:`paired_groups`); :func:`with_config_fields` adds the
shape fields a table sorts and filters by.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import _validate
from ..configs import CONFIG_FIELDS, Config

__all__ = ["with_config_fields", "trial_arrays", "process_groups", "process_groups_by_trial",
           "paired_groups", "trial_medians"]


def with_config_fields(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the shape columns parsed from ``config`` (``CONFIG_FIELDS``), its rows
    sorted by configuration (batch, heads, sequence length, ...)."""
    fields = pd.DataFrame([Config.from_key(k).as_dict() for k in df["config"]], index=df.index)
    out = pd.concat([df.drop(columns=[c for c in CONFIG_FIELDS if c in df.columns]), fields],
                    axis=1)
    order = out["config"].map(lambda k: Config.from_key(k))
    return out.iloc[sorted(range(len(out)), key=lambda i: order.iloc[i])].reset_index(drop=True)


def trial_arrays(samples: pd.DataFrame, config: str, candidate: str, mode: str
                 ) -> list[np.ndarray]:
    """The samples of one (config, candidate, mode), one array per trial, in trial order."""
    df = _validate.samples(samples)
    sel = df[(df["config"] == config) & (df["candidate"] == candidate) & (df["mode"] == mode)]
    return [g["ms"].to_numpy(dtype=float) for _, g in sel.groupby("trial", sort=True)]


def process_groups(frame: pd.DataFrame) -> list:
    """One unit kind's samples as processes, each a list of placements (1-D arrays).

    Runs before protocol 2 have no ``placement`` column; each process is then one
    placement, and :func:`stats.compare` reduces to its two-stage bootstrap.
    """
    return list(process_groups_by_trial(frame).values())


def process_groups_by_trial(frame: pd.DataFrame) -> dict[int, list[np.ndarray]]:
    """:func:`process_groups` keyed by trial, in trial order: each process's placements in
    placement order, each placement's samples in sample order. One sort and one split for
    all processes (a pooled calibration holds hundreds of them)."""
    order = [c for c in ("trial", "placement", "sample") if c in frame.columns]
    frame = frame.sort_values(order, kind="stable")
    ms = frame["ms"].to_numpy(dtype=float)
    trial = frame["trial"].to_numpy(dtype=np.int64)
    place = (frame["placement"].to_numpy(dtype=np.int64) if "placement" in frame.columns
             else np.zeros(len(frame), dtype=np.int64))
    breaks = np.flatnonzero((trial[1:] != trial[:-1]) | (place[1:] != place[:-1])) + 1
    out: dict[int, list[np.ndarray]] = {}
    for start, chunk in zip(np.r_[0, breaks], np.split(ms, breaks)):
        if len(chunk):
            out.setdefault(int(trial[start]), []).append(chunk)
    return out


def paired_groups(base: pd.DataFrame, cand: pd.DataFrame) -> tuple[list, list]:
    """Both arms' :func:`process_groups` over the trials both were measured in, so that the
    ``i``-th process of each is the same process (``stats.compare`` pairs them)."""
    common = set(base["trial"]) & set(cand["trial"])
    return (process_groups(base[base["trial"].isin(common)]),
            process_groups(cand[cand["trial"].isin(common)]))


def trial_medians(samples: pd.DataFrame) -> pd.DataFrame:
    """Median of each trial (process) per configuration, candidate and mode."""
    df = _validate.samples(samples)
    out = (df.groupby(["config", "candidate", "mode", "trial"])["ms"]
           .agg(median_ms="median", n_samples="size").reset_index())
    return with_config_fields(out)
