"""The resumable sweep runner: plan, skip finished work, one process per trial, record failures.

Each trial runs in a fresh process (so process-to-process variance is measured, not
assumed away). Inside it every (configuration, candidate) is built once, checked against
float64, then timed in each mode; each finished unit is written atomically to the run's
journal at once. Rerunning the same sweep on the same folder measures only what is
missing. An unsupported candidate, an out-of-memory error, a failed correctness check or a
crashed worker is recorded with its reason, and the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import gc
import math
import multiprocessing as mp
import numbers
import os
import queue as _queue
import random
import time
import uuid
from pathlib import Path

from .. import __version__
from .. import _validate, record
from . import run_lock
from ..configs import DEVICES, MATRICES, MODES, Config, parse_shapes

SETTINGS_THAT_MUST_MATCH = ("device", "timing", "seed", "deterministic", "placements",
                            "kernel_times")
# Measurement protocol written into every timing unit. 1 (runs before 2026-11-24): one
# allocation of the inputs per candidate per process, candidates one after another.
# 2: ``placements`` fresh allocations per unit behind a random pad, candidates interleaved
# in randomized rounds, the profiler's kernel time per placement.
PROTOCOL = 2


# Protocol 2's calibrated design (book, "Protocol 2"; the calibration chapter measures its
# error rates): 2 processes x 8 placements x 20 samples, 10 ms of warm-up per placement.
DEFAULT_TRIALS = 2
DEFAULT_PLACEMENTS = 8
DEFAULT_TIMING = {"n_samples": 20, "warmup_ms": 10.0}


class SweepError(RuntimeError):
    """The sweep cannot go on (for example, a resumed run on a different machine)."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a sweep measures. Validated when built; nothing touches a GPU before that."""

    configs: tuple
    candidates: tuple
    modes: tuple = MODES
    trials: int = DEFAULT_TRIALS
    device: str = "cuda"
    timing: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_TIMING))
    seed: int = 0
    plugins: tuple = ()
    matrix: str = ""
    profile: bool = True
    ceilings: bool = True
    allow_mixed: bool = False
    # Deterministic algorithms change which kernel SDPA dispatches to (on Hopper they rule
    # out cuDNN attention), so the default measures what a user gets without asking.
    deterministic: bool = False
    # Protocol v2: placements per unit (fresh inputs behind a random pad, graph re-captured),
    # the profiler's kernel time at each placement, and a warm-up before the first round.
    placements: int = DEFAULT_PLACEMENTS
    kernel_times: bool = True
    process_warmup_ms: float = 500.0

    def __post_init__(self):
        from . import candidates as cands
        _plugins_iv(self.plugins)
        if not self.configs or not all(isinstance(c, Config) for c in self.configs):
            raise ValueError("`configs` must be a non-empty sequence of Config.")
        _validate.distinct("configs", (c.key for c in self.configs), "a configuration")
        if not self.candidates:
            raise ValueError(f"`candidates` must name at least one of {sorted(cands.CANDIDATES)}.")
        for name in self.candidates:
            cands.get(name)
        _validate.distinct("candidates", self.candidates, "a name")
        for mode in self.modes:
            if mode not in MODES:
                raise ValueError(f"`modes` must be drawn from {MODES}; got {mode!r}.")
        if not self.modes:
            raise ValueError(f"`modes` must name at least one of {MODES}.")
        _validate.distinct("modes", self.modes, "a mode")
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or self.trials < 1:
            raise ValueError(f"`trials` must be a positive integer; got {self.trials!r}.")
        if (isinstance(self.placements, bool) or not isinstance(self.placements, int)
                or self.placements < 1):
            raise ValueError(f"`placements` must be a positive integer; got {self.placements!r}.")
        if (isinstance(self.process_warmup_ms, bool)
                or not isinstance(self.process_warmup_ms, (int, float))
                or not 0 <= self.process_warmup_ms < float("inf")):
            raise ValueError(f"`process_warmup_ms` must be a finite number >= 0; "
                             f"got {self.process_warmup_ms!r}.")
        if self.device not in cands.DEVICES:
            raise ValueError(f"`device` must be one of {cands.DEVICES}; got {self.device!r}.")
        if not any(self.device in cands.get(n).devices for n in self.candidates):
            raise ValueError(f"`candidates` must include one that runs on {self.device}; "
                             f"{list(self.candidates)} run on "
                             f"{sorted({d for n in self.candidates for d in cands.get(n).devices})}"
                             f" only.")
        # Each trial's generators are seeded with seed + trial, which numpy needs < 2**32.
        if (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                or not 0 <= self.seed <= 2**32 - self.trials):
            raise ValueError(f"`seed` must be an integer in [0, 2**32 - trials]; "
                             f"got {self.seed!r}.")
        for key in ("profile", "ceilings", "allow_mixed", "deterministic"):
            _validate.flag(key, getattr(self, key))
        _timing_iv(self.timing)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["configs"] = [c.key for c in self.configs]
        d["candidates"], d["modes"], d["plugins"] = (list(self.candidates), list(self.modes),
                                                     list(self.plugins))
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Plan":
        d = dict(d)
        d["configs"] = tuple(Config.from_key(k) for k in d["configs"])
        for key in ("candidates", "modes", "plugins"):
            d[key] = tuple(d[key])
        return cls(**d)


