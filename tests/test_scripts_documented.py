"""Every file in scripts/ is run by a documented command: named, as ``scripts/<file>``, in
the README or in scripts/README.md, which the README links; and the documentation names
no script that is gone. One-off studies belong in benchmarks/, beside their data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", ROOT / "scripts" / "README.md")
_NAMED = re.compile(r"scripts/([A-Za-z0-9_.-]+\.(?:py|sh))")


def scripts_in(folder: Path) -> set[str]:
    """The files of ``folder`` a user runs (its own README excluded)."""
    return {p.name for p in folder.iterdir()
            if p.is_file() and p.name != "README.md" and not p.name.startswith(".")}


def named_in(*docs: Path) -> set[str]:
    """The script file names that ``docs`` name as ``scripts/<name>``."""
    return {m for doc in docs for m in _NAMED.findall(doc.read_text())}


def undocumented(folder: Path, *docs: Path) -> tuple[set[str], set[str]]:
    """(files in ``folder`` that no doc names, names in the docs with no file)."""
    files, named = scripts_in(folder), named_in(*docs)
    return files - named, named - files


def test_the_readme_links_the_scripts_page():
    assert "](scripts/README.md)" in (ROOT / "README.md").read_text()


def test_every_script_is_named_by_a_documented_command_and_no_named_script_is_gone():
    missing, gone = undocumented(ROOT / "scripts", *DOCS)
    assert missing == set(), f"scripts/ files no documented command runs: {sorted(missing)}"
    assert gone == set(), f"documented scripts that do not exist: {sorted(gone)}"


def test_no_one_off_probe_is_left_in_scripts():
    # studies move to benchmarks/<study>/ with their data (benchmarks/README.md)
    assert not [n for n in scripts_in(ROOT / "scripts") if "probe" in n and n != "gluon_space_probe.py"]


@pytest.mark.parametrize("files, doc, expected", [
    (("a.py", "b.sh"), "run `bash scripts/b.sh` then `python3 scripts/a.py`", (set(), set())),
    (("a.py", "b.sh"), "run `python3 scripts/a.py`", ({"b.sh"}, set())),
    (("a.py",), "run `python3 scripts/a.py` and `scripts/gone.py`", (set(), {"gone.py"})),
])
def test_the_check_fails_on_an_unnamed_or_a_vanished_script(tmp_path, files, doc, expected):
    folder = tmp_path / "scripts"
    folder.mkdir()
    for name in files:
        (folder / name).write_text("")
    (folder / "README.md").write_text(doc)
    assert undocumented(folder, folder / "README.md") == expected
