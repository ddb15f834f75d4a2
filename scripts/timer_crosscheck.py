"""Every candidate under every timer a practitioner uses, on one GPU, in the same processes (issue 46).

At the target (B32 H8 S512 D64 fp16) and four long shapes (``LONG_SHAPES``: the confirmatory
family's non-causal long shapes, 16k tokens and hidden 2048), a first fresh process builds
every candidate (the registry's defaults, ``gluon``, and the peers of
``attn_analysis.measure.peers`` that import) and runs the float64 gate (``candidates.check``),
timing nothing: it fills the on-disk caches (compiles, FA4's JIT) and records each build's
choices. Then each of ``--processes`` fresh processes builds the candidates that passed
(Triton's and Gluon's tuning reused from the build process), draws one placement per
candidate and shape (``placement.place``), and times that one call with every timer below,
the target first, then the other shapes in a random order, candidates and timers shuffled:

- ``graph``: the protocol's graph mode, ``timing.measure(call, "graph")`` (the package's timer);
- ``per_call``: the protocol's eager mode, ``timing.measure(call, "per_call")`` (an event pair
  around one call, then a synchronize: what an eager PyTorch user's single call costs);
- ``do_bench``: ``triton.testing.do_bench`` with its defaults (its L2 flush before each call);
- ``do_bench_cudagraph``: ``triton.testing.do_bench_cudagraph`` with its defaults;

then reads the kernel time of the call from the profiler (``profiler.profile_device_time``),
so the host's share of an eager call is ``per_call - kernel``. Every raw time is kept, with the
GPU's clocks, temperature and power read (never set) before and after each timer
(``machine.gpu_state``), the machine's fingerprint (versions, GPU UUID) and each build's info
(package versions of the peers). Candidates that fail to build or fail the gate are
recorded with the reason and never timed. Each part has a wall-clock budget
(``--build-deadline-s``, ``--deadline-s``, ``--exp-deadline-s``, shared equally by its
processes); a unit its process reaches too late is recorded as ``skipped: deadline``.

``--experiments`` adds the controlled experiments (:data:`EXPERIMENTS`) that explain a
disagreement, in ``--exp-processes`` further fresh processes at ``EXP_SHAPES``:

- ``l2``: kernel time (profiler) of calls replayed back to back in one graph, hot, against the
  same graph with an L2 flush (twice the L2) captured before every call, flush kernels left
  out; and ``do_bench`` as shipped against ``do_bench`` with a 4-byte "flush" (same code path,
  no eviction);
- ``composition``: graph mode with 1, the protocol's automatic count, and 100 calls per replay,
  and ``do_bench_cudagraph`` at rep 20 ms and 100 ms, each with SM clock samples taken by a
  sampling thread during the timer (``clocks``);
- ``placement``: graph mode at ``EXP_PLACEMENTS`` further placements (fresh inputs at new
  addresses) of the same candidate.

Usage (repository root; ``--gpu N`` pins every process to GPU N of a multi-GPU host)::

    PYTHONPATH=. python3 scripts/timer_crosscheck.py --gpu 0 --out $OUT/timers.json [--experiments]
    PYTHONPATH=. python3 scripts/timer_crosscheck.py --device cpu --quick --out /tmp/t.json

Writes one sealed check file (``attn_analysis.record.checks``, kind ``timers``) atomically after
every process, so a run cut short keeps what it measured (``complete`` says whether it
finished). On the CPU only the two protocol modes run (wall clock); the triton timers and the
profiler are recorded as skipped. The parent process never touches the GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from attn_analysis.configs import TARGET, Config  # noqa: E402
from attn_analysis.record import checks  # noqa: E402

TIMERS = ("graph", "per_call", "do_bench", "do_bench_cudagraph")
CUDA_ONLY_TIMERS = ("do_bench", "do_bench_cudagraph")
# The confirmatory family's non-causal long shapes (configs.MATRICES["confirm-v1"]), at
# FlashAttention-3's geometry: 16k tokens per batch, hidden 2048.
LONG_SHAPES = (Config(8, 32, 2048), Config(2, 32, 8192), Config(8, 16, 2048, 128),
               Config(2, 16, 8192, 128))
SHAPES = (TARGET,) + LONG_SHAPES
PLUGIN = "attn_analysis.measure.peers"
EXTRA_CANDIDATES = ("gluon",)
# Baselines whose long-shape calls last tens of milliseconds (the score matrix in memory) and
# controls for layout: timed at the target only, to keep a run within its budget.
TARGET_ONLY = ("sdpa_math", "eager", "eager_compiled", "fa4_bshd", "sdpa_bshd")
REFERENCE = "sdpa"
EXPERIMENTS = ("l2", "composition", "placement")
ROLES = ("build", "time", "experiments")
EXP_SHAPES = (TARGET, Config(2, 32, 8192))
EXP_CANDIDATES = ("sdpa", "sdpa_cudnn", "flex", "triton", "gluon", "fa4", "fa3",
                  "cudnn_frontend", "flex_flash")
EXP_PLACEMENTS = 3
GRAPH_CALLS = (1, None, 100)       # composition: calls per replay (None: the protocol's rule)
QUICK_GRAPH_CALLS = (1, None, 4)
DBCG_REPS_MS = (20, 100)           # composition: do_bench_cudagraph's rep
L2_GRAPH_CALLS = 10                # l2: calls in the hot and the flushed graph
L2_REPLAYS = 5
CLOCK_SAMPLE_S = 0.01
CPU_QUICK_SHAPES = (Config(1, 2, 32, 64, "float16"),)
CPU_CANDIDATES = ("sdpa", "sdpa_math", "eager")
QUICK_CANDIDATES = ("sdpa", "sdpa_cudnn", "triton", "gluon", "fa4")


def log(*a):
    print(*a, flush=True)


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


# ----------------------------------------------------------------------------- the plan

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="the JSON file (default $OUT/timers.json)")
    ap.add_argument("--gpu", type=int, default=None, help="pin every process to this GPU")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--quick", action="store_true", help="smoke test: target, few candidates")
    ap.add_argument("--processes", type=int, default=4, help="fresh processes (default 4)")
    ap.add_argument("--shapes", nargs="*", default=None, help="Config keys (default SHAPES)")
    ap.add_argument("--candidates", nargs="*", default=None, help="names (default: all)")
    ap.add_argument("--budget-s", type=float, default=0.15,
                    help="budget of each protocol measure (graph, per_call)")
    ap.add_argument("--build-deadline-s", type=float, default=110.0,
                    help="wall-clock budget of the build process (builds, gate, caches)")
    ap.add_argument("--deadline-s", type=float, default=190.0,
                    help="wall-clock budget of the timing processes; units left are recorded "
                         "as skipped")
    ap.add_argument("--experiments", action="store_true", help="add the controlled experiments")
    ap.add_argument("--experiments-only", action="store_true", help="only the experiments")
    ap.add_argument("--exp-processes", type=int, default=2)
    ap.add_argument("--exp-deadline-s", type=float, default=200.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--plan", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--part", default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def make_plan(args) -> dict:
    """Check the arguments and return the plan every worker follows (ValueError names a bad
    argument before any process starts or any file is written)."""
    if args.device not in ("cuda", "cpu"):
        raise ValueError(f"`--device` must be 'cuda' or 'cpu'; got {args.device!r}.")
    for name in ("processes", "exp_processes"):
        if getattr(args, name) < 1:
            raise ValueError(f"`--{name.replace('_', '-')}` must be >= 1; "
                             f"got {getattr(args, name)!r}.")
    for name in ("budget_s", "deadline_s", "exp_deadline_s", "build_deadline_s"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) > 0):
            raise ValueError(f"`--{name.replace('_', '-')}` must be a positive number; "
                             f"got {getattr(args, name)!r}.")
    if args.gpu is not None and args.gpu < 0:
        raise ValueError(f"`--gpu` must be a GPU index >= 0; got {args.gpu!r}.")
    if args.gpu is not None and args.device == "cpu":
        raise ValueError("`--gpu` needs `--device cuda`.")
    cpu = args.device == "cpu"
    if args.shapes:
        shapes = [Config.from_key(k).key for k in args.shapes]
    elif cpu:
        shapes = [c.key for c in CPU_QUICK_SHAPES]
    elif args.quick:
        shapes = [TARGET.key]
    else:
        shapes = [c.key for c in SHAPES]
    if args.candidates:
        cands = list(dict.fromkeys(args.candidates))
    elif cpu:
        cands = list(CPU_CANDIDATES)
    elif args.quick:
        cands = list(QUICK_CANDIDATES)
    else:
        cands = None  # every registered candidate, resolved in the worker (peers may not import)
    if cands is not None and REFERENCE not in cands:
        raise ValueError(f"`--candidates` must include the reference {REFERENCE!r}.")
    quick = args.quick or cpu
    target = TARGET.key if TARGET.key in shapes else shapes[0]
    return dict(device=args.device, quick=quick, shapes=shapes, candidates=cands, target=target,
                target_only=list(TARGET_ONLY), reference=REFERENCE,
                timers=list(TIMERS), budget_s=min(args.budget_s, 0.05) if quick else args.budget_s,
                seed=args.seed, exp_shapes=[target] if quick else [c.key for c in EXP_SHAPES],
                exp_candidates=(cands or list(EXP_CANDIDATES)) if quick else list(EXP_CANDIDATES),
                exp_placements=1 if quick else EXP_PLACEMENTS,
                graph_calls=list(QUICK_GRAPH_CALLS if quick else GRAPH_CALLS))


def units_for(shapes, names, target_only, target_key) -> list[tuple[str, str]]:
    """(shape, candidate) pairs of the main part: every candidate at the target (the plan's
    ``target``: TARGET, or the first shape where TARGET is not measured), the target-only
    ones left out at the other shapes."""
    return [(s, c) for s in shapes for c in names if s == target_key or c not in target_only]


def ordered(units, rng: random.Random, first=None) -> list:
    """The units grouped by shape (shapes in a random order, ``first`` first if given: the
    target, so that a deadline never costs it), candidates shuffled within a shape: each
    process measures everything in its own order."""
    shapes = list(dict.fromkeys(s for s, _ in units))
    rng.shuffle(shapes)
    if first in shapes:
        shapes.remove(first)
        shapes.insert(0, first)
    out = []
    for s in shapes:
        block = [u for u in units if u[0] == s]
        rng.shuffle(block)
        out += block
    return out


# ----------------------------------------------------------------------------- timers

class ClockSampler:
    """SM clock samples (``machine.gpu_state``, read-only) taken by a thread every
    ``CLOCK_SAMPLE_S`` while a timer runs (experiments only: the thread takes the GIL,
    which an eager timer would feel)."""

    def __init__(self, machine, period_s=CLOCK_SAMPLE_S):
        self.machine, self.period_s, self.samples = machine, period_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        t0 = time.perf_counter()
        while not self._stop.is_set():
            self.samples.append((round(time.perf_counter() - t0, 4),
                                 self.machine.gpu_state()["sm_clock_mhz"]))
            self._stop.wait(self.period_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class _NoFlushDriver:
    """Triton's active driver with a 4-byte benchmark cache: ``do_bench`` runs its own code
    path, memset included, but evicts nothing from L2."""

    def __init__(self, driver):
        self._driver = driver

    def __getattr__(self, name):
        return getattr(self._driver, name)

    def get_empty_cache_for_benchmark(self):
        import torch
        return torch.empty(1, dtype=torch.int32, device="cuda")


@contextlib.contextmanager
def no_l2_flush():
    """Inside, ``triton.testing.do_bench`` flushes 4 bytes instead of its L2-sized buffer."""
    import types
    import triton.testing as tt
    real = tt.runtime
    tt.runtime = types.SimpleNamespace(driver=types.SimpleNamespace(active=_NoFlushDriver(
        real.driver.active)))
    try:
        yield
    finally:
        tt.runtime = real


class Worker:
    """One fresh process in one of the ``ROLES``: ``build`` (build and gate every unit, time
    nothing: warms the on-disk caches and records the hints), ``time`` (the main part) or
    ``experiments``."""

    def __init__(self, plan: dict, index: int, part_path: str, hints: dict, deadline: float,
                 role: str):
        from attn_analysis.measure import machine
        if role not in ROLES:
            raise ValueError(f"`role` must be one of {ROLES}; got {role!r}.")
        self.plan, self.index, self.part_path, self.hints = plan, index, part_path, hints
        self.deadline, self.role, self.machine = deadline, role, machine
        self.device = plan["device"]
        self.cuda = self.device == "cuda"
        self.rng = random.Random(plan["seed"] * 1_000_003 + index * 7919 + ROLES.index(role))
        self.part = dict(worker=index, pid=os.getpid(), role=role,
                         started_utc=now_utc(), units=[], builds={}, complete=False)

    # -- edges
    def save(self):
        from attn_analysis.record.journal import atomic_write_bytes
        atomic_write_bytes(Path(self.part_path), json.dumps(self.part, default=str,
                                                            allow_nan=True).encode())

    def state(self):
        return self.machine.gpu_state() if self.cuda else None

    # -- setup
    def start(self):
        from attn_analysis.measure import candidates, env
        try:
            env.lock(seed=self.plan["seed"], deterministic=False)
            self.part["lock"] = "locked: env.lock(deterministic=False)"
        except Exception as exc:  # reported beside the numbers, as check_timer does
            self.part["lock"] = f"not locked: {type(exc).__name__}: {exc}"
        try:
            candidates.load_plugins([PLUGIN])
            self.part["plugin"] = PLUGIN
        except Exception as exc:
            self.part["plugin"] = f"not loaded: {type(exc).__name__}: {exc}"
        if not self.cuda:  # a smoke run: one thread, so a shared CPU's load stalls it less
            import torch
            torch.set_num_threads(1)
        names = self.plan["candidates"]
        if names is None:
            names = list(candidates.DEFAULT_CANDIDATES) + [
                n for n in candidates.CANDIDATES if n not in candidates.DEFAULT_CANDIDATES]
        self.names = [n for n in names if n in candidates.CANDIDATES]
        self.part["unknown_candidates"] = [n for n in names if n not in candidates.CANDIDATES]
        self.part["fingerprint"] = self.machine.fingerprint()
        self.part["gpu_state_start"] = self.state()

    def build(self, shape: str, name: str):
        """Build ``name`` at ``shape`` once in this process (hint: the first process's info);
        gate it in the first process; return the Built or None, the outcome recorded."""
        from attn_analysis.measure import candidates
        key = f"{shape}|{name}"
        if key in self._built:
            return self._built[key]
        rec = self.part["builds"].setdefault(shape, {}).setdefault(name, {})
        config = Config.from_key(shape)
        earlier = self.hints.get(shape, {}).get(name, {})
        if self.role != "build" and not earlier:
            rec.update(status="skipped", reason="no gated build from the build process")
            self._built[key] = None
            return None
        if earlier and earlier.get("status") != "ok":
            rec.update(status="skipped", reason=f"build process: {earlier.get('status')}")
            self._built[key] = None
            return None
        t0 = time.perf_counter()
        try:
            built = candidates.build(name, config, self.device, hint=earlier.get("info"))
        except candidates.Unsupported as exc:
            rec.update(status="unsupported", reason=str(exc)[:500])
            built = None
        except Exception as exc:
            rec.update(status="error", reason=f"{type(exc).__name__}: {str(exc)[:500]}")
            built = None
        rec["build_s"] = time.perf_counter() - t0
        if built is not None:
            rec.update(status="ok", info=built.info)
            if self.role == "build":
                try:
                    gate = candidates.check(built, config, self.device, seed=12345, name=name)
                    rec["gate"] = dict(passed=gate.passed, rel_error=gate.rel_error,
                                       reason=gate.reason)
                    if not gate.passed:
                        rec["status"], built = "failed_gate", None
                except Exception as exc:
                    rec.update(status="error", reason=f"gate: {type(exc).__name__}: {exc}")
                    built = None
        self._built[key] = built
        return built

    def placed(self, shape: str, built, index: int):
        """A fresh placement of the inputs (protocol v2) and the call on them."""
        from attn_analysis.measure import candidates, placement
        config = Config.from_key(shape)
        seed = self.plan["seed"] * 100_000 + self.index * 1000 + index + 1
        placement.release(self.device)
        held = placement.place(index, lambda: candidates.make_inputs(
            config, self.device, seed, layout=built.layout), self.device, self.rng)
        return held, (lambda q=held.inputs[0], k=held.inputs[1], v=held.inputs[2],
                      fn=built.fn: fn(q, k, v))

    # -- one timer
    def timer(self, name: str, call, **kw) -> dict:
        """Run timer ``name`` on ``call``; raw times, settings, clocks before and after."""
        from attn_analysis.measure import timing
        if name in CUDA_ONLY_TIMERS and not self.cuda:
            return {"skipped": "needs CUDA"}
        out = dict(gpu_state_before=self.state())
        t0 = time.perf_counter()
        try:
            if name in ("graph", "per_call", "cold_l2"):
                r = timing.measure(call, name, device=self.device, budget_s=self.plan["budget_s"],
                                   **kw)
                out.update(times_ms=list(r.times_ms), calls_per_sample=r.calls_per_sample,
                           n_warmup_calls=r.n_warmup_calls, stop_reason=r.stop_reason,
                           flush_bytes=r.flush_bytes, clock=r.clock)
            elif name == "do_bench":
                import triton.testing as tt
                out.update(times_ms=[float(t) for t in tt.do_bench(call, return_mode="all", **kw)],
                           settings=kw or {"warmup": "default", "rep": "default"},
                           clock="cuda_event")
            elif name == "do_bench_cudagraph":
                import triton.testing as tt
                out.update(times_ms=[float(t) for t in tt.do_bench_cudagraph(
                    call, return_mode="all", **kw)], settings=kw or {"rep": "default"},
                    clock="cuda_event")
            else:
                raise ValueError(f"`timer` must be one of {TIMERS}; got {name!r}.")
            out["median_ms"] = float(_median(out["times_ms"]))
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        out["elapsed_s"] = time.perf_counter() - t0
        out["gpu_state_after"] = self.state()
        return out

    def kernel(self, call) -> dict:
        from attn_analysis.measure import profiler
        if not self.cuda:
            return {"skipped": "needs CUDA"}
        try:
            return profiler.profile_device_time(call, n_calls=profiler.PLACEMENT_CALLS)
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}

    # -- the build process
    def run_build(self):
        """Build and gate every unit of the main part and the experiments, timing nothing."""
        self._built = {}
        units = units_for(self.plan["shapes"], self.names, self.plan["target_only"],
                          self.plan["target"])
        units += [(s, c) for s in self.plan["exp_shapes"] for c in self.plan["exp_candidates"]
                  if c in self.names and (s, c) not in units]
        for shape, name in units:
            if time.time() > self.deadline:
                self.part["units"].append(dict(shape=shape, candidate=name, skipped="deadline"))
                continue
            self.build(shape, name)
            self.save()
        self._built.clear()

    # -- the units, in order, while the deadline allows
    def units_in_time(self, units):
        """Yield ``(i, shape, built, unit)`` for each (shape, candidate) in ``units`` order.

        Past the deadline a unit is recorded as skipped; a candidate that does not build is
        left to :meth:`build`'s record. Records the order in the part and clears the built
        candidates at the end, for the main part and the experiments alike."""
        self._built = {}
        self.part["order"] = [f"{s}|{c}" for s, c in units]
        for i, (shape, name) in enumerate(units):
            unit = dict(shape=shape, candidate=name, order=i)
            if time.time() > self.deadline:
                unit["skipped"] = "deadline"
                self.part["units"].append(unit)
                continue
            built = self.build(shape, name)
            if built is not None:
                yield i, shape, built, unit
        self._built.clear()

    # -- the main part
    def run_main(self):
        units = ordered(units_for(self.plan["shapes"], self.names, self.plan["target_only"],
                                  self.plan["target"]), self.rng, first=self.plan["target"])
        for i, shape, built, unit in self.units_in_time(units):
            name = unit["candidate"]
            try:
                held, call = self.placed(shape, built, 0)
                unit["placement"] = held.as_record()
                order = list(TIMERS)
                self.rng.shuffle(order)
                unit["timer_order"] = order
                with built.context():
                    unit["timers"] = {t: self.timer(t, call) for t in order}
                    unit["kernel"] = self.kernel(call)  # after the timers, as a sweep does
                del held, call
            except Exception as exc:
                unit["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
            self.part["units"].append(unit)
            log(f"[w{self.index}] {shape} {name}: " + ", ".join(
                f"{t} {v.get('median_ms', float('nan')):.4f}" for t, v in
                unit.get("timers", {}).items()))
            if i % 8 == 7:
                self.save()

    # -- the experiments
    def run_experiments(self):
        units = [(s, c) for s in self.plan["exp_shapes"] for c in self.plan["exp_candidates"]
                 if c in self.names]
        for i, shape, built, unit in self.units_in_time(ordered(units, self.rng)):
            name = unit["candidate"]
            unit["experiments"] = {}
            order = list(EXPERIMENTS)
            self.rng.shuffle(order)
            for exp in order:
                try:
                    with built.context():
                        unit["experiments"][exp] = getattr(self, f"exp_{exp}")(shape, built)
                except Exception as exc:
                    unit["experiments"][exp] = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
            self.part["units"].append(unit)
            log(f"[x{self.index}] {shape} {name}: done")
            self.save()

    def exp_l2(self, shape, built) -> dict:
        """Hot against flushed calls: graph kernel time, and do_bench with and without flush."""
        held, call = self.placed(shape, built, 10)
        out = {}
        if self.cuda:
            out["graph_kernel"] = l2_graph_kernels(call, self.machine)
        out["do_bench_flush"] = self.timer("do_bench", call)
        if self.cuda:
            try:
                with no_l2_flush():
                    out["do_bench_no_flush"] = self.timer("do_bench", call)
            except Exception as exc:  # Triton's internals moved: the rest still stands
                out["do_bench_no_flush"] = {"error": f"{type(exc).__name__}: {exc}"}
        out["cold_l2"] = self.timer("cold_l2", call)
        out["graph"] = self.timer("graph", call)
        del held, call
        return out

    def exp_composition(self, shape, built) -> dict:
        """Calls per graph replay, and do_bench_cudagraph's length, with clock samples."""
        held, call = self.placed(shape, built, 20)
        out = {}
        for k in self.plan["graph_calls"]:
            with self.sampler() as s:
                r = self.timer("graph", call, calls_per_sample=k)
            out[f"graph_k{k or 'auto'}"] = dict(r, clock_samples=s.samples)
        for rep in DBCG_REPS_MS if self.cuda else ():
            with self.sampler() as s:
                r = self.timer("do_bench_cudagraph", call, rep=rep)
            out[f"do_bench_cudagraph_rep{rep}"] = dict(r, clock_samples=s.samples)
        del held, call
        return out

    def exp_placement(self, shape, built) -> dict:
        """Graph mode at further placements of the same candidate."""
        out = []
        for j in range(self.plan["exp_placements"]):
            held, call = self.placed(shape, built, 30 + j)
            out.append(dict(self.timer("graph", call), placement=held.as_record()))
            del held, call
        return {"graph": out}

    def sampler(self):
        return ClockSampler(self.machine) if self.cuda else contextlib.nullcontext(
            type("NoSamples", (), {"samples": []})())

    def run(self):
        self.start()
        self.save()
        {"build": self.run_build, "time": self.run_main,
         "experiments": self.run_experiments}[self.role]()
        self.part.update(complete=True, finished_utc=now_utc(), gpu_state_end=self.state())
        self.save()


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def l2_graph_kernels(call, machine) -> dict:
    """Kernel time per call (profiler) of ``L2_GRAPH_CALLS`` calls in one graph, hot (back to
    back) and flushed (a write of twice the L2 captured before each call), the flush's own
    kernels left out by name (read from a graph of flushes alone)."""
    import torch
    from attn_analysis.measure import profiler, timing
    l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()),
                 "L2_cache_size", 0) or timing.FALLBACK_L2_BYTES
    buf = torch.empty(2 * int(l2), dtype=torch.uint8, device="cuda")

    def flush():
        buf.zero_()

    def flushed():
        flush()
        call()

    def kernel_ms(graph, exclude=()):
        prof = profiler.profile_session(graph.replay, L2_REPLAYS)
        rows = profiler.kernels_per_call(((n, (e - s) / 1e3) for n, s, e in (
            (ev.name(), ev.start_ns(), ev.end_ns()) for ev in profiler.device_activities(prof))),
            L2_REPLAYS * L2_GRAPH_CALLS)
        kept = [r for r in rows if r["name"] not in exclude]
        return sum(r["ms_per_call"] for r in kept), rows

    g_flush = profiler.capture_graph(flush, L2_GRAPH_CALLS)
    kernel_ms(g_flush)  # unrecorded: the profiler's start-up in this process
    _, flush_rows = kernel_ms(g_flush)
    flush_names = {r["name"] for r in flush_rows}
    hot_ms, hot_rows = kernel_ms(profiler.capture_graph(call, L2_GRAPH_CALLS))
    cold_ms, cold_rows = kernel_ms(profiler.capture_graph(flushed, L2_GRAPH_CALLS), flush_names)
    return dict(hot_kernel_ms=hot_ms, flushed_kernel_ms=cold_ms, flush_bytes=2 * int(l2),
                flush_kernels=sorted(flush_names), calls_per_graph=L2_GRAPH_CALLS,
                replays=L2_REPLAYS, hot_kernels=hot_rows[:6],
                flushed_kernels=[r for r in cold_rows if r["name"] not in flush_names][:6],
                sm_clock_mhz=machine.gpu_state()["sm_clock_mhz"])


