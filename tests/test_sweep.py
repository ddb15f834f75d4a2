"""The sweep runner on the CPU with tiny shapes: recording, failures, crash and resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attn_analysis import record
from attn_analysis.measure import run_lock, sweep
from attn_analysis.record import journal
from attn_analysis.configs import Config

import fake_candidates  # noqa: F401
from conftest import (TINY_CONFIGS, alive, copy_run, main_here, tiny_plan as make_plan,
                      wait_dead)

TESTS = Path(__file__).parent
TINY = tuple(Config.from_key(k) for k in TINY_CONFIGS)


def unit_status(run, candidate):
    units = record.load(run).units
    return set(units[units["candidate"] == candidate]["status"])


def test_sweep_records_every_unit_and_every_failure_with_its_reason(swept_run):
    out, plan, summary = swept_run  # conftest: six candidates, two trials, profile, ceilings
    assert plan.candidates == ("sdpa", "eager", "fake_wrong_scale", "fake_oom",
                               "fake_gpu_only", "fake_half_written")
    assert plan.profile and plan.ceilings and plan.trials == 2
    expected = sum(len(v) for v in sweep.plan_units(plan).values())
    assert summary["units"] == expected
    assert record.verify(out) == []
    run = record.load(out)
    s = run.samples
    # Only correct, supported candidates are timed: 2 configs x 2 modes x 2 trials x 4 samples.
    assert set(s["candidate"]) == {"sdpa", "eager"}
    assert len(s) == 2 * 2 * 2 * 2 * 4
    assert unit_status(out, "fake_wrong_scale") == {"failed_correctness"}
    assert unit_status(out, "fake_half_written") == {"failed_correctness"}
    assert unit_status(out, "fake_oom") == {"oom"}
    assert unit_status(out, "fake_gpu_only") == {"unsupported"}
    oom = run.units[run.units["candidate"] == "fake_oom"]["reason"].iloc[0]
    assert "OutOfMemoryError" in oom and "simulated" in oom
    c = run.correctness
    assert c[c["candidate"] == "fake_wrong_scale"]["rel_error"].min() > 0.05
    assert c[c["candidate"] == "sdpa"]["passed"].all()
    # CPU runs are labelled as CPU wall-clock samples.
    assert set(run.units[run.units["status"] == "ok"]["clock"]) == {"cpu_wall"}
    assert run.ceilings["device"] == "cpu" and run.ceilings["matmul"]["tflops"] > 0
    assert len(run.fingerprint["trials"]) == 2


@pytest.fixture(scope="module")
def interleaved_run(tmp_path_factory):
    """One trial of sdpa and the context-needing fake, three placements, every mode, with
    kernel evidence: read by the context test and the protocol-2 test."""
    plan = make_plan(configs=TINY[:1], candidates=("sdpa", "fake_needs_context"), trials=1,
                     modes=("per_call", "cold_l2", "graph"), profile=True, placements=3)
    out = tmp_path_factory.mktemp("interleaved") / "run"
    sweep.run(out, plan, progress=False)
    return out, plan


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_candidate_context_is_entered_once_outside_every_timer(interleaved_run):
    # The fake's context costs 50 ms to enter and its fn refuses to run outside it: the
    # sweep must enter it around the check and the timers, never inside a timed call.
    # The fake counts its calls and its context's entries (recorded in each unit's info):
    # once for the float64 check and once per placement, around every mode's timer.
    out, plan = interleaved_run
    run = record.load(out)
    assert set(run.units["status"]) == {"ok"}, run.units[["kind", "status", "reason"]]
    assert run.correctness["passed"].all()
    ours = run.units[run.units["candidate"] == "fake_needs_context"]
    assert set(ours["mode"]) == {"per_call", "cold_l2", "graph"}
    infos = {json.dumps(json.loads(text), sort_keys=True) for text in ours["info"]}
    assert len(infos) == 1  # written after the last round: the same final counts
    info = json.loads(infos.pop())["counts"]
    assert info["context_entries"] == 1 + plan.placements, info
    samples = run.samples[run.samples["candidate"] == "fake_needs_context"]
    assert len(samples) == 3 * 3 * 4  # 3 modes x 3 placements x 4 samples, each a call at least
    assert info["calls"] >= len(samples) + 1 > info["context_entries"]


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_worker_crash_is_recorded_and_the_sweep_goes_on(tmp_path):
    plan = make_plan(configs=TINY[:1], candidates=("fake_crash", "sdpa"), trials=1)
    out = tmp_path / "run"
    sweep.run(out, plan, progress=False)
    run = record.load(out)
    crashed = run.units[run.units["candidate"] == "fake_crash"]
    assert set(crashed["status"]) == {"crashed"}
    assert "exit code 17" in crashed["reason"].iloc[0]
    assert set(run.samples["candidate"]) == {"sdpa"}


def _cli(out, *extra):
    return [sys.executable, "-m", "attn_analysis", "sweep", "--out", str(out), "--device", "cpu",
            "--shape", "1,2,16", "--shape", "1,1,24", "--candidates", "fake_slow", "sdpa",
            "--modes", "per_call", "graph", "--trials", "2", "--samples", "6",
            "--placements", "2", "--process-warmup-ms", "0",
            "--plugin", "fake_candidates", "--no-profile", "--no-ceilings", "--quiet", *extra]


def _start_sweep_and_wait(out, **popen):
    """Start the CLI sweep in its own process group; return once 3 timing units are on disk."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    # A runner started in the background (nohup, `&` without job control) ignores SIGINT,
    # and children inherit that; give the sweep the default handler a terminal would.
    proc = subprocess.Popen(_cli(out), env=env, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **popen)
    journal = out / "journal"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.is_dir() and len(list(journal.glob("timing__*.json"))) >= 3:
            break
        time.sleep(0.05)
    return proc, journal, env


