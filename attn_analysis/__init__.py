"""attn_analysis: measure and analyse scaled-dot-product attention kernels honestly.

The package follows one direction of data, and its subpackages are its stages:
:mod:`.record` (the run folder: journal, consolidation, verification, loading),
:mod:`.analyse` (pure functions of a loaded run: the verdict rule, comparisons, variance,
calibration, workload), :mod:`.measure` (the GPU side: the lock, the timers, the
candidates and the peer and control plugins, the sweep), :mod:`.present` (figures, tables
and the book's build support), :mod:`.chapters` (one module per chapter of the book) and
:mod:`.cli` (the entry points: the command line's verbs and ``notebook_support``, the
notebooks' prelude). Beneath them all sit ``_validate`` and ``configs``; ``__main__`` runs
the command line. ``tests/test_layers.py`` keeps every import pointing down that order
and the top level to these modules.
"""

__version__ = "0.5.0"

__all__ = ["__version__"]
