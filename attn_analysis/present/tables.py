"""Tables of the paper: DataFrame in, a short captioned MyST table out.

One place decides how a table reads: the human header (with its unit) of every column
the notebooks show (:data:`COLUMNS`), how many digits a number keeps, and how long a
table in a chapter may be (:data:`MAX_ROWS`). A longer or wider frame is shown as its
first rows and offered whole as a CSV download built from the same frame when the book
is built (a ``data:`` link in the HTML page; the PDF shows the short table only).

The output is Markdown (``IPython.display.Markdown``), rendered by myst-nb with
``nb_render_markdown_format: myst``, so the HTML and the PDF both get a real table with a
numbered caption, never a DataFrame's text repr.
"""

from __future__ import annotations

import base64
import math
import numbers
import re

import numpy as np
import pandas as pd

__all__ = ["MAX_ROWS", "COLUMNS", "INTERVALS", "interval_decimals", "with_interval",
           "short_config", "format_value", "header", "formatted", "csv_ready", "csv_link",
           "markdown_table", "show"]

MAX_ROWS = 25

# Column name -> (header shown in the book, format). A format is a str.format spec
# applied to numbers; "%" specs print fractions as percentages. Intervals are rounded
# together (see ``INTERVALS``).
COLUMNS: dict[str, tuple[str, str]] = {
    # identifiers
    "config": ("configuration (fp16; D64 unless shown)", ""), "candidate": ("candidate", ""), "mode": ("timing mode", ""),
    "run": ("run", ""), "device": ("device and software", ""), "trial": ("trial", ""),
    "comparison": ("comparison", ""), "library": ("fastest library backend", ""),
    "kernel": ("kernel", ""), "fastest": ("fastest candidate", ""),
    "established": ("shown faster than sdpa", ""), "verdict": ("verdict", ""),
    "our_verdict": ("our verdict", ""), "protocol": ("protocol", ""), "k": ("k (processes)", ".0f"),
    # latency
    "median_ms": ("median (ms)", ".4f"), "ci_low_ms": ("95 % CI low (ms)", ".4f"),
    "ci_high_ms": ("95 % CI high (ms)", ".4f"),
    "baseline_median_ms": ("sdpa median (ms)", ".4f"),
    "candidate_median_ms": ("candidate median (ms)", ".4f"),
    "kernel_ms": ("kernel median (ms)", ".4f"), "library_ms": ("library median (ms)", ".4f"),
    "value_ms": ("median, as reported (ms)", ".4f"), "device_ms": ("profiler kernel time (ms)", ".4f"),
    "per_call": ("per_call median (ms)", ".4f"), "cold_l2": ("cold_l2 median (ms)", ".4f"),
    "graph": ("graph median (ms)", ".4f"), "hot_ms": ("hot (graph) median (ms)", ".4f"),
    "cold_ms": ("cold (L2 flushed) median (ms)", ".4f"),
    "min_us": ("min (µs)", ".1f"), "median_us": ("median (µs)", ".1f"),
    "max_us": ("max (µs)", ".1f"), "span_us": ("span per call (µs)", ".1f"),
    "busy_us": ("busy per call (µs)", ".1f"),
    # ratios
    "speedup": ("speedup (×)", ".3f"), "ci_low": ("CI low (×)", ".3f"),
    "ci_high": ("CI high (×)", ".3f"), "speedup_ci_low": ("CI low (×)", ".3f"),
    "speedup_ci_high": ("CI high (×)", ".3f"), "tost_low": ("90 % CI low (×)", ".3f"),
    "tost_high": ("90 % CI high (×)", ".3f"), "our_ci_low": ("our CI low (×)", ".3f"),
    "our_ci_high": ("our CI high (×)", ".3f"), "ratio": ("time ratio (×)", ".3f"),
    "resolvable_margin": ("smallest resolvable margin (%)", ".1%"),
    "per_call_over_device": ("per_call / kernel (×)", ".2f"),
    "cold_l2_over_device": ("cold_l2 / kernel (×)", ".2f"),
    "graph_over_device": ("graph / kernel (×)", ".2f"), "host_share": ("host share (%)", ".0%"),
    "cold_over_hot": ("cold / hot (×)", ".2f"), "working_set_over_l2": ("working set / L2 (×)", ".2f"),
    "l4_over_ours": ("L4 / ours (×)", ".1f"),
    # rates
    "tflops": ("TFLOP/s", ".1f"), "intensity": ("intensity (FLOP/B)", ".0f"),
    "eff_gbs": ("effective rate (GB/s)", ".0f"), "hot_gbs": ("hot rate (GB/s)", ".0f"),
    "cold_gbs": ("cold rate (GB/s)", ".0f"),
    "frac_matmul": ("of measured matmul rate (%)", ".0%"),
    "frac_peak_tflops": ("of datasheet peak (%)", ".0%"),
    "frac_copy": ("of measured copy rate (%)", ".0%"), "frac_peak_bw": ("of datasheet bandwidth (%)", ".0%"),
    "hot_over_copy": ("hot / copy rate (%)", ".0%"), "cold_over_copy": ("cold / copy rate (%)", ".0%"),
    "trial_spread": ("spread between trials (%)", ".1%"),
    # statistics of the reports
    "hedges_g": ("Hedges' g", ".2f"), "cliffs_delta": ("Cliff's delta", ".2f"),
    "p_value": ("Mann-Whitney p", ".2g"), "cis_overlap": ("per-sample CIs overlap", ""),
    # counts
    "n_trials": ("processes", ".0f"), "n_processes": ("processes", ".0f"),
    "captures": ("captures", ".0f"),
    "kernels_per_call": ("kernels per call", ".0f"), "n_mentions": ("mentions", ".0f"),
    "replications": ("replications", ".0f"), "n_configs": ("configurations", ".0f"),
    "n_units": ("timing units", ".0f"), "n_samples": ("samples", ".0f"),
    "source_file": ("report file", ""), "status": ("status", ""),
    "unit_s": ("timing unit (s)", ".3f"), "process_overhead_s": ("process overhead (s)", ".2f"),
    "comparison_s": ("one comparison (s)", ".0f"), "calibration_s": ("calibration (s)", ".0f"),
}