def _here(command, capsys) -> subprocess.CompletedProcess:
    """``command`` (``python -m attn_analysis ...``, as ``_cli`` builds it) through ``main``
    in this process (``conftest.main_here``): the reruns below paid an interpreter's start
    and torch's import (about 3 s) once more; the killed sweeps themselves, and the rerun
    after Ctrl-C, go through the command line."""
    assert command[1:3] == ["-m", "attn_analysis"]
    return main_here(capsys, *command[3:])


@pytest.mark.slow
def test_killed_sweep_resumes_without_losing_or_remeasuring(tmp_path, capsys):
    out = tmp_path / "run"
    proc, journal, env = _start_sweep_and_wait(out, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL)
    os.killpg(proc.pid, signal.SIGKILL)  # no clean-up at all, worse than Ctrl-C
    proc.wait()
    before = {p.name: p.read_bytes() for p in journal.glob("*.json")}
    assert 3 <= len([n for n in before if n.startswith("timing")])
    assert record.verify(out)  # not finalized yet: must not verify
    result = _here(_cli(out), capsys)
    assert result.returncode == 0, result.stderr
    after = {p.name: p.read_bytes() for p in journal.glob("*.json")}
    for name, data in before.items():  # nothing lost, nothing measured twice
        assert after[name] == data, name
    expected = 2 * (1 + 2 * 2 * (1 + 2))  # trials x (trial unit + configs x cands x (corr + modes))
    assert len(after) == expected
    assert record.verify(out) == []
    ids = record.load(out).units["measurement_id"]
    assert ids.is_unique


