"""The resumable sweep runner: skip finished work, one process per trial, record failures.

What it measures is a :class:`.plan.Plan` (importable from here too); each trial process
is :mod:`.trial`'s.

Each trial runs in a fresh process (so process-to-process variance is measured, not
assumed away), forked from a server that imported the measuring code once or spawned
(``Plan.start_method``). Inside it every (configuration, candidate) is built once, checked
against float64, then timed in each mode; each finished unit is written atomically to the run's
journal at once. Rerunning the same sweep on the same folder measures only what is
missing. An unsupported candidate, an out-of-memory error, a failed correctness check or a
crashed worker is recorded with its reason, and the sweep goes on.
"""

from __future__ import annotations

import multiprocessing as mp
import numbers
import os
import queue as _queue
import time
from pathlib import Path

from .. import __version__
from .. import _validate, record
from . import run_lock
from ..configs import DEVICES, MATRICES, Config, parse_shapes

from .plan import (DEFAULT_PLACEMENTS, DEFAULT_TIMING, DEFAULT_TRIALS,
                   SETTINGS_THAT_MUST_MATCH, START_METHODS, Plan, SweepError,
                   _candidate_units, _now, plan_units, with_recorded_defaults)
from .trial import _FATAL, _worker_main, _write_failure

__all__ = ["Plan", "SweepError", "DEFAULT_TRIALS", "DEFAULT_PLACEMENTS", "DEFAULT_TIMING",
           "START_METHODS", "FORKSERVER_PRELOAD", "trial_context", "plan_units",
           "ERRORED", "check_fits", "preflight", "finished_summary", "run", "start_trial_server",
           "CPU_SHAPES",
           "CPU_CANDIDATES", "measurement_plan", "campaign_plan"]

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
    A run in which no timing unit recorded a sample is not finalized (SweepError). Units
    that errored or crashed are recorded and the run finalized; the summary counts them
    (``errored``, ``first_error``), and the command line then exits 1.

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
    prebuild = _prebuild.wanted(plan, prebuild)
    finished = preflight(out_dir, plan)
    if finished is not None:
        return finished
    out_dir = run_lock.make_run_folder(out_dir)
    with run_lock.hold(out_dir):
        return _run_locked(out_dir, plan, progress=progress, max_restarts=max_restarts,
                           prebuild=prebuild, command_started=command_started, gpus=gpus,
                           one_at_a_time=one_at_a_time)


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
                gpus: tuple = (), one_at_a_time: bool = False) -> dict:
    """The body of ``run``, inside the folder's lock."""
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
        _run_trials(ctx, out_dir, plan, expected, done, bar, gpus=gpus,
                    one_at_a_time=one_at_a_time, max_restarts=max_restarts)
    finally:
        bar.close()
    outcome = _timing_outcome(out_dir, expected)
    if not outcome["ok"]:
        raise SweepError(f"no timing unit recorded a sample ({_counts_text(outcome)}; first "
                         f"reason: {outcome['first_reason']}); {out_dir} is not finalized.")
    info = {"plan": plan.to_json(), "attn_analysis_version": __version__,
            "finished_utc": _now(), "sweep_wall_s_last_invocation": time.monotonic() - started}
    if prebuilt is not None:
        info["prebuild_last_invocation"] = prebuilt
    if command_started is not None:
        info["command_to_sweep_s_last_invocation"] = started - command_started
    info["gpus_last_invocation"] = list(gpus)
    info["concurrent_processes_last_invocation"] = _width(gpus, one_at_a_time)
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


# What the fork server imports once, before any trial: torch and the modules a trial
# process runs. None of them starts CUDA on import (a forked child could not start it
# again); plugins are left to each trial, since a plugin may touch the GPU when imported.
# torch._inductor.config is what torch.use_deterministic_algorithms (env.lock) imports on
# its first call, about 870 modules: 5-6 s of every spawned trial on the GPU machines,
# whose torch has no bytecode cache (benchmarks/startup-probe/startup_probe.py). Dynamo,
# FlexAttention and
# Triton are part of what each process's first torch.compile and our Triton kernel import
# on first use. Not torch._inductor.compile_fx: importing it asks the CUDA runtime for its
# devices, and a child forked after that cannot start CUDA (checked on an H200 by forking
# after each module's import; tests/test_start_method.py forks the same way).
# Last, forkserver_warm imports compile_fx under FORKSERVER_ENV's NVML device count, which
# leaves CUDA alone, and computes Inductor's and Triton's source hashes (see that module).
FORKSERVER_PRELOAD = ("torch", "torch._inductor.config", "numpy",
                      "torch._dynamo", "torch.nn.attention.flex_attention",
                      "attn_analysis.measure.trial", "attn_analysis.measure.candidates",
                      "attn_analysis.measure.compile_settings",
                      "attn_analysis.measure.triton_attention",
                      "attn_analysis.measure.timing", "attn_analysis.measure.profiler",
                      "attn_analysis.measure.machine", "attn_analysis.measure.env",
                      "attn_analysis.measure.forkserver_warm")
