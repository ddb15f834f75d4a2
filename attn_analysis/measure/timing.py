"""Kernel timers with three protocols (``per_call``, ``cold_l2``, ``graph``) returning raw ms.

The defaults, exactly as in the signature (a test pins them)::

    measure(fn, mode="graph", *, device=None, n_samples=None, ci_target=0.005, budget_s=2.0,
            min_samples=20, max_samples=5000, warmup_ms=25.0, calls_per_sample=None,
            flush_bytes=None, confidence=0.95)

Modes (``MODES``):

``per_call``
    The original reports' protocol: an event pair around one call, then
    ``torch.cuda.synchronize()`` after every call. The GPU sits idle when the start event
    fires, so the span holds the host's launch latency too: at small shapes it reads the host,
    not the kernel. Kept to reproduce and criticise those reports.
``cold_l2``
    Before each sample a buffer of ``flush_bytes`` (default twice the device's L2) is written
    outside the timed span; only the one call lies between the events. Events are made up
    front and one synchronize ends each batch, so the queue stays ahead of the GPU.
``graph``
    ``calls_per_sample`` calls captured in one CUDA graph; each replay is timed with an event
    pair and divided by the count. Hot L2 by construction (same inputs, back to back) and
    almost no launch gaps: the closest of the three to the kernels' own device time.

Without CUDA, or with ``device="cpu"``, the same protocols run on ``time.perf_counter_ns``
and the sample's ``clock`` says ``"cpu_wall"``: never read those numbers as GPU time.
:mod:`.processes` repeats ``measure`` in fresh processes (process-to-process spread);
:mod:`.profiler` reads what the kernels of a call or a graph replay do.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import numpy as np

from .. import _validate
from ..configs import DEVICES, MODES
from ..analyse.intervals import median_ci

__all__ = ["CLOCKS", "STOP_REASONS", "SETTINGS", "GRAPH_TARGET_MS", "MAX_CALLS_PER_SAMPLE",
           "MAX_WARMUP_CALLS", "N_ESTIMATE_CALLS", "CPU_FLUSH_BYTES", "FALLBACK_L2_BYTES",
           "TimingSample", "measure"]

CLOCKS = ("cuda_event", "cpu_wall")
STOP_REASONS = ("n_samples", "ci_target", "budget", "max_samples")
# Stopping-rule settings of ``measure`` that each TimingSample keeps under the same names.
SETTINGS = ("n_samples", "ci_target", "budget_s", "min_samples", "max_samples", "warmup_ms",
            "confidence")
# An auto-sized graph replay should last at least this long. A replay has a fixed cost of a
# few microseconds that is spread over its calls; scripts/graph_anatomy.py measured it on an
# H100 (data/checks/graph_anatomy_h100.json). The runs recorded up to 2026-11-23 used 0.2 ms.
GRAPH_TARGET_MS = 1.0
MAX_CALLS_PER_SAMPLE = 100     # cap of the auto-sized graph
MAX_WARMUP_CALLS = 100_000
N_ESTIMATE_CALLS = 5           # calls timed back to back for the first estimate
CPU_FLUSH_BYTES = 64 * 2**20
FALLBACK_L2_BYTES = 64 * 2**20

_now_ns = time.perf_counter_ns  # the one host clock (samples on CPU, budget); tests fake it


@dataclasses.dataclass(frozen=True)
class TimingSample:
    """Raw per-call times (ms) from one ``measure`` call and the settings that produced them.

    ``times_ms`` holds one entry per sample, already divided by ``calls_per_sample``.
    ``ci_rel_halfwidth`` is half the width of the order-statistic CI of the median
    (``stats.median_ci`` at ``confidence``) over the median. ``n_warmup_calls`` counts the
    calls of ``fn`` before the first sample (first call, estimate, warm-up; graph capture
    excluded). ``flush_bytes`` is the bytes written before each sample (``cold_l2``), else None.

    The stopping-rule settings in force are kept too, as plain ``int``, ``float`` or None
    (``dataclasses.asdict`` minus ``times_ms`` is JSON as it stands, and
    ``measure(fn, mode, **{k: getattr(s, k) for k in SETTINGS})`` repeats the stopping rule):
    ``n_samples`` is the requested count (None: the adaptive rule ran; the count taken is
    ``n``), then ``ci_target``, ``budget_s``, ``min_samples``, ``max_samples``, ``warmup_ms``
    and ``confidence``. With ``n_samples`` given the adaptive settings were passed but unused.
    Built by hand, their defaults are ``measure``'s (a test pins both).
    """

    times_ms: tuple
    mode: str
    clock: str
    device: str
    calls_per_sample: int
    n_warmup_calls: int
    flush_bytes: int | None
    stop_reason: str
    ci_rel_halfwidth: float
    elapsed_s: float
    confidence: float = 0.95
    pid: int = 0
    n_samples: int | None = None
    ci_target: float = 0.005
    budget_s: float = 2.0
    min_samples: int = 20
    max_samples: int = 5000
    warmup_ms: float = 25.0

    def __post_init__(self):
        times = tuple(float(t) for t in self.times_ms)
        if not times or not all(math.isfinite(t) and t >= 0 for t in times):
            raise ValueError("`times_ms` must hold at least one finite, non-negative time.")
        object.__setattr__(self, "times_ms", times)
        for name, allowed in (("mode", MODES), ("clock", CLOCKS), ("device", DEVICES),
                              ("stop_reason", STOP_REASONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"`{name}` must be one of {allowed}; got {getattr(self, name)!r}.")
        settings = _settings_iv(**{k: getattr(self, k) for k in SETTINGS})
        for name, value in settings.items():  # plain Python values, JSON as they stand
            object.__setattr__(self, name, value)

    @property
    def n(self) -> int:
        return len(self.times_ms)

    @property
    def median_ms(self) -> float:
        return float(np.median(self.times_ms))

    @property
    def ci_ms(self) -> tuple[float, float]:
        """Order-statistic CI of the median at ``confidence``."""
        return median_ci(self.times_ms, self.confidence)


# ----------------------------------------------------------------------------- validation

def _torch():
    import torch  # lazy: the CPU path and spawned CPU trials need no torch

    return torch


def _cuda_available() -> bool:
    try:
        return bool(_torch().cuda.is_available())
    except ImportError:
        return False


def _settings_iv(n_samples, ci_target, budget_s, min_samples, max_samples, warmup_ms,
                 confidence) -> dict:
    """The stopping-rule settings (``SETTINGS``), checked, as plain int, float or None."""
    return dict(n_samples=_validate.integer("n_samples", n_samples, allow_none=True),
                ci_target=_validate.finite("ci_target", ci_target, strict=True),
                budget_s=_validate.finite("budget_s", budget_s, strict=True),
                min_samples=_validate.integer("min_samples", min_samples),
                max_samples=_validate.integer("max_samples", max_samples),
                warmup_ms=_validate.finite("warmup_ms", warmup_ms),
                confidence=_validate.number_in("confidence", confidence))


def _device_iv(device) -> str:
    if not (device is None or (isinstance(device, str) and device in DEVICES)):
        raise ValueError(f"`device` must be one of None, 'cpu', 'cuda'; got {device!r}.")
    if device == "cpu":
        return "cpu"
    cuda = _cuda_available()
    if device == "cuda" and not cuda:
        raise ValueError("`device` is 'cuda' but CUDA is not available here; "
                         "use device='cpu' or None.")
    return "cuda" if cuda else "cpu"


def _measure_iv(fn, mode, device, n_samples, ci_target, budget_s, min_samples, max_samples,
                warmup_ms, calls_per_sample, flush_bytes, confidence) -> dict:
    """Check every argument of ``measure``; the device last, since it may import torch."""
    if not callable(fn):
        raise ValueError(f"`fn` must be a zero-argument callable; got {fn!r}.")
    if not (isinstance(mode, str) and mode in MODES):
        raise ValueError(f"`mode` must be one of {MODES}; got {mode!r}.")
    p = dict(fn=fn, mode=mode, **_settings_iv(n_samples, ci_target, budget_s, min_samples,
                                              max_samples, warmup_ms, confidence),
             calls_per_sample=_validate.integer("calls_per_sample", calls_per_sample,
                                                allow_none=True),
             flush_bytes=_validate.integer("flush_bytes", flush_bytes, allow_none=True))
    if p["min_samples"] > p["max_samples"]:
        raise ValueError(f"`min_samples` must be <= `max_samples`; got {min_samples!r} > "
                         f"{max_samples!r}.")
    if mode != "graph" and p["calls_per_sample"] not in (None, 1):
        raise ValueError(f"`calls_per_sample` must be None or 1 unless mode is 'graph'; "
                         f"got {calls_per_sample!r} with mode {mode!r}.")
    if mode != "cold_l2" and p["flush_bytes"] is not None:
        raise ValueError(f"`flush_bytes` must be None unless mode is 'cold_l2'; "
                         f"got {flush_bytes!r} with mode {mode!r}.")
    p["device"] = _device_iv(device)
    return p


# ----------------------------------------------------------------------------- timers

class _CpuTimer:
    """Wall-clock version of the three protocols (``clock="cpu_wall"``)."""

    clock = "cpu_wall"

    def __init__(self, fn, mode):
        self.fn, self.mode, self.k, self.buf, self.flush_bytes = fn, mode, 1, None, None

    def estimate(self) -> float:
        self.fn()
        t0 = _now_ns()
        for _ in range(N_ESTIMATE_CALLS):
            self.fn()
        return (_now_ns() - t0) / 1e6 / N_ESTIMATE_CALLS

    def warm(self, n):
        for _ in range(n):
            self.fn()

    def setup(self, k, flush_bytes, auto_k) -> int:
        self.k = k
        if self.mode == "cold_l2":
            self.flush_bytes = flush_bytes or CPU_FLUSH_BYTES
            self.buf = np.empty(self.flush_bytes, dtype=np.uint8)
            self.buf.fill(0)  # touch every page once, outside any timed span
        return k

    def batch(self, b) -> list[float]:
        out = []
        for i in range(b):
            if self.buf is not None:
                self.buf.fill(i & 0xFF)  # evict the caches, outside the timed span
            t0 = _now_ns()
            for _ in range(self.k):
                self.fn()
            out.append((_now_ns() - t0) / 1e6 / self.k)
        return out


class _CudaTimer:
    """CUDA-event version of the three protocols (``clock="cuda_event"``)."""

    clock = "cuda_event"

    def __init__(self, fn, mode):
        self.torch, self.fn, self.mode, self.k = _torch(), fn, mode, 1
        cuda = self.torch.cuda
        # Graph capture needs warm-up on a side stream (PyTorch's CUDA-graph notes).
        self.stream = cuda.current_stream()
        if mode == "graph":
            self.stream = cuda.Stream()
            self.stream.wait_stream(cuda.current_stream())  # inputs were made on the main one
        self.events, self.buf, self.graph, self.flush_bytes = [], None, None, None

    def _event_pairs(self, b):
        while len(self.events) < b:  # made before the batch starts, reused afterwards
            ev = self.torch.cuda.Event
            self.events.append((ev(enable_timing=True), ev(enable_timing=True)))
        return self.events[:b]

    def estimate(self) -> float:
        cuda = self.torch.cuda
        with cuda.stream(self.stream):
            self.fn()
            cuda.synchronize()
            (s, e), = self._event_pairs(1)
            s.record()
            for _ in range(N_ESTIMATE_CALLS):
                self.fn()
            e.record()
        cuda.synchronize()
        return s.elapsed_time(e) / N_ESTIMATE_CALLS

    def warm(self, n):
        with self.torch.cuda.stream(self.stream):
            for _ in range(n):
                self.fn()
        self.torch.cuda.synchronize()

    def _capture(self, k, sizing: bool):
        """Capture ``k`` calls and replay them once (the first replay uploads the graph: too
        slow to size ``k`` on). With ``sizing``, or where the graph holds one call, time
        three more replays and return their median (ms), which :meth:`setup` sizes ``k``
        on; otherwise return None. Those replays once followed every capture; told ``k``
        they sized nothing (``benchmarks/readme-command/``, "Three replays that sized
        nothing"). Without them (``benchmarks/readme-command/probes/settle_replays_probe.py``,
        H100 and H200) no
        placement median moved and the first sample moved by at most 0.7 %, but with one
        call a replay the first sample of ``sdpa_math`` and ``eager`` at B32 H8 S2048 read
        6-9 % above its placement's median (H100), so one-call graphs keep them."""
        cuda = self.torch.cuda
        self.graph = cuda.CUDAGraph()
        with cuda.graph(self.graph):
            for _ in range(k):
                self.fn()
        cuda.synchronize()
        self.graph.replay()  # the upload
        cuda.synchronize()
        return self._time_replays() if sizing or k == 1 else None

    def _time_replays(self) -> float:
        """Time three replays of the captured graph; return their median (ms)."""
        pairs = self._event_pairs(3)
        for s, e in pairs:
            s.record()
            self.graph.replay()
            e.record()
        self.torch.cuda.synchronize()
        return sorted(s.elapsed_time(e) for s, e in pairs)[1]

    def setup(self, k, flush_bytes, auto_k) -> int:
        torch = self.torch
        if self.mode == "cold_l2":
            if flush_bytes is None:
                l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()),
                             "L2_cache_size", 0) or FALLBACK_L2_BYTES
                flush_bytes = 2 * int(l2)
            self.buf = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
            self.buf.zero_()
            self.flush_bytes = flush_bytes
        elif self.mode == "graph":
            replay_ms = self._capture(k, sizing=auto_k)
            if auto_k and _calls_for(replay_ms / k) > k:
                # the eager estimate holds host time (a compiled call's guards, a Python
                # wrapper) that graph replay removes: size k on the replay, once
                k = _calls_for(replay_ms / k)
                self._capture(k, sizing=False)
        torch.cuda.synchronize()
        self.k = k
        return k

    def batch(self, b) -> list[float]:
        sync, pairs = self.torch.cuda.synchronize, self._event_pairs(b)
        for s, e in pairs:
            if self.mode == "per_call":
                s.record()
                self.fn()
                e.record()
                sync()  # the original reports' protocol: the GPU drains after every call
            elif self.mode == "cold_l2":
                self.buf.zero_()  # flush outside the timed span
                s.record()
                self.fn()
                e.record()
            else:
                s.record()
                self.graph.replay()
                e.record()
        sync()
        return [s.elapsed_time(e) / self.k for s, e in pairs]


