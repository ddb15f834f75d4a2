"""The recorded inputs a chapter reads, checked as notebook parameters: finalized runs
under ``runs_dir`` (loaded and verified) and the sealed check files of ``data/checks/``.

Each ``*_iv`` takes a parameter's name, its value and the parameters checked so far, and
raises ``ValueError`` naming the parameter; :mod:`attn_analysis.cli.notebook_support` applies
them to a notebook's parameters cell, and the chapter modules use them for their own
inputs. Torch-free.
"""

from __future__ import annotations

from pathlib import Path

from .. import record
from ..record import checks

__all__ = ["recorded_run_iv", "recorded_runs_iv", "load_runs", "check_file_iv", "runs_iv",
           "protocol2_runs_iv", "repo_file_iv", "run_iv"]


def recorded_run_iv(name: str, value, params: dict) -> str:
    """Check a parameter naming a recorded run: '' or a finalized run under ``runs_dir``
    (a named run that is missing is an error, never replaced by another)."""
    if not isinstance(value, str):
        raise ValueError(f"`{name}` must be '' or a run folder name; got {value!r}.")
    if value and not (Path(params["runs_dir"]) / value / record.MANIFEST).is_file():
        recorded = [p.name for p in record.find_runs(params["runs_dir"])]
        raise ValueError(f"`{name}` must be '' or a finalized run under {params['runs_dir']} "
                         f"({recorded}); got {value!r}.")
    return value


def recorded_runs_iv(name: str, value, params: dict) -> list[str]:
    """Check '' or comma-separated recorded runs (each as :func:`recorded_run_iv`); return
    the run ids in the given order (empty for '')."""
    if not isinstance(value, str):
        raise ValueError(f"`{name}` must be '' or comma-separated run folder names; "
                         f"got {value!r}.")
    return [recorded_run_iv(name, v.strip(), params) for v in value.split(",") if v.strip()]


def load_runs(runs_dir) -> dict:
    """Every finalized run under ``runs_dir`` (``record.find_runs``), loaded and verified,
    keyed by run id, in name order."""
    return {p.name: record.load(p) for p in record.find_runs(runs_dir)}


def check_file_iv(kind: str, optional: bool = False):
    """A check of a parameter naming a sealed check file of ``kind`` (:mod:`.checks`),
    relative to the repository root: the check returns the file's payload (None for ''
    when ``optional``)."""
    def iv(name: str, value, params: dict):
        if optional and value == "":
            return None
        root = Path(params["root"])
        if not isinstance(value, str) or not value or not (root / value).is_file():
            either = "'' or " if optional else ""
            raise ValueError(f"`{name}` must be {either}an existing file relative to the "
                             f"repository root {root}, written by scripts/ as a {kind} "
                             f"check; got {value!r}.")
        try:
            return checks.read(root / value, kind)
        except checks.CheckFileError as exc:
            raise ValueError(f"`{name}` must be a {kind} check file that verifies; {exc}") \
                from None
    return iv


def runs_iv(name: str, value, params: dict, protocol: int = 1) -> dict:
    """Check comma-separated finalized runs under ``runs_dir``, each of at least
    ``protocol`` and no two the same run (``record.distinct_runs``: same id or same
    content); return them loaded and verified, keyed by run id, in the given order."""
    names = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else []
    if not names:
        raise ValueError(f"`{name}` must name one or more runs, comma-separated; got {value!r}.")
    runs = record.distinct_runs([record.load(Path(params["runs_dir"]) /
                                             recorded_run_iv(name, n, params))
                                 for n in names], name)
    loaded = dict(zip(names, runs))
    old = [n for n, r in loaded.items() if r.protocol < protocol]
    if old:
        raise ValueError(f"`{name}` must name protocol-v{protocol} runs (placements "
                         f"recorded); {old} are protocol {loaded[old[0]].protocol}.")
    return loaded


def protocol2_runs_iv(name: str, value, params: dict) -> dict:
    """:func:`runs_iv` for runs of protocol 2 (memory placements recorded)."""
    return runs_iv(name, value, params, protocol=2)


def repo_file_iv(name: str, value, params: dict) -> Path:
    """Check a parameter naming an existing file relative to the repository root (a
    recorded result such as ``data/simulations/interval_coverage.csv``); return its path."""
    root = Path(params["root"])
    if not isinstance(value, str) or not value or not (root / value).is_file():
        raise ValueError(f"`{name}` must be an existing file relative to the repository root "
                         f"{root}; got {value!r}.")
    return root / value


def run_iv(name: str, value, params: dict):
    """Check one finalized run under ``runs_dir``; return it loaded and verified."""
    if not isinstance(value, str) or not value or "," in value:
        raise ValueError(f"`{name}` must be a run folder name; got {value!r}.")
    return record.load(Path(params["runs_dir"]) / recorded_run_iv(name, value, params))