# The setting under which torch counts CUDA devices through NVML (no CUDA start-up).
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
# The fork server's environment beyond this process's: torch counts CUDA devices through
# NVML, so that importing compile_fx there starts nothing a forked child would lack. A
# value the user set is kept (forkserver_warm then leaves compile_fx to each process).
FORKSERVER_ENV = {NVML_CHECK: "1"}


def trial_context(start_method: str):
    """The multiprocessing context that starts trial processes (``Plan.start_method``).

    For the fork server it also puts ``FORKSERVER_ENV`` into this process's environment
    (where not set already), which the server inherits when it starts."""
    _validate.choice("start_method", start_method, START_METHODS)
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        for key, value in FORKSERVER_ENV.items():
            os.environ.setdefault(key, value)
        ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
    return ctx


def start_trial_server(start_method: str) -> None:
    """Start the fork server now (``start_method`` "forkserver"; nothing for "spawn"), so
    that its imports (torch and the measuring code: 10-12 s of the first trial's wall on
    a fresh H100, ``benchmarks/readme-command/``) run while this process imports torch and
    reads the device's memory, not after. It touches no GPU and writes no file (it sets
    ``FORKSERVER_ENV`` in this process's environment, :func:`trial_context`), and it
    ends with this process."""
    trial_context(start_method)
    if start_method == "forkserver":
        from multiprocessing import forkserver
        forkserver.ensure_running()


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


def _width(gpus: tuple, one_at_a_time: bool) -> int:
    """How many trial processes run at once: one per GPU, or one."""
    return 1 if one_at_a_time or not gpus else len(gpus)


def _run_trials(ctx, out_dir: Path, plan: Plan, expected: dict, done: set, bar, *,
                gpus: tuple, one_at_a_time: bool, max_restarts: int) -> None:
    """Run every trial with units still missing, up to one process per GPU at a time.

    Trials start in plan order, each on a free GPU (``one_at_a_time``: trial t waits for
    ``gpus[t % len(gpus)]`` and nothing else runs). A process that ends with units missing
    is run again; one that crashes is recorded (:func:`_record_crash`) and run again, up
    to ``max_restarts`` times; one that gives up (``_FATAL``) stops the sweep. On any
    exit but success every running process is stopped first.
    """
    width = _width(gpus, one_at_a_time)
    pending = list(expected)
    restarts = dict.fromkeys(expected, 0)
    active = {}  # pin (None: not pinned) -> (process, trial, its message queue)
    try:
        while pending or active:
            for trial in list(pending):
                if len(active) >= width:
                    break
                pin = _free_pin(gpus, active, trial, one_at_a_time)
                if pin is _BUSY:
                    continue
                pending.remove(trial)
                done |= record.finished_units(out_dir, expected[trial])[0]  # its units only
                if all(n in done for n in expected[trial]):
                    continue
                active[pin] = _start_worker(ctx, out_dir, plan, trial, pin, width)
            _drain(active, bar, timeout=0.2)
            for pin, (proc, trial, messages) in list(active.items()):
                if proc.is_alive():
                    continue
                proc.join()
                _drain({pin: (proc, trial, messages)}, bar, timeout=0)
                del active[pin]
                code = proc.exitcode
                if code == _FATAL:
                    raise SweepError(record.read_fatal(out_dir))
                if code != 0:
                    restarts[trial] += 1
                    _record_crash(out_dir, plan, trial, code)
                    if restarts[trial] > max_restarts:
                        raise SweepError(f"trial {trial}: worker crashed {restarts[trial]} "
                                         f"times; last exit code {code}")
                pending.insert(0, trial)  # finished units are skipped when it is taken up
    except BaseException:
        for proc, _, _ in active.values():
            proc.terminate()
        for proc, _, _ in active.values():
            proc.join(10)
        # a worker stopped inside an atomic write leaves its temporary file behind
        record.clean_temporaries(out_dir)
        raise


_BUSY = object()


