"""A recorded run, loaded: its tables and JSON views, refused unless it verifies.

:func:`load` is how every reader (a notebook, the command line, a script) gets a run;
:func:`find_runs` lists the finalized runs under a folder and :func:`distinct_runs`
refuses to pool the same measurements twice.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from . import consolidate
from .schema import MANIFEST, RECORDED_START_METHOD, RecordError
from .verification import read_info, verify

__all__ = ["Run", "load", "distinct_runs", "find_runs"]


@dataclasses.dataclass(frozen=True)
class Run:
    """A verified recorded run as pandas tables plus its JSON views."""

    run_id: str
    path: Path
    samples: pd.DataFrame
    units: pd.DataFrame
    correctness: pd.DataFrame
    kernels: pd.DataFrame
    ceilings: dict
    fingerprint: dict
    info: dict
    placements: pd.DataFrame = None
    # consolidate.content_hash(): recorded in run.json from format 3, computed for earlier runs
    content_hash: str = ""

    @property
    def protocol(self) -> int:
        """The measurement protocol of the run's timing units (1 before placements)."""
        return 2 if self.info.get("format_version", 1) >= 2 else 1

    @property
    def start_method(self) -> str:
        """How the run's trial processes started ("forkserver" or "spawn"; a plan that
        names none was spawned)."""
        return (self.info.get("plan") or {}).get("start_method", RECORDED_START_METHOD)

    @property
    def device(self) -> str:
        """The device name the run was measured on (or 'cpu')."""
        trials = self.fingerprint.get("trials") or {}
        first = next(iter(trials.values()), {})
        return first.get("gpu_name") or first.get("device_kind") or "unknown"


def load(run_dir) -> Run:
    """Load a recorded run; refuse (RecordError) one that does not verify, saying why."""
    run_dir = Path(run_dir)
    problems = verify(run_dir)
    if problems:
        raise RecordError(f"run {run_dir.name} does not verify: " + "; ".join(problems[:10]))

    def read_json(name):
        return json.loads((run_dir / name).read_text())
    samples = pd.read_parquet(run_dir / "samples.parquet")
    if "placement" in samples:
        placements = pd.read_parquet(run_dir / "placements.parquet")
    else:  # format 1: one placement per unit, index 0
        samples.insert(consolidate.SAMPLE_COLUMNS.index("placement"), "placement", 0)
        samples["placement"] = samples["placement"].astype("int64")
        placements = consolidate.placements_from_samples(samples)
    info = read_info(run_dir)  # format_version checked there
    digest = info.get("content_hash") or consolidate.content_hash(read_json(MANIFEST)["files"])
    return Run(run_dir.name, run_dir, samples=samples, placements=placements,
               units=pd.read_parquet(run_dir / "units.parquet"),
               correctness=pd.read_parquet(run_dir / "correctness.parquet"),
               kernels=pd.read_parquet(run_dir / "kernels.parquet"),
               ceilings=read_json("ceilings.json"), fingerprint=read_json("fingerprint.json"),
               info=info, content_hash=digest)


def distinct_runs(runs, name: str = "runs") -> list:
    """``runs`` (loaded :class:`Run` objects) as a list, if no two are the same run.

    Pooling a run twice would count its processes twice and narrow every interval with no
    new data, so two runs with the same id, or the same content hash (the same
    measurements under another folder name or id), raise ValueError naming ``name``
    and both runs.
    """
    runs = list(runs)
    seen_ids, seen_content = {}, {}
    for run in runs:
        if not isinstance(run, Run):
            raise ValueError(f"`{name}` must hold loaded runs (record.Run); "
                             f"got {type(run).__name__}.")
        if run.run_id in seen_ids:
            raise ValueError(f"`{name}` must name each run once; {run.run_id!r} is given "
                             f"twice ({seen_ids[run.run_id].path} and {run.path}).")
        if run.content_hash in seen_content:
            other = seen_content[run.content_hash]
            raise ValueError(f"`{name}` must hold distinct runs; {other.run_id!r} and "
                             f"{run.run_id!r} hold the same measurements (content hash "
                             f"{run.content_hash[:12]}...): pooling a copy counts its "
                             f"processes twice.")
        seen_ids[run.run_id] = run
        seen_content[run.content_hash] = run
    return runs


def find_runs(root="data/runs") -> list[Path]:
    """Folders under ``root`` that hold a manifest (finalized runs), sorted by name."""
    root = Path(root)
    return sorted(p.parent for p in root.glob(f"*/{MANIFEST}"))
