"""python -m attn_analysis: verbs, exit codes and one-line errors."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attn_analysis import __main__ as cli, sweep
from attn_analysis.__main__ import main
from test_records import make_run

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
    from attn_analysis.candidates import DEFAULT_CANDIDATES
    assert cli.build_parser().parse_args(["sweep", "--out", "x"]).candidates is None
    plans = []

    def fake_run(out, plan, progress):
        plans.append(plan)
        return {"units": 0, "out": out, "wall_s": 0.0, "timing_units": 0, "timed": 0,
                "not_timed": {}}

    monkeypatch.setattr(sweep, "run", fake_run)
    assert main(["sweep", "--out", str(tmp_path / "r"), "--device", "cpu", "--shape",
                 "1,2,16", "--quiet"]) == 0
    assert main(["sweep", "--out", str(tmp_path / "r"), "--device", "cpu", "--shape",
                 "1,2,16", "--candidates", "sdpa", "--quiet"]) == 0
    assert [p.candidates for p in plans] == [tuple(DEFAULT_CANDIDATES), ("sdpa",)]
    assert plans[0].modes == sweep.MODES


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
