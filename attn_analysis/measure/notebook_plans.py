"""The plans a notebook or a campaign script sweeps: :func:`measurement_plan` (a
notebook's ``measure=True``, from its parameters) and :func:`campaign_plan` (a recorded
state-of-the-art campaign, ``configs.CAMPAIGN_PLANS``). Both build a :class:`.plan.Plan`;
:mod:`.sweep` runs it (and re-exports these names, where callers import them).
"""

from __future__ import annotations

import numbers

from .. import _validate
from ..configs import DEVICES, MATRICES, parse_shapes
from .plan import DEFAULT_TIMING, DEFAULT_TRIALS, Plan

__all__ = ["CPU_SHAPES", "CPU_CANDIDATES", "measurement_plan", "campaign_plan"]

CPU_SHAPES = "2,2,64;2,2,128"
CPU_CANDIDATES = ("sdpa", "sdpa_math", "eager")


def measurement_plan(device: str, shapes="", candidates="", trials: int = DEFAULT_TRIALS,
                     samples: int = 0) -> Plan:
    """The sweep a notebook runs with ``measure=True`` on ``device`` ("cuda" or "cpu").

    Defaults: on a GPU the reports' ten configurations and every registered candidate;
    on a CPU the small shapes ``CPU_SHAPES`` and ``CPU_CANDIDATES`` (CPU times are host
    wall-clock and labelled so). ``samples`` > 0 fixes the samples per placement; 0 takes
    protocol 2's calibrated design (``DEFAULT_TIMING``; placements ``DEFAULT_PLACEMENTS``).
    """
    from . import candidates as cands
    if device not in DEVICES:
        raise ValueError(f"`device` must be 'cuda' or 'cpu'; got {device!r}.")
    trials = _validate.positive_integer("trials", trials)
    if isinstance(samples, bool) or not isinstance(samples, numbers.Integral) or samples < 0:
        raise ValueError(f"`samples` must be a non-negative integer (0: the default); "
                         f"got {samples!r}.")
    cfgs = parse_shapes(shapes) or (MATRICES["reports-v1"] if device == "cuda"
                                    else parse_shapes(CPU_SHAPES))
    if isinstance(candidates, str):
        names = tuple(candidates.replace(",", " ").split())
    else:
        names = tuple(candidates)
    names = names or (cands.DEFAULT_CANDIDATES if device == "cuda" else CPU_CANDIDATES)
    timing = dict(DEFAULT_TIMING, **({"n_samples": int(samples)} if samples else {}))
    matrix = next((name for name, m in MATRICES.items() if m == cfgs), "")
    return Plan(configs=cfgs, candidates=names, trials=trials, device=device,
                timing=timing, matrix=matrix, profile=device == "cuda")


def campaign_plan(campaign: str, device: str = "cuda") -> Plan:
    """The plan of a state-of-the-art campaign (``configs.CAMPAIGN_PLANS``) on ``device``."""
    from ..configs import CAMPAIGN_PLANS, PLUGINS, matrix
    spec = CAMPAIGN_PLANS[_validate.choice("campaign", campaign, sorted(CAMPAIGN_PLANS))]
    return Plan(configs=matrix(spec["matrix"]), candidates=spec["candidates"],
                modes=spec["modes"], trials=spec["trials"], device=device, plugins=PLUGINS,
                matrix=spec["matrix"])
