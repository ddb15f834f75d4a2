"""The README fits on two screens and every file it links or names exists (issue 44)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 120
_LINK = re.compile(r"\]\(([^)#\s]+)\)")
_PATH = re.compile(r"`((?:attn_analysis|notebooks|book|data|scripts|benchmarks|tests|notes)/"
                   r"[A-Za-z0-9_./-]*[A-Za-z0-9_/])`")


def missing_targets(text: str, root: Path) -> list[str]:
    """The relative links and backticked repository paths of ``text`` with no file under
    ``root`` (skipped: paths with a wildcard, and the user's own runs, ``.../my-*``)."""
    targets = _LINK.findall(text) + _PATH.findall(text)
    return [t for t in targets if "*" not in t and "://" not in t and "/my-" not in t
            and not (root / t).exists()]


def test_the_readme_is_at_most_120_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; at most {MAX_LINES}"


def test_every_path_the_readme_names_exists():
    assert missing_targets(README.read_text(), ROOT) == []


def test_a_missing_target_is_reported(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "a.md").write_text("")
    text = "see [a](book/a.md), [b](book/b.md) and `data/runs/x/`, `data/runs/*/` or `data/runs/my-run`"
    assert missing_targets(text, tmp_path) == ["book/b.md", "data/runs/x/"]


def test_the_readme_tells_a_newcomer_what_to_expect():
    """Issue 44 item 5 case 12: how long the tests and the CPU papermill example take, that
    most CPU units are unsupported, and what the browser and PDF tests need."""
    text = " ".join(w for w in README.read_text().split() if w != "#")
    assert re.search(r"pytest -m \"not slow\"`, \d+ s", text)
    assert re.search(r"pytest in command 2 took \d+ s", text)
    assert re.search(r"It took about \d+ minutes on 2 cores", text)
    assert "more than half the units are expected to be unsupported" in text
    assert "Chromium and TeX Live" in text