# ----------------------------------------------------------------------------- the parent

def worker_main(args) -> int:
    plan = json.loads(Path(args.plan).read_text())
    w = Worker(plan["plan"], args.worker, args.part, plan.get("hints", {}), plan["deadline"],
               plan["role"])
    w.run()
    return 0


def hints_from(part: dict) -> dict:
    """What the build process built (status and info per shape and candidate): the timing
    processes build the same kernels (tuned configurations reused) and skip what failed
    to build or failed the float64 gate."""
    return {s: {c: {"status": r.get("status"), "info": r.get("info")} for c, r in d.items()}
            for s, d in part.get("builds", {}).items()}


def run_workers(doc, plan, n, deadline_s, role, env, out_path, tmp, hints) -> dict:
    """Start ``n`` fresh processes of ``role`` one after another; each gets an equal share
    of what is left of ``deadline_s``; merge their parts into ``doc`` and write it after
    each. Returns the hints (from the build process's part when ``role`` is build)."""
    key = {"build": "build_process", "time": "processes",
           "experiments": "experiment_processes"}[role]
    doc[key] = []
    t_end = time.time() + deadline_s
    for i in range(n):
        share = (t_end - time.time()) / (n - i)
        plan_path = Path(tmp) / f"plan_{key}_{i}.json"
        part_path = Path(tmp) / f"part_{key}_{i}.json"
        plan_path.write_text(json.dumps(dict(plan=plan, hints=hints, role=role,
                                             deadline=time.time() + max(share, 1.0))))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(i),
               "--plan", str(plan_path), "--part", str(part_path)]
        t0 = time.time()
        try:  # a build (compile, autotune) may outrun the share: allow 120 s on top
            rc = subprocess.run(cmd, env=env, timeout=max(share, 1.0) + 120).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        part = json.loads(part_path.read_text()) if part_path.exists() else {"worker": i}
        part.update(returncode=rc, wall_s=time.time() - t0)
        doc[key].append(part)
        if role == "build":
            hints = hints_from(part)
        checks.write(out_path, doc, "timers")
        log(f"{key} {i}: rc={rc}, {part['wall_s']:.0f} s, "
            f"{len(part.get('units', []))} units, wrote {out_path}")
    return hints


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        return worker_main(args)
    plan = make_plan(args)
    out_path = Path(args.out or os.path.join(os.environ.get("OUT", "."), "timers.json"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    if args.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    quick = plan["quick"]
    doc = dict(script="scripts/timer_crosscheck.py", argv=list(sys.argv[1:] if argv is None
                                                               else argv),
               started_utc=now_utc(), gpu_index=args.gpu,
               cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"), plan=plan, complete=False)
    with tempfile.TemporaryDirectory(prefix="timers-") as tmp:
        hints = run_workers(doc, plan, 1, min(args.build_deadline_s, 60.0) if quick
                            else args.build_deadline_s, "build", env, out_path, tmp, {})
        if not args.experiments_only:
            run_workers(doc, plan, 2 if quick else args.processes,
                        min(args.deadline_s, 60.0) if quick else args.deadline_s,
                        "time", env, out_path, tmp, hints)
        if args.experiments or args.experiments_only:
            run_workers(doc, plan, 1 if quick else args.exp_processes,
                        min(args.exp_deadline_s, 60.0) if quick else args.exp_deadline_s,
                        "experiments", env, out_path, tmp, hints)
    parts = doc.get("processes", []) + doc.get("experiment_processes", [])
    doc.update(complete=bool(parts) and all(p.get("complete") for p in parts),
               finished_utc=now_utc())
    checks.write(out_path, doc, "timers")
    log(f"wrote {out_path} (complete: {doc['complete']})")
    try:
        from attn_analysis.analyse import timer_agreement
        if "processes" in doc:
            log(timer_agreement.summary_text(doc))
        else:  # --experiments-only: no main processes, the experiments' table instead
            for row in timer_agreement.experiment_summary(doc):
                log(json.dumps(row))
    except Exception as exc:  # the file is written; a summary that fails is only reported
        log(f"summary failed: {type(exc).__name__}: {exc}")
    return 0 if doc["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
