"""The sweep's trial processes: how they start (a fork server that imported the measuring
code once, or spawned), and the pool that runs every trial with units still missing, up
to one process per GPU at a time, recording a crashed process against what it was on.

:mod:`.sweep` decides what to run and finalizes; this module only starts, watches and
stops processes. Torch-free at import (the fork server imports torch, not this process).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as _queue
import signal
import time
from pathlib import Path

from .. import _validate, record
from ..configs import Config
from .plan import START_METHODS, Plan, SweepError, _candidate_units
from .trial import _FATAL, _worker_main, _write_failure

__all__ = ["FORKSERVER_PRELOAD", "NVML_CHECK", "FORKSERVER_ENV", "trial_context",
           "start_trial_server", "stop_trial_server", "processes_at_once", "run_trials"]

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


def stop_trial_server() -> bool:
    """Stop the fork server :func:`start_trial_server` began, at once; return whether one
    ran. A sweep refused after the server started calls this: the server would otherwise
    go on importing torch for seconds after the command ended, parented to init and
    holding the terminal's stdout open (so ``sweep ... | tail`` waited for it). The
    server is this process's child and has forked no trial yet, so it is ended, reaped
    and its socket removed (``ForkServer._stop``, which CPython's own tests use)."""
    from multiprocessing import forkserver
    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGKILL)  # mid-import it would not read the closed pipe
    except ProcessLookupError:
        pass
    server._stop()
    return True


def processes_at_once(gpus: tuple, one_at_a_time: bool) -> int:
    """How many trial processes run at once: one per GPU, or one."""
    return 1 if one_at_a_time or not gpus else len(gpus)


def run_trials(ctx, out_dir: Path, plan: Plan, expected: dict, done: set, bar, *,
               gpus: tuple, one_at_a_time: bool, max_restarts: int) -> None:
    """Run every trial with units still missing, up to one process per GPU at a time.

    Trials start in plan order, each on a free GPU (``one_at_a_time``: trial t waits for
    ``gpus[t % len(gpus)]`` and nothing else runs). A process that ends with units missing
    is run again; one that crashes is recorded (:func:`_record_crash`) and run again, up
    to ``max_restarts`` times; one that gives up (``_FATAL``) stops the sweep. On any
    exit but success every running process is stopped first.
    """
    width = processes_at_once(gpus, one_at_a_time)
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


