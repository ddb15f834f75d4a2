"""Where and with what a run was measured: its device and GPU labels, every process's
fingerprint, the tuning an autotuned candidate used, and which run a chapter leads with.
Pure: it reads loaded runs (``record.Run``) and their tables, never files.
"""

from __future__ import annotations

import json

from pathlib import Path

import pandas as pd

from .. import _validate
from .sample_groups import with_config_fields

__all__ = ["run_label", "machine_label", "machine_model", "gpu_name", "model_label", "fingerprint_table", "choose_lead",
           "tuning_table", "TUNING_BOOKKEEPING", "tuning_by_run"]


def run_label(run) -> str:
    """Device and software of a run for titles: 'NVIDIA H100 80GB HBM3, torch 2.11.0+cu130'.

    CPU runs say so: their times are host wall-clock, never GPU time.
    """
    fp = _first_fingerprint(run)
    torch_version = fp.get("torch_version", "?")
    if fp.get("device_kind") == "cpu":
        return f"CPU ({fp.get('cpu_name') or 'unknown'}, wall-clock), torch {torch_version}"
    return f"{fp.get('gpu_name') or run.device}, torch {torch_version}"


def machine_label(run) -> str:
    """'H200-c': the GPU's label in the data's inventory (``analyse.inventory``: model and
    a letter per GPU of that model), so prose names a GPU as the inventory table does and
    never by UUID. A run outside a folder of recorded runs, or whose GPU the inventory
    does not know, falls back to the model and the first block of its UUID."""
    return _inventory_label(run) or " ".join(p for p in (_model_name(run), _uuid8(run)) if p)


def machine_model(machine: str) -> str:
    """The GPU model of a machine label: 'H100' for 'H100-a' (inventory label) and for
    'H100 7b2bbc03' (model and UUID block)."""
    if not isinstance(machine, str) or not machine.strip():
        raise ValueError(f"`machine` must be a machine label; got {machine!r}.")
    return machine.split()[0].split("-")[0]


def gpu_name(uuid, runs_dir) -> str:
    """A GPU's name for prose: its inventory label ('H200-c') among the runs of
    ``runs_dir``, or the first block of its UUID where the inventory does not know it."""
    from attn_analysis.analyse import inventory
    try:
        return inventory.gpu_label(uuid, runs_dir=runs_dir)
    except ValueError:
        return str(uuid or "").removeprefix("GPU-")[:8]


def _inventory_label(run):
    """The run's GPU label from the inventory of the folder the run lies in, or None."""
    uuid = str(_first_fingerprint(run).get("gpu_uuid") or "")
    path = getattr(run, "path", None)
    if not uuid or path is None:
        return None
    from attn_analysis.analyse import inventory
    try:
        return inventory.gpu_label(uuid, runs_dir=Path(path).parent)
    except ValueError:
        return None


def model_label(runs) -> str:
    """'H200 (GPUs H200-a, H200-b)': the model of runs pooled over GPUs of one model,
    with each GPU's label (:func:`machine_label`), in the order first seen."""
    runs = list(runs)
    models = {_model_name(r) for r in runs}
    if len(models) != 1:
        raise ValueError(f"`runs` must come from one GPU model; got {sorted(models)}.")
    uuids = list(dict.fromkeys(_inventory_label(r) or _uuid8(r) for r in runs if _uuid8(r)))
    word = "GPU" if len(uuids) == 1 else "GPUs"
    return f"{models.pop()} ({word} {', '.join(uuids)})" if uuids else models.pop()


def _model_name(run) -> str:
    return str(run.device).replace("NVIDIA ", "").replace(" 80GB HBM3", "")


def _uuid8(run) -> str:
    return str(_first_fingerprint(run).get("gpu_uuid") or "").removeprefix("GPU-")[:8]


def _first_fingerprint(run) -> dict:
    """The fingerprint of the run's first trial process ({} where none is recorded)."""
    trials = (run.fingerprint or {}).get("trials") or {}
    return next(iter(trials.values()), {})


def fingerprint_table(runs) -> pd.DataFrame:
    """One row per run and trial: device, software versions, lock state, fingerprint hash."""
    rows = []
    for run in runs:
        plan = (run.info or {}).get("plan", {})
        for trial, fp in sorted(((run.fingerprint or {}).get("trials") or {}).items(),
                                key=lambda kv: int(kv[0])):
            lock = fp.get("lock_state") or {}
            rows.append({
                "run": run.run_id, "trial": int(trial), "device_kind": fp.get("device_kind"),
                "device": fp.get("gpu_name") or fp.get("cpu_name"),
                "torch": fp.get("torch_version"), "cuda": fp.get("cuda_version"),
                "cudnn": fp.get("cudnn_version"), "triton": fp.get("triton_version"),
                "driver": fp.get("driver_version"), "python": fp.get("python_version"),
                "tf32_matmul": lock.get("cuda_matmul_allow_tf32"),
                "fp32_precision": lock.get("float32_matmul_precision"),
                "deterministic": lock.get("deterministic_algorithms"),
                "plan_deterministic": plan.get("deterministic"),
                "locked": fp.get("locked"), "hash": fp.get("fingerprint_hash")})
    return pd.DataFrame(rows, columns=[
        "run", "trial", "device_kind", "device", "torch", "cuda", "cudnn", "triton", "driver",
        "python", "tf32_matmul", "fp32_precision", "deterministic", "plan_deterministic",
        "locked", "hash"])


