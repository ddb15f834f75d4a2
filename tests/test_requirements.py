"""The book installs without triton; the tests that need it skip without it, but not in CI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _requirements(name: str) -> list[str]:
    """Requirement lines of ``name`` with its ``-r`` includes expanded, comments dropped."""
    lines = []
    for line in (REPO / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            lines += _requirements(line[3:].strip())
        elif line:
            lines.append(line)
    return lines


def test_the_books_requirements_hold_no_triton_and_the_tests_add_it():
    book = _requirements("requirements.txt")
    assert any(r.startswith("jupyter-book") for r in book)
    assert not any(re.match(r"triton\b", r) for r in book)
    assert not any(re.match(r"triton\b", r) for r in _requirements("requirements-core.txt"))
    assert any(re.match(r"triton\b", r) for r in _requirements("requirements-test.txt"))


def test_ci_runs_the_readmes_test_command_with_triton_required():
    readme = (REPO / "README.md").read_text()
    command = re.search(r"# 2\. Install what is needed and run the tests\n(.+)\n", readme)[1]
    assert "requirements-test.txt" in command
    ci = (REPO / ".ci" / "run").read_text()
    assert command in ci.splitlines()
    assert "export ATTN_REQUIRE_TRITON=1" in ci
    assert ci.index("export ATTN_REQUIRE_TRITON=1") < ci.index(command)


@pytest.mark.slow  # runs bash on a copy of .ci/run's command lines
def test_ci_fails_when_the_readmes_install_fails(tmp_path):
    """Regression: under `set -e` a failure inside an && list does not stop bash, so a
    failed `pip install` skipped pytest and CI passed. The lines after the command exit."""
    readme = (REPO / "README.md").read_text()
    command = re.search(r"# 2\. Install what is needed and run the tests\n(.+)\n", readme)[1]
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    at = lines.index(command)
    script = "\n".join(["set -eo pipefail", "python3() { return 7; }", command, lines[at + 1],
                        "echo reached-the-next-step"])
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 7 and "reached-the-next-step" not in done.stdout
    assert "failed (7)" in done.stdout
    ok = script.replace("return 7", "return 0")
    done = subprocess.run(["bash", "-c", ok], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "reached-the-next-step" in done.stdout


def _without_triton(tmp_path, test_file: str, *pytest_args: str, **env):
    """Run ``tests/<test_file>`` in a child pytest where ``import triton`` fails."""
    hidden = tmp_path / "no_triton"
    (hidden / "triton").mkdir(parents=True, exist_ok=True)
    (hidden / "triton" / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'triton\'", name="triton")\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hidden), str(REPO)]), **env)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           *pytest_args, str(REPO / "tests" / test_file)],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=env)


def _triton_tests(tmp_path, **env):
    return _without_triton(tmp_path, "test_triton_attention.py", **env)


@pytest.mark.slow  # a child interpreter per case
def test_triton_tests_skip_with_a_reason_without_triton(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTN_REQUIRE_TRITON", raising=False)
    result = _triton_tests(tmp_path)
    assert result.returncode in (0, 5), result.stdout[-2000:]  # 5: every test skipped
    assert "1 skipped" in result.stdout
    assert "triton is not installed" in result.stdout


@pytest.mark.slow  # a child interpreter per case
def test_triton_tests_fail_without_triton_where_ci_requires_it(tmp_path):
    result = _triton_tests(tmp_path, ATTN_REQUIRE_TRITON="1")
    assert result.returncode != 0
    assert "No module named 'triton'" in result.stdout


def test_ci_runs_the_gluon_compile_tests_again_with_the_devices_triton():
    from attn_analysis.measure import gluon_attention as ga

    ci = (REPO / ".ci" / "run").read_text()
    pinned = re.search(r'"triton==([0-9.]+)"', ci)[1]
    assert pinned.startswith(ga.SUPPORTED_TRITON)
    readme_command = "python3 -m pip install -r requirements.txt -r requirements-test.txt"
    second_pass = ci.index("ATTN_REQUIRE_GLUON=1")
    assert ci.index(readme_command) < ci.index(pinned) < second_pass
    assert "tests/test_gluon_attention.py" in ci[second_pass:]


def _gluon_compile_tests(tmp_path, **env):
    return _without_triton(tmp_path, "test_gluon_attention.py", "-k", "compiles_to_sm90a", **env)


@pytest.mark.slow  # a child interpreter per case
def test_gluon_compile_tests_skip_without_their_triton_but_fail_where_ci_requires_it(
        tmp_path, monkeypatch):
    monkeypatch.delenv("ATTN_REQUIRE_GLUON", raising=False)
    skipped = _gluon_compile_tests(tmp_path)
    assert skipped.returncode in (0, 5), skipped.stdout[-2000:]
    assert "skipped" in skipped.stdout and "failed" not in skipped.stdout
    assert "needs Triton 3.6" in skipped.stdout
    required = _gluon_compile_tests(tmp_path, ATTN_REQUIRE_GLUON="1")
    assert required.returncode == 1, required.stdout[-2000:]
    assert "ATTN_REQUIRE_GLUON=1 but the Gluon compile cannot run" in required.stdout
    assert "skipped" not in required.stdout
