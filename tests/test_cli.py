"""python -m attn_analysis: verbs, exit codes and one-line errors."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attn_analysis import __main__ as cli, configs
from attn_analysis.measure import sweep
from attn_analysis.__main__ import main
from conftest import make_run

REPO = Path(__file__).resolve().parents[1]


def _env_without_torch(tmp_path) -> dict:
    """Environment whose PYTHONPATH starts with a ``torch`` package that raises ImportError."""
    hidden = tmp_path / "no_torch"
    (hidden / "torch").mkdir(parents=True, exist_ok=True)
    (hidden / "torch" / "__init__.py").write_text(
        'raise ImportError("torch hidden by test_cli")\n')
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(hidden), str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _run_without_torch(tmp_path, *args):
    """Run ``python -m attn_analysis *args`` where ``import torch`` raises ImportError."""
    return subprocess.run([sys.executable, "-m", "attn_analysis", *args], capture_output=True,
                          text=True, timeout=120, env=_env_without_torch(tmp_path),
                          cwd=tmp_path)


def test_help_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "attn_analysis", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for verb in ("sweep", "verify", "show"):
        assert verb in result.stdout


def test_hidden_torch_really_is_hidden(tmp_path):
    result = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True,
                            text=True, timeout=60, env=_env_without_torch(tmp_path))
    assert result.returncode != 0 and "torch hidden by test_cli" in result.stderr


@pytest.mark.parametrize("args, words", [
    (("--help",), ("sweep", "verify", "show")),
    (("sweep", "--help"), ("--out", "--candidates", "--modes", "per_call cold_l2 graph")),
    (("verify", "--help"), ("runs",)),
    (("show", "--help"), ("run",)),
])
def test_help_works_without_torch(tmp_path, args, words):
    result = _run_without_torch(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    for word in words:
        assert word in result.stdout


def test_verify_works_without_torch(tmp_path):
    run = make_run(tmp_path)
    result = _run_without_torch(tmp_path, "verify", str(run))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(": ok")


def test_sweep_without_torch_is_a_one_line_error(tmp_path):
    result = _run_without_torch(tmp_path, "sweep", "--out", str(tmp_path / "r"), "--device",
                                "cpu", "--shape", "1,2,16", "--quiet")
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "torch" in result.stderr and not (tmp_path / "r").exists()


def test_default_candidates_resolved_when_the_sweep_runs(tmp_path, monkeypatch):
    from attn_analysis.measure.candidates import DEFAULT_CANDIDATES
    assert cli.build_parser().parse_args(["sweep", "--out", "x"]).candidates is None
    plans, prebuilds = [], []

    def fake_run(out, plan, progress, prebuild, command_started, gpus=(), one_at_a_time=False):
        assert gpus == () and one_at_a_time is False  # a cpu sweep pins nothing
        plans.append(plan)
        prebuilds.append(prebuild)
        return {"units": 0, "out": out, "wall_s": 0.0, "timing_units": 0, "timed": 0,
                "not_timed": {}, "errored": 0, "first_error": "", "finished": False}

    monkeypatch.setattr(sweep, "run", fake_run)
    assert main(["sweep", "--out", str(tmp_path / "r"), "--device", "cpu", "--shape",
                 "1,2,16", "--quiet"]) == 0
    assert main(["sweep", "--out", str(tmp_path / "r"), "--device", "cpu", "--shape",
                 "1,2,16", "--candidates", "sdpa", "--quiet", "--no-prebuild"]) == 0
    assert [p.candidates for p in plans] == [tuple(DEFAULT_CANDIDATES), ("sdpa",)]
    # the sweep decides (on a GPU only) unless --no-prebuild says never
    assert prebuilds == [None, False]
    assert plans[0].modes == configs.MODES


def test_sweep_defaults_are_the_calibrated_design(tmp_path, monkeypatch):
    """Without flags a sweep measures protocol 2's calibrated design (2 processes x 8
    placements x 20 samples, 10 ms warm-up); --ci-target switches to the adaptive rule."""
    plans = []
    monkeypatch.setattr(sweep, "run", lambda out, plan, progress, prebuild, command_started, **_:
                        plans.append(plan) or {
        "units": 0, "out": out, "wall_s": 0.0, "timing_units": 0, "timed": 0, "not_timed": {},
        "errored": 0, "first_error": "", "finished": False})
    base = ["sweep", "--device", "cpu", "--shape", "1,2,16", "--quiet"]
    assert main(base + ["--out", str(tmp_path / "a")]) == 0
    assert main(base + ["--out", str(tmp_path / "b"), "--ci-target", "0.01"]) == 0
    assert main(base + ["--out", str(tmp_path / "c"), "--samples", "7"]) == 0
    default, adaptive, fixed = plans
    assert (default.trials, default.placements) == (sweep.DEFAULT_TRIALS, 8) == (4, 8)
    assert default.timing == {"n_samples": 20, "warmup_ms": 10.0} == sweep.Plan(
        configs=default.configs, candidates=("sdpa",)).timing
    assert adaptive.timing == {"ci_target": 0.01, "budget_s": 0.5, "warmup_ms": 10.0}
    assert fixed.timing == {"n_samples": 7, "warmup_ms": 10.0}


def test_verify_ok_and_failed(tmp_path, capsys):
    run = make_run(tmp_path)
    assert main(["verify", str(run)]) == 0
    assert capsys.readouterr().out.strip().endswith(": ok")
    (run / "units.parquet").write_bytes(b"garbage")
    assert main(["verify", str(run)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "units.parquet: SHA-256 does not match" in out


def test_show_summarises_and_warns(tmp_path, capsys):
    run = make_run(tmp_path)
    assert main(["show", str(run)]) == 0
    out = capsys.readouterr().out
    assert "sdpa" in out and "graph" in out
    assert "not timed" in out and "cuda only" in out
    # make_run's two trials differ by a whole millisecond: a between-process warning.
    assert "trial medians differ" in out


def test_errors_are_one_line_with_exit_code_1(tmp_path, capsys):
    assert main(["show", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_bad_command_line_exits_2():
    with pytest.raises(SystemExit) as info:
        main(["sweep", "--out", "x", "--shape", "1,2"])
    assert info.value.code == 2


def test_invalid_parameters_fail_before_any_work(tmp_path, capsys):
    code = main(["sweep", "--out", str(tmp_path / "r"), "--device", "cpu", "--shape", "1,2,16",
                 "--dtype", "float8", "--quiet"])
    assert code == 1
    assert "`dtype` must be one of" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    code = main(["sweep", "--out", str(tmp_path / "r"), "--device", "cpu", "--shape", "1,2,16",
                 "--trials", "0", "--quiet"])
    assert code == 1 and "`trials`" in capsys.readouterr().err


# ------------------------------------------------------------- a newcomer's bad inputs

def _fake_repo(tmp_path) -> Path:
    """A folder shaped like the repository (.git, README.md, a recorded run in data/runs)."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "README.md").write_text("readme\n")
    run = root / "data" / "runs" / "r1"
    (run / "journal").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    return root


