"""attn_analysis: measure and analyse scaled-dot-product attention kernels honestly.

The package follows one direction of data: measure -> record -> verify -> load ->
analyse. Modules hold one concept each: ``configs`` (shapes and the experiment
matrix), ``env`` (lock and fingerprint), ``timing`` (GPU and CPU timers), ``stats``
(intervals and tests), ``workload`` (FLOPs, bytes, roofline), ``candidates``
(implementations and the correctness gate), ``sweep`` (the resumable runner) and
``records`` (the recorded-data format).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
