"""What the GPU does inside a call, from ``torch.profiler``: the kernels of one call and
their device time (:func:`profile_device_time`, the kernel evidence of every timing unit),
and a CUDA graph captured as graph mode captures it (:func:`capture_graph`) with what its
replays run (:func:`profile_graph`). CUDA only; the timers are :mod:`.timing`'s.
"""

from __future__ import annotations

import numpy as np

from .. import _validate
from .timing import _cuda_available, _torch

__all__ = ["PLACEMENT_CALLS", "PROFILER_OVERHEAD", "profile_device_time", "profile_session",
           "device_activities", "kernels_per_call", "capture_graph", "profile_graph"]

# The calls of the profile at each placement of a sweep (the kernel time beside its
# samples), whatever a call lasts. Fewer calls for long calls were tried and dropped: one
# profiled call of the eager math backend at B32 H8 S2048 read 0.5-1.1 % above ten on three
# H100s, and the placements' spread of such kernel times grew two- to sevenfold
# (benchmarks/readme-command/, "A shorter profile for long calls, tried and dropped").
PLACEMENT_CALLS = 10

# Profiler activity that is the profiler's own work, not the call's.
PROFILER_OVERHEAD = ("Activity Buffer Request",)
# Whether this process has had its one unrecorded profiling pass (the profiler's start-up:
# CUPTI is initialised once per process, so later sessions need no warm-up of their own).
_started = False


def profile_device_time(fn, n_calls=20) -> dict:
    """Device time of one call of ``fn``, summed over its CUDA kernels, from ``torch.profiler``.

    Runs ``fn`` ``n_calls`` times under ``ProfilerActivity.CUDA`` after one unrecorded call;
    the first profiling in a process is preceded by one unrecorded profiling pass that
    absorbs the profiler's start-up (once per process, not once per call). Returns
    ``{"device_ms_per_call", "n_calls", "kernels": [{"name", "ms_per_call",
    "count_per_call"}, ...]}``, kernels sorted by time, memsets and copies included. This is
    the kernel evidence the original reports never collected. CUDA only: without CUDA it
    raises ValueError, since there is no device time to read.
    """
    if not callable(fn):
        raise ValueError(f"`fn` must be a zero-argument callable; got {fn!r}.")
    n_calls = _validate.integer("n_calls", n_calls)
    if not _cuda_available():
        raise ValueError("`profile_device_time` needs CUDA, which is not available here.")
    torch = _torch()

    global _started
    fn()
    torch.cuda.synchronize()
    for _ in range(1 if _started else 2):
        _started = True
        prof = profile_session(fn, n_calls)
    kernels = kernels_per_call(_device_events(prof), n_calls)
    return {"device_ms_per_call": float(sum(r["ms_per_call"] for r in kernels)),
            "n_calls": n_calls, "kernels": kernels}


def profile_session(fn, n_calls: int):
    """One ``torch.profiler`` session (``ProfilerActivity.CUDA``) of ``n_calls`` calls of
    ``fn``, ended once the GPU has finished them; the finished profile, for
    :func:`device_activities`. No warm-up of its own: :func:`profile_device_time` adds it.
    CUDA only (the caller checks)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n_calls):
            fn()
        _torch().cuda.synchronize()
    return prof


def device_activities(prof):
    """The device activities of a finished session that ``key_averages`` sums (device
    events, neither asynchronous nor hidden), read from the profiler's raw results without
    building its Python event tree, which cost about 8 ms of the ~13 ms a session took at
    the sweep's 720 sessions a process (``benchmarks/readme-command/probes/sweep_cost_probe.py``;
    ``benchmarks/readme-command/``). Kineto's event objects, with ``name()``,
    ``start_ns()`` and ``end_ns()``; the profiler's own activity is among them."""
    from torch.autograd import DeviceType
    for evt in prof.profiler.kineto_results.events():
        if evt.device_type() != DeviceType.CUDA or evt.is_async() \
                or evt.start_thread_id() != evt.end_thread_id() \
                or getattr(evt, "is_hidden_event", lambda: False)():
            continue
        yield evt


