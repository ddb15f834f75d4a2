"""How trial processes start (Plan.start_method): forked from a server that imported the
measuring code once, or spawned; recorded in the plan, one method per run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from attn_analysis import record
from attn_analysis.measure import forkserver_warm, sweep
from conftest import copy_run, tiny_plan as make_plan


def test_the_default_is_the_fork_server_and_others_are_refused_by_name():
    assert make_plan().start_method == "forkserver" == sweep.START_METHODS[0]
    assert make_plan(start_method="spawn").start_method == "spawn"
    with pytest.raises(ValueError, match=r"`start_method` must be one of \('forkserver', "
                                         r"'spawn'\); got 'fork'"):
        make_plan(start_method="fork")


def test_a_recorded_plan_without_the_key_was_spawned():
    recorded = make_plan(start_method="spawn").to_json()
    assert recorded["start_method"] == "spawn"
    del recorded["start_method"]  # as every run before 2026-11-25 recorded it
    assert sweep.Plan.from_json(recorded).start_method == record.RECORDED_START_METHOD \
        == "spawn"
    assert sweep.Plan.from_json(make_plan().to_json()) == make_plan()


@pytest.mark.slow  # a child imports torch and the preloaded modules
def test_trial_context_preloads_only_modules_that_leave_cuda_alone():
    assert sweep.trial_context("spawn").get_start_method() == "spawn"
    assert sweep.trial_context("forkserver").get_start_method() == "forkserver"
    with pytest.raises(ValueError, match="`start_method` must be one of"):
        sweep.trial_context("fork")
    # importing the preloaded modules must not start CUDA, nor ask the CUDA runtime for
    # its devices: either leaves a forked child unable to start CUDA. With a GPU the
    # child forked after the imports starts CUDA; without one it can only show that the
    # imports did not initialise it.
    code = ("import importlib, os, sys, torch\n"
            "from attn_analysis.measure.sweep import FORKSERVER_PRELOAD\n"
            "[importlib.import_module(m) for m in FORKSERVER_PRELOAD]\n"
            "print(torch.cuda.is_initialized())\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    try:\n"
            "        if torch.cuda.is_available():\n"
            "            torch.zeros(1, device='cuda')\n"
            "        os._exit(0)\n"
            "    except Exception:\n"
            "        os._exit(1)\n"
            "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))")
    # the child runs with the environment the fork server gets (FORKSERVER_ENV), under
    # which the last preloaded module imports Inductor's compile_fx; told to warm up, it
    # does so here too, without the NVIDIA driver
    env = {**os.environ, **sweep.FORKSERVER_ENV, forkserver_warm.WARM_ENV: "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=300, env=env)
    assert done.stdout.split() == ["False", "0"]


def test_the_run_records_its_start_method_and_a_resume_must_share_it(swept_run, tmp_path):
    recorded, plan, _ = swept_run
    assert record.read_plan(recorded)["start_method"] == plan.start_method == "forkserver"
    out = copy_run(recorded, tmp_path)
    (out / record.MANIFEST).unlink()  # as if stopped before finalizing: a run to resume
    old = json.loads((out / "plan.json").read_text())
    del old["start_method"]  # an older run: spawned
    record.write_plan(out, old)
    with pytest.raises(sweep.SweepError, match=r"other settings \(start_method\): recorded "
                                               r"\['spawn'\], asked \['forkserver'\]"):
        sweep.run(out, plan, progress=False)


def test_the_command_line_offers_both_methods_and_refuses_others(tmp_path):
    done = subprocess.run([sys.executable, "-m", "attn_analysis", "sweep", "--out",
                           str(tmp_path / "r"), "--device", "cpu", "--start-method", "fork"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--start-method" in done.stderr and "'fork'" in done.stderr
    assert not (tmp_path / "r").exists()


def test_a_loaded_run_says_how_its_trials_started(swept_run):
    recorded, _, _ = swept_run
    run = record.load(recorded)
    assert run.start_method == "forkserver"
    run.info["plan"].pop("start_method")
    assert run.start_method == "spawn"


@pytest.mark.slow  # a child starts a fork server that imports torch
@pytest.mark.parametrize("method, started", [("forkserver", "True"), ("spawn", "False")])
def test_the_trial_server_can_start_before_the_sweep(method, started):
    # The command line starts it before importing torch, so that the server's imports
    # run beside its own; "spawn" has no server to start.
    code = ("from multiprocessing import forkserver\n"
            "from attn_analysis.measure import sweep\n"
            f"sweep.start_trial_server({method!r})\n"
            "print(forkserver._forkserver._forkserver_pid is not None)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=300)
    assert done.stdout.strip() == started
