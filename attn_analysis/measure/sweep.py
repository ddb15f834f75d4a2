"""The resumable sweep runner: skip finished work, one process per trial, record failures.

What it measures is a :class:`.plan.Plan` (importable from here too); each trial process
is :mod:`.trial`'s, started and watched by :mod:`.trial_pool`; this module checks, locks,
resumes and finalizes. The notebooks' plans are :mod:`.notebook_plans`'.

Each trial runs in a fresh process (so process-to-process variance is measured, not
assumed away), forked from a server that imported the measuring code once or spawned
(``Plan.start_method``). Inside it every (configuration, candidate) is built once, checked
against float64, then timed in each mode; each finished unit is written atomically to the run's
journal at once. Rerunning the same sweep on the same folder measures only what is
missing. An unsupported candidate, an out-of-memory error, a failed correctness check or a
crashed worker is recorded with its reason, and the sweep goes on.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from .. import __version__
from .. import _validate, record
from ..record.code_commit import code_commit
from . import run_lock

from .plan import (DEFAULT_PLACEMENTS, DEFAULT_TIMING, DEFAULT_TRIALS,
                   SETTINGS_THAT_MUST_MATCH, START_METHODS, Plan, SweepError,
                   _now, plan_units, with_recorded_defaults)
# the trial processes and the notebooks' plans, importable from here as before the split
from .trial_pool import (FORKSERVER_ENV, FORKSERVER_PRELOAD, NVML_CHECK, start_trial_server,
                         stop_trial_server, trial_context)
from .notebook_plans import CPU_CANDIDATES, CPU_SHAPES, campaign_plan, measurement_plan
from . import trial_pool

__all__ = ["Plan", "SweepError", "DEFAULT_TRIALS", "DEFAULT_PLACEMENTS", "DEFAULT_TIMING",
           "START_METHODS", "FORKSERVER_PRELOAD", "FORKSERVER_ENV", "NVML_CHECK",
           "trial_context", "plan_units", "ERRORED", "check_fits", "preflight",
           "finished_summary", "run", "discard_if_empty", "start_trial_server", "stop_trial_server",
           "CPU_SHAPES", "CPU_CANDIDATES", "measurement_plan", "campaign_plan"]

# ---------------------------------------------------------------------------- parent

# Statuses of a timing unit that mean the instrument, not the candidate, failed: the sweep
# finishes the rest and finalizes, and the command line then exits non-zero.
ERRORED = ("error", "crashed")


def check_fits(configs, memory_bytes: int | None, device: str, name: str = "configs") -> None:
    """Refuse a configuration whose Q, K, V and output alone (``4 * Config.tensor_bytes``)
    exceed ``memory_bytes``, the device's memory (None: unknown, not checked).

    A lower bound, so it never refuses a shape that could run: the float64 check and the
    candidate's own workspace need more, and a shape that passes here may still run out
    of memory, which the sweep records as ``oom`` in each unit it concerns.
    """
    if memory_bytes is None:
        return
    for config in configs:
        need = 4 * config.tensor_bytes
        if need > memory_bytes:
            raise ValueError(f"`{name}` must fit in the {device}'s memory: {config.key} needs "
                             f"{need / 2**30:,.1f} GiB for Q, K, V and the output alone, and "
                             f"this {device} has {memory_bytes / 2**30:,.1f} GiB.")


def preflight(out_dir, plan: Plan, name: str = "out_dir") -> dict | None:
    """Every check of a sweep that writes nothing, before anything is written.

    The folder may hold a run (``run_lock.check_run_folder``; ValueError naming ``name``),
    this machine has the device, every configuration's inputs fit in its memory
    (:func:`check_fits`), and ``out_dir`` is not a finished run this plan would change
    (:func:`finished_summary`). Returns None when the sweep may go on, or the summary of
    an already finished run that this plan calls for no more than.
    """
    from . import device_memory
    from .candidates import _device_iv
    run_lock.check_run_folder(out_dir, name)
    _device_iv(plan.device)
    check_fits(plan.configs, device_memory.read(plan.device), plan.device)
    return finished_summary(out_dir, plan, name)


def finished_summary(out_dir, plan: Plan, name: str = "out_dir") -> dict | None:
    """None unless ``out_dir`` is a finished (finalized) run; then its summary, with
    ``finished`` True, if this plan calls for nothing it lacks.

    A finished run is never written again (its manifest, finished time and content hash
    stay as they are): a plan with other settings (``SETTINGS_THAT_MUST_MATCH``) or units
    the run lacks, or a run whose journal no longer verifies, raises ValueError naming
    ``name``.
    """
    out_dir = Path(out_dir)
    if not (out_dir / record.MANIFEST).is_file():
        return None
    where = f"`{name}` {str(out_dir)!r} is a finished run ({record.MANIFEST}), never changed"
    diff = _settings_diff(record.read_plan(out_dir) or {}, plan)
    if diff:
        raise ValueError(f"{where}; it was recorded with other settings ({', '.join(diff)}): "
                         f"use a new folder.")
    expected = plan_units(plan)
    done, bad = record.finished_units(out_dir)
    if bad:
        raise ValueError(f"{where}; its journal does not verify ({bad[0]}): `python -m "
                         f"attn_analysis verify {out_dir}` names every file.")
    missing = sorted({n for names in expected.values() for n in names} - done)
    if missing:
        raise ValueError(f"{where}; this plan calls for {len(missing)} unit(s) it lacks, "
                         f"first {missing[0]}: record them into a new folder.")
    outcome = _timing_outcome(out_dir, expected)
    return dict(_summary(out_dir, expected, outcome, wall_s=0.0), finished=True,
                finished_utc=record.read_info(out_dir).get("finished_utc", "?"))


def _summary(out_dir: Path, expected: dict, outcome: dict, wall_s: float) -> dict:
    """What ``run`` returns: unit counts, timed and not-timed timing units, errored ones."""
    return {"units": sum(len(v) for v in expected.values()), "wall_s": wall_s,
            "out": str(out_dir), "timing_units": sum(outcome["statuses"].values()),
            "timed": outcome["ok"], "finished": False,
            "not_timed": {k: v for k, v in outcome["statuses"].items() if k != "ok"},
            "errored": sum(outcome["statuses"].get(k, 0) for k in ERRORED),
            "first_error": outcome["first_error"]}


def run(out_dir, plan: Plan, *, progress: bool = True, max_restarts: int = 3,
        prebuild: bool | None = None, command_started: float | None = None,
        gpus=None, one_at_a_time: bool = False) -> dict:
    """Run (or resume) a sweep into ``out_dir`` and finalize it; return a summary dict.

    Before writing anything it runs :func:`preflight` (the folder, the device, memory,
    a finished run); a finished run that this plan calls for no more than is left as it
    is and its summary returned, with ``finished`` True. While it runs it holds the
    folder's lock (a second sweep on the folder is refused), and its workers die with it.
    Before the first trial process it compiles the compiled candidates of the
    configurations still to measure in parallel (:mod:`.prebuild`; ``prebuild`` None: on
    a GPU only, False: never) and records what that did in ``run.json``
    (``prebuild_last_invocation``). ``command_started`` (a ``time.monotonic()`` reading
    the command line took when it began) adds to ``run.json`` the seconds from then to the
    start of the sweep's own clock (``command_to_sweep_s_last_invocation``): the command
    line's start-up, which ``sweep_wall_s_last_invocation`` leaves out.
    A run in which no timing unit recorded a sample is not finalized (SweepError). A
    sweep that fails or is interrupted before any unit is recorded leaves no folder
    behind (:func:`discard_if_empty`; a folder that was empty when given is removed too):
    there is nothing to resume. Units that errored or crashed are recorded and the run
    finalized; the summary counts them (``errored``, ``first_error``), and the command
    line then exits 1.

    ``gpus``: the ``CUDA_VISIBLE_DEVICES`` pins (:mod:`.gpus`) the trial processes are
    spread over, one process per GPU at a time, each pinned to its GPU (None or empty: one
    process at a time, not pinned). ``one_at_a_time`` runs one process at a time even
    so, trial t on ``gpus[t % len(gpus)]``: the control that shows whether running
    neighbours move the results. Each trial unit records its pin and how many processes
    ran at once; ``run.json`` records both for the last invocation.
    """
    from . import prebuild as _prebuild
    gpus = _gpus_iv(gpus)
    _validate.flag("one_at_a_time", one_at_a_time)
    code = code_commit()  # before any work: a malformed ATTN_CODE_COMMIT is refused here
    prebuild = _prebuild.wanted(plan, prebuild)
    finished = preflight(out_dir, plan)
    if finished is not None:
        return finished
    created = not Path(out_dir).exists() or not any(Path(out_dir).iterdir())
    out_dir = run_lock.make_run_folder(out_dir)
    with run_lock.hold(out_dir):
        try:
            return _run_locked(out_dir, plan, progress=progress, max_restarts=max_restarts,
                               prebuild=prebuild, command_started=command_started, gpus=gpus,
                               one_at_a_time=one_at_a_time, code=code)
        except BaseException:
            discard_if_empty(out_dir, created)
            raise


def _gpus_iv(gpus) -> tuple:
    """``gpus`` as a tuple of non-empty pin strings (None: none)."""
    if gpus is None:
        return ()
    if isinstance(gpus, str) or not all(isinstance(g, str) and g.strip() and "," not in g
                                        for g in gpus):
        raise ValueError(f"`gpus` must be a sequence of CUDA_VISIBLE_DEVICES entries, one "
                         f"GPU each (measure.gpus.select_gpus); got {gpus!r}.")
    _validate.distinct("gpus", gpus, "a GPU")
    return tuple(gpus)


def _run_locked(out_dir: Path, plan: Plan, *, progress: bool, max_restarts: int,
                prebuild: bool = False, command_started: float | None = None,
                gpus: tuple = (), one_at_a_time: bool = False, code: dict | None = None
                ) -> dict:
    """The body of ``run``, inside the folder's lock; ``code``: the measuring code's commit
    (:func:`record.code_commit.code_commit`), recorded in run.json."""
    finished = finished_summary(out_dir, plan)  # finalized while we waited for the lock
    if finished is not None:
        return finished
    record.clean_temporaries(out_dir)
    _check_resume(out_dir, plan)
    started = time.monotonic()
    expected = plan_units(plan)
    total = sum(len(v) for v in expected.values())
    done, bad = record.finished_units(out_dir)
    if bad:
        print(f"warning: {len(bad)} journal file(s) do not verify and will be re-measured: "
              + "; ".join(bad[:3]))
    from tqdm import tqdm
    bar = tqdm(total=total, initial=len(done & set(sum(expected.values(), []))),
               desc="sweep", unit="unit", disable=not progress)
    ctx = trial_context(plan.start_method)
    prebuilt = None
    try:
        if prebuild:
            prebuilt = _prebuild_missing(ctx, plan, expected, done, bar)
        trial_pool.run_trials(ctx, out_dir, plan, expected, done, bar, gpus=gpus,
                              one_at_a_time=one_at_a_time, max_restarts=max_restarts)
    finally:
        bar.close()
    outcome = _timing_outcome(out_dir, expected)
    if not outcome["ok"]:
        raise SweepError(f"no timing unit recorded a sample ({_counts_text(outcome)}; first "
                         f"reason: {outcome['first_reason']}); {out_dir} is not finalized.")
    info = {"plan": plan.to_json(), "attn_analysis_version": __version__, **(code or {}),
            "finished_utc": _now(), "sweep_wall_s_last_invocation": time.monotonic() - started}
    if prebuilt is not None:
        info["prebuild_last_invocation"] = prebuilt
    if command_started is not None:
        info["command_to_sweep_s_last_invocation"] = started - command_started
    info["gpus_last_invocation"] = list(gpus)
    info["concurrent_processes_last_invocation"] = trial_pool.processes_at_once(gpus,
                                                                                 one_at_a_time)
    record.finalize(out_dir, info)
    return _summary(out_dir, expected, outcome, wall_s=time.monotonic() - started)


def _prebuild_missing(ctx, plan: Plan, expected: dict, done: set, bar) -> dict | None:
    """Prebuild (:mod:`.prebuild`) the configurations with a unit still to measure; None
    when there is none or no candidate of the plan compiles."""
    from . import prebuild
    configs = prebuild.pending_configs(
        plan, [n for names in expected.values() for n in names if n not in done])
    if not prebuild.jobs(plan, configs):
        return None
    bar.set_postfix_str("prebuild", refresh=True)
    summary = prebuild.run(ctx, plan, configs,
                           progress=lambda text: bar.set_postfix_str(text, refresh=True))
    counts = {}
    for row in summary["jobs"]:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    bar.write(f"prebuild: {len(summary['jobs'])} compiles in {summary['workers']} "
              f"processes, {summary['wall_s']:.1f} s ("
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ")")
    return summary


def _timing_outcome(out_dir: Path, expected: dict) -> dict:
    """Status counts of the plan's timing units, how many are ``ok``, and the reasons of
    the first failure and of the first errored unit (``ERRORED``)."""
    statuses, first, first_error = {}, "", ""
    for name in sorted(n for names in expected.values() for n in names):
        if record.parse_unit_name(name)["kind"] != "timing":
            continue
        unit = record.read_unit(record.unit_path(out_dir, name))
        status = unit.get("status", "?")
        statuses[status] = statuses.get(status, 0) + 1
        text = f"{unit.get('candidate')} at {unit.get('config')}: {status}, {unit.get('reason')}"
        if status != "ok" and not first:
            first = text
        if status in ERRORED and not first_error:
            first_error = text
    return {"statuses": statuses, "ok": statuses.get("ok", 0), "first_reason": first,
            "first_error": first_error}


def _counts_text(outcome: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(outcome["statuses"].items()))



def _settings_diff(old: dict, plan: Plan) -> list[str]:
    """The ``SETTINGS_THAT_MUST_MATCH`` in which a recorded plan (JSON) differs from ``plan``."""
    old, new = with_recorded_defaults(old), plan.to_json()
    return [k for k in SETTINGS_THAT_MUST_MATCH if old.get(k) != new.get(k)]


def _check_resume(out_dir: Path, plan: Plan) -> None:
    """Refuse to resume a folder recorded with settings that change what a unit means."""
    old = record.read_plan(out_dir)
    if old is not None:
        new, old = plan.to_json(), with_recorded_defaults(old)
        diff = _settings_diff(old, plan)
        if diff:
            raise SweepError(f"{out_dir} was recorded with other settings ({', '.join(diff)}): "
                             f"recorded {[old.get(k) for k in diff]}, asked "
                             f"{[new.get(k) for k in diff]}; use a new --out folder.")
    record.write_plan(out_dir, plan.to_json())


def discard_if_empty(out_dir: Path, created: bool) -> bool:
    """After a sweep failed or was interrupted: where no unit was recorded (an empty
    journal), remove what the sweep wrote (``plan.json``, its markers and temporaries),
    and the folder itself where it was new or empty when the sweep began (``created``);
    return whether it did. A folder
    that holds any unit is left as it is, to be resumed by the same command."""
    out_dir = Path(out_dir)
    if any((out_dir / record.JOURNAL).glob("*")):
        return False
    for name in (record.PLAN, record.FATAL):
        (out_dir / name).unlink(missing_ok=True)
    for path in out_dir.glob(f"{record.CURRENT_PREFIX}*"):
        path.unlink()
    record.clean_temporaries(out_dir)
    if (out_dir / record.JOURNAL).is_dir():
        (out_dir / record.JOURNAL).rmdir()
    if created and not any(out_dir.iterdir()):
        shutil.rmtree(out_dir)
    return True