# Estimate column -> its interval's (low, high) columns: the three are rounded together to
# the digits the interval supports (see :func:`interval_decimals`).
INTERVALS = {"median_ms": ("ci_low_ms", "ci_high_ms"), "speedup": ("ci_low", "ci_high"),
             "speedup_": ("speedup_ci_low", "speedup_ci_high")}


# --------------------------------------------------------------------------- validation

def _show_iv(df, caption, max_rows, formats, labels) -> pd.DataFrame:
    """Check the arguments of :func:`markdown_table`."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"`df` must be a pandas DataFrame; got {type(df).__name__}.")
    if not isinstance(caption, str) or not caption.strip():
        raise ValueError(f"`caption` must be a non-empty string saying what the table shows "
                         f"and where it was measured; got {caption!r}.")
    if isinstance(max_rows, bool) or not isinstance(max_rows, numbers.Integral) \
            or not 1 <= max_rows <= MAX_ROWS:
        raise ValueError(f"`max_rows` must be an integer from 1 to {MAX_ROWS}; got {max_rows!r}.")
    for name, value in (("formats", formats), ("labels", labels)):
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"`{name}` must be a dict keyed by column; got "
                             f"{type(value).__name__}.")
    return df


# --------------------------------------------------------------------------- numbers

def interval_decimals(low, high, digits: int = 1, most: int = 6) -> int | None:
    """Decimals an estimate keeps given its interval: enough to show ``digits``
    significant digits of the narrowest half-width in the column (None when no interval
    is finite and positive).

    >>> interval_decimals([0.99, 1.10], [1.01, 1.30])
    2
    >>> interval_decimals([0.0520], [0.0534])
    4
    """
    lo, hi = (np.asarray(x, dtype=float) for x in (low, high))
    half = (hi - lo) / 2
    half = half[np.isfinite(half) & (half > 0)]
    if not half.size:
        return None
    return int(min(most, max(0, -math.floor(math.log10(half.min())) + digits - 1)))


def with_interval(values, lows, highs, spec: str = ".3f") -> list[str]:
    """Cells "value (low–high)" for a table column, one per row, each number in ``spec``;
    a number at or above 1000 or below 0.001 (an interval with one degree of freedom
    reaches that far) in two significant digits instead, so the cell stays short."""
    def fmt(x):
        x = float(x)
        return format(x, ".2g") if math.isfinite(x) and (abs(x) >= 1e3 or 0 < abs(x) < 1e-3) \
            else format(x, spec)
    return [f"{fmt(v)} ({fmt(lo)}–{fmt(hi)})" for v, lo, hi in zip(values, lows, highs)]


def short_config(key: str) -> str:
    """A configuration key as the figures print it: 'B32 H8 S512' (head dimension and
    dtype only when they are not 64 and fp16)."""
    from ..configs import Config
    try:
        c = Config.from_key(str(key))
    except (ValueError, KeyError, TypeError):
        return str(key)
    text = f"B{c.batch} H{c.heads} S{c.seq_len}"
    text += f" D{c.head_dim}" if c.head_dim != 64 else ""
    dtype = str(getattr(c, "dtype", "fp16"))
    text += "" if dtype in ("fp16", "float16", "torch.float16") else f" {dtype}"
    return text + (" causal" if getattr(c, "causal", False) else "")


def format_value(value, spec: str) -> str:
    """One cell as text: '' for missing, the format ``spec`` for numbers, str otherwise."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, numbers.Number) and spec:
        if not math.isfinite(float(value)):
            return ""
        return format(float(value), spec)
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _cell(text: str) -> str:
    """Escape a cell for a pipe table (pipes, line breaks)."""
    return re.sub(r"\s*\n\s*", " ", text).replace("|", r"\|")


