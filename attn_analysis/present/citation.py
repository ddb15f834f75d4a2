"""How to cite the artifact: ``CITATION.cff`` read once, BibTeX derived from it.

``CITATION.cff`` at the repository root is the one source of the citation. The book's
cite page renders :func:`bibtex` of it when the book is built (the ``attn-citation``
directive registered by :func:`setup`, loaded through ``_config.yml``'s
``local_extensions``), so the page and the file cannot disagree. The entry is a plain
BibTeX ``@misc`` with ``howpublished``, which every standard style (plain, abbrv, alpha,
unsrt, natbib's) accepts; ``@software`` is biblatex-only.
"""

from __future__ import annotations

import datetime as _dt
import re
import subprocess
import textwrap
from pathlib import Path

__all__ = ["CFF_NAME", "REQUIRED_KEYS", "MONTHS", "load_cff", "tex_escape", "cite_key",
           "git_commit", "bibtex", "plain_text", "setup"]

CFF_NAME = "CITATION.cff"
REQUIRED_KEYS = ("cff-version", "title", "authors", "version", "date-released", "license")
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                "^": r"\textasciicircum{}"}


def _cff_iv(cff) -> dict:
    """Check that ``cff`` is a mapping with every key a citation needs."""
    if not isinstance(cff, dict):
        raise ValueError(f"`cff` must be a mapping read from {CFF_NAME}; got "
                         f"{type(cff).__name__}.")
    missing = [k for k in REQUIRED_KEYS if not cff.get(k)]
    if missing:
        raise ValueError(f"`cff` must have the keys {list(REQUIRED_KEYS)}; missing {missing}.")
    if not isinstance(cff["authors"], list) or not all(isinstance(a, dict)
                                                      for a in cff["authors"]):
        raise ValueError("`cff` authors must be a list of mappings (persons or entities).")
    return cff


def load_cff(path) -> dict:
    """Read ``CITATION.cff`` (a file, or the folder holding it) and check its keys.

    ``date-released`` comes back as a :class:`datetime.date` whether YAML parsed it as
    one or left it a string.
    """
    import yaml  # a dependency of jupyter-book; only needed here

    p = Path(path)
    p = p / CFF_NAME if p.is_dir() else p
    if not p.is_file():
        raise ValueError(f"`path` must be {CFF_NAME} or the folder holding it; {p} is not a "
                         f"file.")
    cff = _cff_iv(yaml.safe_load(p.read_text(encoding="utf-8")))
    released = cff["date-released"]
    if isinstance(released, str):
        try:
            released = _dt.date.fromisoformat(released)
        except ValueError as exc:
            raise ValueError(f"`date-released` must be a YYYY-MM-DD date; got "
                             f"{released!r}.") from exc
    return {**cff, "date-released": released}


def git_commit(path) -> str | None:
    """The commit the checkout at ``path`` is at (12 hex digits), with ' plus uncommitted
    changes' where its tracked files differ from it; None without git or outside a
    checkout, so a build from an exported tree still cites the version and date."""
    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True,
                              text=True, timeout=30)
    try:
        head = git("rev-parse", "--short=12", "HEAD")
        if head.returncode or not head.stdout.strip():
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    changed = dirty.returncode == 0 and bool(dirty.stdout.strip())
    return head.stdout.strip() + (" plus uncommitted changes" if changed else "")


def _release_note(cff: dict, released, commit: str | None) -> str:
    """'Version 0.2.0, released 2026-11-28, commit abc123def456, license Apache-2.0'."""
    at = f", commit {commit}" if commit else ""
    return f"Version {cff['version']}, released {released}{at}, license {cff['license']}"


def tex_escape(text: str) -> str:
    """Escape the characters that TeX treats specially."""
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in str(text))


def _protect_case(title: str) -> str:
    """Brace every word after the first that holds a capital, so styles that lower-case
    titles keep 'PyTorch' and 'SDPA' as written."""
    out = []
    for i, w in enumerate(title.split(" ")):
        if i and re.search(r"[A-Z]", w):
            lead, core, trail = re.fullmatch(r"([^\w\\]*)(.*?)([^\w}]*)", w).groups()
            w = f"{lead}{{{core}}}{trail}"
        out.append(w)
    return " ".join(out)


def _author(a: dict) -> str:
    """One BibTeX author: 'Family, Given' for a person, a braced name for an entity."""
    if a.get("name"):
        return "{" + tex_escape(a["name"]) + "}"
    family = " ".join(x for x in (a.get("name-particle"), a.get("family-names")) if x)
    if not family:
        raise ValueError(f"`cff` author {a!r} must have `name` or `family-names`.")
    given = a.get("given-names")
    return tex_escape(f"{family}, {given}" if given else family)


def _identifier_text(cff: dict) -> str:
    """Where to find the artifact: its URL if the file gives one, else its identifier."""
    for key in ("repository-code", "url"):
        if cff.get(key):
            return r"\url{" + cff[key] + "}"
    for ident in cff.get("identifiers") or []:
        if ident.get("value"):
            return tex_escape(ident["value"])
    return "software artifact"


