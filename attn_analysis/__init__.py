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
#   3: run identity. run.json must hold ``run_id`` (verify refuses a folder whose name is
#      not it) and ``content_hash`` (records.content_hash: SHA-256 over the journal files'
#      names and checksums, so a copy under another name or id has the same hash; verify
#      checks it, and pooling refuses two runs with the same id or hash). Units and tables
#      are as in 2. Runs of versions 1 and 2 are not rewritten: each one recorded so far
#      holds ``run_id`` and is checked the same way; one without it is legacy (its folder
#      name is not checked, records.is_legacy_identity), and a missing content hash is
#      computed from the manifest's journal entries when a run is loaded.
RECORD_FORMAT_VERSION = 3

__all__ = ["__version__", "RECORD_FORMAT_VERSION"]
