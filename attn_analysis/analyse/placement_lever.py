"""Whether more placements per process shrink the spread between processes as the variance
components say they should. Pure, no I/O.

:func:`.power.diff_sd` models a process's difference of mean log times as a
process-by-candidate part plus each arm's placement noise divided by the placements. Where
the process-by-candidate part is about zero (the long shapes), the placements are the
cheap lever: four times the placements halve the SD, at no extra process start-up. That is
a model; :func:`subsample_check` tests it on one run with many placements per process, by
splitting each process's placements into ``groups`` interleaved subsets (placement
``p % groups``) and comparing the SD of the per-process differences at the subset size
with the full run's and with the model's prediction from the full run's components.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from .. import _validate
from .power import diff_sd, paired_components

__all__ = ["CHECK_COLUMNS", "subsample_check", "LeverSummary", "lever_summary",
           "placements_per_process"]

CHECK_COLUMNS = ("config", "candidate", "level", "processes", "placements", "sd_all",
                 "subset", "sd_subset", "predicted_subset", "sd_interaction")


def subsample_check(placements: pd.DataFrame, baseline: str = "sdpa", groups: int = 4,
                    levels=("call", "kernel")) -> pd.DataFrame:
    """Per (config, candidate, level) of ``placements`` (``record.Run.placements``):
    ``sd_all``, the SD of the per-process differences over all ``placements`` per process;
    ``sd_subset``, the root mean square over the ``groups`` interleaved subsets of that SD
    when each holds ``subset`` = placements / groups placements; ``predicted_subset``, what
    :func:`.power.diff_sd` predicts at ``subset`` from the full run's components. A model
    that holds gives ``sd_subset`` close to ``predicted_subset`` and ``sd_all`` close to
    ``sd_subset * sqrt(1 / groups)`` where the interaction is about zero."""
    g = _validate.integer("groups", groups, 2)
    if placements is None or len(placements) == 0:
        raise ValueError("`placements` must hold at least one placement row.")
    per = placements.groupby(["config", "candidate", "trial"])["placement"].nunique()
    if per.min() < 2 * g:
        raise ValueError(f"`groups` = {g} needs at least {2 * g} placements per process; "
                         f"the run has {int(per.min())}.")
    rows = []
    for level in levels:
        full = paired_components(placements, baseline, level)
        subs = [paired_components(placements[placements["placement"] % g == k], baseline,
                                  level).set_index(["config", "candidate"])["sd_diff"]
                for k in range(g)]
        for r in full.itertuples():
            key = (r.config, r.candidate)
            sd_sub = [s[key] for s in subs if key in s.index]
            if not sd_sub:
                continue
            size = r.placements / g
            rows.append({"config": r.config, "candidate": r.candidate, "level": level,
                         "processes": int(r.processes), "placements": float(r.placements),
                         "sd_all": float(r.sd_diff), "subset": size,
                         "sd_subset": math.sqrt(float(np.mean(np.square(sd_sub)))),
                         "predicted_subset": diff_sd(r.sd_interaction,
                                                     (r.sd_placement_base,
                                                      r.sd_placement_cand),
                                                     max(1, round(size))),
                         "sd_interaction": float(r.sd_interaction)})
    return pd.DataFrame(rows, columns=list(CHECK_COLUMNS))


@dataclasses.dataclass(frozen=True)
class LeverSummary:
    """:func:`subsample_check` of one run in one line: its placements per process, the
    subset size, how many comparisons, the median ratio of the SD at all placements to the
    SD at the subset, and what pure placement noise gives (``sqrt(1 / groups)``)."""

    placements: int
    subset: int
    comparisons: int
    median_ratio: float
    noise_ratio: float


def lever_summary(placements: pd.DataFrame, baseline: str = "sdpa",
                  groups: int = 4) -> LeverSummary:
    """The median over every comparison and level of ``sd_all / sd_subset``
    (:func:`subsample_check`); near ``sqrt(1 / groups)`` when the spread between processes
    is placement noise, near 1 when it is the processes'."""
    check = subsample_check(placements, baseline, groups)
    if check.empty:
        raise ValueError(f"`placements` holds no comparison with `baseline` {baseline!r}.")
    ratio = float((check["sd_all"] / check["sd_subset"]).median())
    return LeverSummary(int(check["placements"].median()), int(check["subset"].median()),
                        int(len(check)), ratio, math.sqrt(1 / groups))


def placements_per_process(placements: pd.DataFrame) -> int:
    """The median number of placements a (config, candidate, process) holds in a run's
    ``placements`` table: how a run's design can be told apart as a lever study."""
    if placements is None or len(placements) == 0:
        raise ValueError("`placements` must hold at least one placement row.")
    return int(placements.groupby(["config", "candidate", "trial"])["placement"]
               .nunique().median())