@pytest.mark.slow
def test_ctrl_c_exits_130_cleanly_and_a_rerun_completes_without_remeasuring(tmp_path):
    out = tmp_path / "run"
    proc, journal, env = _start_sweep_and_wait(out, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C at a terminal: the whole foreground group
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert not list(out.rglob(".tmp-*"))
    assert record.verify(out)  # not finalized: must not verify yet
    before = {p.name: p.read_bytes() for p in journal.glob("*.json")}
    timed_before = [n for n in before if n.startswith("timing")]
    assert 3 <= len(timed_before) < 2 * 2 * 2 * 2  # stopped mid-way
    ids_before = {n: record.read_unit(journal / n)["measurement_id"] for n in before}
    result = subprocess.run(_cli(out), env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    after = {p.name: p.read_bytes() for p in journal.glob("*.json")}
    for name, data in before.items():  # nothing lost, nothing measured twice
        assert after[name] == data, name
        assert record.read_unit(journal / name)["measurement_id"] == ids_before[name], name
    assert len(after) == 2 * (1 + 2 * 2 * (1 + 2))
    assert record.verify(out) == []
    run = record.load(out)
    assert run.units["measurement_id"].is_unique
    assert set(run.units["status"]) == {"ok"}
    assert not list(out.rglob(".tmp-*"))


def _written_after(out, first_glob, later_glob) -> bool:
    """Whether some journal unit matching ``later_glob`` was written after every ``first_glob``."""
    journal = out / "journal"
    first = max(p.stat().st_mtime_ns for p in journal.glob(first_glob))
    return any(p.stat().st_mtime_ns > first for p in journal.glob(later_glob))


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory):
    """One trial of sdpa beside a candidate that fails to build and one that runs out of
    memory while timed: read by the two tests below. Seed 0 shuffles them to
    fake_oom_while_timing, sdpa, fake_compile_error: the out-of-memory candidate is timed
    (and its units written) before sdpa, as in a sweep that goes on after it."""
    plan = make_plan(configs=TINY[:1], trials=1,
                     candidates=("fake_oom_while_timing", "fake_compile_error", "sdpa"))
    out = tmp_path_factory.mktemp("failing") / "run"
    sweep.run(out, plan, progress=False)
    return out


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_compile_failure_is_recorded_as_error_and_the_sweep_goes_on(failing_run):
    out = failing_run
    assert record.verify(out) == []
    run = record.load(out)
    failed = run.units[run.units["candidate"] == "fake_compile_error"]
    assert set(failed["mode"]) == {"per_call", "graph"}
    assert set(failed["status"]) == {"error"}
    assert set(failed["reason"]) == {"RuntimeError: simulated compile failure"}
    corr = run.correctness.set_index("candidate")
    assert corr.loc["fake_compile_error", "status"] == "error"
    assert corr.loc["fake_compile_error", "reason"] == "RuntimeError: simulated compile failure"
    assert set(run.units[run.units["candidate"] == "sdpa"]["status"]) == {"ok"}
    assert set(run.samples["candidate"]) == {"sdpa"}
    # The same worker went on to the next candidate after recording the failure.
    assert _written_after(out, "*__fake_compile_error*.json", "*__sdpa*.json")


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_out_of_memory_while_timing_is_recorded_as_oom_and_the_sweep_goes_on(failing_run):
    out = failing_run
    assert record.verify(out) == []
    run = record.load(out)
    corr = run.correctness.set_index("candidate")
    assert corr.loc["fake_oom_while_timing", "status"] == "ok"  # it built and passed the check
    assert bool(corr.loc["fake_oom_while_timing", "passed"])
    timed = run.units[run.units["candidate"] == "fake_oom_while_timing"]
    assert set(timed["mode"]) == {"per_call", "graph"}  # each mode tried and recorded
    assert set(timed["status"]) == {"oom"}
    for reason in timed["reason"]:
        assert reason.startswith("OutOfMemoryError: simulated while timing"), reason
    assert (timed["n_samples"] == 0).all()
    assert set(run.units[run.units["candidate"] == "sdpa"]["status"]) == {"ok"}
    assert set(run.samples["candidate"]) == {"sdpa"}
    assert _written_after(out, "timing__*__fake_oom_while_timing__*.json", "*__sdpa*.json")


def test_resume_refuses_changed_timing_settings(swept_run, tmp_path):
    recorded, plan, _ = swept_run
    out = copy_run(recorded, tmp_path)
    (out / record.MANIFEST).unlink()  # as if stopped before finalizing: a run to resume
    with pytest.raises(sweep.SweepError, match=r"was recorded with other settings \(timing\)"):
        sweep.run(out, make_plan(configs=plan.configs, candidates=plan.candidates,
                                 profile=True, ceilings=True, timing={"n_samples": 9}),
                  progress=False)


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_resume_refuses_a_different_machine(tmp_path):
    out = tmp_path / "run"
    record.write_unit(out, {"kind": "trial", "trial": 5,
                             "fingerprint": {"fingerprint_hash": "0ther0machine"}})
    with pytest.raises(sweep.SweepError, match="differs from the run's"):
        sweep.run(out, make_plan(configs=TINY[:1], candidates=("sdpa",), trials=1),
                  progress=False)


def test_plan_validation_names_the_parameter():
    with pytest.raises(ValueError, match="`candidate` must be one of"):
        make_plan(candidates=("nope",))
    with pytest.raises(ValueError, match="`modes` must be drawn from"):
        make_plan(modes=("warm",))
    with pytest.raises(ValueError, match="`trials` must be a positive integer"):
        make_plan(trials=0)
    with pytest.raises(ValueError, match="`device` must be one of"):
        make_plan(device="tpu")
    with pytest.raises(ValueError, match="`samples` must be a positive integer"):
        make_plan(timing={"n_samples": 0})
    with pytest.raises(ValueError, match="`budget_s` must be a positive number"):
        make_plan(timing={"ci_target": 0.01, "budget_s": -1})
    with pytest.raises(ValueError, match="`configs` must be a non-empty"):
        make_plan(configs=())


def _snapshot(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes and modification time."""
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_finished_run_is_left_as_it_is_and_a_plan_that_would_change_it_refused(swept_run,
                                                                                 tmp_path):
    recorded, plan, first = swept_run
    assert first["finished"] is False and first["timed"] == 16 and first["errored"] == 0
    out = copy_run(recorded, tmp_path)
    before = _snapshot(out)
    again = sweep.run(out, plan, progress=False)  # a rerun used to rewrite finished_utc
    info = json.loads((out / record.RUN_INFO).read_text())
    assert again["finished"] is True and again["finished_utc"] == info["finished_utc"]
    assert {k: again[k] for k in ("units", "timing_units", "timed", "not_timed")} == \
        {k: first[k] for k in ("units", "timing_units", "timed", "not_timed")}
    assert _snapshot(out) == before and not run_lock.lock_path(out).exists()
    fewer = sweep.run(out, make_plan(configs=TINY[:1], candidates=("sdpa",), trials=1,
                                     modes=("graph",)), progress=False)
    assert fewer["finished"] is True and fewer["timing_units"] == 1 and fewer["timed"] == 1
    with pytest.raises(ValueError, match=r"`out_dir` '.*run' is a finished run \(manifest.json\), "
                                         r"never changed; this plan calls for 4 unit\(s\) it "
                                         r"lacks, first correctness__t2__"):
        sweep.run(out, make_plan(configs=TINY[:1], candidates=("sdpa",), trials=3),
                  progress=False)
    with pytest.raises(ValueError, match=r"never changed; it was recorded with other settings "
                                         r"\(timing\): use a new folder"):
        sweep.run(out, make_plan(configs=TINY[:1], candidates=("sdpa",), trials=1,
                                 timing={"n_samples": 5}), progress=False)
    assert _snapshot(out) == before and not run_lock.lock_path(out).exists()


def test_plan_refuses_repeated_configurations_and_modes():
    with pytest.raises(ValueError, match=r"`configs` must not repeat a configuration; "
                                         r"\['B1-H2-S16-D64-fp16'\] repeated in"):
        make_plan(configs=(TINY[0], TINY[1], Config(1, 2, 16, 64)))
    with pytest.raises(ValueError, match=r"`modes` must not repeat a mode; \['graph'\] repeated"):
        make_plan(modes=("graph", "per_call", "graph"))


def test_check_fits_refuses_inputs_larger_than_the_device_memory():
    target = Config(32, 8, 512)  # Q, K, V and O: 4 x 16 MiB
    sweep.check_fits([target], 64 * 2**20, "cuda")  # exactly fits
    sweep.check_fits([Config(100000, 100000, 100000)], None, "cuda")  # unknown: not checked
    with pytest.raises(ValueError, match=r"`configs` must fit in the cuda's memory: "
                                         r"B32-H8-S512-D64-fp16 needs 0.1 GiB for Q, K, V and "
                                         r"the output alone, and this cuda has 0.1 GiB"):
        sweep.check_fits([TINY[0], target], 64 * 2**20 - 1, "cuda")


def test_run_refuses_a_shape_that_cannot_fit_before_writing(tmp_path):
    huge = Config(100000, 100000, 100000)
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="`configs` must fit in the cpu's memory: "
                                         "B100000-H100000-S100000-D64-fp16 needs"):
        sweep.run(out, make_plan(configs=(TINY[0], huge)), progress=False)
    assert list(tmp_path.iterdir()) == []


def test_plan_round_trips_through_json():
    plan = make_plan()
    assert sweep.Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_protocol_v2_records_each_placement_interleaved_with_its_own_pad(interleaved_run):
    """Every unit holds ``placements`` records (own pad, round, samples); candidates of a
    configuration are interleaved round by round; the samples carry the placement index."""
    out, plan = interleaved_run
    assert record.verify(out) == []
    run = record.load(out)
    assert run.protocol == 2 and plan.placements == 3
    pl = run.placements
    assert len(pl) == 2 * 3 * 3  # two candidates x three placements x three modes
    assert sorted(set(pl["placement"])) == [0, 1, 2]
    assert set(run.samples["placement"]) == {0, 1, 2}
    per_unit = pl.groupby(["candidate", "mode"])["pad_bytes"].nunique()
    assert (per_unit == 3).all()  # a fresh random pad at each placement
    # interleaved: each round times both candidates before the next round starts
    units, _ = journal.read_journal(out)
    starts = {}
    for u in units.values():
        if u["kind"] == "timing":
            for rec in u["placements"]:
                key = (rec["round"], u["candidate"])
                stamp = rec["gpu_state_start"]["timestamp_utc"]
                starts[key] = min(starts.get(key, stamp), stamp)
    rounds = sorted(starts.items(), key=lambda kv: kv[1])
    assert [key[0] for key, _ in rounds] == [0, 0, 1, 1, 2, 2]
    # no kernel time on the CPU
    assert pl["kernel_ms"].isna().all()


# ------------------------------------------------- workers die with their parent; one sweep per folder

def _children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (from /proc)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _sleepy_cli(out):
    """A sweep whose one fake_sleepy unit takes about 5 s (50 samples of a 100 ms call, at
    one placement): the kill lands within a second of its start."""
    return [sys.executable, "-m", "attn_analysis", "sweep", "--out", str(out), "--device", "cpu",
            "--shape", "1,2,16", "--candidates", "fake_sleepy", "sdpa", "--modes", "per_call",
            "--trials", "1", "--samples", "50", "--warmup-ms", "0", "--placements", "1",
            "--process-warmup-ms", "0", "--plugin", "fake_candidates", "--no-profile",
            "--no-ceilings", "--quiet"]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["kill", "kill-9"])
def test_killing_only_the_parent_leaves_no_worker_and_a_rerun_completes(tmp_path, sig,
                                                                         capsys):
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(_sleepy_cli(out), env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = out / "journal" / "correctness__t0__B1-H2-S16-D64-fp16__fake_sleepy.json"
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "the sweep never reached fake_sleepy's timing"
    workers = _children(proc.pid)
    assert workers, "no worker process found"
    os.kill(proc.pid, sig)  # the parent only, as `kill PID` does: not its process group
    _, stderr = proc.communicate(timeout=60)
    try:  # the orphan would go on timing fake_sleepy for about 5 s
        assert wait_dead(workers, timeout_s=5) == [], "a worker outlived its parent"
    finally:
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    journal = out / "journal"
    assert not (journal / "timing__t0__B1-H2-S16-D64-fp16__fake_sleepy__per_call.json").exists()
    if sig == signal.SIGTERM:  # stopped like Ctrl-C: worker stopped, lock released
        assert proc.returncode == 130, stderr
        assert not run_lock.lock_path(out).exists()
    before = {p.name: p.read_bytes() for p in journal.glob("*.json")}
    result = _here(_sleepy_cli(out), capsys)
    assert result.returncode == 0, result.stderr
    if sig == signal.SIGKILL:  # the dead parent's lock file is left behind, and taken over
        assert f"stale lock of {out} (pid {proc.pid}" in result.stderr
    after = {p.name: p.read_bytes() for p in journal.glob("*.json")}
    for name, data in before.items():  # nothing re-measured or overwritten
        assert after[name] == data, name
    assert record.verify(out) == []
    assert record.load(out).units["measurement_id"].is_unique
    assert not run_lock.lock_path(out).exists()


@pytest.mark.slow
def test_a_second_sweep_on_a_running_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    proc, journal, env = _start_sweep_and_wait(out, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL)
    try:
        second = _here(_cli(out), capsys)  # another process than the running sweep
        units_during = {p.name: p.read_bytes() for p in journal.glob("*.json")}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert lines[0].startswith(f"error: {out} is being recorded by another sweep (pid {proc.pid} ")
    after = {p.name: p.read_bytes() for p in journal.glob("*.json")}
    assert all(after[n] == d for n, d in units_during.items())


def test_plan_refuses_bad_seed_warmup_plugins_and_a_device_no_candidate_runs_on():
    with pytest.raises(ValueError, match=r"`seed` must be an integer in \[0, 2\*\*32 - trials\]"):
        make_plan(seed=-1)
    with pytest.raises(ValueError, match="`seed`"):
        make_plan(seed=2**32 - 1, trials=2)
    with pytest.raises(ValueError, match="`warmup_ms` must be a number of milliseconds >= 0"):
        make_plan(timing={"n_samples": 4, "warmup_ms": -5.0})
    with pytest.raises(ValueError, match="`ci_target` must be a positive number"):
        make_plan(timing={"ci_target": float("nan"), "budget_s": 1.0})
    with pytest.raises(ValueError, match="no module named 'no_such_mod'"):
        make_plan(plugins=("no_such_mod",))
    with pytest.raises(ValueError, match="`candidates` must include one that runs on cpu"):
        make_plan(candidates=("fake_gpu_only",))
    with pytest.raises(ValueError, match="`candidates` must not repeat a name"):
        make_plan(candidates=("sdpa", "sdpa"))
    with pytest.raises(ValueError, match="`ceilings` must be True or False"):
        make_plan(ceilings=1)


def test_run_refuses_a_folder_that_is_not_a_run_before_writing(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="`out_dir` .* is a folder of other files"):
        sweep.run(tmp_path, make_plan(), progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_a_run_of_zero_samples_is_not_finalized(tmp_path):
    out = tmp_path / "run"
    plan = make_plan(configs=TINY[:1], candidates=("fake_wrong_scale", "fake_gpu_only"), trials=1)
    with pytest.raises(sweep.SweepError, match=r"no timing unit recorded a sample "
                                               r"\(failed_correctness 2, unsupported 2"):
        sweep.run(out, plan, progress=False)
    assert not (out / "manifest.json").exists()
    assert not run_lock.lock_path(out).exists()


def test_measurement_plan_of_a_notebook():
    plan = sweep.measurement_plan("cpu", shapes="2,2,32", samples=5)
    assert plan.device == "cpu" and plan.timing == {"n_samples": 5, "warmup_ms": 10.0}
    default = sweep.measurement_plan("cpu", shapes="2,2,32")  # 0: the calibrated design
    assert default.timing == {"n_samples": 20, "warmup_ms": 10.0} and default.placements == 8
    assert plan.candidates == sweep.CPU_CANDIDATES and not plan.profile
    with pytest.raises(ValueError, match="`device` must be 'cuda' or 'cpu'"):
        sweep.measurement_plan("tpu")
    with pytest.raises(ValueError, match="`trials` must be a positive integer"):
        sweep.measurement_plan("cpu", trials=0)
    with pytest.raises(ValueError, match="`samples` must be a non-negative integer"):
        sweep.measurement_plan("cpu", samples=-1)
