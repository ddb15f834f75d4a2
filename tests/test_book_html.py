"""The built book as a reader meets it (``book_words``): no Python repr, no count sentence
reading "0 of 0", no doubled word, and the paper's word budgets (main text at most
``MAIN_PROSE_BUDGET`` words of prose, the whole book at most ``BOOK_BUDGET`` visible
words). The counting is unit-tested on tiny HTML; the checks of the built book wait for the
session's build (``built_book``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_analysis.present import book_words as W

ROOT = Path(__file__).resolve().parents[1]


def page(body: str) -> str:
    return (f"<html><head><style>p {{ color: red }}</style></head><body><nav>theme words "
            f"here</nav><article class='bd-article'>{body}</article>"
            f"<footer>footer words</footer></body></html>")


# ------------------------------------------------------------------ counting, tiny HTML

def test_count_words():
    assert W.count_words("The H100-a ran 0.93× faster — see 2026-11-24 | #") == 7
    assert W.count_words("") == 0
    with pytest.raises(ValueError, match="`text`"):
        W.count_words(None)


def test_prose_counts_paragraphs_and_list_items_only():
    html = page(
        "<section><h1>Title words<a class='headerlink' href='#'>#</a></h1>"
        "<p>One two <code>three</code> <span class='pasted-text'>4</span>.</p>"
        "<ul><li><p>five six</p></li><li>seven</li></ul>"
        "<table><caption><p>caption of table</p></caption><tr><td><p>cell</p></td></tr></table>"
        "<figure><img src='x.png'/><figcaption><p>figure caption</p></figcaption></figure>"
        "<div class='cell_input'><div class='highlight'><pre>x = 1  # code</pre></div></div>"
        "<div class='cell_output'><div class='highlight'><pre>output text</pre></div></div>"
        "<div class='citation' role='doc-biblioentry'><p>Dao. Flash.</p></div>"
        "<script>var hidden = 1;</script></section>")
    counts = W.page_words(html)
    assert counts["prose"] == 7  # One two three 4 five six seven
    # visible: the title (2), prose (7), table (4: caption of table, cell), figure caption
    # (2), the output (2), the bibliography entry (2); no anchor, code input, script, style
    assert counts["visible"] == 2 + 7 + 4 + 2 + 2 + 2
    with pytest.raises(ValueError, match="`html`"):
        W.page_words(None)


def test_defects_repr_zero_of_zero_and_doubled_words():
    repr_page = page("<div class='cell_output'><div class='highlight'><pre><span>&lt;</span>"
                     "<span>IPython</span><span>.</span><span>core.display.Markdown object"
                     "</span><span>&gt;</span></pre></div></div>")
    assert any("IPython" in d for d in W.page_defects(repr_page))
    assert W.page_defects(page("<p>a &lt;Foo object at 0x7f3a2b&gt; here</p>"))
    zero = page("<p>and <span class='pasted-text'>0</span> of the "
                "<span class='pasted-text'>0</span> per-call leads</p>")
    assert any("zero of zero" in d for d in W.page_defects(zero))
    assert W.page_defects(page("<p>3 of 0 and 0 of 3 and 10 of 10</p>")) == []
    doubled = page("<p>on the second GPU <span>equivalent</span> and\n"
                   "<span>equivalent</span>.</p><p>the the end</p>")
    assert len(W.page_defects(doubled)) == 2
    fine = page("<p>what it could and could not resolve; one and one and a half margins; "
                "faster and slower</p>")
    assert W.page_defects(fine) == []


def test_toc_pages_with_and_without_parts():
    toc = {"format": "jb-book", "root": "book/index",
           "parts": [{"caption": "The paper", "chapters": [
               {"file": "book/claim"},
               {"file": "book/results", "sections": [{"file": "notebooks/02_fixed_shape"}]}]},
               {"caption": "Appendices", "chapters": [{"file": "notebooks/07_variance.py"}]}]}
    assert W.toc_pages(toc) == [("book/index", "The paper"), ("book/claim", "The paper"),
                                ("book/results", "The paper"),
                                ("notebooks/02_fixed_shape", "The paper"),
                                ("notebooks/07_variance", "Appendices")]
    flat = {"root": "book/index", "chapters": [{"file": "book/claim"}]}
    assert W.toc_pages(flat) == [("book/index", ""), ("book/claim", "")]
    with pytest.raises(ValueError, match="`toc`"):
        W.toc_pages({"chapters": []})


def test_book_word_counts_of_a_tiny_book(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "index.html").write_text(page("<p>one two three</p>"))
    (tmp_path / "book" / "appendix.html").write_text(page("<p>four five</p><table><tr><td>"
                                                          "six</td></tr></table>"))
    toc = {"root": "book/index", "parts": [
        {"caption": "Appendices", "chapters": [{"file": "book/appendix"}]}]}
    df = W.book_word_counts(tmp_path, toc)
    assert df.to_dict("list") == {"page": ["book/index", "book/appendix"],
                                  "part": ["The paper", "Appendices"], "main": [True, False],
                                  "prose": [3, 2], "visible": [3, 3]}
    with pytest.raises(ValueError, match="no page"):
        W.book_word_counts(tmp_path, {"root": "book/missing"})


# ------------------------------------------------------------------ the built book

def book_report(html_dir: Path, toc: Path):
    """(per-page counts, main prose, whole-book words, {page: defects})."""
    counts = W.book_word_counts(html_dir, toc)
    defects = {p: d for p in counts["page"]
               if (d := W.page_defects((html_dir / f"{p}.html").read_text()))}
    return counts, int(counts.loc[counts["main"], "prose"].sum()), \
        int(counts["visible"].sum()), defects


@pytest.mark.slow
def test_no_repr_no_zero_of_zero_no_doubled_word(built_book):
    *_, defects = book_report(built_book, ROOT / "_toc.yml")
    assert defects == {}


@pytest.mark.slow
def test_word_budgets(built_book):
    counts, main, whole, _ = book_report(built_book, ROOT / "_toc.yml")
    table = counts.to_string(index=False)
    assert main <= W.MAIN_PROSE_BUDGET, \
        f"main text {main} words of prose (budget {W.MAIN_PROSE_BUDGET})\n{table}"
    assert whole <= W.BOOK_BUDGET, \
        f"whole book {whole} visible words (budget {W.BOOK_BUDGET})\n{table}"


def test_abstract_words_count_the_abstract_block_only():
    html = page('<section id="abstract"><h2>Abstract</h2><div class="glued-sentences">'
                '<p>One two three.</p><p>Four 0.94×.</p></div><p>caption words here</p>'
                '</section>')
    assert W.abstract_words(html) == 5
    with pytest.raises(ValueError, match="`html`"):
        W.abstract_words(page("<p>no abstract</p>"))


@pytest.mark.slow
def test_the_abstract_is_within_its_budget(built_book):
    words = W.abstract_words((built_book / "book" / "index.html").read_text())
    assert 0 < words <= W.ABSTRACT_BUDGET, f"abstract {words} words"
