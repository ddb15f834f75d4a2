"""``measure`` repeated in fresh processes, one after another: the spread between them is
the process-to-process variance (allocation addresses, clocks, autotuning choices) that
one process cannot show. The timers are :mod:`.timing`'s.
"""

from __future__ import annotations

import inspect
import multiprocessing
import pickle

from .. import _validate
from .timing import TimingSample, _measure_iv, measure

__all__ = ["measure_in_processes"]


_MEASURE_KWARGS = ("device", "n_samples", "ci_target", "budget_s", "min_samples", "max_samples",
                   "warmup_ms", "calls_per_sample", "flush_bytes", "confidence")


def _trial(factory, mode, kwargs) -> TimingSample:
    """Body of one fresh process: build the inputs, then time them."""
    return measure(factory(), mode, **kwargs)


def measure_in_processes(factory, n_trials, *, mode="graph", **measure_kwargs):
    """Run ``measure(factory(), mode, **measure_kwargs)`` in ``n_trials`` fresh processes.

    One spawned process per trial, one after another (trials never share the GPU), so the
    spread between trials shows process-to-process variance (allocation addresses, clocks,
    autotuning choices) instead of assuming it away. ``factory`` must be a picklable,
    module-level callable returning the zero-argument ``fn``. Returns a list of
    ``TimingSample``; each one's ``pid`` names its process.
    """
    if not callable(factory):
        raise ValueError(f"`factory` must be a picklable module-level callable; got {factory!r}.")
    try:
        pickle.dumps(factory)
    except Exception as exc:  # lambdas, closures, bound local functions
        raise ValueError(f"`factory` must be picklable (a module-level callable); {exc}") from None
    n_trials = _validate.integer("n_trials", n_trials)
    unknown = sorted(set(measure_kwargs) - set(_MEASURE_KWARGS))
    if unknown:
        raise ValueError(f"`measure_kwargs` may hold only {_MEASURE_KWARGS}; got {unknown}.")
    full = {k: v.default for k, v in inspect.signature(measure).parameters.items()
            if k in _MEASURE_KWARGS}
    full.update(measure_kwargs)
    _measure_iv(factory, mode, **full)  # fail here, before any process starts
    ctx = multiprocessing.get_context("spawn")
    out = []
    for _ in range(n_trials):
        with ctx.Pool(processes=1) as pool:
            out.append(pool.apply(_trial, (factory, mode, measure_kwargs)))
    return out
