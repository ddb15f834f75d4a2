"""The builds of the book a full test session needs, and what reads them in a browser,
run in one background thread.

Building the book executes every notebook; a full session needs it twice: the
repository's book (``built_book``: the HTML, browser and PDF checks read it) and, in a
copy of the repository, the book after papermill has measured a new CPU run
(``measured_copy``: ``test_notebooks`` checks that the run reaches the cross-device
table). Headless Chromium then checks and screenshots every chapter of the repository's
book (``chromium_report``, ``chapter_screenshots``; ``book_browser``) and the LaTeX
builder makes its PDF (``built_pdf``). All are subprocesses that mostly wait on one core,
so ``conftest`` starts the ones a selected test needs, one after the other, in a
background thread as soon as the session's tests are collected, and moves the tests that
read them to the end; meanwhile the other tests run on the other core. A fixture that
needs a step waits for it and re-raises its failure, or skips with the step's reason
(``Skip``: no Chromium, no TeX Live). No test asserts anything about time, so sharing the
cores changes no result. A session that ends early (``-x``, Ctrl-C) waits for the step
under way to finish (each has a timeout), so no subprocess outlives it.

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

import book_browser

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"  # the repository's built book, which the browser reads
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


# The steps' commands run at a lower priority (nice 10, where `nice` is found): they are
# the session's background, the tests in front its critical path, and a test that starts
# processes (a sweep, a fresh interpreter) wants both cores for a moment. A build then
# waits for those moments instead of halving them; it uses every other one.
BACKGROUND = ("nice", "-n", "10") if shutil.which("nice") else ()


class Skip(str):
    """A step that cannot run on this machine; its fixture skips with this reason."""


def _in_chromium(read):
    """``read(HTML)`` (a ``book_browser`` function), or a ``Skip`` where Chromium is missing."""
    return Skip(book_browser.MISSING) if book_browser.CHROMIUM is None else read(HTML)


def build_book(root: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    """``jupyter-book build <root> <args>`` from ``root``, as the README runs it."""
    return subprocess.run([*BACKGROUND, JUPYTER_BOOK, "build", str(root), *args],
                          capture_output=True, text=True, cwd=root, timeout=timeout)


def papermill(copy: Path, notebook: str, out: Path, *params: str) -> nbformat.NotebookNode:
    """jupytext -> papermill, run from the copy's notebooks/ folder; return the output."""
    ipynb = out.with_suffix(".in.ipynb")
    subprocess.run([*BACKGROUND, sys.executable, "-m", "jupytext", "--to", "ipynb", "-o",
                    str(ipynb), str(copy / "notebooks" / notebook)], check=True,
                   capture_output=True)
    proc = subprocess.run([*BACKGROUND, sys.executable, "-m", "papermill", str(ipynb), str(out),
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
    """The repository's book, then the steps asked for, in one daemon thread: the browser's
    check report and screenshots, the PDF, and the measured copy's book."""

    STEPS = ("built_book", "chromium_report", "chapter_screenshots", "built_pdf",
             "measured_copy")

    def __init__(self):
        self.steps = {name: Step(name) for name in self.STEPS}
        self.scratch = self.copy = self._thread = None

    def wait(self, name: str):
        """Wait for step ``name``; its value, or its exception raised here."""
        return self.steps[name].wait()

    def start(self, wanted: set[str]) -> None:
        """Start the thread (once): the book, and of the other steps those in ``wanted``
        (a step that needs the book waits for it; the measured copy runs last, it is the
        longest)."""
        if self._thread is None:
            self.scratch = Path(tempfile.mkdtemp(prefix="attn-session-builds-"))
            self._thread = threading.Thread(target=self._run, args=(set(wanted),), daemon=True,
                                            name="attn-session-builds")
            self._thread.start()

    def close(self) -> None:
        """Wait for the thread (a running build is never left behind) and remove the copy."""
        if self._thread is not None:
            self._thread.join()
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _run(self, wanted: set[str]) -> None:
        book = self.steps["built_book"]
        self._step(book, self._build_repository, "measured_copy" in wanted)
        work = {"chromium_report": lambda: _in_chromium(book_browser.check_pages),
                "chapter_screenshots": lambda: _in_chromium(book_browser.screenshots),
                "built_pdf": self._build_pdf, "measured_copy": self._measure_and_rebuild}
        for name in self.STEPS[1:]:
            if name not in wanted:
                continue
            if book.error is not None:
                self.steps[name].error = RuntimeError("the repository's book did not build")
                self.steps[name].done.set()
            else:
                self._step(self.steps[name], work[name])

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
        return HTML

    @staticmethod
    def _build_pdf():
        """The PDF with the documented command (the notebook cache of the HTML build makes
        it quick), or a ``Skip`` without TeX Live or poppler-utils."""
        missing = [t for t in ("latexmk", "pdfinfo", "pdftotext") if shutil.which(t) is None]
        if missing or not any(shutil.which(t) for t in ("pdflatex", "xelatex")):
            return Skip(f"TeX Live or poppler-utils is not installed (missing: {missing}); see "
                        f"the reproducibility chapter for the apt-get line")
        pdf = ROOT / "_build" / "latex" / "book.pdf"
        # latexmk remembers an earlier failed run (e.g. before a font was installed) and
        # refuses to retry: start from an empty LaTeX folder (the notebook cache stays).
        shutil.rmtree(pdf.parent, ignore_errors=True)
        proc = build_book(ROOT, "--builder", "pdflatex")
        assert proc.returncode == 0 and pdf.is_file(), proc.stdout[-4000:] + proc.stderr[-4000:]
        return pdf

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
