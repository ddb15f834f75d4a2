"""attn_analysis: measure and analyse scaled-dot-product attention kernels honestly.

The package follows one direction of data: measure -> record -> verify -> load ->
analyse. Modules hold one concept each: ``configs`` (shapes and the experiment
matrix), ``env`` (lock and fingerprint), ``timing`` (GPU and CPU timers), ``stats``
(intervals and tests), ``workload`` (FLOPs, bytes, roofline), ``candidates``
(implementations and the correctness gate), ``sweep`` (the resumable runner) and
``records`` (the recorded-data format).
"""

__version__ = "0.1.0"

# Version of the recorded-data format written by ``records``. Every change is listed
# here; the loader refuses any version it does not know.
#   1: first format (units journal, consolidated Parquet tables, SHA-256 manifest).
#   2: protocol v2. Timing units hold ``placements`` (one record per memory placement:
#      its samples, pad, kernel time, clocks and temperature); samples.parquet gains a
#      ``placement`` column and placements.parquet one row per placement. Version-1 runs
#      still verify as written and load with placement 0 throughout.
RECORD_FORMAT_VERSION = 2

__all__ = ["__version__", "RECORD_FORMAT_VERSION"]
