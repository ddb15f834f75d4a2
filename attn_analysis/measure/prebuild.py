"""Compile a sweep's compiled candidates in parallel before its first trial process.

On a machine that has compiled nothing, the first trial process compiles every shape of
``eager_compiled`` and ``flex`` (torch.compile) and every configuration our Triton
kernel's tuning tries, one after another: 41-50 s of a fresh H100's first process, against
9 s once the machine's caches hold them (``benchmarks/readme-command/``). Those caches are
on disk (Inductor's and Triton's) and shared by every process of the machine, so worker
processes forked before the first trial fill them in parallel, one (configuration,
candidate) at a time (``Candidate.warm``), and the trial then loads what they compiled:
on fresh H100s the first process's build fell to 17.5-20.0 s, of which 10.8-11.1 s is our
Triton kernel's tuning (it times on the GPU, so it stays in the trial), for 11.8-15.8 s
of prebuild.

What a trial measures does not change: it still builds, tunes, checks against float64 and
times every candidate itself; the GPU is quiet again (the workers have exited) before it
starts; and a compile the workers could not do is only a cache left cold, which the
trial's own build then does or records as failed. The workers share the GPU, so no choice
made by timing there may outlive them: Inductor times some of its kernels' configurations
at their first launch and keeps the fastest in its cache (``.best_config`` files, and its
algorithm selector's records under ``cache/``); the prebuild removes every such file that
appeared while it ran (:func:`timing_choices`), so the sweep's first process still makes
those choices alone on the GPU, as without a prebuild. Our Triton kernel's workers compile
without timing anything (``triton_attention.precompile``). The sweep records what the
prebuild did (:func:`run`'s summary) in the run's ``run.json``.

A pair is compiled once per machine: a worker that compiled it leaves a marker in the
per-machine tuning cache (:mod:`.tuning_cache`, keyed by candidate, configuration, the
machine's fingerprint and the measuring code), and a later sweep's worker finds it and
compiles nothing ("cached"). A marker whose compile caches were emptied since only costs
time: the trial then compiles itself, as without a prebuild.
"""

from __future__ import annotations

import os
import queue as _queue
import time
from pathlib import Path

from ..configs import Config
from . import tuning_cache
from .plan import Plan

__all__ = ["MAX_WORKERS", "TIMEOUT_S", "MARKER_PREFIX", "wanted", "jobs", "pending_configs",
           "job_order", "worker_count", "marker_key", "inductor_cache_dir", "timing_choices",
           "warm", "run"]

# At most this many workers, and one core fewer than the machine has: each starts its own
# CUDA context (~0.5 GiB of device memory) and its own Inductor, and compiles on one core.
# On a fresh 16-core H100 machine 8 workers took 13.3-15.8 s for the README command's 30
# compiles, whose work summed to 99-115 s (benchmarks/readme-command/).
MAX_WORKERS = 16
# The prebuild stops waiting after this long; its unfinished compiles are left to the trial.
TIMEOUT_S = 240.0
# A prebuilt pair's marker sits in the tuning cache under its candidate's name so prefixed.
MARKER_PREFIX = "prebuilt:"


def wanted(plan: Plan, setting: bool | None) -> bool:
    """Whether a sweep of ``plan`` prebuilds: ``setting`` True or False says so; None (the
    default) prebuilds on a GPU only, whose machines have cores to spare; a CPU plan's
    compiles would compete with each other on the few cores of a laptop or a CI runner."""
    if setting is not None and not isinstance(setting, bool):
        raise ValueError(f"`prebuild` must be True, False or None (on a GPU only); "
                         f"got {setting!r}.")
    return plan.device == "cuda" if setting is None else setting


def jobs(plan: Plan, configs=None) -> list[tuple[str, str]]:
    """The (configuration key, candidate) pairs of ``plan`` whose candidate compiles
    (``Candidate.warm``), for ``configs`` (default: all of the plan's), in plan order."""
    from . import candidates as cands
    configs = plan.configs if configs is None else configs
    return [(config.key, name) for config in configs for name in plan.candidates
            if cands.get(name).warm is not None]


def pending_configs(plan: Plan, missing_names) -> list[Config]:
    """The plan's configurations (in plan order) that one of the unit names
    ``missing_names``, the units a sweep has still to measure, belongs to."""
    from .. import record
    keys = {record.parse_unit_name(name).get("config") for name in missing_names}
    return [config for config in plan.configs if config.key in keys]


