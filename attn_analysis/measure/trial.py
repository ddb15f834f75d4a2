"""One trial process of a sweep (:func:`_worker_main`, started by :mod:`.sweep`): it locks
the environment, builds each (configuration, candidate) once, checks it against float64,
times it in each mode at every placement, in randomized rounds, and writes each finished
unit to the run's journal at once; a unit that fails is recorded with its reason.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import random
import sys
import time
import uuid
from pathlib import Path

from .. import record
from . import run_lock, tuning_cache, unit_records
from .budget import PhaseClock
from ..configs import Config

from .unit_records import jsonable, short_reason
from .plan import (PROTOCOL, Plan, SweepError, _candidate_units, _input_seed,
                   _now, plan_units)

# Nothing public: sweep.run starts each trial process at _worker_main.
__all__: list[str] = []

# The fork server's warm-up module (sweep.FORKSERVER_PRELOAD), never imported here.
_WARM = f"{__package__}.forkserver_warm"
# Exit code of a trial process that gives up (its reason in the run's ``.fatal`` marker).
_FATAL = 3


def _write_failure(out_dir, name, status, reason) -> None:
    """Record the unit ``name`` (its identity read from the name) as not measured."""
    unit = dict(record.parse_unit_name(name), status=status, reason=reason,
                started_utc=_now(), measurement_id=uuid.uuid4().hex)
    if unit["kind"] == "timing":
        unit["times_ms"] = []
    record.write_unit(out_dir, unit)


def _worker_main(out_dir: str, plan_json: dict, trial: int, messages, parent_pid: int,
                 spawned_at: float | None = None, pin: str | None = None,
                 concurrent: int = 1) -> None:
    """Entry point of a trial process; it dies with the sweep ``parent_pid``: its parent when
    spawned (``run_lock.die_with_parent``), else through ``run_lock.die_with_process``.
    ``spawned_at`` is the parent's clock at the start, the start of this process's budget.
    ``pin`` (a ``CUDA_VISIBLE_DEVICES`` entry) is set before anything can start CUDA (the
    fork server never does), so the process sees one GPU, as its device 0; ``concurrent``
    is how many trial processes the sweep runs at once. Both go into the trial unit."""
    if pin is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = pin
    clock = PhaseClock(spawned_at)
    parent = os.getppid()
    run_lock.die_with_parent(parent)
    if parent != parent_pid:  # forked by the fork server, which a trial keeps alive
        run_lock.die_with_process(parent_pid)
    try:
        with clock.phase("import"):  # the plan imports the candidates (torch) and plugins
            try:
                plan = Plan.from_json(plan_json)
            except ValueError as exc:  # a plugin that imported in the sweep but not here
                raise SweepError(f"trial {trial}: the plan does not load in a trial process, "
                                 f"though it did in the sweep: {exc}") from None
        _Worker(Path(out_dir), plan, trial, messages, clock,
                placement={"cuda_visible_devices": pin,
                           "concurrent_processes": int(concurrent)}).run()
    except SweepError as exc:
        record.write_fatal(out_dir, str(exc))
        sys.exit(_FATAL)


class _Worker:
    """Runs one trial: every configuration and candidate of the plan, in a shuffled order."""

    def __init__(self, out_dir: Path, plan: Plan, trial: int, messages,
                 clock: PhaseClock | None = None, placement: dict | None = None):
        self.out, self.plan, self.trial, self.messages = out_dir, plan, trial, messages
        # where the sweep ran this process: its GPU pin and the processes run at once
        self.placement = dict(placement or {})
        self.clock = clock or PhaseClock()
        # set in run(): the machine's fingerprint, and the measuring code's hash when a
        # tuning key is first needed (both key the per-machine tuning cache)
        self.fingerprint_hash: str | None = None
        self._code_hash: str | None = None
        # seconds of the build phase per candidate, summed over configurations (the trial
        # unit's ``build_s_by_candidate``: which compiler or tuner a process waits for)
        self.build_s: dict[str, float] = {}
        with self.clock.phase("journal"):  # this trial's units (and the run's ceilings)
            names = plan_units(plan)[trial] + [record.unit_name("ceilings")]
            self.done, _ = record.finished_units(out_dir, names)

    def _emit(self, path) -> None:
        self.done.add(Path(path).name)
        self.messages.put(("done", Path(path).name))

    def _write(self, unit: dict) -> None:
        unit.setdefault("measurement_id", uuid.uuid4().hex)
        with self.clock.phase("write"):
            path = record.write_unit(self.out, unit)
        self._emit(path)

    def run(self) -> None:
        with self.clock.phase("import"):
            import torch
            from . import env, machine
        with self.clock.phase("lock"):
            try:
                env.lock(seed=self.plan.seed + self.trial, deterministic=self.plan.deterministic)
            except env.EnvironmentNotLocked as exc:
                raise SweepError(f"trial {self.trial}: {exc}") from None
        if self.plan.device == "cuda":
            with self.clock.phase("cuda"):  # CUDA's start-up, on its own line of the budget
                torch.cuda.init()
        with self.clock.phase("fingerprint"):
            fp = machine.fingerprint()
            self._check_machine(fp)
        self.fingerprint_hash = fp.get("fingerprint_hash")
        name = record.unit_name("trial", trial=self.trial)
        trial_unit = None
        if name not in self.done:
            trial_unit = {"kind": "trial", "trial": self.trial, "fingerprint": fp,
                          "started_utc": _now(), "pid": os.getpid(),
                          # what the fork server's warm-up left it (None: spawned)
                          "preloaded": getattr(sys.modules.get(_WARM), "WARMED", None),
                          **self.placement}
            self._write(trial_unit)  # sets its measurement_id, kept when it is rewritten
        if self.trial == 0 and self.plan.ceilings and \
                record.unit_name("ceilings") not in self.done:
            from .ceilings import measure_ceilings
            with self.clock.phase("ceilings"):
                ceilings = measure_ceilings(self.plan.device)
            self._write({"kind": "ceilings", "ceilings": ceilings, "started_utc": _now()})
        rng = random.Random(self.plan.seed * 1_000_003 + self.trial)
        allocated = []
        for ci, config in enumerate(self.plan.configs):
            self._config(config, ci, rng)
            with self.clock.phase("collect"):
                # the objects made since the heap was last frozen (_rounds), this
                # configuration's rounds: a collection of those alone, not of the heap
                gc.collect()
                if self.plan.device == "cuda":
                    torch.cuda.empty_cache()
                    allocated.append(int(torch.cuda.memory_allocated()))
        if trial_unit is not None:  # the same unit again, now with where its time went
            # (and the device memory still allocated after each configuration: what the
            # frozen heap could keep alive shows here as growth)
            self._write(dict(trial_unit, budget=self.clock.as_record(),
                             allocated_after_config_bytes=allocated,
                             build_s_by_candidate={c: round(t, 4)
                                                   for c, t in self.build_s.items()}))

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

    def _hint(self, config: Config, cand: str) -> tuple[dict | None, str | None]:
        """What to reuse instead of tuning, and from where: another trial of this run
        ("run"), else an earlier run on this machine ("machine"; :mod:`.tuning_cache`)."""
        from . import candidates as cands
        if not cands.accepts_hint(cand):
            return None, None
        earlier = self._earlier_info(config, cand)
        if earlier is not None:
            return earlier, "run"
        key = self._tuning_key(config, cand)
        cached = tuning_cache.lookup(key) if key else None
        return (cached, "machine") if cached is not None else (None, None)

    def _tuning_key(self, config: Config, cand: str) -> str | None:
        if self.plan.device != "cuda" or not self.fingerprint_hash:
            return None
        if self._code_hash is None:
            self._code_hash = tuning_cache.code_hash()
        return tuning_cache.cache_key(cand, config.key, self.fingerprint_hash, self._code_hash)

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
            built, source = self._build(config, cand)
        except cands.Unsupported as exc:
            return self._fail_rest(names, "unsupported", str(exc))
        except torch.OutOfMemoryError as exc:
            return self._fail_rest(names, "oom", short_reason(exc))
        except Exception as exc:  # compile failures and the like: record and go on
            return self._fail_rest(names, "error", short_reason(exc))
        seed = _input_seed(self.plan, self.trial, ci)
        corr_name = names[0]
        if corr_name in self.done:
            passed = record.read_unit(record.unit_path(self.out, corr_name))["status"] == "ok"
        else:
            try:
                with self.clock.phase("check"):
                    result = cands.check(built, config, self.plan.device, seed=seed, name=cand)
            except torch.OutOfMemoryError as exc:
                return self._fail_rest(names, "oom", short_reason(exc))
            except Exception as exc:
                return self._fail_rest(names, "error", short_reason(exc))
            passed = result.passed
            self._write({"kind": "correctness", "config": config.key, "candidate": cand,
                         "trial": self.trial, "status": "ok" if passed else "failed_correctness",
                         "reason": result.reason, "result": dataclasses.asdict(result),
                         "input_seed": seed, "started_utc": _now()})
        if not passed:
            return self._fail_rest(names, "failed_correctness",
                                   "failed the float64 correctness gate; not timed")
        if cands.accepts_hint(cand):
            key = self._tuning_key(config, cand)
            if source is None and key:  # tuned here and correct: later runs may reuse it
                tuning_cache.store(key, jsonable(built.info))
            # every unit says whether this build tuned ("tuned") or reused a choice
            built = dataclasses.replace(built, info={**built.info,
                                                     "hint_source": source or "tuned"})
        return built

    def _build(self, config: Config, cand: str):
        """``cands.build`` with the hint to reuse (:meth:`_hint`): (built, hint source);
        its time is charged to the ``build`` phase and to ``cand`` in ``build_s``."""
        from . import candidates as cands
        t = time.perf_counter()
        try:
            with self.clock.phase("build"):
                hint, source = self._hint(config, cand)
                return cands.build(cand, config, self.plan.device, hint=hint), source
        finally:
            self.build_s[cand] = self.build_s.get(cand, 0.0) + time.perf_counter() - t

    def _rounds(self, config: Config, ci: int, ready: dict, rng: random.Random) -> None:
        """Protocol v2: ``plan.placements`` rounds; in each, every candidate in a random
        order gets a fresh placement (inputs after a random pad, graph re-captured) and is
        timed in each mode, modes in a random order. Units are written after the last round."""
        pending = {}
        for cand, (built, names) in ready.items():
            for mode in self.plan.modes:
                name = record.unit_name("timing", config=config.key, candidate=cand,
                                         mode=mode, trial=self.trial)
                if name not in self.done:
                    pending[(cand, mode)] = {"placements": [], "started_utc": _now(),
                                             "failure": None}
        seed = _input_seed(self.plan, self.trial, ci)
        with self.clock.phase("warmup"):
            self._process_warmup(config, ready, seed)
        # What is alive now (modules, the built candidates) outlives the rounds: frozen, it
        # is left out of the garbage collection before each placement (placement.release),
        # which otherwise walks the whole heap of a torch process (~0.15 s, per placement).
        # It stays frozen: a full collection walked ~424,000 objects in 0.2-0.26 s on an
        # H100, twice a configuration (benchmarks/readme-command/probes/sweep_cost_probe.py),
        # and what a later
        # collection must free is made after this point. An object frozen here that later
        # becomes cyclic garbage is never collected; the trial unit records the device
        # memory still allocated after each configuration, where such a leak would show.
        with self.clock.phase("collect"):
            gc.collect()
            gc.freeze()
        self._placements(config, ready, pending, seed, rng)
        for (cand, mode), entry in pending.items():
            self._write_timing(config, cand, mode, ready[cand][0].info, entry)

    def _placements(self, config: Config, ready: dict, pending: dict, seed: int,
                    rng: random.Random) -> None:
        """The rounds themselves: each candidate at each placement, in a shuffled order."""
        import torch
        from . import candidates as cands, machine, placement
        device = self.plan.device
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
                try:
                    with self.clock.phase("placement"):
                        placement.release(device)
                        pl = placement.place(p, lambda: cands.make_inputs(
                            config, device, seed=seed + 1 + p, layout=built.layout),
                            device, rng)
                except torch.OutOfMemoryError as exc:
                    for m in modes:
                        pending[(cand, m)]["failure"] = ("oom", short_reason(exc))
                    continue
                q, k, v = pl.inputs

                def call(q=q, k=k, v=v, fn=built.fn):
                    return fn(q, k, v)
                with built.context():  # e.g. SDPA's forced backend: set once, outside timers
                    with self.clock.phase("state"):
                        state = machine.gpu_state()
                    with self.clock.phase("profile"):
                        kernel_ms, kernel_calls = (self._placement_kernel_ms(call) if modes
                                                   else (None, None))
                    for mode in modes:
                        entry = pending[(cand, mode)]
                        with self.clock.phase("timing"):
                            rec = self._time_placement(call, mode, entry)
                        if "failure" in rec:
                            entry["failure"] = rec.pop("failure")
                            continue
                        rec.update(pl.as_record(), round=p, position=position,
                                   kernel_ms=kernel_ms, kernel_calls=kernel_calls,
                                   gpu_state_start=state)
                        with self.clock.phase("state"):
                            rec["gpu_state_end"] = machine.gpu_state()
                        entry["placements"].append(rec)
                    if want_kernels:
                        self._kernels(call, config, cand)
                del call, q, k, v, pl
        with self.clock.phase("placement"):
            placement.release(device)

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

    def _placement_kernel_ms(self, call) -> tuple[float | None, int | None]:
        """Sum of the profiler's kernel times per call at this placement and the calls it
        profiled (``profiler.PLACEMENT_CALLS``); (None, None) if off."""
        if not (self.plan.kernel_times and self.plan.device == "cuda"):
            return None, None
        from . import profiler
        try:
            got = profiler.profile_device_time(call, n_calls=profiler.PLACEMENT_CALLS)
        except Exception:  # the profiler is evidence beside the timing, never a reason to stop
            return None, None
        return float(got["device_ms_per_call"]), int(got["n_calls"])

    def _time_placement(self, call, mode, entry: dict) -> dict:
        """Time one placement in one mode; a dict with the samples and settings, or with
        ``failure`` = (status, reason). In graph mode the calls per replay are sized at the
        unit's first placement and kept at the others (``calls_per_sample_sized``), which
        capture once instead of capturing, sizing on a replay and capturing again."""
        import torch
        from . import timing
        k = entry.get("calls_per_sample") if mode == "graph" else None
        t0 = time.monotonic()
        try:
            sample = timing.measure(call, mode=mode, device=self.plan.device,
                                    calls_per_sample=k, **self.plan.timing)
        except torch.OutOfMemoryError as exc:
            return {"failure": ("oom", short_reason(exc))}
        except Exception as exc:
            return {"failure": ("error", short_reason(exc))}
        settings = {key: v for key, v in dataclasses.asdict(sample).items() if key != "times_ms"}
        rec = {"times_ms": [float(x) for x in sample.times_ms], "timing": jsonable(settings),
               "elapsed_s": time.monotonic() - t0}
        if mode == "graph":
            entry.setdefault("calls_per_sample", sample.calls_per_sample)
            rec["calls_per_sample_sized"] = k is None
        return rec

    def _write_timing(self, config, cand, mode, info, entry) -> None:
        self._write(unit_records.timing_unit(config.key, cand, mode, self.trial, info, entry,
                                             PROTOCOL))

    def _kernels(self, call, config, cand) -> None:
        from . import profiler
        unit = {"kind": "kernels", "config": config.key, "candidate": cand,
                "started_utc": _now()}
        try:
            with self.clock.phase("kernels"):
                evidence = profiler.profile_device_time(call)
        except Exception as exc:
            unit.update(status="error", reason=short_reason(exc), kernels=[])
        else:
            unit.update(status="ok", reason="", evidence=jsonable(evidence),
                        kernels=unit_records.kernel_rows(evidence))
        self._write(unit)

