"""The two builds of the book a full test session needs, run in one background thread.

Building the book executes every notebook; a full session needs it twice: the
repository's book (``built_book``: the HTML, browser and PDF checks read it) and, in a
copy of the repository, the book after papermill has measured a new CPU run
(``measured_copy``: ``test_notebooks`` checks that the run reaches the cross-device
table). Both are subprocesses that mostly wait on one core, so ``conftest`` starts them,
one after the other, in a background thread as soon as the session's tests are collected
(only if a selected test needs them) and moves the tests that read them to the end;
meanwhile the other tests run on the other core. A fixture that needs a build waits for
it and re-raises its failure. No test asserts anything about time, so sharing the cores
changes no result. A session that ends early (``-x``, Ctrl-C) waits for the build under
way to finish (each has a timeout), so no build outlives it.

Each step is what the README documents: ``jupyter-book build . -W -n --keep-going``, and
jupytext piped into papermill for the measurement.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
# The jupyter-book next to this Python (a virtual environment need not be on PATH).
JUPYTER_BOOK = (str(Path(sys.executable).with_name("jupyter-book"))
                if Path(sys.executable).with_name("jupyter-book").exists()
                else shutil.which("jupyter-book") or "jupyter-book")
# What a copy of the repository leaves out (its own book is built from scratch or copied).
IGNORE = shutil.ignore_patterns("_build", ".jupyter_cache", ".git", ".pytest_cache",
                                "__pycache__", "*.egg-info", "out", ".benchmarks")
CROSS_DEVICE_PAGE = Path("_build", "html", "notebooks", "05_cross_device.html")
# The measurement: a tiny new shape on the CPU, recorded as run cpu-test.
NEW_SHAPE = "2,2,48"
NEW_RUN = "cpu-test"
MEASURE_PARAMETERS = ("-p", "measure", "True", "-p", "device", "cpu", "-p", "shapes", NEW_SHAPE,
                      "-p", "samples", "8", "-p", "trials", "2", "-p", "run_id", NEW_RUN,
                      "-p", "n_resamples", "200")


def build_book(root: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    """``jupyter-book build <root> <args>`` from ``root``, as the README runs it."""
    return subprocess.run([JUPYTER_BOOK, "build", str(root), *args], capture_output=True,
                          text=True, cwd=root, timeout=timeout)


def papermill(copy: Path, notebook: str, out: Path, *params: str) -> nbformat.NotebookNode:
    """jupytext -> papermill, run from the copy's notebooks/ folder; return the output."""
    ipynb = out.with_suffix(".in.ipynb")
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", "-o", str(ipynb),
                    str(copy / "notebooks" / notebook)], check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "papermill", str(ipynb), str(out),
                           "--cwd", str(copy / "notebooks"), "-k", "python3", *params],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return nbformat.read(out, as_version=4)


class Step:
    """One background step's outcome: wait for it, get its value or its exception."""

    def __init__(self, name: str):
        self.name, self.done, self.value, self.error = name, threading.Event(), None, None

    def wait(self):
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value


class SessionBuilds:
    """The repository's book, then (if asked) the measured copy's, in one daemon thread."""

    def __init__(self):
        self.book, self.measured = Step("built_book"), Step("measured_copy")
        self.scratch = self.copy = self._thread = None

    def start(self, measured: bool) -> None:
        """Start the thread (once): the book, and the measured copy if ``measured``."""
        if self._thread is None:
            self.scratch = Path(tempfile.mkdtemp(prefix="attn-session-builds-"))
            self._thread = threading.Thread(target=self._run, args=(measured,), daemon=True,
                                            name="attn-session-builds")
            self._thread.start()

    def close(self) -> None:
        """Wait for the thread (a running build is never left behind) and remove the copy."""
        if self._thread is not None:
            self._thread.join()
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _run(self, measured: bool) -> None:
        self._step(self.book, self._build_repository, measured)
        if not measured:
            return
        if self.book.error is not None:
            self.measured.error = RuntimeError("the repository's book did not build")
            self.measured.done.set()
        else:
            self._step(self.measured, self._measure_and_rebuild)

    @staticmethod
    def _step(step: Step, fn, *args) -> None:
        try:
            step.value = fn(*args)
        except BaseException as exc:  # re-raised by the fixture that waits for the step
            step.error = exc
        finally:
            step.done.set()

    def _build_repository(self, snapshot: bool) -> Path:
        """Build the repository's book and return its HTML folder; with ``snapshot``, then
        copy the repository and its ``_build``, before any test writes into them."""
        proc = build_book(ROOT, "-W", "-n", "--keep-going")
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        if snapshot:
            self.copy = self.scratch / "repo" / "attn"
            shutil.copytree(ROOT, self.copy, ignore=IGNORE)
            shutil.copytree(ROOT / "_build", self.copy / "_build")
        return ROOT / "_build" / "html"

    def _measure_and_rebuild(self) -> dict:
        """In the copy: the cross-device page as built, papermill measuring a new CPU run
        into its data/runs, and the page after the README's build over the existing
        ``_build``."""
        copy = self.copy
        before = (copy / CROSS_DEVICE_PAGE).read_text()
        measured = papermill(copy, "03_matrix.py", self.scratch / "03.ipynb",
                             *MEASURE_PARAMETERS)
        proc = build_book(copy, "-W", "-n", "--keep-going", timeout=900)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        return {"copy": copy, "before": before, "measured": measured,
                "after": (copy / CROSS_DEVICE_PAGE).read_text()}
