"""Text summary of a recorded run, with warnings about unstable data (as pyperf does)."""

from __future__ import annotations

import pandas as pd

__all__ = ["MAX_CV", "MAX_OUTLIER_RATIO", "MIN_RESOLVABLE_MS", "warnings_for", "summary"]

# Thresholds for warnings: spread, outliers, timer resolution.
MAX_CV = 0.10               # coefficient of variation above this is "unstable"
MAX_OUTLIER_RATIO = 2.0     # max / median above this flags extreme samples
MIN_RESOLVABLE_MS = 0.005   # CUDA events resolve about 0.5 us; stay 10x above it


def warnings_for(samples: pd.DataFrame) -> list[str]:
    """One line per (config, candidate, mode) whose samples look unstable."""
    out = []
    for (config, cand, mode), g in samples.groupby(["config", "candidate", "mode"]):
        ms = g["ms"]
        med = ms.median()
        cv = ms.std(ddof=1) / ms.mean() if len(ms) > 1 else 0.0
        label = f"{config} {cand} {mode}"
        if cv > MAX_CV:
            out.append(f"{label}: spread is large (CV {cv:.1%})")
        if ms.max() > MAX_OUTLIER_RATIO * med:
            out.append(f"{label}: extreme sample {ms.max():.4g} ms vs median {med:.4g} ms")
        if med < MIN_RESOLVABLE_MS:
            out.append(f"{label}: median {med:.3g} ms is near the timer's resolution")
        trial_medians = g.groupby("trial")["ms"].median()
        if len(trial_medians) > 1 and trial_medians.max() > 1.05 * trial_medians.min():
            out.append(f"{label}: trial medians differ by "
                       f"{trial_medians.max() / trial_medians.min() - 1:.1%} between processes")
    return out


def summary(run) -> str:
    """Medians per configuration, candidate and mode; failures with reasons; warnings."""
    lines = [f"run {run.run_id} on {run.device}"]
    hashes = run.fingerprint.get("fingerprint_hashes", [])
    if len(hashes) > 1:
        lines.append(f"WARNING: trials ran on {len(hashes)} different environments: {hashes}")
    s = run.samples
    if len(s):
        table = (s.groupby(["config", "candidate", "mode"])["ms"]
                 .agg(n="size", median_ms="median").reset_index())
        lines.append(table.to_string(index=False, float_format=lambda x: f"{x:.5f}"))
    failed = run.units[run.units["status"] != "ok"]
    if len(failed):
        lines.append("not timed:")
        for (cand, status, reason), g in failed.groupby(["candidate", "status", "reason"]):
            lines.append(f"  {cand}: {status} ({len(g)} units): {reason[:160]}")
    warns = warnings_for(s) if len(s) else []
    if warns:
        lines.append(f"{len(warns)} warning(s):")
        lines += [f"  {w}" for w in warns]
    return "\n".join(lines)