def _calls_for(est_ms: float) -> int:
    """Calls per graph replay so that one replay lasts about ``GRAPH_TARGET_MS``."""
    if not est_ms > 0:
        return MAX_CALLS_PER_SAMPLE
    return int(min(max(math.ceil(GRAPH_TARGET_MS / est_ms), 1), MAX_CALLS_PER_SAMPLE))


def _ci_rel(times, confidence) -> float:
    med = float(np.median(times))
    if len(times) < 2 or med <= 0:
        return math.inf
    lo, hi = median_ci(times, confidence)
    return (hi - lo) / (2.0 * med)


# ----------------------------------------------------------------------------- public API

def measure(fn, mode="graph", *, device=None, n_samples=None, ci_target=0.005, budget_s=2.0,
            min_samples=20, max_samples=5000, warmup_ms=25.0, calls_per_sample=None,
            flush_bytes=None, confidence=0.95) -> TimingSample:
    """Time the zero-argument callable ``fn`` under one protocol; return every raw sample.

    Parameters
    ----------
    fn : callable
        Launches the work; its inputs are bound inside it.
    mode : {"per_call", "cold_l2", "graph"}
        Protocol (module docstring); default "graph".
    device : {None, "cpu", "cuda"}
        None picks CUDA when available. "cuda" without CUDA raises ValueError.
    n_samples : int or None
        If given, exactly this many samples (min/max_samples, ci_target, budget_s unused).
    ci_target : float
        Stop once the CI half-width of the median over the median is <= this; default 0.005.
    budget_s : float
        Stop once this many seconds have passed since the call began (warm-up included);
        checked between batches, and the first batch of ``min_samples`` is always taken.
    min_samples, max_samples : int
        Bounds of the adaptive rule; defaults 20 and 5000.
    warmup_ms : float
        Warm-up length; the call count is derived from a 5-call estimate (triton's do_bench
        habit); default 25.0. That may not lift an idle GPU's clocks: on an H100 fresh
        processes spread far less with 500 ms (data/checks/check_timer_h100*.json).
    calls_per_sample : int or None
        Graph mode only: calls per replay; None sizes a replay to >= ``GRAPH_TARGET_MS`` (1..100).
    flush_bytes : int or None
        cold_l2 only: bytes written before each sample; None means twice the L2 size
        (fallback 2 x 64 MiB) on CUDA, 64 MiB on the CPU.
    confidence : float
        Coverage of the median's CI in the stopping rule; default 0.95.

    Returns
    -------
    TimingSample
        Every raw sample, plus the settings above that were in force (``SETTINGS``, as
        normalised here: ``n_samples`` None when the adaptive rule ran). ``stop_reason``
        is "n_samples", "ci_target", "max_samples" or "budget" (checked in that order
        after each batch); batches grow by half the samples so far, capped by the budget
        left.
    """
    p = _measure_iv(fn, mode, device, n_samples, ci_target, budget_s, min_samples, max_samples,
                    warmup_ms, calls_per_sample, flush_bytes, confidence)
    t_start = _now_ns()
    timer = (_CudaTimer if p["device"] == "cuda" else _CpuTimer)(fn, mode)
    est_ms = timer.estimate()
    n_warm = 0 if p["warmup_ms"] == 0 else int(
        min(max(p["warmup_ms"] / est_ms, 1), MAX_WARMUP_CALLS) if est_ms > 0 else MAX_WARMUP_CALLS)
    timer.warm(n_warm)
    if mode == "graph":
        k = p["calls_per_sample"] or _calls_for(est_ms)
    else:
        k = 1
    k = timer.setup(k, p["flush_bytes"], auto_k=p["calls_per_sample"] is None)
    used_flush = timer.flush_bytes if mode == "cold_l2" else None

    if p["n_samples"] is not None:
        times, reason = timer.batch(p["n_samples"]), "n_samples"
    else:
        times, b, t_sampling = [], p["min_samples"], _now_ns()
        while True:
            times += timer.batch(b)
            n = len(times)
            if _ci_rel(times, p["confidence"]) <= p["ci_target"]:
                reason = "ci_target"
                break
            if n >= p["max_samples"]:
                reason = "max_samples"
                break
            left_s = p["budget_s"] - (_now_ns() - t_start) / 1e9
            if left_s <= 0:
                reason = "budget"
                break
            per_sample_s = (_now_ns() - t_sampling) / 1e9 / n
            fit = int(left_s / per_sample_s) if per_sample_s > 0 else p["max_samples"]
            b = max(1, min(p["max_samples"] - n, max(p["min_samples"], n // 2), fit))
    return TimingSample(
        times_ms=tuple(times), mode=mode, clock=timer.clock, device=p["device"],
        calls_per_sample=k, n_warmup_calls=1 + N_ESTIMATE_CALLS + n_warm,
        flush_bytes=used_flush, stop_reason=reason,
        ci_rel_halfwidth=_ci_rel(times, p["confidence"]),
        elapsed_s=(_now_ns() - t_start) / 1e9, confidence=p["confidence"], pid=os.getpid(),
        **{name: p[name] for name in SETTINGS if name != "confidence"})
