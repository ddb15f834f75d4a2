"""Analyse: pure functions of a loaded run's frames (the stage after record); no torch, no
GPU, no files but the package's own tables (``hardware.json``, ``data/reference/``).

The verdict rule and its intervals: :mod:`.stats` (a speedup judged against the
equivalence margin of :mod:`.margin`, ``DEFAULT_MARGIN``; ``Verdict``), :mod:`.intervals` (the t-interval
over processes), :mod:`.bootstrap`, :mod:`.simulation` (which interval, by simulation),
:mod:`.reports_statistics` (the original reports' statistics). Comparisons:
:mod:`.comparisons` (call, kernel and attention speedups: the one speedup table),
:mod:`.latency_tables`, :mod:`.kernel_evidence`, :mod:`.timing_fidelity`,
:mod:`.replay_cost`, :mod:`.findings` (sentences computed from verdict tables). The
design: :mod:`.variance`, :mod:`.machine_level` (the spread between GPUs of one model), :mod:`.design`, :mod:`.protocols`, :mod:`.calibration`,
:mod:`.gpu_time`. The vocabulary: :mod:`.catalog` (who each candidate is), :mod:`.workload`
(FLOPs, bytes, roofline), :mod:`.reference` (the reports' transcribed figures),
:mod:`.provenance` (where a run was measured), :mod:`.inventory` (which GPU ran which
run: labels and counts of ``data/runs``), :mod:`.software` (each run's software, the
commands' durations), :mod:`.sample_groups`.
Import the modules themselves; ``tests/test_layers.py`` keeps this stage torch-free.
"""

__all__ = ["bootstrap", "calibration", "catalog", "comparisons", "design", "findings",
           "gpu_time", "intervals", "inventory", "kernel_evidence", "latency_tables", "machine_level", "margin",
           "protocols",
           "provenance", "reference", "replay_cost", "reports_statistics", "sample_groups",
           "simulation", "software", "stats", "timing_fidelity", "variance", "workload"]
