"""Environment lock (no TF32, deterministic algorithms, seeds) and the machine fingerprint.

The lock exists because the original reports' lock re-enabled TF32 by calling
``torch.set_float32_matmul_precision("high")`` after ``allow_tf32 = False``: each
setting was right on its own line and wrong in sequence. Here every setting the lock
makes is listed once in ``LOCK_SETTINGS``, :func:`lock` applies them in an order that
survives both the legacy (``allow_tf32``, ``set_float32_matmul_precision``) and the
newer ``fp32_precision`` API, and :func:`assert_locked` re-reads all of them and names
every one that is off. fp16 SDPA itself never uses TF32; the lock keeps fp32
reference and ceiling computations in true fp32 and keeps runs deterministic.

:func:`fingerprint` describes the machine; its ``fingerprint_hash`` covers only the
fields that decide whether two runs may be compared (``FINGERPRINT_FIELDS``,
``hashed``), never clocks, temperatures or power. It holds no host, user, path or
address. :func:`fingerprint` and :func:`gpu_state` initialise CUDA on a GPU machine,
so call :func:`lock` first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import hashlib
import json
import os
import platform
import random
import types

import numpy as np
import torch

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


# ---------------------------------------------------------------- fingerprint

@dataclasses.dataclass(frozen=True)
class FingerprintField:
    """One fingerprint key: accepted type(s), unit, whether it enters the hash, meaning."""

    name: str
    type: tuple
    unit: str
    hashed: bool
    doc: str
    nullable: bool = True


_S, _I, _F = (str,), (int,), (float, int)
FINGERPRINT_FIELDS: tuple[FingerprintField, ...] = (
    FingerprintField("gpu_name", _S, "", True, "CUDA device name"),
    FingerprintField("gpu_uuid", _S, "", False, "the GPU's UUID: tells two cards of one model "
                     "apart (outside the hash; absent from runs before protocol 2)"),
    FingerprintField("sm_count", _I, "SMs", True, "streaming multiprocessors"),
    FingerprintField("l2_bytes", _I, "bytes", True, "L2 cache size"),
    FingerprintField("memory_bytes", _I, "bytes", True, "device memory"),
    FingerprintField("compute_capability", _S, "major.minor", True, "e.g. '8.9'"),
    FingerprintField("driver_version", _S, "", True, "NVIDIA driver, from NVML"),
    FingerprintField("cuda_version", _S, "", True, "torch.version.cuda"),
    FingerprintField("cudnn_version", _I, "", True, "torch.backends.cudnn.version()"),
    FingerprintField("torch_version", _S, "", True, "torch.__version__", False),
    FingerprintField("triton_version", _S, "", True, "None if triton is absent"),
    FingerprintField("python_version", _S, "", True, "hashed as major.minor only", False),
    FingerprintField("numpy_version", _S, "", False, "numpy.__version__", False),
    FingerprintField("platform", _S, "", False, "OS name and machine arch", False),
    FingerprintField("cpu_name", _S, "", False, "CPU model; compared for CPU runs"),
    FingerprintField("cpu_count", _I, "CPUs", False, "logical CPUs"),
    FingerprintField("device_kind", _S, "", True, "'cuda' or 'cpu'", False),
    FingerprintField("note", _S, "", False, "human note, e.g. for CPU runs"),
    FingerprintField("lock_state", (dict,), "", True, "lock_state() at fingerprint time", False),
    FingerprintField("locked", (bool,), "", True, "the lock holds, under the deterministic or the default-dispatch profile that lock_state shows", False),
    # NVML readings: volatile, never hashed, None without a GPU or NVML
    *(FingerprintField(name, types, unit, False, f"{what} (NVML)")
      for name, types, unit, what in (("sm_clock_mhz", _I, "MHz", "current SM clock"),
                                      ("mem_clock_mhz", _I, "MHz", "current memory clock"),
                                      ("max_sm_clock_mhz", _I, "MHz", "maximum SM clock"),
                                      ("temperature_c", _I, "degC", "GPU temperature"),
                                      ("power_limit_w", _F, "W", "enforced power limit"),
                                      ("power_draw_w", _F, "W", "power draw"))),
    FingerprintField("fingerprint_hash", _S, "hex", False, "12 hex of SHA-256 of hashed fields",
                     False),
)
_FIELDS = {f.name: f for f in FINGERPRINT_FIELDS}
# Keys that fingerprints recorded before they existed may lack.
OPTIONAL_KEYS = ("gpu_uuid",)
HASHED_KEYS = tuple(f.name for f in FINGERPRINT_FIELDS if f.hashed)


@functools.lru_cache(maxsize=1)
def _nvml():
    """The initialised pynvml module, or None when NVML is missing or fails."""
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _try(fn, *args):
    """``fn(*args)``, or None if anything fails (NVML calls must never raise)."""
    try:
        return fn(*args)
    except Exception:
        return None


def _nvml_handle():
    """(pynvml, handle of the current CUDA device) found by UUID, immune to renumbering;
    None where there is no GPU, no NVML or no match."""
    nv = _nvml() if torch.cuda.is_available() else None
    if nv is None:
        return None, None
    try:
        index = torch.cuda.current_device()
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception:
        return nv, None
    handle = _try(nv.nvmlDeviceGetHandleByUUID, f"GPU-{uuid}") if uuid else None
    if handle is None and "CUDA_VISIBLE_DEVICES" not in os.environ:
        handle = _try(nv.nvmlDeviceGetHandleByIndex, index)
    return nv, handle


def _nvml_readings(with_static: bool) -> dict:
    """Clocks, temperature and power of the current CUDA device; None where unavailable."""
    keys = ["sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_draw_w"]
    if with_static:
        keys += ["max_sm_clock_mhz", "power_limit_w", "driver_version"]
    out = dict.fromkeys(keys)
    nv, handle = _nvml_handle()
    if handle is None:
        return out
    mw = _try(nv.nvmlDeviceGetPowerUsage, handle)
    out.update(sm_clock_mhz=_try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM),
               mem_clock_mhz=_try(nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_MEM),
               temperature_c=_try(nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU),
               power_draw_w=None if mw is None else mw / 1000.0)
    if with_static:
        limit = _try(nv.nvmlDeviceGetEnforcedPowerLimit, handle)
        driver = _try(nv.nvmlSystemGetDriverVersion)
        out.update(max_sm_clock_mhz=_try(nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_SM),
                   power_limit_w=None if limit is None else limit / 1000.0,
                   driver_version=driver.decode() if isinstance(driver, bytes) else driver)
    return out


_CUDA_MEMORY = ("import torch; print(torch.cuda.get_device_properties("
                "torch.cuda.current_device()).total_memory)")


def device_memory_bytes(device: str) -> int | None:
    """Total memory of ``device``: the current CUDA device's, or the host's physical
    memory for "cpu"; None where it cannot be read. The sweep refuses, before writing
    anything, a configuration whose inputs exceed it.

    The CUDA device's properties are read in a short child process: reading them here
    would initialise CUDA in this process, after which :func:`lock` can no longer set
    ``CUBLAS_WORKSPACE_CONFIG`` (a notebook that measures, then locks, would fail).
    """
    if device == "cuda":
        import subprocess
        import sys
        if not torch.cuda.is_available():
            return None
        proc = _try(lambda: subprocess.run([sys.executable, "-c", _CUDA_MEMORY],
                                           capture_output=True, text=True, timeout=120))
        text = proc.stdout.strip() if proc is not None and proc.returncode == 0 else ""
        return int(text) if text.isdigit() else None
    return _try(lambda: int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES")))


def gpu_state() -> dict:
    """Volatile GPU readings (clocks, temperature, power) and ``timestamp_utc``.

    Values are None without a GPU or NVML. The sweep records this at the start and
    end of each timing unit (one configuration x candidate x mode in one trial), as
    ``gpu_state_start`` and ``gpu_state_end`` in the unit; units.parquet carries the SM
    clock and temperature of both (``sm_clock_start_mhz``, ``sm_clock_end_mhz``,
    ``temperature_start_c``, ``temperature_end_c``). None of it enters the fingerprint
    hash.
    """
    out = _nvml_readings(with_static=False)
    out["timestamp_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="milliseconds")
    return out


def _cpu_name() -> str | None:
    """CPU model name from /proc/cpuinfo (Linux) or platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def fingerprint() -> dict:
    """Describe this machine and software; see ``FINGERPRINT_FIELDS`` for every key.

    Without CUDA the GPU fields are None, ``device_kind`` is 'cpu' and ``note`` says
    the run is CPU wall-clock. NVML readings are None where NVML is missing or a call
    fails. Initialises CUDA on a GPU machine: call :func:`lock` first.
    """
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = None
    cuda = torch.cuda.is_available()
    props = torch.cuda.get_device_properties(torch.cuda.current_device()) if cuda else None
    state = lock_state()
    fp = {
        "gpu_name": props.name if cuda else None,
        "gpu_uuid": str(getattr(props, "uuid", "")) or None if cuda else None,
        "sm_count": props.multi_processor_count if cuda else None,
        "l2_bytes": getattr(props, "L2_cache_size", None) if cuda else None,
        "memory_bytes": props.total_memory if cuda else None,
        "compute_capability": f"{props.major}.{props.minor}" if cuda else None,
        "cuda_version": torch.version.cuda,
        "cudnn_version": _try(torch.backends.cudnn.version),
        "torch_version": torch.__version__,
        "triton_version": triton_version,
        "python_version": platform.python_version(),
        "numpy_version": np.__version__,
        "platform": f"{platform.system()}-{platform.machine()}",
        "cpu_name": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "device_kind": "cuda" if cuda else "cpu",
        "note": None if cuda else "no CUDA device: CPU wall-clock run",
        "lock_state": state,
        "locked": not _faults(state, bool(state.get("deterministic_algorithms"))),
    }
    fp.update(_nvml_readings(with_static=True))
    fp = {f.name: fp.get(f.name) for f in FINGERPRINT_FIELDS}
    fp["fingerprint_hash"] = fingerprint_hash(fp)
    return validate_fingerprint(fp)


