"""The fork server's warm-up (measure.forkserver_warm): what it does under each setting of
the NVML device count, that the trial processes forked from the server record it, and
that the sweep gives the server that setting without overriding the user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from attn_analysis import record
from attn_analysis.measure import forkserver_warm, sweep

# In a fresh interpreter: import the module under the given setting and print what it did,
# whether compile_fx was imported, and whether the two hashes are now kept by the process
# (Triton's through functools' cache, Inductor's through torch's own cache).
_CHILD = """
import json, sys, time
from attn_analysis.measure import forkserver_warm as w
from triton.runtime.cache import triton_key
hits = triton_key.cache_info().hits
triton_key()
print(json.dumps({"warmed": w.WARMED,
                  "compile_fx": "torch._inductor.compile_fx" in sys.modules,
                  "triton_cached": triton_key.cache_info().hits == hits + 1}))
"""


def _warm_in_child(nvml: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != forkserver_warm.NVML_CHECK}
    env[forkserver_warm.WARM_ENV] = "1"  # whatever the machine
    if nvml is not None:
        env[forkserver_warm.NVML_CHECK] = nvml
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          env=env, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two interpreters import torch and Inductor
def test_compile_fx_is_imported_only_under_the_nvml_count_and_the_hashes_always():
    on = _warm_in_child("1")
    assert on["compile_fx"] is True and on["warmed"]["compile_fx"] >= 0
    assert on["warmed"]["nvml_check"] == "1"
    off = _warm_in_child(None)  # asking CUDA for its devices would break forked children
    assert off["compile_fx"] is False and off["warmed"]["compile_fx"] is None
    assert off["warmed"]["nvml_check"] is None
    for got in (on, off):
        assert got["warmed"]["torch_key"] >= 0 and got["warmed"]["triton_key"] >= 0
        assert got["triton_cached"] is True  # computed once, kept for the process


def test_nothing_is_done_where_the_warm_up_is_not_wanted(monkeypatch):
    monkeypatch.setenv(forkserver_warm.WARM_ENV, "0")
    monkeypatch.setenv(forkserver_warm.NVML_CHECK, "1")
    monkeypatch.setattr(forkserver_warm, "_torch_key", lambda: pytest.fail("hashed"))
    assert forkserver_warm._warm() == {"nvml_check": "1", "compile_fx": None,
                                       "torch_key": None, "triton_key": None}


def test_the_warm_up_is_wanted_where_the_nvidia_driver_is_unless_told(monkeypatch, tmp_path):
    assert forkserver_warm.DRIVER_SIGNS[0] == forkserver_warm.NVIDIA_DRIVER
    driver, control = tmp_path / "version", tmp_path / "nvidiactl"
    monkeypatch.setattr(forkserver_warm, "DRIVER_SIGNS", (str(driver), str(control)))
    monkeypatch.delenv(forkserver_warm.WARM_ENV, raising=False)
    assert forkserver_warm.wanted() is False
    control.write_text("")  # the control device alone is enough
    assert forkserver_warm.wanted() is True
    control.unlink()
    driver.write_text("NVRM version: test")
    assert forkserver_warm.wanted() is True
    monkeypatch.setenv(forkserver_warm.WARM_ENV, "0")
    assert forkserver_warm.wanted() is False
    driver.unlink()
    monkeypatch.setenv(forkserver_warm.WARM_ENV, "1")
    assert forkserver_warm.wanted() is True
    monkeypatch.setenv(forkserver_warm.WARM_ENV, "yes")  # neither: the machine decides
    assert forkserver_warm.wanted() is False


def test_the_fork_server_gets_the_nvml_count_unless_the_user_chose(monkeypatch):
    assert sweep.FORKSERVER_ENV == {forkserver_warm.NVML_CHECK: "1"}
    assert sweep.FORKSERVER_PRELOAD[-1] == "attn_analysis.measure.forkserver_warm"
    monkeypatch.delenv(forkserver_warm.NVML_CHECK, raising=False)
    sweep.trial_context("spawn")  # a spawned trial imports nothing in advance
    assert forkserver_warm.NVML_CHECK not in os.environ
    sweep.trial_context("forkserver")
    assert os.environ[forkserver_warm.NVML_CHECK] == "1"
    monkeypatch.setenv(forkserver_warm.NVML_CHECK, "0")
    sweep.trial_context("forkserver")
    assert os.environ[forkserver_warm.NVML_CHECK] == "0"


def test_the_swept_runs_trial_units_say_what_their_fork_server_did(swept_run):
    out, plan, _ = swept_run
    assert plan.start_method == "forkserver"
    units = [record.read_unit(p) for p in sorted((out / "journal").glob("trial__*.json"))]
    assert len(units) == plan.trials
    for unit in units:
        got = unit["preloaded"]
        assert set(got) == {"compile_fx", "torch_key", "triton_key", "nvml_check"}
        # the session's server was started with this process's environment and machine
        if forkserver_warm.wanted():
            assert got["torch_key"] >= 0 and got["triton_key"] >= 0
            assert (got["compile_fx"] is None) == (got["nvml_check"] != "1")
        else:
            assert got["compile_fx"] is got["torch_key"] is got["triton_key"] is None


def test_the_schema_refuses_a_preloaded_record_that_is_not_an_object():
    unit = {"kind": "trial", "trial": 0, "fingerprint": {}, "preloaded": "yes",
            "started_utc": "2026-11-27T00:00:00Z", "measurement_id": "x"}
    assert any("`preloaded` must be an object" in p for p in record.unit_problems(unit))
    assert not any("preloaded" in p for p in record.unit_problems(dict(unit, preloaded=None)))
