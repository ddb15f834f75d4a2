"""The book builds with warnings as errors, and its pages render in headless Chromium.

The build goes into the repository's ``_build`` (execution cached in ``_build/.jupyter_cache``,
so an unchanged tree rebuilds in seconds). Chromium loads every chapter through a small
check page in the same folder, reads each figure's ``naturalWidth`` and looks for error
output; a screenshot of the results page is saved into ``_build``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHAPTERS = ["book/index", "book/claim", "book/methods", "book/results", "book/negative_result",
            "book/limitations", "book/reproducibility", "book/cite",
            "notebooks/01_environment", "notebooks/02_fixed_shape", "notebooks/03_matrix",
            "notebooks/04_sweeps", "notebooks/05_cross_device", "book/audit", "notebooks/06_audit"]
FIGURE_PAGES = {"notebooks/02_fixed_shape": 2, "notebooks/03_matrix": 2,
                "notebooks/04_sweeps": 4, "notebooks/05_cross_device": 1,
                "notebooks/06_audit": 3}

CHECK_PAGE = """<!doctype html><html><body><pre id="result">pending</pre><script>
const pages = %s;
const out = {};
function check(i) {
  if (i >= pages.length) { document.getElementById('result').textContent =
    'RESULT' + JSON.stringify(out) + 'END'; return; }
  const f = document.createElement('iframe');
  f.style.width = '1200px'; f.style.height = '900px';
  f.onload = () => setTimeout(() => {
    const d = f.contentDocument;
    const imgs = Array.from(d.querySelectorAll('main img, article img, .bd-article img'));
    const text = d.body ? d.body.innerText : '';
    out[pages[i]] = {
      title: d.title, loaded: !!d.body && text.length > 200,
      images: imgs.length,
      broken: imgs.filter(im => !(im.complete && im.naturalWidth > 0)).map(im => im.src),
      errors: d.querySelectorAll('.output.error, .output.traceback, .cell_output .error').length,
      traceback: /Traceback \\(most recent call last\\)|Error:.*line \\d+/.test(text),
      unpasted: /\\{glue(:\\w+)?\\}/.test(text)};
    f.remove(); check(i + 1);
  }, 300);
  f.src = pages[i] + '.html';
  document.body.appendChild(f);
}
check(0);
</script></body></html>"""


@pytest.fixture(scope="session")
def built_book():
    """Build the book once for the session with -W -n --keep-going; fail on any warning."""
    proc = subprocess.run([sys.executable, "-m", "jupyter_book", "build", str(ROOT), "-W", "-n",
                           "--keep-going"], capture_output=True, text=True, cwd=ROOT,
                          timeout=1200)
    if proc.returncode != 0:
        proc = subprocess.run(["jupyter-book", "build", str(ROOT), "-W", "-n", "--keep-going"],
                              capture_output=True, text=True, cwd=ROOT, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return HTML


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
    check.write_text(CHECK_PAGE % json.dumps(CHAPTERS))
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


@pytest.mark.parametrize("page,n_figures", sorted(FIGURE_PAGES.items()))
def test_figures_present(chromium_report, page, n_figures):
    assert chromium_report[page]["images"] >= n_figures


def test_screenshot_of_results(built_book):
    if CHROMIUM is None:
        pytest.skip("headless Chromium is not installed")
    shot = built_book / "results_screenshot.png"
    shot.unlink(missing_ok=True)
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                    "--window-size=1280,2400", f"--screenshot={shot}",
                    (built_book / "notebooks" / "03_matrix.html").as_uri()],
                   capture_output=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 10_000
