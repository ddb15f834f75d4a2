"""Tests for attn_analysis.measure.machine: the fingerprint is complete, stable, hashed only
on what matters, and leak-free; the device's memory is read without initialising CUDA."""

from __future__ import annotations

import copy
import getpass
import os
import re
import socket
import sys
import types

import pytest
import torch

from attn_analysis.measure import env, machine

pytestmark = pytest.mark.usefixtures("restore_torch_state")


# ------------------------------------------------------------------ fingerprint

def _fp(**changes) -> dict:
    """A fingerprint of this machine with some fields replaced and the hash recomputed."""
    fp = copy.deepcopy(machine.fingerprint())
    fp.update(changes)
    fp["fingerprint_hash"] = machine.fingerprint_hash(fp)
    return fp


def test_fingerprint_has_every_declared_key_and_validates():
    env.lock()
    fp = machine.fingerprint()
    assert list(fp) == [f.name for f in machine.FINGERPRINT_FIELDS]
    assert machine.validate_fingerprint(fp) is fp
    assert fp["locked"] is True and fp["lock_state"] == env.lock_state()
    assert re.fullmatch(r"[0-9a-f]{12}", fp["fingerprint_hash"])


def test_fingerprint_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    fp = machine.fingerprint()
    assert fp["device_kind"] == "cpu"
    assert fp["note"] == "no CUDA device: CPU wall-clock run"
    for key in ("gpu_name", "sm_count", "l2_bytes", "memory_bytes", "compute_capability",
                "sm_clock_mhz", "temperature_c", "power_draw_w"):
        assert fp[key] is None
    assert set(machine.gpu_state()) == {"sm_clock_mhz", "mem_clock_mhz", "temperature_c",
                                    "power_draw_w", "timestamp_utc"}
    assert machine.gpu_state()["sm_clock_mhz"] is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00",
                        machine.gpu_state()["timestamp_utc"])


