"""The notebooks re-execute with new parameters, and a measured run reaches the book.

In a temporary copy of the repository (the real ``data/`` is never touched), the book is
built, papermill runs ``03_matrix`` with ``measure=True`` on the CPU with a tiny new
shape, the new run is recorded under the copy's ``data/runs``, and after a rebuild (the
same ``jupyter-book build`` command as the README's, cache kept) the book's cross-device
table has a row for the new configuration and the new run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NEW_SHAPE = "2,2,48"
NEW_CONFIG = "B2-H2-S48-D64-fp16"
NEW_CONFIG_SHOWN = ("B2-H2-S48-D64-fp16", "B2 H2 S48")  # tables print the short form
IGNORE = shutil.ignore_patterns("_build", ".jupyter_cache", ".git", ".pytest_cache",
                                "__pycache__", "*.egg-info", "out", ".benchmarks")


def _papermill(copy: Path, notebook: str, out: Path, *params: str) -> nbformat.NotebookNode:
    """jupytext -> papermill, run from the copy's notebooks/ folder; return the output."""
    ipynb = out.with_suffix(".in.ipynb")
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", "-o", str(ipynb),
                    str(copy / "notebooks" / notebook)], check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "papermill", str(ipynb), str(out),
                           "--cwd", str(copy / "notebooks"), "-k", "python3", *params],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return nbformat.read(out, as_version=4)


def _html_outputs(nb) -> str:
    """The HTML and Markdown outputs (tables are Markdown, see attn_analysis.tables)."""
    return "\n".join(o.get("data", {}).get(kind, "") for c in nb.cells
                     if c.cell_type == "code" for o in c.get("outputs", [])
                     for kind in ("text/html", "text/markdown"))


def _shows_new_config(text: str) -> bool:
    return any(form in text for form in NEW_CONFIG_SHOWN)


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory):
    copy = tmp_path_factory.mktemp("repo") / "attn"
    shutil.copytree(ROOT, copy, ignore=IGNORE)
    if (ROOT / "_build" / ".jupyter_cache").is_dir():  # a warm start: same data, same cache
        shutil.copytree(ROOT / "_build", copy / "_build")
    return copy


def _build_book(copy: Path) -> str:
    """Build the copy's book as the README does; return the cross-device page's HTML."""
    proc = subprocess.run(["jupyter-book", "build", str(copy), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return (copy / "_build" / "html" / "notebooks" / "05_cross_device.html").read_text()


def test_measure_on_cpu_reaches_the_cross_device_table(repo_copy, tmp_path):
    before = _build_book(repo_copy)
    assert "h100-reports-v1" in before and not _shows_new_config(before)

    measured = _papermill(repo_copy, "03_matrix.py", tmp_path / "03.ipynb",
                          "-p", "measure", "True", "-p", "device", "cpu",
                          "-p", "shapes", NEW_SHAPE, "-p", "samples", "8",
                          "-p", "trials", "2", "-p", "run_id", "cpu-test",
                          "-p", "n_resamples", "200")
    run_dir = repo_copy / "data" / "runs" / "cpu-test"
    assert (run_dir / "manifest.json").is_file()
    assert not (ROOT / "data" / "runs" / "cpu-test").exists()
    html = _html_outputs(measured)
    assert _shows_new_config(html) and "CPU" in html  # the lead table is the new CPU run

    after = _build_book(repo_copy)  # the data changed, so the cached executions are redone
    assert _shows_new_config(after) and "cpu-test" in after


def test_bad_parameter_stops_with_a_named_value_error(repo_copy, tmp_path):
    ipynb = tmp_path / "in.ipynb"
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", "-o", str(ipynb),
                    str(repo_copy / "notebooks" / "04_sweeps.py")], check=True,
                   capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "papermill", str(ipynb),
                           str(tmp_path / "out.ipynb"), "--cwd",
                           str(repo_copy / "notebooks"), "-p", "mode", "warm"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "`mode` must be one of" in proc.stderr
