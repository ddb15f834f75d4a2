"""The rendered book measured as a reader meets it: its words per page, against the paper's
budgets, and the defects a glance at the page would catch.

A *word* is a whitespace-separated token that holds a letter or a digit (so '0.93×',
'H100-a' and '2026-11-24' are one word each; a lone '#', '—' or '|' is none). Two counts
per page, both of the article body (``<article>``), never of the theme around it:

``prose``
    words of paragraphs and list items (``<p>``, ``<li>``), outside tables, figures (the
    image and its caption), code, cell inputs and bibliography entries: what the paper
    says in sentences;
``visible``
    every word of the article a reader sees: prose, headings, tables, captions, admonitions
    and glued output, but no code cell input, script, style or heading anchor.

The paper's budgets (issue 41): the main text (the ``_toc.yml`` part captioned
:data:`MAIN_PART`) at most :data:`MAIN_PROSE_BUDGET` words of prose, the whole book at most
:data:`BOOK_BUDGET` visible words. :func:`page_defects` finds what no reader should see: a
Python repr (``<IPython.core.display.Markdown object>``, ``object at 0x``), a count
sentence reading "0 of 0", and a word doubled around "and"/"or" or repeated.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import yaml

__all__ = ["MAIN_PART", "MAIN_PROSE_BUDGET", "BOOK_BUDGET", "ABSTRACT_BUDGET", "abstract_words", "count_words", "page_words",
           "toc_pages", "book_word_counts", "page_defects"]

MAIN_PART = "The paper"
MAIN_PROSE_BUDGET = 7000
# 12000, then 12500 for 3.7's long-grid run; 13000 for the Gluon ablation table and the
# confirmatory Gluon runs in 3.5 (2026-11-29), while main prose fell to 6,321 words;
# 13500 for 3.5's figure of every confirmatory run at the target (its caption names each
# run) and the ablation's rounds 4 and 5 (0.5.0: 13,322 visible, main prose 6,503);
# 13785 for 3.5's table of every confirmatory run at the target (285 visible words: the
# numbers behind 3.5's answer, which its figure alone does not show)
BOOK_BUDGET = 13785
ABSTRACT_BUDGET = 250  # the landing page's abstract (its glued sentences), issue 41
_WORD = re.compile(r"\S*[^\W_]\S*")  # a token with a letter or digit
# what a reader never sees as text of the article
_HIDDEN_TAGS = ("script", "style", "noscript", "template", "button", "svg", "math")
_HIDDEN_CLASSES = ("headerlink", "cell_input", "toggle-details__summary")
# what is not prose: tables, figures, code
_NOT_PROSE_TAGS = ("table", "figure", "pre")
_NOT_PROSE_CLASSES = ("highlight", "math", "cell_output", "citation")  # citation: a
# bibliography entry (sphinxcontrib-bibtex), a reference rather than a sentence
_REPR = re.compile(r"<IPython\.|<[\w.]+ object at 0x[0-9a-f]+>|\bobject at 0x[0-9a-f]+")
_ZERO_OF_ZERO = re.compile(r"\b0 (?:of|out of) (?:the |these |those )?0\b")
_DOUBLED = re.compile(r"\b([A-Za-z]{3,})\s+(?:and|or)\s+\1\b|\b([A-Za-z]{2,})\s+\2\b",
                      re.IGNORECASE)
# repeats that English allows: "that that", "could and could not", "one and one and a half"
_ALLOWED_REPEATS = {"that", "had", "is", "could", "can", "would", "should", "may", "might",
                    "must", "will", "one", "two", "three", "again", "over", "on", "off", "up",
                    "down", "round", "through", "more", "less", "back", "by"}


def count_words(text: str) -> int:
    """The words of ``text`` (see the module docstring)."""
    if not isinstance(text, str):
        raise ValueError(f"`text` must be a string; got {type(text).__name__}.")
    return len(_WORD.findall(text))


def _has_class(tag, names) -> bool:
    classes = tag.get("class") or []
    return any(c in names for c in classes)


def _article(html: str):
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(html, "html.parser")
    article = soup.find("article") or soup.body or soup
    for tag in article.find_all(_HIDDEN_TAGS):
        tag.decompose()
    for tag in article.find_all(lambda t: _has_class(t, _HIDDEN_CLASSES)):
        tag.decompose()
    return article


def _prose(article, sep: str = " ") -> str:
    """The text of paragraphs and list items outside tables, figures and code blocks (a
    sentence's inline code is part of the sentence); a list item's own paragraphs are
    counted once."""
    parts = []
    for tag in article.find_all(["p", "li"]):
        if tag.find_parent(["p", "li"]) is not None:
            continue
        if tag.find_parent(_NOT_PROSE_TAGS) is not None or tag.find_parent(
                lambda t: _has_class(t, _NOT_PROSE_CLASSES)) is not None:
            continue
        parts.append(tag.get_text(sep))
    return "\n".join(parts)


def page_words(html: str) -> dict:
    """{'prose': words, 'visible': words, 'prose_text': str, 'visible_text': str} of one
    rendered page (its HTML)."""
    if not isinstance(html, str):
        raise ValueError(f"`html` must be a string; got {type(html).__name__}.")
    visible = _article(html).get_text(" ")
    prose = _prose(_article(html))
    return {"prose": count_words(prose), "visible": count_words(visible),
            "prose_text": prose, "visible_text": visible}


def toc_pages(toc) -> list[tuple[str, str]]:
    """(page, part caption) of every page of a jb-book ``_toc.yml`` (a path or its parsed
    dict), in reading order; pages of a toc without parts belong to part ''."""
    data = yaml.safe_load(Path(toc).read_text()) if isinstance(toc, (str, Path)) else toc
    if not isinstance(data, dict) or "root" not in data:
        raise ValueError(f"`toc` must be a jb-book table of contents with a root; got {toc!r}.")
    out = [(str(data["root"]), MAIN_PART if data.get("parts") else "")]

    def walk(entries, part):
        for entry in entries or ():
            if "file" in entry:
                out.append((str(entry["file"]), part))
            walk(entry.get("sections"), part)
            walk(entry.get("chapters"), part)

    if data.get("parts"):
        for part in data["parts"]:
            walk(part.get("chapters"), str(part.get("caption", "")))
    walk(data.get("chapters"), "")
    return [(p.removesuffix(".md").removesuffix(".ipynb").removesuffix(".py"), part)
            for p, part in out]


def book_word_counts(html_dir, toc) -> pd.DataFrame:
    """One row per page of the built book (``html_dir``, e.g. ``_build/html``), in the
    order of ``toc``: page, part, main (in the part :data:`MAIN_PART`; every page where the
    toc has no parts), prose and visible words."""
    html_dir = Path(html_dir)
    rows = []
    pages = toc_pages(toc)
    has_parts = any(part for _, part in pages)
    for page, part in pages:
        path = html_dir / f"{page}.html"
        if not path.is_file():
            raise ValueError(f"`html_dir` has no page {page}.html; build the book first.")
        counts = page_words(path.read_text())
        rows.append({"page": page, "part": part,
                     "main": part == MAIN_PART if has_parts else True,
                     "prose": counts["prose"], "visible": counts["visible"]})
    return pd.DataFrame(rows, columns=["page", "part", "main", "prose", "visible"])


def page_defects(html: str) -> list[str]:
    """What a reader must never see on a page: Python reprs, a count sentence reading
    '0 of 0', doubled words ('equivalent and equivalent', 'the the'); each as a short
    quote of the text around it."""
    if not isinstance(html, str):
        raise ValueError(f"`html` must be a string; got {type(html).__name__}.")
    # text as rendered, without separators between tags: a highlighted repr is split
    # into spans ('<', 'IPython', '.'), a glued count sits in a span of its own
    text = re.sub(r"\s+", " ", _article(html).get_text(""))
    found = [f"repr: {m.group(0)}" for m in _REPR.finditer(text)]
    found += [f"zero of zero: ...{text[max(0, m.start() - 40):m.end() + 20]}..."
              for m in _ZERO_OF_ZERO.finditer(text)]
    prose = re.sub(r"[ \t\r\f\v]+", " ", _prose(_article(html), sep=""))
    for m in _DOUBLED.finditer(prose):
        word = (m.group(1) or m.group(2)).lower()
        if word in _ALLOWED_REPEATS:
            continue
        found.append(f"doubled word: ...{prose[max(0, m.start() - 30):m.end() + 20]}...")
    return found


def abstract_words(html: str) -> int:
    """Words of the landing page's abstract as rendered: the ``glued-sentences`` block of
    its section ``abstract`` (the figure and its caption below it are not the abstract).
    ValueError when the page has no such block."""
    from bs4 import BeautifulSoup
    section = BeautifulSoup(html, "html.parser").find("section", id="abstract")
    block = section.find("div", class_="glued-sentences") if section else None
    if block is None:
        raise ValueError("`html` holds no abstract (section#abstract div.glued-sentences).")
    return count_words(block.get_text(" "))
