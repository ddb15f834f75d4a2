"""What headless Chromium does with the built book: one check page that loads every
chapter in an iframe at the reader's width and reports what it finds, and a screenshot of
every chapter to be looked at. ``session_builds`` runs both in the background once the
book is built; ``test_book`` asserts on what they return.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
MISSING = ("headless Chromium is not installed (looked for chromium, chromium-browser, "
           "/usr/bin/chromium)")
ROOT = Path(__file__).resolve().parents[1]
VIEWPORT_PX = 1280
SCREENSHOT_MIN_BYTES = 10_000  # a blank page's PNG is far smaller


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


def check_pages(html: Path, pages: list[str] = CHAPTERS) -> dict:
    """Load every page of the built book (``html``) through the check page and return what
    it measured, page by page. Raises if Chromium never finished the check page."""
    check = html / "_check_pages.html"
    check.write_text(CHECK_PAGE % (json.dumps(pages), VIEWPORT_PX))
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--allow-file-access-from-files", "--virtual-time-budget=60000",
           "--dump-dom", check.as_uri()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        check.unlink()
    dom = proc.stdout
    if "RESULT" not in dom:
        raise AssertionError(f"check page did not finish: {proc.stderr[-2000:]}")
    return json.loads(dom.split("RESULT", 1)[1].split("END", 1)[0])


def screenshots(html: Path, pages: list[str] = CHAPTERS) -> dict[str, Path]:
    """A screenshot of every page at ``VIEWPORT_PX`` wide, into ``html``'s sibling
    ``screenshots/`` (stale ones removed first); page -> PNG path, present or not."""
    shots = html.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    out = {}
    for page in pages:
        shot = shots / (page.replace("/", "__") + ".png")
        shot.unlink(missing_ok=True)
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--window-size={VIEWPORT_PX},2400",
                        "--virtual-time-budget=3000", f"--screenshot={shot}",
                        (html / f"{page}.html").as_uri()],
                       capture_output=True, timeout=120)
        out[page] = shot
    return out
