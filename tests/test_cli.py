"""python -m attn_analysis: verbs, exit codes and one-line errors."""

import subprocess
import sys

import pytest

from attn_analysis.__main__ import main
from test_records import make_run


def test_help_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "attn_analysis", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for verb in ("sweep", "verify", "show"):
        assert verb in result.stdout


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