def job_order(pairs: list[tuple[str, str]], heavy=()) -> list[tuple[str, str]]:
    """The order the workers take ``pairs`` in. The pairs of the candidates in ``heavy``
    come first, in plan order: each compiles a whole tuning space (our Triton kernel: 5-10 s
    a configuration on an H100, against 0.3-5 s for a torch.compile graph), and the
    longest jobs first keep the last worker from finishing long after the others. Then the
    rest: each candidate's first configuration first (it compiles what that candidate's
    later configurations may share), then candidate by candidate, in the order of their
    firsts, so that a later configuration tends to start after its first has finished."""
    heavy = set(heavy)
    first_jobs = [p for p in pairs if p[1] in heavy]
    firsts: dict[str, tuple[str, str]] = {}  # candidate -> its first pair, in order
    for pair in pairs:
        if pair[1] not in heavy:
            firsts.setdefault(pair[1], pair)
    rank = {name: i for i, name in enumerate(firsts)}
    rest = [p for p in pairs if p[1] not in heavy and p != firsts[p[1]]]
    return first_jobs + list(firsts.values()) + sorted(rest, key=lambda p: rank[p[1]])


def marker_key(name: str, config_key: str, fingerprint_hash: str, code: str) -> str:
    """The tuning-cache key of the marker that this machine (``fingerprint_hash``) has
    compiled candidate ``name`` at ``config_key`` with this measuring code (``code``)."""
    return tuning_cache.cache_key(MARKER_PREFIX + name, config_key, fingerprint_hash, code)


def inductor_cache_dir() -> Path:
    """Inductor's cache folder on this machine, as its compiles will find it
    (``TORCHINDUCTOR_CACHE_DIR``, else Inductor's default), without creating it."""
    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if folder is None:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
        folder = default_cache_dir()
    return Path(folder).absolute()


def timing_choices(folder: Path) -> set[Path]:
    """The files under Inductor's cache ``folder`` that keep a choice made by timing on the
    GPU: each runtime-autotuned kernel's ``*.best_config`` and the algorithm selector's
    records (under ``cache/``); empty when the folder does not exist."""
    folder = Path(folder)
    if not folder.is_dir():
        return set()
    found = set(folder.rglob("*.best_config"))
    if (folder / "cache").is_dir():
        found |= {p for p in (folder / "cache").rglob("*") if p.is_file()}
    return found


def worker_count(n_jobs: int, cpu_count: int | None, max_workers: int = MAX_WORKERS) -> int:
    """How many workers compile ``n_jobs`` pairs: one per pair, at most ``max_workers``,
    and one CPU left to the sweep itself (at least one worker where there are jobs)."""
    if n_jobs <= 0:
        return 0
    return max(1, min(n_jobs, max_workers, (cpu_count or 2) - 1))