def _free_pin(gpus: tuple, active: dict, trial: int, one_at_a_time: bool):
    """The pin trial ``trial`` may start on now, or ``_BUSY``."""
    if not gpus:
        return _BUSY if None in active else None
    if one_at_a_time:
        pin = gpus[trial % len(gpus)]
        return _BUSY if active else pin
    return next((g for g in gpus if g not in active), _BUSY)


def _start_worker(ctx, out_dir: Path, plan: Plan, trial: int, pin, width: int) -> tuple:
    """Start trial ``trial``'s process, pinned to ``pin`` (None: not pinned)."""
    messages = ctx.Queue()
    proc = ctx.Process(target=_worker_main, args=(str(out_dir), plan.to_json(), trial, messages,
                                                  os.getpid(), time.time(), pin, width),
                       name=f"attn-trial-{trial}")
    proc.start()
    return proc, trial, messages


def _drain(active: dict, bar, timeout: float) -> None:
    """Move the progress bar for the messages the running processes sent; wait up to
    ``timeout`` seconds for the first."""
    deadline = time.monotonic() + timeout
    for proc, trial, messages in list(active.values()):
        while True:
            try:
                kind, payload = messages.get(timeout=max(0.0, deadline - time.monotonic()))
            except _queue.Empty:
                break
            if kind == "done":
                bar.update(1)
            elif kind == "status":
                bar.set_postfix_str(payload, refresh=False)


def _record_crash(out_dir: Path, plan: Plan, trial: int, code: int) -> None:
    """Record the units of the (configuration, candidate) a crashed worker was on."""
    current = record.read_current(out_dir, trial)
    if current is None:
        return
    config = Config.from_key(current["config"])
    reason = f"worker process crashed (exit code {code}) while on this candidate"
    done, _ = record.finished_units(out_dir)
    for cand in current["candidates"]:
        for name in _candidate_units(plan, config, cand, trial):
            if name not in done:
                _write_failure(out_dir, name, "crashed", reason)
    record.clear_current(out_dir, trial)


# ------------------------------------------------------------------- a notebook's sweep

CPU_SHAPES = "2,2,64;2,2,128"
CPU_CANDIDATES = ("sdpa", "sdpa_math", "eager")


def measurement_plan(device: str, shapes="", candidates="", trials: int = DEFAULT_TRIALS,
                     samples: int = 0) -> Plan:
    """The sweep a notebook runs with ``measure=True`` on ``device`` ("cuda" or "cpu").

    Defaults: on a GPU the reports' ten configurations and every registered candidate;
    on a CPU the small shapes ``CPU_SHAPES`` and ``CPU_CANDIDATES`` (CPU times are host
    wall-clock and labelled so). ``samples`` > 0 fixes the samples per placement; 0 takes
    protocol 2's calibrated design (``DEFAULT_TIMING``; placements ``DEFAULT_PLACEMENTS``).
    """
    from . import candidates as cands
    if device not in DEVICES:
        raise ValueError(f"`device` must be 'cuda' or 'cpu'; got {device!r}.")
    trials = _validate.positive_integer("trials", trials)
    if isinstance(samples, bool) or not isinstance(samples, numbers.Integral) or samples < 0:
        raise ValueError(f"`samples` must be a non-negative integer (0: the default); "
                         f"got {samples!r}.")
    cfgs = parse_shapes(shapes) or (MATRICES["reports-v1"] if device == "cuda"
                                    else parse_shapes(CPU_SHAPES))
    if isinstance(candidates, str):
        names = tuple(candidates.replace(",", " ").split())
    else:
        names = tuple(candidates)
    names = names or (cands.DEFAULT_CANDIDATES if device == "cuda" else CPU_CANDIDATES)
    timing = dict(DEFAULT_TIMING, **({"n_samples": int(samples)} if samples else {}))
    matrix = next((name for name, m in MATRICES.items() if m == cfgs), "")
    return Plan(configs=cfgs, candidates=names, trials=trials, device=device,
                timing=timing, matrix=matrix, profile=device == "cuda")


def campaign_plan(campaign: str, device: str = "cuda") -> Plan:
    """The plan of a state-of-the-art campaign (``configs.CAMPAIGN_PLANS``) on ``device``."""
    from ..configs import CAMPAIGN_PLANS, PLUGINS, matrix
    spec = CAMPAIGN_PLANS[_validate.choice("campaign", campaign, sorted(CAMPAIGN_PLANS))]
    return Plan(configs=matrix(spec["matrix"]), candidates=spec["candidates"],
                modes=spec["modes"], trials=spec["trials"], device=device, plugins=PLUGINS,
                matrix=spec["matrix"])
