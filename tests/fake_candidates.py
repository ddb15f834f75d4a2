"""Deliberately broken candidates for the sweep and correctness-gate tests (a plugin)."""

import math
import os
import time

import torch

from attn_analysis.measure import candidates as cands


def _attention(q, k, v, scale):
    return torch.softmax((q @ k.transpose(-1, -2)) * scale, dim=-1) @ v


def _wrong_scale(config, device):
    # Forgets the 1/sqrt(D) scale: runs fine, gives the wrong function.
    return cands.Built(lambda q, k, v: _attention(q, k, v, 1.0), {"bug": "no scale"})


def _half_written(config, device):
    # Writes only the first half of the sequence into the caller's buffer.
    def fn(q, k, v, out):
        half = q.shape[2] // 2
        out[:, :, :half] = _attention(q, k, v, 1 / math.sqrt(q.shape[-1]))[:, :, :half]
        return out
    return cands.Built(fn, {"bug": "half written"}, accepts_out=True)


def _oom(config, device):
    raise torch.OutOfMemoryError("simulated: CUDA out of memory. Tried to allocate 64.00 GiB")


def _crash(config, device):
    os._exit(17)  # a segfault-like death of the worker process


def _slow(config, device):
    def fn(q, k, v):
        time.sleep(0.02)
        return _attention(q, k, v, 1 / math.sqrt(q.shape[-1]))
    return cands.Built(fn, {"note": "sleeps 20 ms a call"})


def _sleepy(config, device):
    # Slow enough that a trial outlives a killed parent by many seconds.
    def fn(q, k, v):
        time.sleep(0.1)
        return _attention(q, k, v, 1 / math.sqrt(q.shape[-1]))
    return cands.Built(fn, {"note": "sleeps 100 ms a call"})


class _SlowContext:
    """A context that costs 50 ms to enter, and outside which the candidate refuses to run.
    It counts its entries in ``counts`` (part of the candidate's info, which the sweep records)."""

    inside = False

    def __init__(self, counts: dict):
        self.counts = counts

    def __enter__(self):
        time.sleep(0.05)
        self.counts["context_entries"] += 1
        _SlowContext.inside = True

    def __exit__(self, *exc):
        _SlowContext.inside = False


def _needs_context(config, device):
    # Like SDPA forced to one backend: correct only inside its context, which is costly.
    # Its info's ``counts`` (a dict the build's copy of the info shares) counts the calls
    # and the context's entries; the sweep writes the info into every timing unit after
    # the last round, so the test reads the counts, not a clock.
    counts = {"calls": 0, "context_entries": 0}

    def fn(q, k, v):
        if not _SlowContext.inside:
            raise RuntimeError("called outside its context")
        counts["calls"] += 1
        return _attention(q, k, v, 1 / math.sqrt(q.shape[-1]))
    return cands.Built(fn, {"note": "needs its context", "counts": counts},
                       context=lambda: _SlowContext(counts))


def _correct(config, device):
    return cands.Built(lambda q, k, v: _attention(q, k, v, 1 / math.sqrt(q.shape[-1])), {})


for _name, _build, _devices in [
    ("fake_wrong_scale", _wrong_scale, cands.DEVICES),
    ("fake_half_written", _half_written, cands.DEVICES),
    ("fake_oom", _oom, cands.DEVICES),
    ("fake_crash", _crash, cands.DEVICES),
    ("fake_slow", _slow, cands.DEVICES),
    ("fake_sleepy", _sleepy, cands.DEVICES),
    ("fake_gpu_only", _correct, ("cuda",)),
    ("fake_needs_context", _needs_context, cands.DEVICES),
]:
    if _name not in cands.CANDIDATES:
        cands.register(cands.Candidate(_name, "test double", _build, devices=_devices))


def _compile_error(config, device):
    # A build that fails the ordinary way (a kernel that does not compile), not an OOM.
    raise RuntimeError("simulated compile failure")


def _oom_while_timing(config, device):
    # Passes the correctness check (its first call), then runs out of memory on every
    # later call: the out-of-memory arrives while timing, not at build.
    calls = {"n": 0}

    def fn(q, k, v):
        calls["n"] += 1
        if calls["n"] > 1:
            raise torch.OutOfMemoryError(
                f"simulated while timing: CUDA out of memory on call {calls['n']}")
        return _attention(q, k, v, 1 / math.sqrt(q.shape[-1]))
    return cands.Built(fn, {"note": "out of memory after its first call"})


for _name, _build in [("fake_compile_error", _compile_error),
                      ("fake_oom_while_timing", _oom_while_timing)]:
    if _name not in cands.CANDIDATES:
        cands.register(cands.Candidate(_name, "test double", _build, devices=cands.DEVICES))


# Candidates that compile (``Candidate.warm``), for the sweep's prebuild (measure.prebuild).
# ``fake_warmed`` leaves a marker per warm, named after the configuration and the process,
# in the folder ATTN_TEST_WARM_DIR; the others fail or outlast the prebuild's limit.
def _warm_marker(config, device):
    folder = os.environ.get("ATTN_TEST_WARM_DIR")
    if folder:
        with open(os.path.join(folder, f"{config.key}__{os.getpid()}"), "w") as fh:
            fh.write(device)


def _warm_times(config, device):
    # as Inductor's first launch leaves behind in its cache folder: a compiled kernel, the
    # configuration its timing chose, and an algorithm selector's record
    folder = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    stem = f"{config.key}-{os.getpid()}"
    for sub, name in (("ab", f"{stem}.py"), ("ab", f"{stem}.best_config"),
                      (os.path.join("cache", "sys"), stem)):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
        with open(os.path.join(folder, sub, name), "w") as fh:
            fh.write("{}")


def _warm_fails(config, device):
    raise RuntimeError("simulated compiler failure while prebuilding")


def _warm_hangs(config, device):
    time.sleep(120)


def _exact(config, device):
    # a correct attention for every configuration of the tiny plan, causal ones included
    causal = config.causal
    return cands.Built(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=causal), {})


for _name, _warm in [("fake_warmed", _warm_marker), ("fake_warm_times", _warm_times),
                     ("fake_warm_fails", _warm_fails),
                     ("fake_warm_hangs", _warm_hangs)]:
    if _name not in cands.CANDIDATES:
        cands.register(cands.Candidate(_name, "test double that compiles", _exact,
                                       devices=cands.DEVICES, warm=_warm))