def header(column: str, labels: dict | None = None) -> str:
    """The header the book prints for ``column``: an explicit label, else the registry's,
    else the name with underscores as spaces."""
    if labels and column in labels:
        return labels[column]
    return COLUMNS.get(column, (column.replace("_", " "), ""))[0]


def formatted(df: pd.DataFrame, formats: dict | None = None,
              digits: int = 2) -> pd.DataFrame:
    """``df`` as strings: registry formats, overridden by ``formats``. An estimate and its
    interval (``INTERVALS``) are rounded together, row by row, to show ``digits``
    significant digits of that row's half-width, unless ``formats`` names the estimate."""
    formats = dict(formats or {})
    specs = {c: formats.get(c, COLUMNS.get(c, ("", ""))[1]) for c in df.columns}
    out = pd.DataFrame(index=df.index)
    for c in df.columns:
        if c == "config" and c not in formats:
            out[c] = [short_config(v) for v in df[c]]
            continue
        out[c] = [format_value(v, specs[c]) for v in df[c]]
    for est, (lo, hi) in INTERVALS.items():
        est_col = "speedup" if est == "speedup_" else est
        if not {est_col, lo, hi} <= set(df.columns) or est_col in formats:
            continue
        for i, (vlo, vhi) in enumerate(zip(df[lo], df[hi])):
            d = interval_decimals([vlo], [vhi], digits=digits)
            if d is None:
                continue
            for c in (est_col, lo, hi):
                v = df[c].iloc[i]
                far = isinstance(v, numbers.Real) and math.isfinite(v) and (
                    abs(v) >= 1e3 or 0 < abs(v) < 1e-3) and est_col == "speedup"
                out.iloc[i, df.columns.get_loc(c)] = format_value(v, ".2g" if far else f".{d}f")
    return out


