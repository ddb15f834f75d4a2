"""Environment lock: no TF32, deterministic algorithms, seeds.

The lock exists because the original reports' lock re-enabled TF32 by calling
``torch.set_float32_matmul_precision("high")`` after ``allow_tf32 = False``: each
setting was right on its own line and wrong in sequence. Here every setting the lock
makes is listed once in ``LOCK_SETTINGS``, :func:`lock` applies them in an order that
survives both the legacy (``allow_tf32``, ``set_float32_matmul_precision``) and the
newer ``fp32_precision`` API, and :func:`assert_locked` re-reads all of them and names
every one that is off. fp16 SDPA itself never uses TF32; the lock keeps fp32
reference and ceiling computations in true fp32 and keeps runs deterministic.

The machine's fingerprint is :mod:`.machine`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import types

import numpy as np
import torch

__all__ = ["CUBLAS_WORKSPACE_CONFIGS", "EnvironmentNotLocked", "LockSetting",
           "LOCK_SETTINGS", "lock_state", "assert_locked", "is_locked", "LockResult",
           "lock", "preserved_state"]

CUBLAS_WORKSPACE_CONFIGS = (":4096:8", ":16:8")  # the values cuBLAS documents as deterministic
_FULL_FP32 = ("ieee", "none", "default")  # fp32_precision values that mean "no TF32/bf16"


class EnvironmentNotLocked(RuntimeError):
    """The global torch state is not what :func:`lock` sets; the message names every fault."""


@dataclasses.dataclass(frozen=True)
class LockSetting:
    """One global setting the lock controls: how messages name it, the values accepted
    (the first is what :func:`lock` sets), why, and where it is read (default: label)."""

    key: str
    label: str
    accepted: tuple
    why: str
    optional: bool = False  # absent from some torch versions: None is accepted
    path: str | None = None  # dotted path from ``torch`` ('()' = call), or '$VAR' for os.environ


_M = "torch.backends.cuda.matmul."
# fp16/bf16 reduced-precision reductions are pinned to PyTorch's defaults (allowed) and
# fp16 accumulation to its default (off): fp16 timings then show what a default PyTorch
# user gets, accuracy is judged by the float64 correctness gate, and a run that changed
# them is caught and hashed differently.
LOCK_SETTINGS: tuple[LockSetting, ...] = (
    LockSetting("float32_matmul_precision", "float32 matmul precision", ("highest",),
                "fp32 matmuls in true fp32", path="torch.get_float32_matmul_precision()"),
    LockSetting("cuda_matmul_allow_tf32", _M + "allow_tf32", (False,), "cuBLAS without TF32"),
    LockSetting("cudnn_allow_tf32", "torch.backends.cudnn.allow_tf32", (False,),
                "cuDNN without TF32"),
    LockSetting("fp32_precision", "torch.backends.fp32_precision", _FULL_FP32,
                "root of the fp32_precision tree, inherited by unset leaves", True),
    LockSetting("cuda_matmul_fp32_precision", _M + "fp32_precision", _FULL_FP32,
                "new-API twin of matmul.allow_tf32", True),
    LockSetting("cudnn_conv_fp32_precision", "torch.backends.cudnn.conv.fp32_precision",
                _FULL_FP32, "new-API twin of cudnn.allow_tf32", True),
    LockSetting("cudnn_rnn_fp32_precision", "torch.backends.cudnn.rnn.fp32_precision",
                _FULL_FP32, "new-API twin of cudnn.allow_tf32", True),
    LockSetting("mkldnn_matmul_fp32_precision", "torch.backends.mkldnn.matmul.fp32_precision",
                _FULL_FP32, "CPU (oneDNN) fp32 matmuls without bf16/TF32", True),
    LockSetting("deterministic_algorithms", "torch.are_deterministic_algorithms_enabled()",
                (True,), "nondeterministic ops raise"),
    LockSetting("deterministic_warn_only", "deterministic algorithms warn_only", (False,),
                "raise, not warn", path="torch.is_deterministic_algorithms_warn_only_enabled()"),
    # On by default in deterministic mode: NaN-fills every torch.empty on the GPU, op
    # outputs included, i.e. extra kernels inside every timed call.
    LockSetting("deterministic_fill_uninitialized_memory",
                "torch.utils.deterministic.fill_uninitialized_memory", (False,),
                "no hidden fill kernels inside timed calls", True),
    LockSetting("cudnn_deterministic", "torch.backends.cudnn.deterministic", (True,),
                "deterministic cuDNN algorithms"),
    LockSetting("cudnn_benchmark", "torch.backends.cudnn.benchmark", (False,),
                "no run-dependent cuDNN autotuning"),
    LockSetting("cublas_workspace_config", "CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIGS,
                "deterministic cuBLAS workspaces", path="$CUBLAS_WORKSPACE_CONFIG"),
    LockSetting("allow_fp16_reduced_precision_reduction",
                _M + "allow_fp16_reduced_precision_reduction", (True,), "PyTorch default"),
    LockSetting("allow_bf16_reduced_precision_reduction",
                _M + "allow_bf16_reduced_precision_reduction", (True,), "PyTorch default"),
    LockSetting("allow_fp16_accumulation", _M + "allow_fp16_accumulation", (False,),
                "fp16 GEMMs accumulate in fp32 (PyTorch default)", True),
    LockSetting("math_sdp_fp16_bf16_reduction",
                "torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()", (False,),
                "math SDPA accumulates in fp32 (PyTorch default)", True),
)
_HINTS = {"high": " (TF32 allowed)", "medium": " (bf16 allowed)",
          "tf32": " (TF32 allowed)", "bf16": " (bf16 allowed)"}


def _read(path: str):
    """Value at ``path``: '$VAR' from os.environ, else attributes from ``torch``."""
    if path.startswith("$"):
        return os.environ.get(path[1:])
    obj = torch
    for part in path.removesuffix("()").split(".")[1:]:
        obj = getattr(obj, part)
    return obj() if path.endswith("()") else obj


def lock_state() -> dict:
    """Current value of every ``LOCK_SETTINGS`` key: bool, str, or None where this torch
    lacks the setting; a reading that raises (mixed TF32 APIs) is ``'<unreadable: Error>'``."""
    state = {}
    for s in LOCK_SETTINGS:
        try:
            value = _read(s.path or s.label)
        except AttributeError:
            value = None
        except Exception as exc:  # torch refuses to report a mixed legacy/new API state
            value = f"<unreadable: {type(exc).__name__}>"
        state[s.key] = value if isinstance(value, (bool, str, type(None))) else str(value)
    return state


def _accepted(setting: LockSetting, deterministic: bool) -> tuple:
    """Accepted values of a setting under the deterministic or the default-dispatch lock."""
    if setting.key == "deterministic_algorithms" and not deterministic:
        return (False,)
    return setting.accepted


def _faults(state: dict, deterministic: bool = True) -> list[str]:
    """One message per setting in ``state`` that the lock does not accept."""
    faults = []
    for s in LOCK_SETTINGS:
        value = state.get(s.key)
        accepted = _accepted(s, deterministic)
        if value in accepted or (value is None and s.optional):
            continue
        if isinstance(value, str) and value.startswith("<unreadable"):
            faults.append(f"{s.label} cannot be read ({value[1:-1]}: the legacy allow_tf32/"
                          f"set_float32_matmul_precision and the fp32_precision APIs were "
                          f"mixed), want {accepted[0]!r}")
        else:
            hint = _HINTS.get(value, "") if isinstance(value, str) else ""
            want = " or ".join(repr(a) for a in accepted if a not in ("none", "default"))
            faults.append(f"{s.label} is {value!r}{hint}, want {want}")
    return faults


def assert_locked(deterministic: bool = True) -> None:
    """Raise EnvironmentNotLocked naming every setting that differs from the lock.

    ``deterministic=False`` checks the default-dispatch lock (see :func:`lock`).
    """
    faults = _faults(lock_state(), deterministic)
    if faults:
        raise EnvironmentNotLocked("environment not locked: " + "; ".join(faults) + ".")


def is_locked(deterministic: bool = True) -> bool:
    """True when :func:`assert_locked` would pass."""
    return not _faults(lock_state(), deterministic)


@dataclasses.dataclass(frozen=True)
class LockResult:
    """What :func:`lock` applied: the seed, the cuBLAS workspace setting and the final state."""

    seed: int
    cublas_workspace_config: str
    previous_cublas_workspace_config: str | None
    state: types.MappingProxyType


def _lock_iv(seed) -> int:
    """Check that ``seed`` is an integer numpy can take (0 <= seed < 2**32)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
        raise ValueError(f"`seed` must be an integer in [0, 2**32); got {seed!r}.")
    return int(seed)