def _listing(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns for p in root.rglob("*")}


def _sweep(cwd: Path, *args, timeout=300):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]))
    return subprocess.run([sys.executable, "-m", "attn_analysis", "sweep", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


_TINY = ("--shape", "1,2,16", "--candidates", "sdpa", "--modes", "per_call", "--trials", "1",
         "--samples", "4", "--placements", "1", "--process-warmup-ms", "0", "--no-ceilings",
         "--no-profile", "--quiet")


@pytest.mark.parametrize("args, message", [
    (("--out", ""), "`--out` must be a folder path for the run"),
    (("--out", "."), "is a repository root"),
    (("--out", "data/runs"), "'data/runs' holds runs (r1)"),
    (("--out", "README.md"), "'README.md' is a file"),
    (("--out", "README.md/run"), "README.md is a file, not a folder"),
    (("--out", "data/runs/r1/journal"), "lies inside the run folder"),
    (("--out", "/sys/attn-newcomer"), "`--out` cannot be"),
    (("--out", "new", "--seed", "-1"), "`seed` must be an integer in [0, 2**32 - trials]; got -1"),
    (("--out", "new", "--warmup-ms", "-5"), "`warmup_ms` must be a number of milliseconds >= 0"),
    (("--out", "new", "--budget", "-1"), "`budget_s` must be a positive number; got -1.0"),
    (("--out", "new", "--plugin", "no_such_mod"), "`plugins` must be importable module names"),
    (("--out", "new", "--candidates", "sdpa_flash"), "`candidates` must include one that runs"),
    (("--out", "new", "--candidates", "nope"), "`candidate` must be one of"),
    (("--out", "new", "--modes", "warm"), "`modes` must be drawn from"),
])
def test_bad_input_is_one_line_naming_it_and_writes_nothing(tmp_path, monkeypatch, capsys,
                                                            args, message):
    """In this process (``python -m attn_analysis`` is ``sys.exit(main())``; the tests
    above and below run it as a module), from the fake repository as working folder."""
    if args[1].startswith("/sys") and not Path("/sys").is_dir():
        pytest.skip("no /sys here")
    if "--candidates" in args and args[args.index("--candidates") + 1] == "sdpa_flash":
        import torch
        if torch.cuda.is_available():
            pytest.skip("sdpa_flash runs here")
    root = _fake_repo(tmp_path)
    before = _listing(root)
    base = [a for a in _TINY if a not in ("--candidates", "sdpa", "--modes", "per_call")] \
        if ("--candidates" in args or "--modes" in args) else list(_TINY)
    monkeypatch.chdir(root)
    code = main(["sweep", *args, *base, "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert message in lines[0]
    assert _listing(root) == before  # nothing written, nothing deleted
    assert not list(root.parent.glob(".*.lock"))


_IN_PROCESS = ("--device", "cpu", "--trials", "1", "--samples", "4", "--placements", "1",
               "--process-warmup-ms", "0", "--no-ceilings", "--no-profile", "--quiet")


@pytest.mark.parametrize("args, message", [
    (("--shape", "100000,100000,100000", "--shape", "1,2,16"),
     "`--shape` must fit in the cpu's memory: B100000-H100000-S100000-D64-fp16 needs "),
    (("--shape", "1,2,16", "--shape", "1,2,16,64"),
     "`--shape` must not repeat a shape; ['B1-H2-S16-D64-fp16'] repeated in"),
    (("--shape", "1,2,16", "--modes", "graph", "per_call", "graph"),
     "`--modes` must not repeat a mode; ['graph'] repeated in ['graph', 'per_call', 'graph']."),
    (("--shape", "1,2,16", "--candidates", "sdpa", "eager", "sdpa"),
     "`--candidates` must not repeat a name; ['sdpa'] repeated in"),
])
def test_an_infeasible_or_repeated_sweep_is_refused_before_anything_is_written(
        tmp_path, capsys, args, message):
    code = main(["sweep", "--out", str(tmp_path / "new"), *args, *_IN_PROCESS])
    assert code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert list(tmp_path.iterdir()) == []  # no run folder, no lock file


def test_a_finished_run_says_so_and_an_errored_unit_exits_1_after_finalizing(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["sweep", "--out", str(out), "--shape", "1,2,16", "--modes", "per_call",
            "--candidates", "fake_compile_error", "sdpa", "--plugin", "fake_candidates",
            *_IN_PROCESS]
    began = time.monotonic()
    assert main(args) == 1  # the compile failure: recorded, the rest measured, finalized
    took = time.monotonic() - began
    info = json.loads((out / "run.json").read_text())
    # the command line's start-up before the sweep's clock: recorded, inside the command
    startup = info["command_to_sweep_s_last_invocation"]
    assert 0 <= startup and startup + info["sweep_wall_s_last_invocation"] <= took
    std = capsys.readouterr()
    assert "recorded 1 of 2 timing units with samples" in std.out and "error 1" in std.out
    assert std.err.strip() == (
        "error: 1 timing unit(s) errored or crashed (first: fake_compile_error at "
        "B1-H2-S16-D64-fp16: error, RuntimeError: simulated compile failure); the rest was "
        "measured and the run finalized with them recorded")
    from attn_analysis import record
    assert record.verify(out) == []
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(args) == 0  # finished: said so, nothing changed
    finished = json.loads((out / "run.json").read_text())["finished_utc"]
    assert capsys.readouterr().out.strip() == (
        f"{out} is a finished run (finalized {finished}): nothing to measure, nothing "
        f"changed; 1 of 2 timing units hold samples. A new --out records a new run.")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_unknown_flag_and_bad_device_exit_2():
    for args in (["--out", "x", "--trails", "3"], ["--out", "x", "--device", "tpu"]):
        with pytest.raises(SystemExit) as info:
            main(["sweep", *args])
        assert info.value.code == 2


@pytest.mark.slow  # a sweep through `python -m attn_analysis` in a subprocess
def test_device_defaults_to_what_the_machine_has_and_says_so(tmp_path):
    import torch
    has_cuda = torch.cuda.is_available()
    result = _sweep(tmp_path, "--out", "run", *_TINY)
    assert result.returncode == 0, result.stderr
    expected = "device: cuda (a CUDA device" if has_cuda else "device: cpu (no CUDA device"
    assert result.stdout.startswith(expected), result.stdout
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert plan["device"] == ("cuda" if has_cuda else "cpu")
    assert "recorded 1 of 1 timing units with samples" in result.stdout


@pytest.mark.slow  # a sweep through `python -m attn_analysis` in a subprocess
def test_cuda_without_a_gpu_is_refused_up_front_and_cpu_then_works(tmp_path, monkeypatch,
                                                                   capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = _sweep(tmp_path, "--out", "run", "--device", "cuda", *_TINY)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: `--device` is cuda, but this machine has no CUDA device (torch "
        f"{torch.__version__}); pass --device cpu or leave --device out."]
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()
    # The same command with --device cpu, through main in this process (an interpreter
    # that imports torch is about 3 s; the sweep above and in the test before go through
    # `python -m attn_analysis`).
    code, _, err = _sweep_here(tmp_path, monkeypatch, capsys, "--out", "run", "--device",
                               "cpu", *_TINY)
    assert code == 0, err
    assert (tmp_path / "run" / "manifest.json").is_file()


def _sweep_here(cwd: Path, monkeypatch, capsys, *args):
    """``main(["sweep", *args])`` in this process from ``cwd``: (exit code, stdout, stderr)."""
    monkeypatch.chdir(cwd)
    code = main(["sweep", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_a_run_of_zero_samples_is_not_finalized(tmp_path, monkeypatch, capsys):
    args = [a for a in _TINY if a != "sdpa"]
    args[args.index("--candidates") + 1:args.index("--candidates") + 1] = ["fake_wrong_scale"]
    code, _, err = _sweep_here(tmp_path, monkeypatch, capsys, "--out", "run", "--device", "cpu",
                               "--plugin", "fake_candidates", *args)
    assert code == 1
    assert err.startswith("error: no timing unit recorded a sample "
                          "(failed_correctness 1; first reason: fake_wrong_scale")
    assert "is not finalized" in err
    assert not (tmp_path / "run" / "manifest.json").exists()


@pytest.mark.slow  # runs a sweep: trial processes that import torch
def test_final_line_counts_only_timed_units(tmp_path, monkeypatch, capsys):
    args = [a for a in _TINY if a != "sdpa"]
    args[args.index("--candidates") + 1:args.index("--candidates") + 1] = [
        "sdpa", "fake_gpu_only"]
    code, out, err = _sweep_here(tmp_path, monkeypatch, capsys, "--out", "run", "--device",
                                 "cpu", "--plugin", "fake_candidates", *args)
    assert code == 0, err
    assert "recorded 1 of 2 timing units with samples into run" in out
    assert out.rstrip().endswith("; not timed: unsupported 1")


def test_building_the_parser_imports_neither_torch_nor_scipy():
    """The sweep starts its trial processes' server after the parser is built: what the
    parser imports delays that server on every run (scipy.stats, for the margin's default,
    took 3.6 s of a fresh H100's command under the profiler)."""
    code = ("import sys, attn_analysis.__main__ as m; m.build_parser(); "
            "print(sorted(k for k in ('torch', 'scipy', 'scipy.stats') if k in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
