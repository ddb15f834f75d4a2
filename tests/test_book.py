"""The book builds with warnings as errors, renders in headless Chromium, and prints.

The build goes into the repository's ``_build`` (execution cached in ``_build/.jupyter_cache``,
so an unchanged tree rebuilds in seconds), once per test session: the ``built_book`` and
``built_pdf`` fixtures live in ``conftest.py`` and every test file shares them. Chromium loads every chapter at 1280 px through a
small check page in the same folder: it fails a page that scrolls horizontally, that has a
figure that does not load, a table longer than the book allows, a traceback, a raw
DataFrame repr or a glue key that did not resolve. Every chapter is also screenshotted into
``_build/screenshots/`` to be looked at. The PDF test builds the LaTeX version where TeX
Live is installed (and skips, saying why, where it is not).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow  # book build, papermill or the Triton interpreter

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
ROOT = Path(__file__).resolve().parents[1]


def toc_pages(toc: Path = ROOT / "_toc.yml") -> list[str]:
    """Every page of the book in reading order, read from its table of contents (the root,
    then each chapter followed by its sections), so a chapter added there is checked here."""
    data = yaml.safe_load(toc.read_text())
    pages = [data["root"]]

    def walk(entries):
        for entry in entries:
            pages.append(entry["file"])
            walk(entry.get("sections", ()))

    walk(data["chapters"])
    return pages


CHAPTERS = toc_pages()
FIGURE_PAGES = {"notebooks/02_fixed_shape": 2, "notebooks/03_matrix": 2,
                "notebooks/04_sweeps": 4, "notebooks/05_cross_device": 1,
                "notebooks/09_audit": 4}
MAX_TABLE_ROWS = 25  # attn_analysis.tables.MAX_ROWS; the claims table is 13
VIEWPORT_PX = 1280

CHECK_PAGE = """<!doctype html><html><body><pre id="result">pending</pre><script>
const pages = %s;
const out = {};
function check(i) {
  if (i >= pages.length) { document.getElementById('result').textContent =
    'RESULT' + JSON.stringify(out) + 'END'; return; }
  const f = document.createElement('iframe');
  f.style.width = '%dpx'; f.style.height = '900px';
  f.onload = () => setTimeout(() => {
    const d = f.contentDocument;
    const imgs = Array.from(d.querySelectorAll('main img, article img, .bd-article img'));
    const article = d.querySelector('article') || d.body;
    const text = article ? article.innerText : '';
    const rows = Array.from(article.querySelectorAll('table')).map(
      t => t.querySelectorAll('tbody tr').length);
    out[pages[i]] = {
      title: d.title, loaded: !!d.body && text.length > 200,
      images: imgs.length,
      broken: imgs.filter(im => !(im.complete && im.naturalWidth > 0)).map(im => im.src),
      overflow: d.documentElement.scrollWidth - d.documentElement.clientWidth,
      wide: Array.from(article.querySelectorAll('*')).filter(
        e => e.getBoundingClientRect().right > d.documentElement.clientWidth + 1)
        .slice(0, 3).map(e => e.tagName + '.' + e.className),
      max_rows: rows.length ? Math.max(...rows) : 0,
      clipped: Array.from(article.querySelectorAll('table')).filter(t => {
        const box = t.parentElement;
        return box.scrollWidth > box.clientWidth + 1 || t.getBoundingClientRect().right >
          article.getBoundingClientRect().right + 1; }).map(
        t => (t.querySelector('caption') || t).innerText.slice(0, 60)),
      dataframes: article.querySelectorAll('table.dataframe, table[id^="T_"]').length,
      repr: /\\d+ rows\\s*[x\u00d7]\\s*\\d+ columns/.test(text),
      errors: d.querySelectorAll('.output.error, .output.traceback, .cell_output .error').length,
      traceback: /Traceback \\(most recent call last\\)|Error:.*line \\d+/.test(text),
      unpasted: /\\{glue(:\\w+)?\\}|glue:text|::\\w+:[.\\d]*[sdf%%]`/.test(text)};
    f.remove(); check(i + 1);
  }, 300);
  f.src = pages[i] + '.html';
  document.body.appendChild(f);
}
check(0);
</script></body></html>"""


def test_the_chapter_list_is_the_table_of_contents():
    # every notebook is a chapter of the book, and the check list is read from _toc.yml
    notebooks = {f"notebooks/{p.stem}" for p in (ROOT / "notebooks").glob("*.py")}
    assert notebooks <= set(CHAPTERS), sorted(notebooks - set(CHAPTERS))
    assert CHAPTERS[0] == "book/index" and len(CHAPTERS) == len(set(CHAPTERS))


def test_notebook_numbers_follow_the_table_of_contents():
    # a reader who meets 06 after 05 in the book finds it after 05 in notebooks/ too
    numbers = [int(page.split("/")[1].split("_")[0]) for page in CHAPTERS
               if page.startswith("notebooks/")]
    assert numbers == list(range(1, len(numbers) + 1)), numbers


def test_build_has_every_chapter(built_book):
    for page in CHAPTERS:
        assert (built_book / f"{page}.html").is_file(), page


def test_no_literal_glue_or_error_in_html(built_book):
    for page in CHAPTERS:
        text = (built_book / f"{page}.html").read_text()
        assert "{glue" not in text, f"{page}: a glue role was not pasted"
        assert "Traceback (most recent call last)" not in text, page
        assert 'class="output traceback' not in text, page


@pytest.fixture(scope="session")
def chromium_report(built_book):
    if CHROMIUM is None:
        pytest.skip("headless Chromium is not installed (looked for chromium, "
                    "chromium-browser, /usr/bin/chromium)")
    check = built_book / "_check_pages.html"
    check.write_text(CHECK_PAGE % (json.dumps(CHAPTERS), VIEWPORT_PX))
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--allow-file-access-from-files", "--virtual-time-budget=60000",
           "--dump-dom", check.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    check.unlink()
    dom = proc.stdout
    assert "RESULT" in dom, f"check page did not finish: {proc.stderr[-2000:]}"
    return json.loads(dom.split("RESULT", 1)[1].split("END", 1)[0])


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


def test_screenshot_of_every_chapter(built_book):
    """A 1280 px wide screenshot of every chapter, kept in _build/screenshots/ to be looked
    at; each must come back as a real image."""
    if CHROMIUM is None:
        pytest.skip("headless Chromium is not installed")
    shots = built_book.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    for page in CHAPTERS:
        shot = shots / (page.replace("/", "__") + ".png")
        shot.unlink(missing_ok=True)
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--window-size={VIEWPORT_PX},2400",
                        "--virtual-time-budget=3000", f"--screenshot={shot}",
                        (built_book / f"{page}.html").as_uri()],
                       capture_output=True, timeout=120)
        assert shot.is_file() and shot.stat().st_size > 10_000, page


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
    assert len(numbers) >= 5, pasted
    flat = re.sub(r"\s+", " ", text)
    missing = [n for n in numbers if n.strip() not in flat]
    assert not missing, f"glued numbers of the landing page missing from the PDF: {missing}"