def _has(obj, name: str) -> bool:
    """Whether this torch has ``obj.name`` (a reading refused in a mixed state counts)."""
    try:
        getattr(obj, name)
    except AttributeError:
        return False
    except Exception:
        pass
    return True


def lock(seed: int = 0, deterministic: bool = True) -> LockResult:
    """Lock torch into true fp32, deterministic algorithms and seeded generators.

    Sets ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` unless it already holds a deterministic
    value; if CUDA is already initialised and it does not, raises EnvironmentNotLocked,
    because cuBLAS reads it once, at its first handle, and a late value cannot be
    verified. Then the precision settings (legacy API first, then the newer
    ``fp32_precision`` leaves, so neither can re-enable TF32 through the other), the
    determinism flags, and the seeds of ``random``, numpy and torch (all devices).
    Ends with :func:`assert_locked`. ``seed`` defaults to 0.

    ``deterministic`` (default True) turns on ``torch.use_deterministic_algorithms``.
    With False every other setting is locked the same, but deterministic algorithms stay
    off: PyTorch then dispatches as it does for a user who never asked for determinism.
    This matters for timing, because deterministic mode changes which kernel SDPA runs
    (on Hopper it refuses cuDNN attention); the run records which lock it used.
    """
    seed = _lock_iv(seed)
    if not isinstance(deterministic, bool):
        raise ValueError(f"`deterministic` must be True or False; got {deterministic!r}.")
    previous = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if previous not in CUBLAS_WORKSPACE_CONFIGS:
        if torch.cuda.is_initialized():
            raise EnvironmentNotLocked(
                f"CUBLAS_WORKSPACE_CONFIG is {previous!r} and CUDA is already initialised: cuBLAS "
                f"may already have read it, so setting it now cannot be verified. Call lock() "
                f"before any CUDA work, or export CUBLAS_WORKSPACE_CONFIG=:4096:8.")
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE_CONFIGS[0]
    b, nodes = torch.backends, _fp32_nodes()
    if "root" in nodes:  # else a 'tf32' root leaks into leaves the legacy calls leave unset
        nodes["root"].fp32_precision = "ieee"
    torch.set_float32_matmul_precision("highest")
    b.cuda.matmul.allow_tf32 = False
    b.cudnn.allow_tf32 = False
    for name in ("cuda.matmul", "cudnn.conv", "cudnn.rnn"):
        if name in nodes:
            nodes[name].fp32_precision = "ieee"
    b.cuda.matmul.allow_fp16_reduced_precision_reduction = True
    b.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    if _has(b.cuda.matmul, "allow_fp16_accumulation"):
        b.cuda.matmul.allow_fp16_accumulation = False
    if hasattr(b.cuda, "allow_fp16_bf16_reduction_math_sdp"):
        b.cuda.allow_fp16_bf16_reduction_math_sdp(False)
    torch.use_deterministic_algorithms(deterministic, warn_only=False)
    if hasattr(torch.utils, "deterministic"):
        torch.utils.deterministic.fill_uninitialized_memory = False
    b.cudnn.deterministic = True
    b.cudnn.benchmark = False
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too (lazily if CUDA is not up yet)
    assert_locked(deterministic)
    return LockResult(seed, os.environ["CUBLAS_WORKSPACE_CONFIG"], previous,
                      types.MappingProxyType(lock_state()))