def _hash_view(fp: dict, keys) -> dict:
    """The values compared/hashed for ``keys``; python_version reduced to major.minor."""
    view = {k: fp[k] for k in keys}
    if isinstance(view.get("python_version"), str):
        view["python_version"] = ".".join(view["python_version"].split(".")[:2])
    return view


def fingerprint_hash(fp: dict) -> str:
    """First 12 hex digits of SHA-256 over canonical JSON of the ``hashed`` fields."""
    missing = [k for k in HASHED_KEYS if k not in fp]
    if missing:
        raise ValueError(f"`fp` lacks hashed key(s) {missing}.")
    text = json.dumps(_hash_view(fp, HASHED_KEYS), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def validate_fingerprint(fp) -> dict:
    """Return ``fp`` if it matches ``FINGERPRINT_FIELDS``; else ValueError naming each bad key.

    Checks: every key present and no other, each value of its declared type (bools are
    not ints), ``lock_state`` holding exactly the ``LOCK_SETTINGS`` keys, and
    ``fingerprint_hash`` equal to the hash of the hashed fields.
    """
    if not isinstance(fp, dict):
        raise ValueError(f"`fingerprint` must be a dict; got {type(fp).__name__}.")
    problems = [f"missing key `{k}`" for k in _FIELDS if k not in fp and k not in OPTIONAL_KEYS]
    problems += [f"unknown key `{k}`" for k in fp if k not in _FIELDS]
    for name, value in fp.items():
        field = _FIELDS.get(name)
        if field is None or (value is None and field.nullable):
            continue
        if isinstance(value, bool) and bool not in field.type or not isinstance(value, field.type):
            kinds = " or ".join(t.__name__ for t in field.type) + (" or None" if field.nullable
                                                                    else "")
            problems.append(f"`{name}` must be {kinds}; got {value!r}")
    state = fp.get("lock_state")
    if isinstance(state, dict):
        want = {s.key for s in LOCK_SETTINGS}
        bad = sorted(set(state) ^ want | {k for k, v in state.items()
                                           if not isinstance(v, (bool, str, type(None)))})
        if bad:
            problems.append(f"`lock_state` has missing, unknown or non-scalar key(s) {bad}")
    if fp.get("device_kind") not in ("cuda", "cpu", None):
        problems.append(f"`device_kind` must be 'cuda' or 'cpu'; got {fp['device_kind']!r}")
    if not problems and fp["fingerprint_hash"] != fingerprint_hash(fp):
        problems.append("`fingerprint_hash` does not match the hashed fields")
    if problems:
        raise ValueError("invalid fingerprint: " + "; ".join(problems) + ".")
    return fp
