"""Tests of the citation: CITATION.cff is complete and honest, the BibTeX derives from it."""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from pathlib import Path

import pytest

from attn_analysis import __version__
from attn_analysis.present import citation as C

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cff():
    return C.load_cff(ROOT)


def test_cff_release_version_and_license(cff):
    assert cff["date-released"] >= dt.date(2026, 11, 28)  # data and text changed after 0.1.0
    assert str(cff["version"]) == __version__ and __version__ != "0.1.0"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert cff["license"] == pyproject["project"]["license"]["text"]
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    # no placeholder address: an identifier names the repository, and says why
    assert cff["identifiers"][0]["value"] and "no public URL" in cff["identifiers"][0][
        "description"]
    for key in ("url", "repository-code"):
        assert key not in cff or re.match(r"https?://", cff[key])


def test_bibtex_is_a_plain_misc_entry(cff):
    bib = C.bibtex(cff)
    assert bib.startswith("@misc{attn_analysis_2026,")
    assert max(len(line) for line in bib.splitlines()) <= 88  # fits the page
    joined = re.sub(r"\n {17}", " ", bib)  # undo the wrapping of long values
    fields = dict(re.findall(r"^\s+(\w+)\s+= (.+?),?$", joined, flags=re.M))
    assert set(fields) == {"author", "title", "howpublished", "year", "month", "note"}
    assert fields["year"] == "{2026}" and fields["month"] == "nov"
    assert r"{The attn\_analysis authors}" in fields["author"]
    assert "{PyTorch}" in fields["title"] and "{SDPA}" in fields["title"]
    assert __version__ in fields["note"] and "Apache-2.0" in fields["note"]
    assert bib.count("{") == bib.count("}")


def test_plain_text_and_person_authors(cff):
    assert C.plain_text(cff).startswith("The attn_analysis authors (2026).")
    person = {**cff, "authors": [{"family-names": "Doe", "given-names": "Jane"},
                                 {"name-particle": "van", "family-names": "Dam"}]}
    assert "author       = {Doe, Jane and van Dam}" in C.bibtex(person)
    assert C.cite_key(person) == "doe_2026"


def test_release_is_not_older_than_the_newest_run(cff):
    from attn_analysis.analyse import inventory
    runs = inventory.run_inventory(ROOT / "data" / "runs")
    newest = max(dt.datetime.fromisoformat(t).date() for t in runs["finished_utc"].dropna())
    assert cff["date-released"] >= newest, \
        f"CITATION.cff's date {cff['date-released']} is older than the newest run ({newest}):" \
        f" bump the version and the date"


def test_the_citation_names_the_commit(cff, tmp_path):
    commit = C.git_commit(ROOT)
    assert commit and re.fullmatch(r"[0-9a-f]{12}( plus uncommitted changes)?", commit)
    assert f"commit {commit}" in C.plain_text(cff, commit)
    joined = re.sub(r"\n {17}", " ", C.bibtex(cff, commit=commit))
    assert f"commit {commit}" in joined
    # without git (an exported tree) the citation still renders, without a commit
    assert C.git_commit(tmp_path) is None
    assert "commit" not in C.plain_text(cff, None) and "commit" not in C.bibtex(cff)


def test_tex_escape():
    assert C.tex_escape("a_b & 50% #1") == r"a\_b \& 50\% \#1"


def test_validation_messages(tmp_path):
    with pytest.raises(ValueError, match="`cff` must be a mapping"):
        C.bibtex(["x"])
    with pytest.raises(ValueError, match=r"`cff` must have the keys .* missing \['license'\]"):
        C.bibtex({k: "x" for k in C.REQUIRED_KEYS if k != "license"})
    with pytest.raises(ValueError, match="`path` must be CITATION.cff"):
        C.load_cff(tmp_path)
    (tmp_path / "CITATION.cff").write_text(
        "cff-version: 1.2.0\ntitle: t\nauthors: [{name: x}]\nversion: 1\n"
        "date-released: soon\nlicense: MIT\n")
    with pytest.raises(ValueError, match="`date-released` must be a YYYY-MM-DD date"):
        C.load_cff(tmp_path)


@pytest.mark.parametrize("style", ["plain", "unsrt", "alpha", "abbrv"])
def test_standard_bibtex_styles_accept_the_entry(cff, tmp_path, style):
    """BibTeX itself (where installed) formats the entry without a warning."""
    import shutil
    import subprocess
    if shutil.which("bibtex") is None:
        pytest.skip("bibtex is not installed (Debian: texlive-binaries via texlive-latex-*)")
    (tmp_path / "cite.bib").write_text(C.bibtex(cff) + "\n")
    (tmp_path / "doc.aux").write_text(
        f"\\citation{{{C.cite_key(cff)}}}\n\\bibstyle{{{style}}}\n\\bibdata{{cite}}\n")
    proc = subprocess.run(["bibtex", "doc"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    log = (tmp_path / "doc.blg").read_text()
    assert proc.returncode == 0 and "Warning" not in log and "error" not in log.lower(), log
    bbl = (tmp_path / "doc.bbl").read_text()
    assert "Software, attn\\_analysis git repository" in bbl and "2026" in bbl


def test_every_transcribed_value_links_to_a_cited_report():
    import pandas as pd
    from attn_analysis.analyse import reference
    reports = pd.read_csv(ROOT / "data" / "reference" / "reports.csv")
    assert sorted(reports["source_file"]) == sorted(reference.SEED_FILES)  # all five
    values = pd.read_csv(ROOT / "data" / "reference" / "l4_reported.csv")
    assert set(values["source_file"]) <= set(reports["source_file"])
    bib = (ROOT / "book" / "references.bib").read_text()
    entries = dict(re.findall(r"@\w+\{(\w+),(.*?)\n\}", bib, flags=re.S))
    for row in reports.itertuples():
        assert row.bib_key in entries, row.bib_key
        entry = entries[row.bib_key]
        assert row.url in entry and row.source_file.replace("_", r"\_") in entry
        assert row.url == "https://github.com/GOATnote-Inc/periodicdent42"
    # the cite page cites all five, and the FA3 figures name their paper, which is cited
    cite = (ROOT / "book" / "cite.md").read_text()
    assert all(k in cite for k in reports["bib_key"])
    fa3 = pd.read_csv(ROOT / "data" / "reference" / "fa3_published.csv")
    assert fa3["source"].str.contains("FlashAttention-3").all()
    assert "shah2024flashattention3" in entries


def test_author_year_labels_are_distinct():
    """The book cites author-year (`_config.yml`): two entries with one author and one year
    would render the same label ("Dent, 2025" twice), so the bibliography suffixes them."""
    from pybtex.database import parse_file
    bib = parse_file(str(ROOT / "book" / "references.bib"))
    labels = []
    for key, entry in bib.entries.items():
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        first = " ".join(people[0].last_names) if people else key
        labels.append((first, entry.fields.get("year", "n.d.")))
    assert len(labels) == len(set(labels)), sorted(labels)
    assert ("Dent", "2025a") in labels and ("Dent", "2025b") in labels