def cite_key(cff: dict) -> str:
    """A stable BibTeX key: the first author's first word (an entity's leading 'The'
    dropped) and the release year, e.g. ``attn_analysis_2026``."""
    cff = _cff_iv(cff)
    first = cff["authors"][0]
    name = (first.get("family-names") or first.get("name") or "anon").lower()
    name = re.sub(r"^the\s+", "", name).split()[0] if name.strip() else "anon"
    word = re.sub(r"[^a-z0-9_]", "", name) or "anon"
    released = cff["date-released"]
    year = released.year if isinstance(released, _dt.date) else str(released)[:4]
    return f"{word}_{year}"


def bibtex(cff: dict, key: str | None = None, commit: str | None = None) -> str:
    """The artifact as a BibTeX ``@misc`` entry that standard BibTeX styles accept.

    Parameters
    ----------
    cff : dict
        ``CITATION.cff`` as returned by :func:`load_cff`.
    key : str, optional
        The entry's key; default :func:`cite_key`.
    commit : str, optional
        The commit cited (:func:`git_commit`), added to ``note``; none without it.

    Returns
    -------
    str
        The entry, fields ``author``, ``title``, ``howpublished``, ``year``, ``month`` and
        ``note`` (version and license), one per line.

    Examples
    --------
    >>> import datetime
    >>> cff = {"cff-version": "1.2.0", "title": "A study of SDPA", "version": "1.0",
    ...        "authors": [{"family-names": "Doe", "given-names": "Jane"}],
    ...        "date-released": datetime.date(2026, 11, 24), "license": "MIT",
    ...        "identifiers": [{"type": "other", "value": "example repository"}]}
    >>> print(bibtex(cff))
    @misc{doe_2026,
      author       = {Doe, Jane},
      title        = {A study of {SDPA}},
      howpublished = {Software, example repository},
      year         = {2026},
      month        = nov,
      note         = {Version 1.0, released 2026-11-24, license MIT}
    }
    """
    cff = _cff_iv(cff)
    released = cff["date-released"]
    if not isinstance(released, _dt.date):
        released = _dt.date.fromisoformat(str(released))
    fields = [
        ("author", "{" + " and ".join(_author(a) for a in cff["authors"]) + "}"),
        ("title", "{" + _protect_case(tex_escape(cff["title"])) + "}"),
        ("howpublished", "{Software, " + _identifier_text(cff) + "}"),
        ("year", "{" + str(released.year) + "}"),
        ("month", MONTHS[released.month - 1]),
        ("note", "{" + tex_escape(_release_note(cff, released.isoformat(), commit)) + "}"),
    ]
    lines = []
    for name, value in fields:
        # Long values wrap inside their braces (BibTeX joins the lines), so the entry
        # fits a page and a code block.
        lines.append(textwrap.fill(f"  {name:<12} = {value}", width=88,
                                   subsequent_indent=" " * 17, break_long_words=False,
                                   break_on_hyphens=False))
    body = ",\n".join(lines)
    return f"@misc{{{key or cite_key(cff)},\n{body}\n}}"


def plain_text(cff: dict, commit: str | None = None) -> str:
    """A one-line citation: authors (year). Title. Version, date, commit (where given),
    license; where."""
    cff = _cff_iv(cff)
    names = ", ".join(a.get("name") or " ".join(x for x in (a.get("given-names"),
                                                             a.get("family-names")) if x)
                      for a in cff["authors"])
    released = cff["date-released"]
    where = cff.get("repository-code") or cff.get("url") or next(
        (i["value"] for i in cff.get("identifiers") or [] if i.get("value")), "")
    return (f"{names} ({str(released)[:4]}). {cff['title']}. "
            f"{_release_note(cff, released, commit)}." + (f" {where}." if where else ""))


# --------------------------------------------------------------------------- Sphinx

def setup(app):
    """Register the ``attn-citation`` directive: the BibTeX (``:format: bibtex``, the
    default) or the one-line citation (``:format: text``) of the repository's
    ``CITATION.cff``, read when the page is built, with the commit the source tree is at
    (:func:`git_commit`; left out without git). The page is rebuilt when the file
    changes (a noted dependency)."""
    from docutils import nodes
    from docutils.parsers.rst import directives
    from sphinx.util.docutils import SphinxDirective

    class CitationDirective(SphinxDirective):
        has_content = False
        option_spec = {"format": lambda arg: directives.choice(arg, ("bibtex", "text"))}

        def run(self):
            path = Path(self.env.srcdir) / CFF_NAME
            self.env.note_dependency(str(path))
            cff = load_cff(path)
            if not hasattr(self.env, "attn_citation_docs"):
                self.env.attn_citation_docs = set()
            self.env.attn_citation_docs.add(self.env.docname)
            commit = git_commit(self.env.srcdir)
            if self.options.get("format", "bibtex") == "text":
                return [nodes.paragraph(text=plain_text(cff, commit))]
            text = bibtex(cff, commit=commit)
            block = nodes.literal_block(text, text, language="bibtex")
            return [block]

    def always_outdated(app, env, added, changed, removed):
        """The commit changes with every commit, which no file dependency sees: the pages
        that cite are read again on every build."""
        return sorted(getattr(env, "attn_citation_docs", set()) - set(removed))

    app.add_directive("attn-citation", CitationDirective)
    app.connect("env-get-outdated", always_outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
