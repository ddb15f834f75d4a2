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


def _triton_tests(tmp_path, **env):
    """Run tests/test_triton_attention.py where ``import triton`` fails."""
    hidden = tmp_path / "no_triton"
    (hidden / "triton").mkdir(parents=True)
    (hidden / "triton" / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'triton\'", name="triton")\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hidden), str(REPO)]), **env)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           str(REPO / "tests" / "test_triton_attention.py")],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=env)


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