class _FakeNVML:
    """pynvml stand-in: fixed readings (power in mW, as NVML gives it), or every call raising."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, fail: bool):
        self.fail = fail

    def __getattr__(self, name):
        readings = {"nvmlDeviceGetHandleByUUID": "handle", "nvmlDeviceGetPowerUsage": 70500,
                    "nvmlDeviceGetTemperature": 64, "nvmlDeviceGetEnforcedPowerLimit": 72000,
                    "nvmlSystemGetDriverVersion": b"570.172.08"}

        def call(*args):
            if self.fail:
                raise RuntimeError("NVML call failed")
            if name in ("nvmlDeviceGetClockInfo", "nvmlDeviceGetMaxClockInfo"):
                return {1: 2040 if "Max" in name else 1500, 2: 6251}[args[1]]
            return readings[name]
        return call


@pytest.mark.parametrize("fail", [False, True])
def test_nvml_readings_convert_units_and_never_raise(monkeypatch, fail):
    monkeypatch.setattr(machine, "_nvml", lambda: _FakeNVML(fail))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: types.SimpleNamespace(uuid="0000-1111"))
    state = machine.gpu_state()
    readings = machine._nvml_readings(with_static=True)
    if fail:
        assert state["sm_clock_mhz"] is None and state["power_draw_w"] is None
        assert set(readings.values()) == {None}
    else:
        assert state["sm_clock_mhz"] == 1500 and state["mem_clock_mhz"] == 6251
        assert state["temperature_c"] == 64 and state["power_draw_w"] == 70.5
        assert readings["power_limit_w"] == 72.0 and readings["max_sm_clock_mhz"] == 2040
        assert readings["driver_version"] == "570.172.08"


def test_nvml_missing_device_properties_gives_none(monkeypatch):
    monkeypatch.setattr(machine, "_nvml", lambda: _FakeNVML(False))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1 / 0)
    assert machine.gpu_state()["temperature_c"] is None


def test_hash_is_stable_and_ignores_volatile_readings():
    env.lock()
    a, b = machine.fingerprint(), machine.fingerprint()
    assert a["fingerprint_hash"] == b["fingerprint_hash"]
    volatile = _fp(sm_clock_mhz=1500, mem_clock_mhz=6251, max_sm_clock_mhz=2040,
                   temperature_c=71, power_limit_w=72.0, power_draw_w=70.5,
                   note="a different note", numpy_version="0.0",
                   python_version=f"{sys.version_info[0]}.{sys.version_info[1]}.99")
    assert volatile["fingerprint_hash"] == a["fingerprint_hash"]


@pytest.mark.parametrize("key, value", [
    ("torch_version", "2.2.1+cu121"), ("gpu_name", "NVIDIA L4"), ("sm_count", 58),
    ("l2_bytes", 48 * 2**20), ("driver_version", "570.172.08"), ("triton_version", None),
    ("python_version", "3.99.1"), ("locked", False),
])
def test_hash_changes_with_environment_critical_fields(key, value):
    env.lock()
    base = _fp()
    changed = _fp(**{key: value})
    assert changed["fingerprint_hash"] != base["fingerprint_hash"]


def test_hash_changes_with_lock_state():
    base = _fp()
    state = dict(base["lock_state"], cudnn_benchmark=not base["lock_state"]["cudnn_benchmark"])
    assert _fp(lock_state=state)["fingerprint_hash"] != base["fingerprint_hash"]


def test_fingerprint_leaks_no_host_user_or_path():
    fp = machine.fingerprint()
    secrets = {socket.gethostname(), getpass.getuser()}
    paths = {os.getcwd(), os.path.expanduser("~")}

    def strings(value):
        if isinstance(value, dict):
            for k, v in value.items():
                yield str(k)
                yield from strings(v)
        elif value is not None:
            yield str(value)

    for text in strings(fp):
        tokens = set(re.split(r"[^A-Za-z0-9_.-]+", text))
        assert not secrets & tokens, text  # host/user names, however short, as whole tokens
        assert not any(p in text for p in paths if len(p) > 1), text
        assert not re.search(r"\b\d{1,3}(\.\d{1,3}){3}\b", text), text  # IPv4 address


def test_validate_fingerprint_names_missing_and_mistyped_keys():
    fp = _fp()
    del fp["sm_count"]
    with pytest.raises(ValueError, match="missing key `sm_count`"):
        machine.validate_fingerprint(fp)
    with pytest.raises(ValueError, match="`l2_bytes` must be int or None; got 'big'"):
        machine.validate_fingerprint(dict(_fp(), l2_bytes="big"))
    with pytest.raises(ValueError, match="`sm_count` must be int or None; got True"):
        machine.validate_fingerprint(dict(_fp(), sm_count=True))
    with pytest.raises(ValueError, match="`torch_version` must be str; got None"):
        machine.validate_fingerprint(dict(_fp(), torch_version=None))
    with pytest.raises(ValueError, match="unknown key `hostname`"):
        machine.validate_fingerprint(dict(_fp(), hostname="x"))
    with pytest.raises(ValueError, match="`fingerprint_hash` does not match"):
        machine.validate_fingerprint(dict(_fp(), gpu_name="tampered"))
    bad_state = dict(_fp()["lock_state"], extra=1)
    with pytest.raises(ValueError, match=r"`lock_state` has .* \['extra'\]"):
        machine.validate_fingerprint(_fp(lock_state=bad_state))
    with pytest.raises(ValueError, match="`fingerprint` must be a dict"):
        machine.validate_fingerprint([])


def test_float_fields_accept_ints_but_not_text():
    machine.validate_fingerprint(_fp(power_draw_w=70))
    with pytest.raises(ValueError, match="`power_draw_w` must be float or int or None"):
        machine.validate_fingerprint(_fp(power_draw_w="70 W"))


def test_every_field_declares_type_unit_and_hashing():
    names = [f.name for f in machine.FINGERPRINT_FIELDS]
    assert len(names) == len(set(names))
    volatile = {"sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz", "temperature_c",
                "power_limit_w", "power_draw_w", "fingerprint_hash"}
    assert not volatile & set(machine.HASHED_KEYS)
    assert {"gpu_name", "sm_count", "l2_bytes", "memory_bytes", "compute_capability",
            "driver_version", "cuda_version", "cudnn_version", "torch_version",
            "triton_version", "python_version", "lock_state"} <= set(machine.HASHED_KEYS)
    assert {f.unit for f in machine.FINGERPRINT_FIELDS if f.name.endswith("_mhz")} == {"MHz"}
