"""A sweep spreads its trial processes over the host's GPUs, one per GPU at a time, each
pinned with CUDA_VISIBLE_DEVICES (CPU: fake GPU pins, which the CPU ignores), records each
process's pin, and resumes as before; the GPU list and --gpus are parsed and checked."""

import pytest

from attn_analysis import record
from attn_analysis.record import journal, read_info
from attn_analysis.measure import gpus, sweep

import fake_gpu_probe  # noqa: F401
from conftest import tiny_plan

_SMI = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa-1111)\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb-2222)\n")


def _probe_plan(trials=4):
    return tiny_plan(configs=tiny_plan().configs[:1], candidates=("fake_gpu_probe",),
                     modes=("per_call",), trials=trials, plugins=("fake_gpu_probe",),
                     timing={"n_samples": 6}, start_method="spawn")


def _units(out):
    units, bad = journal.read_journal(out)
    assert not bad
    trials = {u["trial"]: u for u in units.values() if u["kind"] == "trial"}
    timing = {u["trial"]: u for u in units.values() if u["kind"] == "timing"}
    return trials, timing


def _windows(timing):
    return sorted(tuple(u["info"]["build_window"]) for u in timing.values())


def test_visible_gpus_from_the_environment_or_nvidia_smi():
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ("2", "3")
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == ()
    assert gpus.visible_gpus({}, lister=lambda: _SMI) == ("GPU-aaaa-1111", "GPU-bbbb-2222")
    assert gpus.visible_gpus({}, lister=lambda: "") == ()


def test_select_gpus_picks_indices_and_names_the_flag():
    visible = ("GPU-a", "GPU-b", "GPU-c")
    assert gpus.select_gpus(None, visible) == visible
    assert gpus.select_gpus("all", visible) == visible
    assert gpus.select_gpus("2,0", visible) == ("GPU-c", "GPU-a")
    for bad, words in (("3", "GPUs 0..2"), ("0,0", "each GPU once"), ("a", "indices"),
                       ("", "indices")):
        with pytest.raises(ValueError, match=words) as err:
            gpus.select_gpus(bad, visible, "--gpus")
        assert "`--gpus`" in str(err.value)
    with pytest.raises(ValueError, match="no GPU"):
        gpus.select_gpus(None, ())


def test_run_refuses_bad_pins_before_writing(tmp_path):
    out = tmp_path / "run"
    for bad in ("0,1", ["a", "a"], ["a,b"], [""]):
        with pytest.raises(ValueError, match="`gpus`"):
            sweep.run(out, _probe_plan(), progress=False, gpus=bad)
    assert not out.exists()


def test_trials_spread_over_every_gpu_at_once_each_pinned_and_recorded(tmp_path):
    out = tmp_path / "run"
    summary = sweep.run(out, _probe_plan(4), progress=False, gpus=("fakeA", "fakeB"))
    assert summary["timed"] == 4 and not summary["errored"]
    assert record.verify(out) == []
    trials, timing = _units(out)
    # each process saw its own pin, and its trial unit records it
    for t, unit in trials.items():
        assert unit["cuda_visible_devices"] == timing[t]["info"]["pin"]
        assert unit["concurrent_processes"] == 2
    assert {u["cuda_visible_devices"] for u in trials.values()} == {"fakeA", "fakeB"}
    # two processes ran at once: some timing windows overlap
    w = _windows(timing)
    assert any(b[0] < a[1] for a, b in zip(w, w[1:]))
    info = read_info(out)
    assert info["gpus_last_invocation"] == ["fakeA", "fakeB"]
    assert info["concurrent_processes_last_invocation"] == 2


def test_one_at_a_time_rotates_gpus_and_never_overlaps(tmp_path):
    out = tmp_path / "run"
    sweep.run(out, _probe_plan(4), progress=False, gpus=("fakeA", "fakeB"),
              one_at_a_time=True)
    trials, timing = _units(out)
    assert {t: u["cuda_visible_devices"] for t, u in trials.items()} == {
        0: "fakeA", 1: "fakeB", 2: "fakeA", 3: "fakeB"}
    assert all(u["concurrent_processes"] == 1 for u in trials.values())
    w = _windows(timing)
    assert all(b[0] >= a[1] for a, b in zip(w, w[1:]))


def test_no_gpus_runs_unpinned_one_at_a_time(tmp_path):
    out = tmp_path / "run"
    sweep.run(out, _probe_plan(2), progress=False)
    trials, timing = _units(out)
    assert all(u["cuda_visible_devices"] is None and u["concurrent_processes"] == 1
               for u in trials.values())
    assert read_info(out)["gpus_last_invocation"] == []


def test_a_spread_sweep_resumes_only_what_is_missing(tmp_path):
    out = tmp_path / "run"
    plan = _probe_plan(4)
    sweep.run(out, plan, progress=False, gpus=("fakeA", "fakeB"))
    kept = {n: record.read_unit(record.unit_path(out, n))["measurement_id"]
            for n in sweep.plan_units(plan)[0]}
    # drop trial 3's units and the run's finalized files: a run cut short
    for name in sweep.plan_units(plan)[3]:
        record.unit_path(out, name).unlink()
    (out / "manifest.json").unlink()
    sweep.run(out, plan, progress=False, gpus=("fakeA", "fakeB", "fakeC"))
    assert record.verify(out) == []
    for n, mid in kept.items():  # trial 0 was not measured again
        assert record.read_unit(record.unit_path(out, n))["measurement_id"] == mid
    trials, _ = _units(out)
    assert len(trials) == 4


def test_a_crashing_trial_is_recorded_while_its_neighbours_go_on(tmp_path):
    out = tmp_path / "run"
    plan = tiny_plan(configs=tiny_plan().configs[:1], candidates=("sdpa", "fake_crash"),
                     modes=("per_call",), trials=3)
    summary = sweep.run(out, plan, progress=False, gpus=("fakeA", "fakeB"))
    assert summary["not_timed"] == {"crashed": 3}
    assert summary["timed"] == 3
    assert record.verify(out) == []
