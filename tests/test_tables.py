"""Tests of the book's tables: short, human headers, rounding from intervals, CSV downloads."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pandas as pd
import pytest

from attn_analysis.present import tables as T


def frame(n=3):
    return pd.DataFrame({"config": [f"B{i + 1}-H8-S512-D64-fp16" for i in range(n)],
                         "speedup": np.linspace(0.9, 1.1, n),
                         "ci_low": np.linspace(0.9, 1.1, n) - 0.012,
                         "ci_high": np.linspace(0.9, 1.1, n) + 0.012,
                         "verdict": ["slower"] * n, "frac_matmul": [0.4512] * n})


def rows_of(md: str) -> list[str]:
    return [line for line in md.splitlines() if line.startswith("| ")]


def csv_in(md: str) -> pd.DataFrame:
    href = re.search(r'href="data:text/csv;charset=utf-8;base64,([^"]+)"', md).group(1)
    return pd.read_csv(io.StringIO(base64.b64decode(href).decode()))


def test_headers_are_human_with_units():
    md = T.markdown_table(frame(), "Speedups. Device X, run r.", name="tbl-x")
    head = rows_of(md)[0]
    assert "speedup (×)" in head and "CI low (×)" in head
    assert "of measured matmul rate (%)" in head
    assert "_" not in head  # no snake_case column reaches the page
    assert md.startswith("```{table} Speedups. Device X, run r.\n:name: tbl-x")
    # a caption with inline code: a backtick fence cannot hold it (the directive was shown
    # as text and its label undefined, issue 41), so the fence is of tildes
    code = T.markdown_table(frame(), "Needed: `plan --power`.", name="tbl-y")
    assert code.startswith("~~~{table} Needed: `plan --power`.\n:name: tbl-y")
    assert code.split("\n")[-1] == "~~~" or "~~~\n" in code


def test_estimate_and_interval_rounded_to_what_the_interval_supports():
    df = frame(2)
    df.loc[1, ["speedup", "ci_low", "ci_high"]] = [0.036512, 0.036034, 0.036921]
    rows = rows_of(T.markdown_table(df, "c"))
    # half-width 0.012: two significant digits of it, three decimals; the fraction as a
    # whole percentage; a row with a narrower interval keeps more decimals
    assert "| 0.900 | 0.888 | 0.912 |" in rows[2] and "45%" in rows[2]
    assert "| 0.03651 | 0.03603 | 0.03692 |" in rows[3]
    assert T.interval_decimals([1.0], [1.0]) is None
    far = T.formatted(pd.DataFrame({"speedup": [1.27], "ci_low": [3.1e-6], "ci_high": [4.2e6]}))
    assert list(far.iloc[0]) == ["1", "3.1e-06", "4.2e+06"]
    assert T.interval_decimals([0.0520], [0.0534]) == 4


def test_long_table_is_cut_and_offered_whole_as_csv():
    df = frame(40)
    md = T.markdown_table(df, "Long.", csv="long.csv")
    assert len(rows_of(md)) == 2 + T.MAX_ROWS
    assert f"First {T.MAX_ROWS} of 40 rows" in md
    assert 'download="long.csv"' in md
    back = csv_in(md)
    assert len(back) == 40 and list(back.columns) == list(df.columns)
    np.testing.assert_allclose(back["speedup"], df["speedup"])  # full precision in the CSV


def test_full_frame_behind_the_download():
    full = frame(5).assign(extra=1)
    md = T.markdown_table(full[["config", "speedup"]], "Short.", csv="f.csv", full=full)
    assert "extra" in csv_in(md).columns and "extra" not in rows_of(md)[0]


def test_cells_escape_pipes_and_show_missing_as_blank():
    df = pd.DataFrame({"comparison": ["a | b"], "median_ms": [np.nan], "locked": [True]})
    row = rows_of(T.markdown_table(df, "c"))[2]
    assert r"a \| b" in row and "| yes |" in row and "|  |" in row


def test_validation_messages():
    with pytest.raises(ValueError, match="`df` must be a pandas DataFrame"):
        T.markdown_table([1], "c")
    with pytest.raises(ValueError, match="`caption` must be a non-empty string"):
        T.markdown_table(frame(), " ")
    with pytest.raises(ValueError, match="`max_rows` must be an integer from 1 to 25"):
        T.markdown_table(frame(), "c", max_rows=30)
    with pytest.raises(ValueError, match="`formats` must be a dict"):
        T.markdown_table(frame(), "c", formats=[".3f"])
    with pytest.raises(ValueError, match="`filename` must be a plain name ending in .csv"):
        T.csv_link(frame(), "../x.txt")


def test_configurations_print_as_in_the_figures():
    assert T.short_config("B32-H8-S512-D64-fp16") == "B32 H8 S512"
    assert T.short_config("B32-H8-S512-D128-fp16") == "B32 H8 S512 D128"
    assert T.short_config("not a key") == "not a key"
    row = rows_of(T.markdown_table(frame(1), "c"))[2]
    assert row.startswith("| B1 H8 S512 |")


def test_with_interval_writes_value_and_interval_per_row():
    assert T.with_interval([1.0, 0.9], [0.99, 0.8], [1.01, 0.95]) == [
        "1.000 (0.990–1.010)", "0.900 (0.800–0.950)"]
    assert T.with_interval([2.5], [2.0], [3.0], ".1f") == ["2.5 (2.0–3.0)"]
    # an interval with one degree of freedom under Bonferroni reaches far: kept short
    assert T.with_interval([1.275], [3.1e-6], [3969529.6]) == ["1.275 (3.1e-06–4e+06)"]


def test_csv_download_holds_lists_as_plain_text():
    df = pd.DataFrame({"runs": [["H200-k", "H200-l"], ("H100-a",), np.array(["x", "y"]),
                                {"b", "a"}, "plain"], "n": [1, 2, 3, 4, 5]})
    link = T.csv_link(df, "t.csv")
    data = base64.b64decode(re.search(r"base64,([^\"]+)", link).group(1)).decode("utf-8")
    back = pd.read_csv(io.StringIO(data))
    assert back["runs"].tolist() == ["H200-k, H200-l", "H100-a", "x, y", "a, b", "plain"]
    assert "[" not in data and "'" not in data
    assert back["n"].tolist() == [1, 2, 3, 4, 5]
    assert isinstance(df["runs"].iloc[0], list)  # the caller's frame is left as it was


def test_interval_title_names_the_family_wise_level():
    from attn_analysis.present.plots import ci_label
    per = 1 - 0.05 / 220
    assert ci_label(pd.DataFrame({"confidence": [per], "n_comparisons": [220]})) == \
        " (95% family-wise CI, m = 220)"
    assert ci_label(pd.DataFrame({"confidence": [0.9998]})) == " (99.98% CI)"
    assert ci_label(pd.DataFrame({"confidence": [0.95]})) == " (95% CI)"
    assert ci_label(pd.DataFrame({"x": [1]})) == ""
