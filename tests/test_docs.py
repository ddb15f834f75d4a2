"""The documented commands leave the repository as they found it, but for what they record."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("doc", ["README.md", "notebooks/10_reproducibility.py"])
def test_documented_papermill_commands_write_the_notebook_outside_the_repository(doc):
    outputs = re.findall(r"\bpapermill - (\S+)", (REPO / doc).read_text())
    assert outputs, f"{doc} documents no papermill command"
    for out in outputs:  # relative to the repository root, where the commands are run
        assert Path(out).is_absolute() and not Path(out).resolve().is_relative_to(REPO), out
