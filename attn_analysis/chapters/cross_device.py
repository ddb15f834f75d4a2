"""The cross-device chapter (``notebooks/05_cross_device.py``): which runs it compares.

A run that measured only the target's sizes (the fixed-shape and calibration runs, also in
bf16 or causal) adds nothing across configurations (:func:`target_sizes`); of the others,
the table shows one run per device, at most four, the lead run first on its device and
elsewhere the run covering the most configurations (:func:`shown_runs`), so a newly
measured device always gets a column. Torch-free.
"""

from __future__ import annotations

from ..configs import TARGET, Config

__all__ = ["MAX_RUN_COLUMNS", "target_sizes", "shown_runs"]

MAX_RUN_COLUMNS = 4  # run columns that fit the page


def target_sizes(key: str) -> bool:
    """Whether a configuration has the target's sizes (any dtype, causal or not)."""
    c = Config.from_key(key)
    return (c.batch, c.heads, c.seq_len, c.head_dim) == (TARGET.batch, TARGET.heads,
                                                         TARGET.seq_len, TARGET.head_dim)


def shown_runs(n_configs: dict, device_of: dict, lead: str,
               max_runs: int = MAX_RUN_COLUMNS) -> tuple[list, list]:
    """The runs the table shows, one per device (the lead run on its device, elsewhere the
    run with the most configurations, ties by name), at most ``max_runs``; and the runs
    left out, by name. ``n_configs``: run -> configurations; ``device_of``: run -> device."""
    order = sorted(n_configs, key=lambda r: (r != lead, -n_configs[r], r))
    shown = []
    for r in order:
        if device_of[r] not in {device_of[x] for x in shown}:
            shown.append(r)
    shown = shown[:max_runs]
    return shown, [r for r in sorted(n_configs) if r not in shown]