def _timing_iv(timing: dict) -> None:
    """Check the timing settings: either a fixed sample count or a CI target and budget."""
    allowed = {"n_samples", "ci_target", "budget_s", "min_samples", "max_samples",
               "warmup_ms", "confidence"}
    unknown = set(timing) - allowed
    if unknown:
        raise ValueError(f"`timing` keys must be drawn from {sorted(allowed)}; got {sorted(unknown)}.")
    for key, label in (("n_samples", "samples"), ("min_samples", "min_samples"),
                       ("max_samples", "max_samples")):
        n = timing.get(key)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"`{label}` must be a positive integer; got {n!r}.")
    if timing.get("min_samples", 1) > timing.get("max_samples", timing.get("min_samples", 1)):
        raise ValueError(f"`min_samples` must not exceed `max_samples`; got "
                         f"{timing['min_samples']} and {timing['max_samples']}.")
    for key in ("ci_target", "budget_s"):
        value = timing.get(key)
        if value is not None and not (_real(value) and 0 < value < math.inf):
            raise ValueError(f"`{key}` must be a positive number; got {value!r}.")
    warmup = timing.get("warmup_ms")
    if warmup is not None and not (_real(warmup) and 0 <= warmup < math.inf):
        raise ValueError(f"`warmup_ms` must be a number of milliseconds >= 0; got {warmup!r}.")
    confidence = timing.get("confidence")
    if confidence is not None and not (_real(confidence) and 0 < confidence < 1):
        raise ValueError(f"`confidence` must be a number in (0, 1); got {confidence!r}.")


def _real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _plugins_iv(plugins) -> None:
    """Import each plugin module; a failure names the plugin and the reason."""
    from . import candidates as cands
    for name in plugins:
        if not isinstance(name, str) or not name:
            raise ValueError(f"`plugins` must be importable module names; got {name!r}.")
        try:
            cands.load_plugins((name,))
        except ModuleNotFoundError as exc:
            if exc.name == name or name.startswith(f"{exc.name}."):
                raise ValueError(f"`plugins` must be importable module names (on sys.path or "
                                 f"PYTHONPATH) that register candidates; no module named "
                                 f"{name!r}.") from None
            raise ValueError(f"`plugins`: importing {name!r} failed: {type(exc).__name__}: "
                             f"{exc}") from None
        except Exception as exc:  # a plugin that raises while registering
            raise ValueError(f"`plugins`: importing {name!r} failed: {type(exc).__name__}: "
                             f"{exc}") from None


def plan_units(plan: Plan) -> dict[int, list[str]]:
    """Every journal unit the plan calls for, grouped by trial."""
    return record.plan_unit_names(plan.to_json())


def _candidate_units(plan: Plan, config: Config, cand: str, trial: int) -> list[str]:
    return record.candidate_unit_names(config.key, cand, trial, plan.modes, plan.profile)


def _input_seed(plan: "Plan", trial: int, ci: int) -> int:
    """Seed of the correctness inputs of configuration ``ci`` in ``trial``; placement p
    draws its timing inputs from seed + 1 + p."""
    return (plan.seed * 7919 + trial * 104_729 + ci * 131 + 17) % (2**31)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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
    from . import machine
    from .candidates import _device_iv
    run_lock.check_run_folder(out_dir, name)
    _device_iv(plan.device)
    check_fits(plan.configs, machine.device_memory_bytes(plan.device), plan.device)
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


