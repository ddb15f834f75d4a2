"""Where a trial process's time goes: named phases, summed (the per-process time budget).

A sweep's cost is mostly not its timed samples: start-up, building, the float64 gate,
graph captures and the profiler's kernel time come first. To say which, every trial
process carries a :class:`PhaseClock`; the trial wraps each piece of work in
``clock.phase(name)`` and records :meth:`PhaseClock.as_record` in its trial unit
(``budget``), so a run's journal says what each of its processes spent, phase by phase.
The clock itself costs two ``perf_counter`` reads a phase. No torch here.
"""

from __future__ import annotations

import contextlib
import time

__all__ = ["PHASES", "PhaseClock"]

# The phases a trial process records, in the order they first happen; anything else the
# process did is the remainder ``other`` of :meth:`PhaseClock.as_record`.
PHASES = ("start", "journal", "import", "lock", "cuda", "fingerprint", "ceilings", "build",
          "check", "warmup", "collect", "placement", "profile", "timing", "state", "kernels",
          "write")


class PhaseClock:
    """Seconds per named phase of one process, from ``spawned_at`` (the parent's
    ``time.time()`` just before it started the process) to :meth:`as_record`.

    ``start`` is charged at construction: the time from the parent's spawn to the
    worker's first line (interpreter start, the module imports spawn repeats).
    """

    def __init__(self, spawned_at: float | None = None):
        now = time.time()
        self.spawned_at = now if spawned_at is None else float(spawned_at)
        self.seconds = {"start": max(0.0, now - self.spawned_at)}  # clocks can step back
        self._t0 = time.perf_counter() - self.seconds["start"]

    @contextlib.contextmanager
    def phase(self, name: str):
        """Charge the time of the ``with`` body to ``name`` (one of :data:`PHASES`)."""
        if name not in PHASES:
            raise ValueError(f"`name` must be one of {PHASES}; got {name!r}.")
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t

    def as_record(self) -> dict:
        """``{"wall_s", "phases_s", "other_s"}``: the process's wall time so far, seconds
        per phase (in :data:`PHASES` order, phases never entered left out) and the rest."""
        wall = time.perf_counter() - self._t0
        phases = {p: round(self.seconds[p], 4) for p in PHASES if p in self.seconds}
        return {"wall_s": round(wall, 4), "phases_s": phases,
                "other_s": round(max(0.0, wall - sum(self.seconds.values())), 4)}