def _device_events(prof):
    """(name, duration in microseconds) of each of :func:`device_activities`."""
    for evt in device_activities(prof):
        yield evt.name(), (evt.end_ns() - evt.start_ns()) / 1e3


def kernels_per_call(events, n_calls: int) -> list[dict]:
    """Group ``(name, duration_us)`` device events of ``n_calls`` calls by name: one row per
    kernel with ``ms_per_call`` and ``count_per_call``, longest first; the profiler's own
    activity (``PROFILER_OVERHEAD``) is left out, memsets and copies are kept."""
    n_calls = _validate.integer("n_calls", n_calls)
    total_us: dict[str, float] = {}
    count: dict[str, int] = {}
    for name, us in events:
        if name in PROFILER_OVERHEAD:
            continue
        total_us[name] = total_us.get(name, 0.0) + float(us)
        count[name] = count.get(name, 0) + 1
    kernels = [{"name": name, "ms_per_call": total_us[name] / 1e3 / n_calls,
                "count_per_call": count[name] / n_calls} for name in total_us]
    kernels.sort(key=lambda r: -r["ms_per_call"])
    return kernels


def capture_graph(fn, n_calls=1, *, debug=False):
    """``n_calls`` calls of ``fn`` in one CUDA graph, captured as graph mode captures them.

    One call warms ``fn`` up on a side stream (PyTorch's CUDA-graph notes), the calls are
    captured, and one replay uploads the graph (the first replay of a graph is slow), so
    the next replay is a representative one. ``debug`` turns on the graph's debug mode
    before the capture, for ``graph.debug_dump``. Returns the ``torch.cuda.CUDAGraph``.
    CUDA only: without it, ValueError.
    """
    if not callable(fn):
        raise ValueError(f"`fn` must be a zero-argument callable; got {fn!r}.")
    n_calls = _validate.integer("n_calls", n_calls)
    if not _cuda_available():
        raise ValueError("`capture_graph` needs CUDA, which is not available here.")
    cuda = _torch().cuda
    stream = cuda.Stream()
    stream.wait_stream(cuda.current_stream())
    with cuda.stream(stream):
        fn()
    cuda.current_stream().wait_stream(stream)
    cuda.synchronize()
    graph = cuda.CUDAGraph()
    if debug:
        graph.enable_debug_mode()
    with cuda.graph(graph):
        for _ in range(n_calls):
            fn()
    graph.replay()
    cuda.synchronize()
    return graph


def profile_graph(graph, n_calls, n_replays=10) -> dict:
    """What the GPU does inside replays of ``graph`` (``n_calls`` calls captured), from
    ``n_replays`` replays under ``torch.profiler``.

    Returns ``{"kernels_per_replay", "kernel_names", "busy_ms_per_call",
    "span_ms_per_call"}``: the kernels (memsets included) of one replay, their names with
    counts, and per call the median over replays of the kernels' summed duration and of the
    span from the first kernel's start to the last one's end; the span minus the busy time
    is the idle gap between dependent kernels. The times are None when no kernel was seen.
    """
    n_calls, n_replays = _validate.integer("n_calls", n_calls), _validate.integer("n_replays", n_replays)
    if not _cuda_available():
        raise ValueError("`profile_graph` needs CUDA, which is not available here.")
    torch = _torch()
    from collections import Counter

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n_replays):
            graph.replay()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type.name == "CUDA"
                      and e.name not in PROFILER_OVERHEAD), key=lambda e: e.time_range.start)
    per = len(kernels) // n_replays
    busy, span = [], []
    for r in range(n_replays):
        ks = kernels[r * per:(r + 1) * per]
        if ks:  # profiler times are in microseconds
            busy.append(sum(k.time_range.end - k.time_range.start for k in ks) / n_calls / 1e3)
            span.append((ks[-1].time_range.end - ks[0].time_range.start) / n_calls / 1e3)
    return {"kernels_per_replay": per, "kernel_names": dict(Counter(k.name for k in kernels[:per])),
            "busy_ms_per_call": float(np.median(busy)) if busy else None,
            "span_ms_per_call": float(np.median(span)) if span else None}
