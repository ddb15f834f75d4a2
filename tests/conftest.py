"""Builders the test modules share: journal units, a small finalized run, and the process
checks of the tests that kill sweeps and their workers.

Import them by name (``from conftest import make_run``); pytest also loads this file
itself, before any test module.
"""

from __future__ import annotations

import time
from pathlib import Path

from attn_analysis import records


def make_timing_unit(config="B1-H2-S16-D64-fp16", candidate="sdpa", mode="graph", trial=0,
                     times=(0.5, 0.52, 0.51), status="ok", reason=""):
    """Builder for a timing unit as the sweep writes it."""
    return {"kind": "timing", "config": config, "candidate": candidate, "mode": mode,
            "trial": trial, "status": status, "reason": reason, "times_ms": list(times),
            "timing": {"clock": "cpu_wall", "stop_reason": "n_samples",
                       "ci_rel_halfwidth": 0.01, "calls_per_sample": 1},
            "gpu_state_start": {"sm_clock_mhz": None}, "gpu_state_end": {},
            "measurement_id": f"{candidate}-{mode}-{trial}"}


def make_run(tmp_path, n_trials=2):
    """A finalized CPU run, ``tmp_path/run-a``, holding a unit of every kind: per trial a
    trial unit, two timing units and a correctness unit; an unsupported candidate's timing
    unit, a kernels unit and a ceilings unit."""
    run = tmp_path / "run-a"
    for t in range(n_trials):
        records.write_unit(run, {"kind": "trial", "trial": t,
                                 "fingerprint": {"fingerprint_hash": "abc", "device_kind": "cpu"}})
        for mode in ("graph", "per_call"):
            records.write_unit(run, make_timing_unit(mode=mode, trial=t,
                                                     times=(0.5 + t, 0.6 + t, 0.55 + t)))
        records.write_unit(run, {"kind": "correctness", "config": "B1-H2-S16-D64-fp16",
                                 "candidate": "sdpa", "trial": t, "status": "ok", "reason": "",
                                 "result": {"passed": True, "rel_error": 3e-4,
                                            "max_abs_error": 1e-3, "threshold": 5e-3,
                                            "nonfinite": 0}})
    records.write_unit(run, make_timing_unit(candidate="sdpa_flash", status="unsupported",
                                             reason="cuda only", times=()))
    records.write_unit(run, {"kind": "kernels", "config": "B1-H2-S16-D64-fp16",
                             "candidate": "sdpa", "status": "ok",
                             "kernels": [{"name": "k1", "calls_per_call": 1.0,
                                          "device_ms_per_call": 0.4}]})
    records.write_unit(run, {"kind": "ceilings", "ceilings": {"matmul": {"tflops": 1.0}}})
    records.finalize(run, {"plan": {"device": "cpu"}})
    return run


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, counts as dead)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_dead(pids, timeout_s: float = 15.0) -> list[int]:
    """Wait for every pid to die; return those still alive after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]