def choose_lead(runs: pd.DataFrame, requested: str = "") -> str:
    """The run a notebook leads with: ``requested`` if given, else the GPU run with the
    most timing units (ties: first by name), else the largest CPU run.

    ``runs`` has columns ``run``, ``device_kind`` and ``n_units``.
    """
    df = _validate.frame("runs", runs, ("run", "device_kind", "n_units"))
    if df.empty:
        raise ValueError("`runs` is empty: no recorded run was found (run a sweep, or set "
                         "measure=True).")
    if requested:
        if requested not in set(df["run"]):
            raise ValueError(f"`run` must be one of {sorted(df['run'])}; got {requested!r}.")
        return requested
    ranked = df.assign(gpu=df["device_kind"] == "cuda").sort_values(
        ["gpu", "n_units", "run"], ascending=[False, False, True])
    return str(ranked["run"].iloc[0])


def tuning_table(units: pd.DataFrame, candidate: str = "triton") -> pd.DataFrame:
    """Per configuration: the tuning a candidate recorded in its timing units' ``info``
    (the first trial that has one), one column per tuning key."""
    df = _validate.frame("units", units, ("config", "candidate", "trial", "info"))
    df = df[df["candidate"] == candidate].sort_values("trial")
    rows = {}
    for config, info in zip(df["config"], df["info"]):
        tuning = (json.loads(info or "{}") or {}).get("tuning")
        if tuning and config not in rows:
            rows[config] = {"config": config, **tuning}
    out = pd.DataFrame(list(rows.values()))
    if out.empty:
        return pd.DataFrame(columns=["config"])
    return with_config_fields(out)



# Bookkeeping a tuner records beside its configuration: not part of the kernel it picked.
TUNING_BOOKKEEPING = ("tuned_ms", "n_tried", "n_failed", "reused", "fast_launch")


def tuning_by_run(units_by_run: dict, candidate: str = "triton") -> pd.DataFrame:
    """Which tuning each process of each run used, per configuration.

    ``units_by_run`` maps a run id to its ``units`` table. An autotuned candidate records
    its pick in each timing unit's ``info["tuning"]``; the sweep tunes in the first
    process that builds the candidate and hands the pick to every later process
    (``reused: true``), so the tuning is fixed within a run. One row per (run,
    configuration): ``n_processes``, ``n_reused`` (processes that took the pick over),
    ``same_everywhere`` (every process ran the same configuration keys), ``tuning`` (the
    keys, bookkeeping left out: ``TUNING_BOOKKEEPING``) and, as columns, ``BLOCK_M``,
    ``BLOCK_N``, ``num_warps`` and ``num_stages``.
    """
    if not isinstance(units_by_run, dict):
        raise ValueError(f"`units_by_run` must be a dict of run id -> units; "
                         f"got {type(units_by_run).__name__}.")
    rows = []
    for run_id, units in units_by_run.items():
        df = _validate.frame("units", units, ("config", "candidate", "trial", "info"))
        df = df[df["candidate"] == candidate]
        for config, g in df.groupby("config", sort=True):
            picks = {}
            for trial, info in zip(g["trial"], g["info"]):
                tuning = (json.loads(info or "{}") or {}).get("tuning")
                if tuning:
                    picks.setdefault(int(trial), tuning)
            if not picks:
                continue
            keys = {t: {k: v for k, v in p.items() if k not in TUNING_BOOKKEEPING}
                    for t, p in picks.items()}
            first = keys[min(keys)]
            rows.append({"run": run_id, "config": config, "n_processes": len(picks),
                         "n_reused": sum(bool(p.get("reused")) for p in picks.values()),
                         "same_everywhere": all(k == first for k in keys.values()),
                         "tuning": ", ".join(f"{k}={v}" for k, v in sorted(first.items())),
                         **{k: first.get(k) for k in ("BLOCK_M", "BLOCK_N", "num_warps",
                                                      "num_stages")}})
    cols = ["run", "config", "n_processes", "n_reused", "same_everywhere", "tuning",
            "BLOCK_M", "BLOCK_N", "num_warps", "num_stages"]
    out = pd.DataFrame(rows, columns=cols)
    return with_config_fields(out) if len(out) else out
