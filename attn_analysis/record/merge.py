"""Join the shard runs of one plan into the run the unsharded plan records.

A plan split with ``--shard K/N`` (:func:`.journal.shard_trials`) is recorded as N
finalized runs, on any machines. :func:`merge` checks each (``verify``), checks that they
are the N shards of one plan, recorded on machines with one fingerprint hash (unless the
plan allows mixed machines), copies their journal files byte for byte into a new folder
and finalizes it: its plan is the unsharded plan, so ``verify`` requires every unit of
every trial. ``run.json`` keeps each shard's own ``run.json`` (run id, content hash,
finish time, version, invocation records) under ``merged_from``; each trial unit keeps
its fingerprint, GPU and pin. The shard folders are left as they are.

Shards recorded by different package versions merge only on request
(``across_versions``): a campaign recorded over sessions may span a release whose changes
leave the measuring code as it was. The merged ``run.json`` then names every version
(``attn_analysis_version`` joins them with " + "; ``across_versions`` is true), and each
shard's own version and commit stay under ``merged_from``; the claim that the measuring
code did not change belongs in the run's README row, with the diff that shows it.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import tempfile
from pathlib import Path

from ..configs import plugin_modules
from . import consolidate, journal
from .journal import outside_git_iv
from .schema import JOURNAL, RecordError
from .verification import read_info, verify

__all__ = ["merge"]


def merge(out_dir, shard_dirs, across_versions: bool = False) -> Path:
    """Merge the finalized shard runs ``shard_dirs`` into the new run ``out_dir``; return it.

    ValueError, before anything is written, naming ``out_dir`` (exists already) or
    ``shard_dirs`` (a run that does not verify, is no shard, whose plan differs from the
    others' but for its shard, a shard missing or given twice, or machines whose
    fingerprint hashes differ where the plan does not allow mixed machines, or package
    versions differ and ``across_versions`` is false) or ``across_versions`` (not a bool).
    The new
    run is built beside ``out_dir`` and renamed into place, so a failure leaves nothing.
    """
    out_dir = outside_git_iv(out_dir, "out_dir")
    if not isinstance(across_versions, bool):
        raise ValueError(f"`across_versions` must be a bool; got {across_versions!r}.")
    if out_dir.exists():
        raise ValueError(f"`out_dir` {str(out_dir)!r} exists; merge writes a new run folder.")
    shard_dirs = [Path(d) for d in shard_dirs]
    if len(shard_dirs) < 1:
        raise ValueError("`shard_dirs` must name the shard runs to merge.")
    plans, infos = [], []
    for d in shard_dirs:
        problems = verify(d)
        if problems:
            raise ValueError(f"`shard_dirs`: {d} does not verify: {'; '.join(problems[:3])}")
        info = read_info(d)
        plan = info.get("plan") or {}
        if plan.get("shard") is None:
            raise ValueError(f"`shard_dirs`: {d} is not a shard (its plan records no "
                             f"`shard`); only shard runs of one plan merge.")
        plans.append(plan)
        infos.append(info)
    merged_plan = _merged_plan(plans, shard_dirs)
    _same_machine(shard_dirs, merged_plan)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".merge-", dir=out_dir.parent))
    try:
        target = work / out_dir.name  # finalize names the run by its folder
        (target / JOURNAL).mkdir(parents=True)
        for d in shard_dirs:
            for path in sorted((d / JOURNAL).glob("*.json")):
                shutil.copy2(path, target / JOURNAL / path.name)
        journal.write_plan(target, merged_plan)
        info = {"plan": merged_plan,
                **_version(infos, across_versions),
                "finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(
                    timespec="seconds"),
                "merged_from": [dict(i, shard=i["plan"]["shard"]) for i in
                                sorted(infos, key=lambda i: i["plan"]["shard"][0])]}
        commits = {i.get("code_commit") for i in infos}
        info["code_commit"] = commits.pop() if len(commits) == 1 else None  # shards' own: merged_from
        consolidate.finalize(target, info)
        problems = verify(target)
        if problems:
            raise RecordError(f"the merged run does not verify: {'; '.join(problems[:3])}")
        target.rename(out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out_dir


def _merged_plan(plans: list, dirs: list) -> dict:
    """The unsharded plan the shards share; ValueError naming ``shard_dirs`` otherwise.
    Plugins compare, and are merged, by their current module paths (a shard recorded
    before a plugin moved names its old path: ``configs.RENAMED_MODULES``)."""
    bare = [{k: (list(plugin_modules(v)) if k == "plugins" and isinstance(v, (list, tuple))
                 else v) for k, v in p.items() if k != "shard"} for p in plans]
    for d, p in zip(dirs[1:], bare[1:]):
        if p != bare[0]:
            keys = sorted(k for k in set(p) | set(bare[0]) if p.get(k) != bare[0].get(k))
            raise ValueError(f"`shard_dirs`: {d} records another plan than {dirs[0]} "
                             f"(differs in {keys}); shards of one plan differ in `shard` only.")
    n = {p["shard"][1] for p in plans}
    if len(n) != 1:
        raise ValueError(f"`shard_dirs` must be shards of one split; their N are {sorted(n)}.")
    n = n.pop()
    ks = sorted(p["shard"][0] for p in plans)
    if ks != list(range(1, n + 1)):
        twice = sorted({k for k in ks if ks.count(k) > 1})
        missing = sorted(set(range(1, n + 1)) - set(ks))
        raise ValueError(f"`shard_dirs` must hold each shard 1..{n} once; "
                         + (f"missing {missing}" if missing else "")
                         + ("; " if missing and twice else "")
                         + (f"given twice {twice}" if twice else "") + ".")
    return bare[0]


def _same_machine(dirs: list, plan: dict) -> None:
    """Every trial of every shard has one fingerprint hash, unless the plan allows mixed
    machines (the rule a single sweep applies to its own trials)."""
    if plan.get("allow_mixed"):
        return
    seen = {}
    for d in dirs:
        fp = json.loads((d / "fingerprint.json").read_text())
        for trial, f in (fp.get("trials") or {}).items():
            seen.setdefault(f.get("fingerprint_hash"), (d, trial))
    if len(seen) > 1:
        (h1, (d1, t1)), (h2, (d2, t2)) = list(seen.items())[:2]
        raise ValueError(f"`shard_dirs` were recorded on machines with different fingerprints "
                         f"({d1} trial {t1}: {h1}; {d2} trial {t2}: {h2}); a plan with "
                         f"allow_mixed merges them.")


def _version(infos: list, across_versions: bool) -> dict:
    """The merged run's ``attn_analysis_version``: the one every shard shares; with
    ``across_versions``, the sorted versions joined by " + " and ``across_versions: true``
    where they differ; ValueError naming ``shard_dirs`` where they differ otherwise."""
    key = "attn_analysis_version"
    values = sorted({str(i.get(key)) for i in infos})
    if len(values) == 1:
        return {key: infos[0].get(key)}
    if not across_versions:
        raise ValueError(f"`shard_dirs` were recorded by different versions of the package "
                         f"({key}: {values}); merge runs of one version, or pass "
                         f"`across_versions` (--across-versions) where the measuring code "
                         f"is the same.")
    return {key: " + ".join(values), "across_versions": True}