def run(ctx, plan: Plan, configs=None, *, timeout_s: float = TIMEOUT_S,
        progress=None) -> dict:
    """Compile :func:`jobs` in :func:`worker_count` processes started by ``ctx`` (the
    sweep's trial context, so forked from its fork server); wait for them to finish or for
    ``timeout_s``; return the summary the sweep records:

    ``workers``, ``wall_s``, ``timeout_s``, ``cpu_count`` and ``jobs``, one row per pair:
    ``config``, ``candidate``, ``status`` ("ok"; "cached" for a pair this machine had
    compiled before, see the module's docstring; "skipped" for a candidate that does not
    apply on this device; "error" with its ``reason``; or "not_done" for a pair no worker
    finished) and ``s``, the seconds it took in its worker; and
    ``timing_choices_removed``, how many files of choices made by timing while the workers
    ran were removed (:func:`timing_choices`). The pairs compiled ("ok") get their markers
    in one write after the workers have stopped.
    """
    from . import candidates as cands
    pairs = job_order(jobs(plan, configs),
                      heavy=[n for n in plan.candidates if cands.accepts_hint(n)])
    workers = worker_count(len(pairs), os.cpu_count())
    summary = {"workers": workers, "wall_s": 0.0, "timeout_s": float(timeout_s),
               "cpu_count": os.cpu_count(), "jobs": [], "timing_choices_removed": 0}
    if not pairs:
        return summary
    inductor_dir = inductor_cache_dir()
    choices_before = timing_choices(inductor_dir)
    started = time.monotonic()
    todo, results = ctx.Queue(), ctx.Queue()
    for pair in pairs:
        todo.put(pair)
    for _ in range(workers):
        todo.put(None)  # one stop sign per worker
    procs = [ctx.Process(target=_worker_main, args=(plan.to_json(), todo, results, os.getpid()),
                         name=f"attn-prebuild-{i}") for i in range(workers)]
    for proc in procs:
        proc.start()
    done = {}
    deadline = started + timeout_s
    try:
        while len(done) < len(pairs) and time.monotonic() < deadline:
            try:
                row = results.get(timeout=0.5)
            except _queue.Empty:
                if not any(p.is_alive() for p in procs):
                    break
                continue
            done[(row["config"], row["candidate"])] = row
            if progress is not None:
                progress(f"prebuild {len(done)}/{len(pairs)} {row['candidate']} "
                         f"{row['config']}")
    finally:
        for proc in procs:
            proc.join(max(0.0, min(5.0, deadline - time.monotonic())))
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
    for path in timing_choices(inductor_dir) - choices_before:
        path.unlink(missing_ok=True)
        summary["timing_choices_removed"] += 1
    summary["wall_s"] = round(time.monotonic() - started, 3)
    markers = {}
    for row in done.values():
        marker = row.pop("marker", None)
        if marker:
            markers[marker] = {"config": row["config"], "candidate": row["candidate"],
                               "s": row["s"]}
    tuning_cache.store_many(markers)
    summary["jobs"] = [done.get(pair, {"config": pair[0], "candidate": pair[1],
                                       "status": "not_done", "reason": "", "s": None})
                       for pair in pairs]
    return summary


def warm(name: str, config: Config, device: str) -> bool:
    """Fill this machine's compile caches for candidate ``name`` at ``config``, timing
    nothing (``Candidate.warm``); False when it compiles nothing or does not apply on this
    device (its build in the trial then says why)."""
    from . import candidates as cands
    candidate = cands.get(name)
    cands._device_iv(device)
    if candidate.warm is None or candidate.unsupported_reason(config, device):
        return False
    candidate.warm(config, device)
    return True


def _worker_main(plan_json: dict, todo, results, parent_pid: int) -> None:
    """One prebuild worker: the trial's environment lock (the caches are keyed on the
    settings it makes), CUDA, the machine's fingerprint, then pairs from ``todo`` until its
    stop sign; a pair with a marker (:func:`marker_key`) is "cached", one it compiled
    carries its marker's key back to the parent ("marker"), which stores it."""
    from . import run_lock
    if os.getppid() == parent_pid:
        run_lock.die_with_parent(parent_pid)
    else:  # forked by the fork server
        run_lock.die_with_process(parent_pid)
    try:
        plan = Plan.from_json(plan_json)  # imports the candidates and the plan's plugins
    except ValueError:  # a plugin that fails here: every trial process says so, once
        return
    import torch
    from . import env, machine
    env.lock(seed=plan.seed, deterministic=plan.deterministic)
    if plan.device == "cuda":
        torch.cuda.init()
    fingerprint_hash = machine.fingerprint().get("fingerprint_hash")
    code = tuning_cache.code_hash()
    while (pair := todo.get()) is not None:
        key, name = pair
        t = time.perf_counter()
        marker = marker_key(name, key, fingerprint_hash, code) if fingerprint_hash else None
        try:
            if marker and tuning_cache.lookup(marker) is not None:
                status = "cached"
            else:
                status = "ok" if warm(name, Config.from_key(key), plan.device) else "skipped"
                if plan.device == "cuda":  # the next pair's inputs, not this one's, in memory
                    torch.cuda.empty_cache()
            reason = ""
        except Exception as exc:  # a cold cache, not a failure of the sweep  # noqa: BLE001
            status, reason = "error", f"{type(exc).__name__}: {str(exc)[:300]}"
        results.put({"config": key, "candidate": name, "status": status, "reason": reason,
                     "s": round(time.perf_counter() - t, 3),
                     "marker": marker if status == "ok" else None})
