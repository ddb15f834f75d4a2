"""What a trial process writes into the run's journal, built from what it measured: the
timing unit of one (configuration, candidate, mode) from its placements (:func:`timing_unit`),
the kernels unit's rows (:func:`kernel_rows`), a failure's one-line reason
(:func:`short_reason`) and settings made plain JSON (:func:`jsonable`). Pure functions;
:mod:`.trial` measures and writes, :mod:`attn_analysis.record.schema` says what a unit holds.
"""

from __future__ import annotations

__all__ = ["timing_unit", "kernel_rows", "short_reason", "jsonable"]


def timing_unit(config_key: str, candidate: str, mode: str, trial: int, info: dict,
                entry: dict, protocol: int) -> dict:
    """One timing unit holding every placement of (configuration, candidate, mode).

    ``entry`` is the trial's record of the unit so far: ``placements`` (one dict per timed
    placement: ``times_ms``, ``timing``, ``elapsed_s``, the GPU's state at both ends, ...),
    ``started_utc`` and ``failure`` (None, or (status, reason) of the first placement that
    failed). A unit with a failure or without a placement is recorded with no samples."""
    placements = entry["placements"]
    unit = {"kind": "timing", "config": config_key, "candidate": candidate, "mode": mode,
            "trial": trial, "info": jsonable(info), "started_utc": entry["started_utc"],
            "protocol": protocol}
    if entry["failure"] is not None or not placements:
        status, reason = entry["failure"] or ("error", "no placement was timed")
        unit.update(status=status, reason=reason, times_ms=[], placements=[])
    else:
        unit.update(status="ok", reason="",
                    times_ms=[t for rec in placements for t in rec["times_ms"]],
                    timing=placements[0]["timing"], placements=jsonable(placements))
    unit["gpu_state_start"] = placements[0]["gpu_state_start"] if placements else None
    unit["gpu_state_end"] = placements[-1]["gpu_state_end"] if placements else None
    unit["elapsed_s"] = float(sum(rec["elapsed_s"] for rec in placements))
    return unit


def kernel_rows(evidence: dict) -> list[dict]:
    """Normalise the profiler's kernel list to name, calls per call, device ms per call."""
    return [{"name": str(k.get("name")), "calls_per_call": float(k.get("count_per_call", 1)),
             "device_ms_per_call": float(k.get("ms_per_call", 0.0))}
            for k in evidence.get("kernels", [])]


def short_reason(exc: BaseException) -> str:
    """An exception as the one line a unit records: its type and its message's first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:400] if text else ''}"


def jsonable(obj):
    """Convert settings (numpy scalars, tuples, torch dtypes) to plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)
