"""The verbs that read or join recorded runs as they are: ``verify``, ``show``, ``merge``."""

from __future__ import annotations

__all__ = ["cmd_verify", "cmd_show", "cmd_merge"]


def cmd_merge(args) -> int:
    from .. import record
    out = record.merge(args.out, args.shards, across_versions=args.across_versions)
    print(f"merged {len(args.shards)} shard runs into {out}; it verifies")
    return 0


def cmd_verify(args) -> int:
    from ..record import checks
    from .. import record
    status = 0
    for run in args.runs:
        problems = checks.verify(run) if checks.is_check_path(run) else record.verify(run)
        if problems:
            status = 1
            print(f"{run}: FAILED")
            for p in problems:
                print(f"  {p}")
        elif checks.is_check_path(run) or not record.is_legacy_identity(run):
            print(f"{run}: ok")
        else:
            print(f"{run}: ok (legacy run: run.json records no run id, so the folder's "
                  f"name is not checked)")
    return status


def cmd_show(args) -> int:
    from .. import record
    from ..present import show
    run = record.load(args.run)
    print(show.summary(run))
    return 0
