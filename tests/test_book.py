"""The book builds with warnings as errors, renders in headless Chromium, and prints.

The build goes into the repository's ``_build`` (execution cached in ``_build/.jupyter_cache``,
so an unchanged tree rebuilds in seconds), once per test session. What is slow runs in the
background from collection time (``session_builds``), and the fixtures of ``conftest.py``
(``built_book``, ``chromium_report``, ``chapter_screenshots``, ``built_pdf``) wait for it:
Chromium loads every chapter at 1280 px through a small check page in the same folder
(``book_browser``), and this file fails a page that scrolls horizontally, that has a figure
that does not load, a table longer than the book allows, a traceback, a raw DataFrame repr
or a glue key that did not resolve. Every chapter is also screenshotted into
``_build/screenshots/`` to be looked at. The PDF is built with the LaTeX builder where TeX
Live is installed (its test skips, saying why, where it is not).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from book_browser import CHAPTERS, SCREENSHOT_MIN_BYTES, VIEWPORT_PX

pytestmark = pytest.mark.slow  # book build, papermill or the Triton interpreter

ROOT = Path(__file__).resolve().parents[1]
FIGURE_PAGES = {"notebooks/02_fixed_shape": 2, "notebooks/03_matrix": 2,
                "notebooks/04_sweeps": 4, "notebooks/05_cross_device": 1, "notebooks/07_peer_rates": 1,
                "notebooks/09_audit": 3}
MAX_TABLE_ROWS = 25  # attn_analysis.present.tables.MAX_ROWS; the claims table is 13


def test_the_chapter_list_is_the_table_of_contents():
    # every notebook is a chapter of the book, and the check list is read from _toc.yml
    notebooks = {f"notebooks/{p.stem}" for p in (ROOT / "notebooks").glob("*.py")}
    assert notebooks <= set(CHAPTERS), sorted(notebooks - set(CHAPTERS))
    assert CHAPTERS[0] == "book/index" and len(CHAPTERS) == len(set(CHAPTERS))


def test_notebook_numbers_follow_the_table_of_contents():
    # a reader who meets 06 after 05 in the book finds it after 05 in notebooks/ too; the
    # appendices' notebooks are numbered after the main text's (11, 12), so numbers rise
    # with the book's order without being consecutive
    numbers = [int(page.split("/")[1].split("_")[0]) for page in CHAPTERS
               if page.startswith("notebooks/")]
    assert numbers[0] == 1 and numbers == sorted(set(numbers)), numbers


def test_build_has_every_chapter(built_book):
    for page in CHAPTERS:
        assert (built_book / f"{page}.html").is_file(), page


def test_no_literal_glue_or_error_in_html(built_book):
    for page in CHAPTERS:
        text = (built_book / f"{page}.html").read_text()
        assert "{glue" not in text, f"{page}: a glue role was not pasted"
        assert "Traceback (most recent call last)" not in text, page
        assert 'class="output traceback' not in text, page


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_renders_in_chromium(chromium_report, page):
    r = chromium_report[page]
    assert r["loaded"], f"{page} did not load"
    assert r["broken"] == [], f"{page}: figures that do not render: {r['broken']}"
    assert r["errors"] == 0 and not r["traceback"], f"{page}: error output"
    assert not r["unpasted"], f"{page}: a glue role was not pasted"


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_fits_1280px_without_raw_tables(chromium_report, page):
    r = chromium_report[page]
    assert r["overflow"] <= 1, (f"{page} scrolls horizontally at {VIEWPORT_PX} px by "
                                f"{r['overflow']} px; widest elements: {r['wide']}")
    assert r["clipped"] == [], f"{page}: tables wider than the text column: {r['clipped']}"
    assert r["dataframes"] == 0 and not r["repr"], f"{page}: a raw DataFrame repr is shown"
    assert r["max_rows"] <= MAX_TABLE_ROWS, (f"{page}: a table of {r['max_rows']} rows "
                                             f"(at most {MAX_TABLE_ROWS})")


@pytest.mark.parametrize("page,n_figures", sorted(FIGURE_PAGES.items()))
def test_figures_present(chromium_report, page, n_figures):
    assert chromium_report[page]["images"] >= n_figures


def test_screenshot_of_every_chapter(chapter_screenshots):
    """A 1280 px wide screenshot of every chapter, kept in _build/screenshots/ to be looked
    at; each must come back as a real image."""
    assert list(chapter_screenshots) == CHAPTERS
    for page, shot in chapter_screenshots.items():
        assert shot.is_file() and shot.stat().st_size > SCREENSHOT_MIN_BYTES, page


# --------------------------------------------------------------------------- PDF

PDF_PAGES = (25, 120)  # the book as built from the recorded runs: 62 pages


def test_pdf_pages_and_glued_numbers(built_pdf, built_book):
    info = subprocess.run(["pdfinfo", str(built_pdf)], capture_output=True, text=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, flags=re.M).group(1))
    assert PDF_PAGES[0] <= pages <= PDF_PAGES[1], f"{pages} pages"
    text = subprocess.run(["pdftotext", str(built_pdf), "-"], capture_output=True,
                          text=True).stdout
    assert "{glue" not in text and "glue:text" not in text
    # every number glued into the landing page is in the PDF too
    landing = (built_book / "book" / "index.html").read_text()
    pasted = re.findall(r'class="pasted-text">([^<]+)<', landing)
    numbers = [p for p in pasted if re.fullmatch(r"[\d.]+%?", p.strip())]
    # the abstract glues most of its numbers inside sentences; a few stand alone
    assert len(numbers) >= 3, pasted
    flat = re.sub(r"\s+", " ", text)
    missing = [n for n in numbers if n.strip() not in flat]
    assert not missing, f"glued numbers of the landing page missing from the PDF: {missing}"


TINY_NOTEBOOK = {"cells": [
    {"cell_type": "markdown", "metadata": {}, "source": "# Notebook"},
    {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
     "source": "import matplotlib.pyplot as plt\nfrom myst_nb import glue\n"
               "fig, ax = plt.subplots()\nax.plot([1, 2])\n"
               "glue('fig', fig, display=False)\nplt.close(fig)"}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.parametrize("builder", ["html", "pdflatex"])
def test_a_figure_glued_in_a_notebook_and_pasted_on_another_page_renders(tmp_path, builder):
    """Regression (issue 41): myst-nb pastes a figure on another page as a path to
    ``<sha256>.png`` and writes no file, so a figure glued with ``display=False`` was a
    missing PNG and the PDF build stopped. attn_analysis.present.book_figures writes it."""
    import json
    import shutil

    from session_builds import build_book
    if builder == "pdflatex" and shutil.which("latexmk") is None:
        pytest.skip("TeX Live is not installed")
    (tmp_path / "_config.yml").write_text(
        "title: tiny\nauthor: a\nonly_build_toc_files: true\n"
        "execute:\n  execute_notebooks: force\n"
        f"sphinx:\n  local_extensions:\n    attn_analysis.present.book_figures: {ROOT}\n"
        "latex:\n  latex_documents:\n    targetname: book.tex\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: index\nchapters:\n"
                                       "  - file: sub/page\n  - file: nb\n")
    (tmp_path / "index.md").write_text("# Root\n\nA tiny book.\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "page.md").write_text("# Page\n\n```{glue} fig\n:doc: ../nb.ipynb\n```\n")
    (tmp_path / "nb.ipynb").write_text(json.dumps(TINY_NOTEBOOK))
    proc = build_book(tmp_path, "-W", "-n", "--builder", builder, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    if builder == "html":
        page = (tmp_path / "_build" / "html" / "sub" / "page.html").read_text()
        src = re.search(r'<img[^>]*src="([^"]+\.png)"', page).group(1)
        assert (tmp_path / "_build" / "html" / "sub" / src).resolve().is_file(), src
    else:
        assert (tmp_path / "_build" / "latex" / "book.pdf").is_file()
        assert "includegraphics" in (tmp_path / "_build" / "latex" / "book.tex").read_text()
