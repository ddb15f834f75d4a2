"""What a newcomer's mistakes do (issue 44, item 5): each is refused with one clear line
naming what was wrong, before anything is measured or written, or no longer happens.

The cases that need a sweep's trial processes are in tests/test_sweep_refusals.py (slow).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from attn_analysis import record
from attn_analysis.record import consolidate

from conftest import main_here, make_run


def _set_run_info(run: Path, **changes) -> None:
    """Edit run.json and recompute the manifest, as a newcomer who 'fixes' a run would."""
    info = json.loads((run / record.RUN_INFO).read_text())
    info.update(changes)
    (run / record.RUN_INFO).write_text(json.dumps(info))
    consolidate.write_manifest(run)


@pytest.mark.parametrize("bad", ["abc", True, 99, None, 2.5])
def test_a_bad_run_json_format_version_is_refused_naming_the_file_and_field(tmp_path, bad):
    run = make_run(tmp_path)
    _set_run_info(run, format_version=bad)
    with pytest.raises(record.RecordError, match=r"run\.json: `format_version` must be one of"):
        record.read_info(run)
    problems = record.verify(run)
    assert any(str(run / record.RUN_INFO) in p and "`format_version`" in p for p in problems)
    with pytest.raises(record.RecordError, match="`format_version`"):
        record.load(run)


@pytest.mark.parametrize("verb", ["verify", "show", "compare"])
def test_every_verb_refuses_a_bad_format_version_the_same_way(tmp_path, capsys, verb):
    run = make_run(tmp_path)
    _set_run_info(run, format_version="abc")
    result = main_here(capsys, verb, str(run))
    assert result.returncode == 1
    assert "invalid literal" not in result.stderr + result.stdout
    assert "`format_version`" in result.stderr + result.stdout
    assert str(run / record.RUN_INFO) in result.stderr + result.stdout


def test_every_file_of_a_run_has_one_mode_as_the_umask_allows(tmp_path):
    old = os.umask(0o022)
    try:
        run = make_run(tmp_path)
        modes = {p.relative_to(run).as_posix(): stat.S_IMODE(p.stat().st_mode)
                 for p in run.rglob("*") if p.is_file()}
        os.umask(0o027)
        record.write_plan(tmp_path / "other", {"x": 1})
        other = stat.S_IMODE((tmp_path / "other" / record.PLAN).stat().st_mode)
    finally:
        os.umask(old)
    assert any(k.endswith(".parquet") for k in modes) and any(k.endswith(".json") for k in modes)
    assert set(modes.values()) == {0o644}, modes
    assert other == 0o640


def test_an_unknown_notebook_run_is_refused_before_any_run_is_loaded(tmp_path, monkeypatch):
    from attn_analysis.cli import notebook_support as nbs
    make_run(tmp_path)

    def no_loading(*args, **kwargs):
        raise AssertionError("a run was loaded before `run` was checked")
    monkeypatch.setattr(record, "load", no_loading)
    monkeypatch.setattr(nbs, "load_runs", no_loading)
    ns = dict(runs_dir=str(tmp_path), run="run-b", measure=False, n_resamples=1000)
    with pytest.raises(ValueError, match=r"`run` must be '' or a finalized run under .*"
                                         r"\['run-a'\]\); got 'run-b'"):
        nbs.prelude(ns)
    # the named run, '' and the documented default (absent here) pass the check
    for run in ("run-a", "", nbs.DEFAULT_LEAD_RUN):
        assert nbs.check_given(tmp_path, dict(nbs.MEASURE_DEFAULTS, **dict(ns, run=run)))["run"] == run


def test_the_readme_s_virtual_environment_is_ignored_by_git():
    root = Path(__file__).resolve().parents[1]
    assert ".venv" in (root / "README.md").read_text()
    import subprocess
    result = subprocess.run(["git", "check-ignore", "-q", ".venv/bin/python"], cwd=root)
    assert result.returncode == 0, ".venv is not in .gitignore"


# ------------------------------------------------------------------ the command line

import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from attn_analysis.__main__ import build_parser, main  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TINY = ("--device", "cpu", "--shape", "1,2,16", "--candidates", "sdpa", "--modes", "per_call",
        "--trials", "1", "--samples", "4", "--placements", "1", "--process-warmup-ms", "0",
        "--no-ceilings", "--no-profile", "--quiet")
# What a plugin's import does, by case: each must be refused naming the plugin.
BAD_IMPORTS = {"exit0": "raise SystemExit(0)", "exitmsg": "import sys; sys.exit('msg')",
               "interrupt": "raise KeyboardInterrupt"}


def _plugin(folder: Path, name: str, body: str) -> str:
    (folder / f"{name}.py").write_text(body + "\n")
    return name


def _server_pid():
    from multiprocessing import forkserver
    return forkserver._forkserver._forkserver_pid


@pytest.mark.parametrize("case", sorted(BAD_IMPORTS))
def test_a_plugin_that_exits_or_interrupts_at_import_is_refused_naming_it(
        tmp_path, monkeypatch, capsys, case):
    name = _plugin(tmp_path, f"newcomer_plugin_{case}", BAD_IMPORTS[case])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = main_here(capsys, "sweep", "--out", "run", "--plugin", name, *TINY)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: `plugins`: importing "
                                                   f"'{name}' raised "), result.stderr
    assert "interrupted" not in result.stderr
    assert not (tmp_path / "run").exists()
    assert _server_pid() is None  # the trial server started for the sweep was stopped


def test_repeated_list_options_accumulate_and_a_repeated_pair_is_refused(capsys):
    parse = build_parser().parse_args
    args = parse(["sweep", "--out", "x", "--candidates", "sdpa", "--candidates", "eager",
                  "--modes", "graph", "--modes", "per_call", "cold_l2", "--shape", "1,2,16",
                  "--shape", "1,2,32", "--plugin", "a", "--plugin", "b"])
    assert args.candidates == ["sdpa", "eager"]
    assert args.modes == ["graph", "per_call", "cold_l2"]
    assert args.shape == [(1, 2, 16), (1, 2, 32)] and args.plugin == ["a", "b"]
    assert parse(["sweep", "--out", "x"]).modes is None  # the default, filled in by the verb
    plan = parse(["plan", "--power", "--matrix", "reports-v1", "--candidates", "sdpa",
                  "--candidates", "eager"])
    assert plan.candidates == ["sdpa", "eager"]
    assert parse(["compare", "r", "--config", "a", "--config", "b"]).config == ["a", "b"]
    with pytest.raises(SystemExit) as exc:
        parse(["plan", "--power", "--sigma", "1", "2", "--sigma", "3", "4"])
    assert exc.value.code == 2 and "--sigma may be given once" in capsys.readouterr().err


def test_repeated_candidates_reach_the_plan(tmp_path, monkeypatch, capsys):
    from attn_analysis.measure import sweep
    plans = []

    def fake_run(out, plan, **_):
        plans.append(plan)
        return {"units": 0, "out": out, "wall_s": 0.0, "timing_units": 0, "timed": 0,
                "not_timed": {}, "errored": 0, "first_error": "", "finished": False}
    monkeypatch.setattr(sweep, "run", fake_run)
    monkeypatch.chdir(tmp_path)
    args = [a for a in TINY if a not in ("--candidates", "sdpa", "--modes", "per_call")]
    assert main(["sweep", "--out", "run", *args, "--candidates", "sdpa", "--candidates",
                 "eager", "--modes", "graph", "--modes", "per_call"]) == 0
    assert plans[0].candidates == ("sdpa", "eager")
    assert plans[0].modes == ("graph", "per_call")
    # and a repetition across the two uses is refused as within one
    result = main_here(capsys, "sweep", "--out", "run", *args, "--candidates", "sdpa",
                       "--candidates", "sdpa")
    assert result.returncode == 1 and "`--candidates` must not repeat a name" in result.stderr


@pytest.mark.parametrize("out", [".git/probe-run", ".git", "sub/.git/objects/run"])
def test_a_run_inside_a_git_folder_is_refused(tmp_path, monkeypatch, capsys, out):
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    before = sorted(p.as_posix() for p in tmp_path.rglob("*"))
    result = main_here(capsys, "sweep", "--out", out, *TINY)
    assert result.returncode == 1
    assert "`--out` must not lie inside a .git folder" in result.stderr
    assert sorted(p.as_posix() for p in tmp_path.rglob("*")) == before
    with pytest.raises(ValueError, match="`out_dir` must not lie inside a .git folder"):
        record.merge(tmp_path / ".git" / "merged", [tmp_path / "shard"])


def test_help_lists_the_registered_candidates_without_importing_torch():
    from attn_analysis.measure import candidate_names
    from attn_analysis.measure import candidates
    # the torch-free names are the built-in registry's, in its order
    assert tuple(candidates.CANDIDATES)[:len(candidate_names.BUILT_IN)] == \
        candidate_names.BUILT_IN
    assert set(candidates.DEFAULT_CANDIDATES) <= set(candidate_names.BUILT_IN)
    code = ("import sys; from attn_analysis.__main__ import build_parser; "
            "h = build_parser()._subparsers._group_actions[0].choices['sweep'].format_help(); "
            "print(' '.join(h.split())); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=REPO)
    text, torch_loaded = done.stdout.strip().rsplit("\n", 1)
    assert torch_loaded == "False"
    assert "built in " + ", ".join(candidate_names.BUILT_IN) in text
    for plugin in candidate_names.EXAMPLE_PLUGINS:
        assert plugin in text


def _sweep_process(cwd: Path, *args) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m attn_analysis sweep *args`` with stdout a pipe, as in ``sweep | tail``:
    the result, and the seconds from the command's exit to the pipe's end (a process it
    left behind holds the pipe open)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests"),
                                                      str(cwd)]))
    proc = subprocess.Popen([sys.executable, "-m", "attn_analysis", "sweep", *args], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    while proc.poll() is None:
        time.sleep(0.05)
    exited = time.monotonic()
    out, err = proc.communicate(timeout=300)
    return (subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
            time.monotonic() - exited)


@pytest.mark.slow  # a sweep through `python -m attn_analysis` in a subprocess
@pytest.mark.parametrize("refused, message", [
    (("--candidates", "nope"), "`candidate` must be one of"),
    (("--plugin", "newcomer_plugin_exit"), "importing 'newcomer_plugin_exit' raised SystemExit"),
])
def test_a_refused_sweep_leaves_no_process_holding_its_output(tmp_path, refused, message):
    _plugin(tmp_path, "newcomer_plugin_exit", BAD_IMPORTS["exitmsg"])
    args = [a for a in TINY if a not in ("--candidates", "sdpa")]
    result, lingered = _sweep_process(tmp_path, "--out", "run", *refused, *args)
    assert result.returncode == 1 and message in result.stderr, result.stderr
    assert lingered < 1.0, f"the output stayed open {lingered:.1f} s after the command ended"


@pytest.mark.slow  # runs a sweep's trial process
def test_a_plugin_that_fails_only_in_the_trial_processes_is_named_once(tmp_path):
    name = _plugin(tmp_path, "newcomer_plugin_parent_only",
                   "import multiprocessing\n"
                   "if multiprocessing.current_process().name.startswith('attn-trial'):\n"
                   "    raise RuntimeError('no GPU in a trial')")
    result, _ = _sweep_process(tmp_path, "--out", "run", "--plugin", name, *TINY)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: trial 0: the plan does not load in a trial process")
    assert f"importing '{name}' failed: RuntimeError: no GPU in a trial" in lines[0]
    assert "crashed" not in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()  # nothing recorded: no half-made run folder
    assert not list(tmp_path.glob(".run.lock"))


@pytest.mark.slow  # starts prebuild processes
def test_a_plugin_that_fails_in_the_prebuild_processes_prints_no_traceback(tmp_path, capfd,
                                                                         monkeypatch):
    from attn_analysis.measure import prebuild, sweep
    from conftest import tiny_plan
    _plugin(tmp_path, "newcomer_plugin_parent_only2",
            "import multiprocessing\n"
            "if multiprocessing.current_process().name.startswith('attn-prebuild'):\n"
            "    raise RuntimeError('no GPU in a prebuild')")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(REPO / "tests"),
                                                      str(REPO)]))
    monkeypatch.setenv("ATTN_TEST_WARM_DIR", str(tmp_path))
    plan = tiny_plan(candidates=("fake_warmed",), start_method="spawn",
                     plugins=("fake_candidates", "newcomer_plugin_parent_only2"))
    summary = prebuild.run(sweep.trial_context("spawn"), plan, timeout_s=120)
    assert {r["status"] for r in summary["jobs"]} == {"not_done"}
    assert "Traceback" not in capfd.readouterr().err


def test_the_interrupt_message_says_what_was_left(tmp_path):
    from types import SimpleNamespace
    from attn_analysis.__main__ import interrupt_message
    empty = SimpleNamespace(verb="sweep", out=str(tmp_path / "never-made"))
    assert interrupt_message(empty) == ("interrupted before any unit was recorded; nothing "
                                        "was left on disk")
    run = tmp_path / "run"
    (run / "journal").mkdir(parents=True)
    (run / "journal" / "timing__t0.json").write_text("{}")
    text = interrupt_message(SimpleNamespace(verb="sweep", out=str(run)))
    assert str(run) in text and "rerun the same command to resume" in text
    assert interrupt_message(SimpleNamespace(verb="compare")) == "interrupted"
