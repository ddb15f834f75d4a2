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
