"""The machine fingerprint: what a trial process ran on (GPU, its UUID, driver and
software versions, CPU, the lock's state), each key with a declared type, unit and whether
it enters the hash (``FINGERPRINT_FIELDS``), and the GPU's clocks and temperature.

:func:`fingerprint` describes the machine; its ``fingerprint_hash`` covers only the
fields that decide whether two runs may be compared (``FINGERPRINT_FIELDS``,
``hashed``), never clocks, temperatures or power. It holds no host, user, path or
address. :func:`fingerprint` and :func:`gpu_state` initialise CUDA on a GPU machine,
so call :func:`.env.lock` first.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
import os
import platform

import numpy as np
import torch

from .env import LOCK_SETTINGS, _faults, lock_state

__all__ = ["FingerprintField", "FINGERPRINT_FIELDS", "OPTIONAL_KEYS", "HASHED_KEYS",
           "gpu_state", "fingerprint", "fingerprint_hash",
           "validate_fingerprint"]

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


# NVML handles found so far, by (NVML module, CUDA device index): a sweep reads the GPU's
# state twice per placement, and finding a handle by UUID walks NVML's device list.
_handles: dict = {}


def _nvml_handle():
    """(pynvml, handle of the current CUDA device) found by UUID, immune to renumbering;
    None where there is no GPU, no NVML or no match."""
    nv = _nvml() if torch.cuda.is_available() else None
    if nv is None:
        return None, None
    try:
        index = torch.cuda.current_device()
        if (id(nv), index) in _handles:
            return nv, _handles[(id(nv), index)]
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception:
        return nv, None
    handle = _try(nv.nvmlDeviceGetHandleByUUID, f"GPU-{uuid}") if uuid else None
    if handle is None and "CUDA_VISIBLE_DEVICES" not in os.environ:
        handle = _try(nv.nvmlDeviceGetHandleByIndex, index)
    if handle is not None:
        _handles[(id(nv), index)] = handle
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
