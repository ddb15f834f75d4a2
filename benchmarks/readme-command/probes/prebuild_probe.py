"""Run a sweep's prebuild alone (``measure.prebuild``) for the plan of the README's GPU
command (the reports' matrix, the default candidates, graph mode) and print what it did.

Run right after that command on the same machine, it measures what the prebuild costs a
machine that has compiled everything before (every pair "cached": workers start, find
their markers and compile nothing), which a second run of the command pays; run first on
a fresh machine, it measures the prebuild alone. It times no kernel and writes no run.

Usage: python3 benchmarks/readme-command/probes/prebuild_probe.py [--device cuda|cpu] [--matrix NAME]
Prints one JSON line: wall_s, workers, the count of each status, and the seconds the
jobs took summed by candidate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def summarize(summary: dict) -> dict:
    """The probe's line from ``prebuild.run``'s summary."""
    statuses, seconds = {}, {}
    for row in summary["jobs"]:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        seconds[row["candidate"]] = round(seconds.get(row["candidate"], 0.0)
                                          + (row["s"] or 0.0), 3)
    return {"wall_s": summary["wall_s"], "workers": summary["workers"],
            "statuses": statuses, "job_s_by_candidate": seconds,
            "timing_choices_removed": summary["timing_choices_removed"]}


def main(argv=None) -> int:
    from attn_analysis import configs
    from attn_analysis.measure import prebuild, sweep
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=configs.DEVICES, default="cuda")
    parser.add_argument("--matrix", choices=sorted(configs.MATRICES), default="reports-v1")
    args = parser.parse_args(argv)
    sweep.start_trial_server("forkserver")
    from attn_analysis.measure.candidates import DEFAULT_CANDIDATES
    plan = sweep.Plan(configs=configs.matrix(args.matrix), candidates=tuple(DEFAULT_CANDIDATES),
                      modes=("graph",), device=args.device, matrix=args.matrix)
    started = time.monotonic()
    line = summarize(prebuild.run(sweep.trial_context(plan.start_method), plan))
    line["probe_wall_s"] = round(time.monotonic() - started, 3)
    print(json.dumps(line, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