def run(out_dir, plan: Plan, *, progress: bool = True, max_restarts: int = 3) -> dict:
    """Run (or resume) a sweep into ``out_dir`` and finalize it; return a summary dict.

    Before writing anything it runs :func:`preflight` (the folder, the device, memory,
    a finished run); a finished run that this plan calls for no more than is left as it
    is and its summary returned, with ``finished`` True. While it runs it holds the
    folder's lock (a second sweep on the folder is refused), and its workers die with it.
    A run in which no timing unit recorded a sample is not finalized (SweepError). Units
    that errored or crashed are recorded and the run finalized; the summary counts them
    (``errored``, ``first_error``), and the command line then exits 1.
    """
    finished = preflight(out_dir, plan)
    if finished is not None:
        return finished
    out_dir = run_lock.make_run_folder(out_dir)
    with run_lock.hold(out_dir):
        return _run_locked(out_dir, plan, progress=progress, max_restarts=max_restarts)


def _run_locked(out_dir: Path, plan: Plan, *, progress: bool, max_restarts: int) -> dict:
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
    ctx = mp.get_context("spawn")
    try:
        for trial, names in expected.items():
            restarts = 0
            while True:
                done, _ = record.finished_units(out_dir)
                missing = [n for n in names if n not in done]
                if not missing:
                    break
                code = _run_worker(ctx, out_dir, plan, trial, bar)
                if code == 0:
                    continue
                if code == _FATAL:
                    raise SweepError(record.read_fatal(out_dir))
                restarts += 1
                _record_crash(out_dir, plan, trial, code)
                if restarts > max_restarts:
                    raise SweepError(f"trial {trial}: worker crashed {restarts} times; "
                                     f"last exit code {code}")
    finally:
        bar.close()
    outcome = _timing_outcome(out_dir, expected)
    if not outcome["ok"]:
        raise SweepError(f"no timing unit recorded a sample ({_counts_text(outcome)}; first "
                         f"reason: {outcome['first_reason']}); {out_dir} is not finalized.")
    info = {"plan": plan.to_json(), "attn_analysis_version": __version__,
            "finished_utc": _now(), "sweep_wall_s_last_invocation": time.monotonic() - started}
    record.finalize(out_dir, info)
    return _summary(out_dir, expected, outcome, wall_s=time.monotonic() - started)


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


_FATAL = 3


def _settings_diff(old: dict, plan: Plan) -> list[str]:
    """The ``SETTINGS_THAT_MUST_MATCH`` in which a recorded plan (JSON) differs from ``plan``."""
    new = plan.to_json()
    return [k for k in SETTINGS_THAT_MUST_MATCH if old.get(k) != new.get(k)]


def _check_resume(out_dir: Path, plan: Plan) -> None:
    """Refuse to resume a folder recorded with settings that change what a unit means."""
    old = record.read_plan(out_dir)
    if old is not None:
        new = plan.to_json()
        diff = _settings_diff(old, plan)
        if diff:
            raise SweepError(f"{out_dir} was recorded with other settings ({', '.join(diff)}): "
                             f"recorded {[old.get(k) for k in diff]}, asked "
                             f"{[new.get(k) for k in diff]}; use a new --out folder.")
    record.write_plan(out_dir, plan.to_json())


def _run_worker(ctx, out_dir: Path, plan: Plan, trial: int, bar) -> int:
    """Start one trial's process and move the progress bar as its units land."""
    messages = ctx.Queue()
    proc = ctx.Process(target=_worker_main, args=(str(out_dir), plan.to_json(), trial, messages,
                                                  os.getpid()), name=f"attn-trial-{trial}")
    proc.start()
    try:
        while proc.is_alive() or not messages.empty():
            try:
                kind, payload = messages.get(timeout=0.5)
            except _queue.Empty:
                continue
            if kind == "done":
                bar.update(1)
            elif kind == "status":
                bar.set_postfix_str(payload, refresh=False)
    except KeyboardInterrupt:
        proc.terminate()
        proc.join(10)
        raise
    proc.join()
    return proc.exitcode


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


def _write_failure(out_dir, name, status, reason) -> None:
    """Record the unit ``name`` (its identity read from the name) as not measured."""
    unit = dict(record.parse_unit_name(name), status=status, reason=reason,
                started_utc=_now(), measurement_id=uuid.uuid4().hex)
    if unit["kind"] == "timing":
        unit["times_ms"] = []
    record.write_unit(out_dir, unit)


