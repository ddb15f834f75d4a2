"""The cheapest measurement design for a target precision: processes x placements x
samples, from the measured variance components (``variance.decompose``). Pure, no I/O.

:func:`log_speedup_se` is the standard error of the log speedup a design gives for two
arms whose components are known; :func:`cheapest_design` searches the designs for the
cheapest one that reaches a target standard error, at a given cost of a process and of a
placement.
"""

from __future__ import annotations

import dataclasses
import math

from .. import _validate

__all__ = ["Design", "log_speedup_se", "cheapest_design"]


def _arm_iv(name: str, arm) -> tuple[float, float, float]:
    """An arm's (process, placement, replay) SDs from a mapping or a row of
    :func:`decompose`; a missing or NaN replay SD counts as 0 (kernel level)."""
    try:
        sds = [arm[f"sd_{f}"] if f"sd_{f}" in arm else math.nan
               for f in ("process", "placement", "replay")]
    except TypeError:
        raise ValueError(f"`{name}` must be a mapping or row with sd_process, sd_placement "
                         f"and optionally sd_replay; got {type(arm).__name__}.") from None
    sds = [float(x) for x in sds]
    sds[2] = 0.0 if math.isnan(sds[2]) else sds[2]
    if not all(math.isfinite(x) and x >= 0 for x in sds):
        raise ValueError(f"`{name}` must have finite sd_process and sd_placement >= 0; "
                         f"got {sds[:2]}.")
    return tuple(sds)


@dataclasses.dataclass(frozen=True)
class Design:
    """A measurement design and what it buys: standard error of the log speedup, cost."""

    processes: int
    placements: int
    samples: int
    se: float
    cost_s: float


def log_speedup_se(baseline, candidate, processes: int, placements: int,
                   samples: int) -> float:
    """Standard error of the log speedup from ``processes`` x ``placements`` x ``samples``
    per arm on one machine.

    ``baseline`` and ``candidate`` are rows of :func:`decompose` (or mappings with
    ``sd_process``, ``sd_placement`` and ``sd_replay``; a NaN or missing replay SD counts
    as 0, as at kernel level). Each arm's mean log time has variance
    ``sd_process**2 / P + sd_placement**2 / (P M) + sd_replay**2 / (P M N)``; the arms are
    taken as independent and the two variances add. The machine component is left out:
    both arms run on the same machine. Processes shared by both arms would correlate the
    arms and make the true error smaller, so this errs on the safe side.
    """
    arms = [_arm_iv("baseline", baseline), _arm_iv("candidate", candidate)]
    p = _validate.integer("processes", processes, 1)
    m = _validate.integer("placements", placements, 1)
    n = _validate.integer("samples", samples, 1)
    return math.sqrt(sum(sp ** 2 / p + sl ** 2 / (p * m) + sr ** 2 / (p * m * n)
                         for sp, sl, sr in arms))


def cheapest_design(baseline, candidate, target_se: float, process_overhead_s: float,
                    placement_s: float, samples: int = 20, arms: int = 2,
                    min_processes: int = 2, max_processes: int = 64,
                    max_placements: int = 64) -> Design | None:
    """The (processes, placements) of least cost whose :func:`log_speedup_se` is at most
    ``target_se``, or None when no design in the grid reaches it.

    Cost of a design: ``P * (process_overhead_s + arms * M * placement_s)``, with
    ``placement_s`` the wall time of one placement of one arm at ``samples`` samples and
    ``process_overhead_s`` a process's fixed cost (start-up, compilation, checks). Ties go
    to the smaller standard error. At least ``min_processes`` processes (default 2): one
    process cannot show a process effect.
    """
    target_se = _validate.finite("target_se", target_se, strict=True)
    overhead = _validate.finite("process_overhead_s", process_overhead_s)
    per = _validate.finite("placement_s", placement_s, strict=True)
    n = _validate.integer("samples", samples, 1)
    arms = _validate.integer("arms", arms, 1)
    lo = _validate.integer("min_processes", min_processes, 1)
    hi = _validate.integer("max_processes", max_processes, lo)
    m_hi = _validate.integer("max_placements", max_placements, 1)
    best = None
    for p in range(lo, hi + 1):
        for m in range(1, m_hi + 1):
            se = log_speedup_se(baseline, candidate, p, m, n)
            if se > target_se:
                continue
            d = Design(p, m, n, se, p * (overhead + arms * m * per))
            if best is None or (d.cost_s, d.se) < (best.cost_s, best.se):
                best = d
            break  # more placements only cost more at this P
    return best