# --------------------------------------------------------------------------- output

def csv_ready(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every list, tuple, set or array cell written as plain text
    ("H200-k, H200-l"), so a downloaded CSV holds no Python reprs; other cells unchanged."""
    def plain(v):
        if isinstance(v, (set, frozenset)):
            v = sorted(v, key=str)
        if isinstance(v, (list, tuple, np.ndarray)):
            return ", ".join(str(x) for x in v)
        return v
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object:
            out[c] = [plain(v) for v in out[c]]
    return out


def csv_link(df: pd.DataFrame, filename: str, text: str | None = None) -> str:
    """A raw-HTML paragraph with a download link holding ``df`` as CSV (a ``data:`` URI,
    so the page carries its own data; the PDF drops raw HTML)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+\.csv", filename or ""):
        raise ValueError(f"`filename` must be a plain name ending in .csv; got {filename!r}.")
    data = csv_ready(df).to_csv(index=False).encode("utf-8")
    href = "data:text/csv;charset=utf-8;base64," + base64.b64encode(data).decode("ascii")
    text = text or f"Download the full table as CSV ({len(df)} rows, {df.shape[1]} columns)"
    return (f'<p class="csv-download"><a download="{filename}" href="{href}">'
            f"{text}</a></p>")


def markdown_table(df: pd.DataFrame, caption: str, *, name: str | None = None,
                   max_rows: int = MAX_ROWS, formats: dict | None = None,
                   labels: dict | None = None, csv: str | None = None,
                   full: pd.DataFrame | None = None) -> str:
    """A MyST ``table`` directive holding ``df`` (index dropped) with human headers.

    Parameters
    ----------
    df : DataFrame
        The rows and columns to show, in order; keep the index as a column first
        (``reset_index()``) if it carries meaning.
    caption : str
        What the table shows and where it was measured (device, run).
    name : str, optional
        Label for ``{numref}``.
    max_rows : int
        At most this many rows are shown (no more than :data:`MAX_ROWS`); the caption
        then says how many of how many.
    formats, labels : dict, optional
        Per-column format specs and headers, overriding :data:`COLUMNS`.
    csv : str, optional
        File name of a CSV download of ``full`` (default: ``df``), offered below the table.
    full : DataFrame, optional
        The complete data behind the download, e.g. every row and column of the frame the
        shown table was cut from.

    Returns
    -------
    str
        MyST Markdown.
    """
    df = _show_iv(df, caption, max_rows, formats, labels)
    shown = df.head(max_rows)
    caption = caption.strip()
    if len(df) > len(shown):
        caption += f" First {len(shown)} of {len(df)} rows; every row is in the CSV below."
    cells = formatted(shown, formats)
    head = "| " + " | ".join(_cell(header(c, labels)) for c in shown.columns) + " |"
    rule = "| " + " | ".join("---" for _ in shown.columns) + " |"
    body = ["| " + " | ".join(_cell(v) for v in row) + " |"
            for row in cells.itertuples(index=False)]
    # A backtick fence's info string may not hold a backtick (CommonMark), so a caption
    # with inline code gets a tilde fence; otherwise the directive is shown as text.
    fence = "~~~" if "`" in caption else "```"
    lines = [f"{fence}{{table}} " + _cell(caption)]
    if name:
        lines.append(f":name: {name}")
    lines += ["", head, rule, *body, fence]
    text = "\n".join(lines)
    if csv or len(df) > len(shown):
        data = df if full is None else full
        text += "\n\n" + csv_link(data, csv or "table.csv")
    return text


def show(df: pd.DataFrame, caption: str, **kwargs) -> None:
    """Display :func:`markdown_table` in a notebook (as Markdown)."""
    from IPython.display import Markdown, display
    display(Markdown(markdown_table(df, caption, **kwargs)))
