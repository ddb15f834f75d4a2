"""What headless Chromium does with the built book: one check page that loads every
chapter in an iframe at the reader's width and reports what it finds, and a screenshot of
every chapter to be looked at, all in one browser driven through a pipe.
``session_builds`` runs both in the background once the book is built; ``test_book``
asserts on what they return.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
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

    for part in data.get("parts", [{"chapters": data.get("chapters", [])}]):
        walk(part["chapters"])
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


class _DevTools:
    """One headless Chromium driven over the DevTools protocol through a pipe
    (``--remote-debugging-pipe``: commands on its fd 3, replies and events on its fd 4,
    each message JSON ended by a NUL byte), with one page (``session``) attached."""

    def __init__(self, timeout_s: float):
        commands, self._out = os.pipe()
        self._in, replies = os.pipe()

        def on_fds_3_and_4():  # in the child, before exec: its ends where Chromium looks
            low, high = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands, replies))
            os.dup2(low, 3)
            os.dup2(high, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-pipe", "about:blank"], pass_fds=(3, 4),
            preexec_fn=on_fds_3_and_4, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands)
        os.close(replies)
        self.timeout_s, self._id, self._buffer, self._events = timeout_s, 0, b"", []
        self.session = None
        try:
            target = self.send("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.send("Target.attachToTarget", targetId=target,
                                     flatten=True)["sessionId"]
        except BaseException:
            self.close()
            raise

    def _message(self) -> dict:
        while b"\0" not in self._buffer:
            if not select.select([self._in], [], [], self.timeout_s)[0]:
                raise TimeoutError(f"Chromium sent nothing for {self.timeout_s} s")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited (code {self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, page: bool = False, **params) -> dict:
        """Run ``method`` (on the attached page with ``page``) and return its result;
        events that arrive meanwhile are kept for :meth:`wait_for`."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if page:
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._message()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self._events.append(reply)

    def wait_for(self, event: str) -> None:
        """Return once the attached page has sent ``event`` (consuming it)."""
        while True:
            for i, message in enumerate(self._events):
                if message.get("method") == event and message.get("sessionId") == self.session:
                    del self._events[i]
                    return
            self._events.append(self._message())

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (OSError, RuntimeError, TimeoutError):
            pass
        finally:
            os.close(self._out)
            os.close(self._in)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def screenshots(html: Path, pages: list[str] = CHAPTERS) -> dict[str, Path]:
    """A screenshot of every page at ``VIEWPORT_PX`` x 2400 px, into ``html``'s sibling
    ``screenshots/`` (stale ones removed first); page -> PNG path, present or not.

    One browser takes them all, as ``chromium --screenshot --virtual-time-budget=3000``
    takes one: each page's timers run for 3 s of virtual time, which waits while files load
    (a browser per page took about 2.6 s a page on 2 cores, this about 0.5 s)."""
    shots = html.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    out = {page: shots / (page.replace("/", "__") + ".png") for page in pages}
    for shot in out.values():
        shot.unlink(missing_ok=True)
    browser = _DevTools(timeout_s=120)
    try:
        browser.send("Emulation.setDeviceMetricsOverride", page=True, width=VIEWPORT_PX,
                     height=2400, deviceScaleFactor=1, mobile=False)
        for page, shot in out.items():
            browser.send("Emulation.setVirtualTimePolicy", page=True, policy="pause")
            browser.send("Page.navigate", page=True, url=(html / f"{page}.html").as_uri())
            browser.send("Emulation.setVirtualTimePolicy", page=True,
                         policy="pauseIfNetworkFetchesPending", budget=3000)
            browser.wait_for("Emulation.virtualTimeBudgetExpired")
            png = browser.send("Page.captureScreenshot", page=True, format="png")["data"]
            shot.write_bytes(base64.b64decode(png))
    finally:
        browser.close()
    return out
