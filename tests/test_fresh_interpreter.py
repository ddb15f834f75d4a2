"""measure.fresh_interpreter: the probes' one way to run code in a fresh interpreter and read
its JSON record back (the probes of benchmarks/readme-command/probes/: cold_start_probe.py,
sweep_cost_probe.py, trial_overhead_probe.py; benchmarks/startup-probe/startup_probe.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attn_analysis.measure.fresh_interpreter import ERROR_TAIL_CHARS, run_record

ROOT = Path(__file__).resolve().parents[1]

PRINT = "import json, os, sys; print('noise'); print(json.dumps({'argv': sys.argv[1:], " \
        "'pid': os.getpid(), 'flag': os.environ.get('PROBE_FLAG')}))"


def test_the_last_line_is_the_record_with_the_childs_wall_time(monkeypatch):
    monkeypatch.setenv("PROBE_FLAG", "mine")
    got = run_record(PRINT, "a", "b")
    assert got["argv"] == ["a", "b"] and got["pid"] != os.getpid()
    assert got["flag"] == "mine"  # this process's environment by default
    assert got["wall_s"] > 0 and "returncode" not in got


def test_the_environment_is_the_base_updated_with_the_extra():
    got = run_record(PRINT, env_extra={"PROBE_FLAG": "extra"})
    assert got["flag"] == "extra"
    base = {k: v for k, v in os.environ.items() if k != "PROBE_FLAG"}
    assert run_record(PRINT, base_env=base)["flag"] is None


def test_a_child_without_a_record_gives_the_end_of_its_output():
    got = run_record("import sys; print('x' * 5000); sys.exit('boom')")
    assert got["returncode"] == 1 and got["error"].endswith("boom\n")
    assert len(got["error"]) == ERROR_TAIL_CHARS and got["wall_s"] > 0
    assert "error" in run_record("print('[1, 2]')")  # JSON, but not an object


def test_a_child_that_fails_after_its_record_keeps_it_and_says_so():
    got = run_record("import json, sys; print(json.dumps({'done': 1})); sys.exit(3)")
    assert got["done"] == 1 and got["returncode"] == 3


@pytest.mark.parametrize("code, args", [("", ()), ("  ", ()), (None, ()), ("pass", (1,))])
def test_bad_code_or_arguments_are_refused_before_any_child(code, args):
    with pytest.raises(ValueError, match="`code`|`args`"):
        run_record(code, *args)


def test_no_probe_script_keeps_its_own_copy():
    probes = ROOT / "benchmarks" / "readme-command" / "probes"
    for path in (probes / "cold_start_probe.py", probes / "sweep_cost_probe.py",
                 probes / "trial_overhead_probe.py",
                 ROOT / "benchmarks" / "startup-probe" / "startup_probe.py"):
        text = path.read_text()
        assert "run_record" in text and "subprocess.run([sys.executable" not in text