@contextlib.contextmanager
def preserved_state():
    """Restore every setting :func:`lock` touches, and the RNG states, on exit (for tests)."""
    saved = lock_state()
    fp32 = {name: obj.fp32_precision for name, obj in _fp32_nodes().items()}
    rng = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    try:
        yield
    finally:
        _restore(saved, fp32)
        random.setstate(rng[0])
        np.random.set_state(rng[1])
        torch.set_rng_state(rng[2])


def _restore(saved: dict, fp32: dict) -> None:
    """Put back a ``lock_state()`` snapshot: root, legacy calls, then differing leaves."""
    b = torch.backends
    if saved["cublas_workspace_config"] is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = saved["cublas_workspace_config"]
    nodes = _fp32_nodes()
    if "root" in fp32:
        nodes["root"].fp32_precision = fp32["root"]
    if saved["float32_matmul_precision"] in ("highest", "high", "medium"):
        torch.set_float32_matmul_precision(saved["float32_matmul_precision"])
    if isinstance(saved["cudnn_allow_tf32"], bool):
        b.cudnn.allow_tf32 = saved["cudnn_allow_tf32"]
    for name, value in fp32.items():
        if nodes[name].fp32_precision != value:
            nodes[name].fp32_precision = value
    for key in ("allow_fp16_reduced_precision_reduction",
                "allow_bf16_reduced_precision_reduction", "allow_fp16_accumulation"):
        if saved[key] is not None:
            setattr(b.cuda.matmul, key, saved[key])
    if saved["math_sdp_fp16_bf16_reduction"] is not None:
        b.cuda.allow_fp16_bf16_reduction_math_sdp(saved["math_sdp_fp16_bf16_reduction"])
    torch.use_deterministic_algorithms(saved["deterministic_algorithms"],
                                       warn_only=saved["deterministic_warn_only"])
    if saved["deterministic_fill_uninitialized_memory"] is not None:
        torch.utils.deterministic.fill_uninitialized_memory = \
            saved["deterministic_fill_uninitialized_memory"]
    b.cudnn.deterministic = saved["cudnn_deterministic"]
    b.cudnn.benchmark = saved["cudnn_benchmark"]


def _fp32_nodes() -> dict:
    """The fp32_precision API objects present in this torch, root first."""
    b = torch.backends
    nodes = {"root": b, "cuda.matmul": b.cuda.matmul, "cudnn.conv": getattr(b.cudnn, "conv", None),
             "cudnn.rnn": getattr(b.cudnn, "rnn", None),
             "mkldnn.matmul": getattr(b.mkldnn, "matmul", None)}
    return {k: v for k, v in nodes.items() if v is not None and _has(v, "fp32_precision")}
