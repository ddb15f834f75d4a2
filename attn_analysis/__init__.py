"""attn_analysis: measure and analyse scaled-dot-product attention kernels honestly.

The package follows one direction of data, and its subpackages are its stages:
:mod:`.measure` (the GPU side: the lock, the timers, the candidates, the sweep),
:mod:`.record` (the run folder: journal, consolidation, verification, loading),
:mod:`.analyse` (pure functions of a loaded run: the verdict rule, comparisons, variance,
calibration, workload) and :mod:`.chapters` (one module per chapter of the book), with
``_validate`` and ``configs`` beneath them all and the figures and tables (``plots``,
``latency_plots``, ``audit_plots``, ``figure_style``, ``tables``) between analysis and
chapters. ``tests/test_layers.py`` keeps every import pointing down that order.
"""

__version__ = "0.3.0"

__all__ = ["__version__"]