# ---------------------------------------------------------------------------- worker

def _worker_main(out_dir: str, plan_json: dict, trial: int, messages, parent_pid: int) -> None:
    """Entry point of a trial process; it dies with its parent (``run_lock.die_with_parent``)."""
    import sys
    run_lock.die_with_parent(parent_pid)
    try:
        _Worker(Path(out_dir), Plan.from_json(plan_json), trial, messages).run()
    except SweepError as exc:
        record.write_fatal(out_dir, str(exc))
        sys.exit(_FATAL)


class _Worker:
    """Runs one trial: every configuration and candidate of the plan, in a shuffled order."""

    def __init__(self, out_dir: Path, plan: Plan, trial: int, messages):
        self.out, self.plan, self.trial, self.messages = out_dir, plan, trial, messages
        self.done, _ = record.finished_units(out_dir)

    def _emit(self, path) -> None:
        self.done.add(Path(path).name)
        self.messages.put(("done", Path(path).name))

    def _write(self, unit: dict) -> None:
        unit.setdefault("measurement_id", uuid.uuid4().hex)
        self._emit(record.write_unit(self.out, unit))

    def run(self) -> None:
        import torch
        from . import env, machine
        try:
            env.lock(seed=self.plan.seed + self.trial, deterministic=self.plan.deterministic)
        except env.EnvironmentNotLocked as exc:
            raise SweepError(f"trial {self.trial}: {exc}") from None
        fp = machine.fingerprint()
        self._check_machine(fp)
        name = record.unit_name("trial", trial=self.trial)
        if name not in self.done:
            self._write({"kind": "trial", "trial": self.trial, "fingerprint": fp,
                         "started_utc": _now(), "pid": os.getpid()})
        if self.trial == 0 and self.plan.ceilings and \
                record.unit_name("ceilings") not in self.done:
            from .ceilings import measure_ceilings
            self._write({"kind": "ceilings", "ceilings": measure_ceilings(self.plan.device),
                         "started_utc": _now()})
        rng = random.Random(self.plan.seed * 1_000_003 + self.trial)
        for ci, config in enumerate(self.plan.configs):
            self._config(config, ci, rng)
            gc.collect()
            if self.plan.device == "cuda":
                torch.cuda.empty_cache()

    def _check_machine(self, fp: dict) -> None:
        if self.plan.allow_mixed:
            return
        for path in record.journal_paths(self.out, "trial"):
            other = record.read_unit(path)["fingerprint"].get("fingerprint_hash")
            if other != fp.get("fingerprint_hash"):
                raise SweepError(
                    f"this machine's fingerprint {fp.get('fingerprint_hash')} differs from the "
                    f"run's {other} ({path.name}); record into a new folder or pass --allow-mixed")

    def _earlier_info(self, config: Config, cand: str) -> dict | None:
        """What another trial's build of this candidate recorded (e.g. its tuning), if any."""
        for path in record.journal_paths(self.out, "timing", config=config.key, candidate=cand):
            unit = record.read_unit(path)
            if unit["trial"] != self.trial and unit.get("status") == "ok" and unit.get("info"):
                return unit["info"]
        return None

    def _fail_rest(self, names, status, reason) -> None:
        for name in names:
            if name not in self.done:
                _write_failure(self.out, name, status, reason)
                self._emit(name)

    def _config(self, config: Config, ci: int, rng: random.Random) -> None:
        """Build and check every candidate of one configuration, then time them interleaved."""
        order = list(self.plan.candidates)
        rng.shuffle(order)  # no candidate is always built (or checked) first
        ready = {}
        for cand in order:
            names = _candidate_units(self.plan, config, cand, self.trial)
            if all(n in self.done for n in names):
                continue
            self.messages.put(("status", f"t{self.trial} {config.key} {cand} (check)"))
            # say which candidate this process is on, so a crash is recorded against it
            record.write_current(self.out, self.trial, config.key, [cand])
            built = self._prepare(config, ci, cand, names)
            record.clear_current(self.out, self.trial)
            if built is not None:
                ready[cand] = (built, names)
        if ready:
            record.write_current(self.out, self.trial, config.key, list(ready))
            self._rounds(config, ci, ready, rng)
            record.clear_current(self.out, self.trial)

    def _prepare(self, config: Config, ci: int, cand: str, names: list[str]):
        """Build one candidate and pass it through the float64 gate; None when it cannot
        be timed (the reason is recorded in each of its units)."""
        import torch
        from . import candidates as cands
        try:
            built = cands.build(cand, config, self.plan.device, hint=self._earlier_info(config, cand))
        except cands.Unsupported as exc:
            return self._fail_rest(names, "unsupported", str(exc))
        except torch.OutOfMemoryError as exc:
            return self._fail_rest(names, "oom", _short(exc))
        except Exception as exc:  # compile failures and the like: record and go on
            return self._fail_rest(names, "error", _short(exc))
        seed = _input_seed(self.plan, self.trial, ci)
        corr_name = names[0]
        if corr_name in self.done:
            passed = record.read_unit(record.unit_path(self.out, corr_name))["status"] == "ok"
        else:
            try:
                result = cands.check(built, config, self.plan.device, seed=seed, name=cand)
            except torch.OutOfMemoryError as exc:
                return self._fail_rest(names, "oom", _short(exc))
            except Exception as exc:
                return self._fail_rest(names, "error", _short(exc))
            passed = result.passed
            self._write({"kind": "correctness", "config": config.key, "candidate": cand,
                         "trial": self.trial, "status": "ok" if passed else "failed_correctness",
                         "reason": result.reason, "result": dataclasses.asdict(result),
                         "input_seed": seed, "started_utc": _now()})
        if not passed:
            return self._fail_rest(names, "failed_correctness",
                                   "failed the float64 correctness gate; not timed")
        return built

    def _rounds(self, config: Config, ci: int, ready: dict, rng: random.Random) -> None:
        """Protocol v2: ``plan.placements`` rounds; in each, every candidate in a random
        order gets a fresh placement (inputs after a random pad, graph re-captured) and is
        timed in each mode, modes in a random order. Units are written after the last round."""
        import torch
        from . import candidates as cands, machine, placement
        device = self.plan.device
        pending = {}
        for cand, (built, names) in ready.items():
            for mode in self.plan.modes:
                name = record.unit_name("timing", config=config.key, candidate=cand,
                                         mode=mode, trial=self.trial)
                if name not in self.done:
                    pending[(cand, mode)] = {"placements": [], "started_utc": _now(),
                                             "failure": None}
        seed = _input_seed(self.plan, self.trial, ci)
        self._process_warmup(config, ready, seed)
        for p in range(self.plan.placements):
            order = list(ready)
            rng.shuffle(order)
            for position, cand in enumerate(order):
                modes = [m for m in self.plan.modes
                         if (cand, m) in pending and pending[(cand, m)]["failure"] is None]
                kname = record.unit_name("kernels", config=config.key, candidate=cand)
                want_kernels = (p == self.plan.placements - 1 and kname in ready[cand][1]
                                and kname not in self.done)
                if not modes and not want_kernels:
                    continue
                rng.shuffle(modes)
                self.messages.put(("status", f"t{self.trial} {config.key} p{p} {cand}"))
                built = ready[cand][0]
                placement.release(device)
                try:
                    pl = placement.place(p, lambda: cands.make_inputs(
                        config, device, seed=seed + 1 + p, layout=built.layout), device, rng)
                except torch.OutOfMemoryError as exc:
                    for m in modes:
                        pending[(cand, m)]["failure"] = ("oom", _short(exc))
                    continue
                q, k, v = pl.inputs

                def call(q=q, k=k, v=v, fn=built.fn):
                    return fn(q, k, v)
                with built.context():  # e.g. SDPA's forced backend: set once, outside timers
                    state = machine.gpu_state()
                    kernel_ms = self._placement_kernel_ms(call) if modes else None
                    for mode in modes:
                        entry = pending[(cand, mode)]
                        rec = self._time_placement(call, mode)
                        if "failure" in rec:
                            entry["failure"] = rec.pop("failure")
                            continue
                        rec.update(pl.as_record(), round=p, position=position,
                                   kernel_ms=kernel_ms, gpu_state_start=state)
                        rec["gpu_state_end"] = machine.gpu_state()
                        entry["placements"].append(rec)
                    if want_kernels:
                        self._kernels(call, config, cand)
                del call, q, k, v, pl
        placement.release(device)
        for (cand, mode), entry in pending.items():
            self._write_timing(config, cand, mode, ready[cand][0].info, entry)

    def _process_warmup(self, config: Config, ready: dict, seed: int) -> None:
        """Keep the GPU busy for ``plan.process_warmup_ms`` before the first round, so the
        first placement of the first candidate does not meet idle clocks."""
        from . import candidates as cands
        if self.plan.process_warmup_ms <= 0:
            return
        built = next(iter(ready.values()))[0]
        q, k, v = cands.make_inputs(config, self.plan.device, seed=seed, layout=built.layout)
        with built.context():
            deadline = time.monotonic() + self.plan.process_warmup_ms / 1e3
            while time.monotonic() < deadline:
                for _ in range(10):
                    built.fn(q, k, v)
                if self.plan.device == "cuda":
                    import torch
                    torch.cuda.synchronize()
        del q, k, v

    def _placement_kernel_ms(self, call):
        """Sum of the profiler's kernel times per call at this placement (None if off)."""
        if not (self.plan.kernel_times and self.plan.device == "cuda"):
            return None
        from . import profiler
        try:
            return float(profiler.profile_device_time(call, n_calls=10)["device_ms_per_call"])
        except Exception:  # the profiler is evidence beside the timing, never a reason to stop
            return None

    def _time_placement(self, call, mode) -> dict:
        """Time one placement in one mode; a dict with the samples and settings, or with
        ``failure`` = (status, reason)."""
        import torch
        from . import timing
        t0 = time.monotonic()
        try:
            sample = timing.measure(call, mode=mode, device=self.plan.device, **self.plan.timing)
        except torch.OutOfMemoryError as exc:
            return {"failure": ("oom", _short(exc))}
        except Exception as exc:
            return {"failure": ("error", _short(exc))}
        settings = {k: v for k, v in dataclasses.asdict(sample).items() if k != "times_ms"}
        return {"times_ms": [float(x) for x in sample.times_ms], "timing": _jsonable(settings),
                "elapsed_s": time.monotonic() - t0}

    def _write_timing(self, config, cand, mode, info, entry) -> None:
        """One timing unit holding every placement of (configuration, candidate, mode)."""
        placements = entry["placements"]
        unit = {"kind": "timing", "config": config.key, "candidate": cand, "mode": mode,
                "trial": self.trial, "info": _jsonable(info), "started_utc": entry["started_utc"],
                "protocol": PROTOCOL}
        if entry["failure"] is not None or not placements:
            status, reason = entry["failure"] or ("error", "no placement was timed")
            unit.update(status=status, reason=reason, times_ms=[], placements=[])
        else:
            unit.update(status="ok", reason="",
                        times_ms=[t for rec in placements for t in rec["times_ms"]],
                        timing=placements[0]["timing"], placements=_jsonable(placements))
        unit["gpu_state_start"] = placements[0]["gpu_state_start"] if placements else None
        unit["gpu_state_end"] = placements[-1]["gpu_state_end"] if placements else None
        unit["elapsed_s"] = float(sum(rec["elapsed_s"] for rec in placements))
        self._write(unit)

    def _kernels(self, call, config, cand) -> None:
        from . import profiler
        unit = {"kind": "kernels", "config": config.key, "candidate": cand,
                "started_utc": _now()}
        try:
            evidence = profiler.profile_device_time(call)
        except Exception as exc:
            unit.update(status="error", reason=_short(exc), kernels=[])
        else:
            unit.update(status="ok", reason="", evidence=_jsonable(evidence),
                        kernels=_kernel_rows(evidence))
        self._write(unit)


def _kernel_rows(evidence: dict) -> list[dict]:
    """Normalise the profiler's kernel list to name, calls per call, device ms per call."""
    rows = []
    for k in evidence.get("kernels", []):
        rows.append({"name": str(k.get("name")),
                     "calls_per_call": float(k.get("count_per_call", 1)),
                     "device_ms_per_call": float(k.get("ms_per_call", 0.0))})
    return rows


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:400] if text else ''}"


def _jsonable(obj):
    """Convert settings (numpy scalars, tuples, torch dtypes) to plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


# ------------------------------------------------------------------- a notebook's sweep

CPU_SHAPES = "2,2,64;2,2,128"
CPU_CANDIDATES = ("sdpa", "sdpa_math", "eager")


def measurement_plan(device: str, shapes="", candidates="", trials: int = 2,
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

