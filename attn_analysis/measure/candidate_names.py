"""The names of the built-in candidates, torch-free: what the command line's ``--help``
lists without importing torch. :mod:`.candidates` registers exactly these, in this order
(tests/test_newcomer_mistakes.py holds the two together); plugins register more.
"""

from __future__ import annotations

__all__ = ["BUILT_IN", "EXAMPLE_PLUGINS"]

BUILT_IN = ("sdpa", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_math", "eager",
            "eager_compiled", "flex", "triton", "gluon")
# Plugin modules of the package that register more (the peers, the calibration controls).
EXAMPLE_PLUGINS = ("attn_analysis.measure.peers", "attn_analysis.measure.controls")
