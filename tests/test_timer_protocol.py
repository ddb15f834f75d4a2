"""chapters.timer_protocol on a synthetic cross-check and synthetic protocol runs of known
truth: the check's graph-replay speedup against each run's, what each design recorded, and
the sentence for both outcomes (missing a run's interval, overlapping on a shared GPU)."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attn_analysis.chapters import timer_protocol as tp

SHAPE = "B32-H8-S512-D64-fp16"
# TRUTH: in the check SDPA takes 48.2 µs per replayed call and ours 45.6 µs (speedup
# 1.057); the protocol runs time 48.1 and 46.0 µs (1.046)
CHECK_MS = {"sdpa": 0.0482, "gluon": 0.0456}
RUN_MS = {"sdpa": 0.0481, "gluon": 0.0460}


def check_doc(n_proc=8, uuid="GPU-check-0000", seed=0):
    rng = np.random.default_rng(seed)
    procs = []
    for p in range(n_proc):
        units = []
        for cand, ms in CHECK_MS.items():
            times = list(ms * np.exp(rng.normal(0, 0.0005, 20)))
            units.append(dict(shape=SHAPE, candidate=cand, timers={"graph": dict(
                times_ms=times, calls_per_sample=21 if cand == "sdpa" else 22,
                gpu_state_before={"sm_clock_mhz": 1980},
                gpu_state_after={"sm_clock_mhz": 1980})}))
        procs.append(dict(worker=p, role="time", units=units,
                          fingerprint={"gpu_name": "NVIDIA H200", "gpu_uuid": uuid}))
    return {"processes": procs}


def fake_run(uuid, n_trials=28, placements=8):
    rows = [dict(config=SHAPE, candidate=c, mode="graph", trial=t, median_ms=ms,
                 calls_per_sample=21 if c == "sdpa" else 22, n_samples=20 * placements,
                 sm_clock_start_mhz=1980, sm_clock_end_mhz=1965)
            for c, ms in RUN_MS.items() for t in range(n_trials)]
    return SimpleNamespace(units=pd.DataFrame(rows), info={"plan": {"placements": placements}},
                           fingerprint={"trials": {"0": {"gpu_uuid": uuid}}})


def table(speedup, low, high, m=2):
    return pd.DataFrame([dict(config=SHAPE, candidate="gluon", level="call", speedup=speedup,
                              ci_low=low, ci_high=high, n_comparisons=m)])


def protocol():
    return {"a-run": ("H200-ae", table(1.044, 1.043, 1.046), fake_run("GPU-aaaa")),
            "c-run": ("H200-ah", table(1.045, 1.043, 1.047), fake_run("GPU-check-0000"))}


def test_check_graph_and_run_graph_read_each_design():
    cg = tp.check_graph(check_doc())
    assert cg["gpu_uuid"] == "GPU-check-0000"
    assert cg["sdpa"]["per_call_us"] == pytest.approx(48.2, rel=1e-3)
    assert (cg["gluon"]["calls_per_replay"], cg["gluon"]["samples"],
            cg["gluon"]["placements"], cg["gluon"]["n_processes"]) == (22, 20, 1, 8)
    assert (cg["sdpa"]["clock_start_mhz"], cg["sdpa"]["clock_end_mhz"]) == (1980, 1980)
    rg = tp.run_graph(fake_run("GPU-aaaa"))
    assert rg["gpu_uuid"] == "GPU-aaaa"
    assert rg["gluon"] == dict(per_call_us=pytest.approx(46.0), calls_per_replay=22,
                               samples=20, placements=8, clock_start_mhz=1980, clock_end_mhz=1965,
                               n_processes=28)
    with pytest.raises(ValueError, match="`run`"):
        tp.run_graph(SimpleNamespace(units=pd.DataFrame({"config": []}), info={},
                                     fingerprint={}))


def test_gap_values_pair_the_check_with_each_run():
    v = tp.gap_values(check_doc(), protocol(), "gluon")
    c = v["check"]
    assert c["speedup"] == pytest.approx(0.0482 / 0.0456, rel=1e-3)
    assert c["low"] > 1.047  # narrow: 8 processes of low noise
    a, cc = v["runs"]
    assert (a["run"], a["overlap"], a["same_gpu"]) == ("a-run", False, False)
    assert (cc["run"], cc["same_gpu"]) == ("c-run", True)
    assert cc["overlap"] is False  # its interval ends at 1.047 too
    wide = protocol()
    wide["c-run"] = ("H200-ah", table(1.05, 1.04, 1.07), wide["c-run"][2])
    assert tp.gap_values(check_doc(), wide, "gluon")["runs"][1]["overlap"] is True
    with pytest.raises(ValueError, match="`doc`"):
        tp.gap_values(check_doc(), protocol(), "fa4")
    with pytest.raises(ValueError, match="`protocol`"):
        tp.gap_values(check_doc(), {}, "gluon")
    bad = {"a-run": ("H200-ae", table(1.0, 0.9, 1.1).assign(candidate="x"),
                     fake_run("GPU-aaaa"))}
    with pytest.raises(ValueError, match="`protocol` run 'a-run'"):
        tp.gap_values(check_doc(), bad, "gluon")


def test_gap_sentence_says_what_differs_and_claims_no_cause():
    v = tp.gap_values(check_doc(uuid="GPU-elsewhere"), protocol(), "gluon")
    text = tp.gap_sentence(v)
    assert text.startswith("The confirmatory runs of gluon give 1.044–1.045× per call "
                           "(intervals within 1.043–1.047, m = 2). Its graph-replay interval "
                           "misses those of all 2 runs. The check ran on a GPU without a "
                           "protocol run.")
    assert "SDPA took 48.2 µs there and 48.1 µs in the runs; gluon 45.6 and 46.0 µs." in text
    assert "Both replay 21–22 calls per graph, 20 samples per placement." in text
    assert "The check timed 1 placement per process in 8 processes, the runs 8 in 28." in text
    assert ("The SM clock read 1980 MHz at the start and end of the check's graph timer; "
            "the runs' units read 1980 and 1965 MHz.") in text
    assert text.endswith("The records do not show which difference moves the speedup.")
    assert "because" not in text
    assert max(len(t.split()) for t in re.split(r"(?<=\.) (?=[A-Z])", text)) < 25
    # one run missed, the other overlapping on the check's own GPU; the runs said before
    one = protocol()
    one["c-run"] = ("H200-ah", table(1.05, 1.04, 1.07), one["c-run"][2])
    text = tp.gap_sentence(tp.gap_values(check_doc(), one, "gluon"), check="x.json",
                           about=False)
    assert text.startswith("The graph-replay interval of x.json misses that of run a-run "
                           "(H200-ae). The check ran on the H200-ah.")
    assert "48.1 µs in the run;" in text and "the run 8 in 28" in text
    assert "the run's units read" in text
    assert text.endswith("Run c-run ran on the check's own GPU, the H200-ah, and overlaps it.")
    # every interval overlapping: the times are not listed
    wide = dict(one, **{"a-run": ("H200-ae", table(1.05, 1.04, 1.07), one["a-run"][2])})
    text = tp.gap_sentence(tp.gap_values(check_doc(), wide, "gluon"))
    assert text == ("The confirmatory runs of gluon give 1.050× per call (intervals within "
                    "1.040–1.070, m = 2). Its graph-replay interval overlaps each run's. Run "
                    "c-run ran on the check's own GPU, the H200-ah, and overlaps it.")
    assert "µs" not in text
    with pytest.raises(ValueError, match="`v`"):
        tp.gap_sentence({})
    with pytest.raises(ValueError, match="`v`"):
        tp.gap_sentence(dict(v, runs=[]))
    assert math.isfinite(v["check"]["high"])


def test_protocol_runs_finds_the_recorded_confirmatory_runs_of_a_kernel():
    """On the recorded data: the confirmatory runs that timed our Gluon kernel at the
    target, each at its registered family; a kernel no run timed gives none."""
    from pathlib import Path
    from attn_analysis import record
    from attn_analysis.analyse import power
    runs_dir = Path(__file__).resolve().parents[1] / "data" / "runs"
    runs = {r: record.load(runs_dir / r) for r in (
        "h200-gluon-v2-target", "h200-gluon-target", "h200-sota-target")}
    found = tp.protocol_runs(runs, "gluon", n_resamples=200)
    # TRUTH: the pre-registered run is confirmatory, the first Gluon run at the target
    # exploratory, the state-of-the-art target run never timed gluon
    assert list(found) == ["h200-gluon-v2-target"]
    for run_id, (machine, t, run) in found.items():
        assert machine.startswith("H200") and run.run_id == run_id
        assert set(t["n_comparisons"]) == {power.registered_family(run.info)}
    assert tp.protocol_runs(runs, "no_such_kernel") == {}
    with pytest.raises(ValueError, match="`candidate`"):
        tp.protocol_runs(runs, "")
    with pytest.raises(ValueError, match="`runs`"):
        tp.protocol_runs(list(runs.values()), "gluon")
