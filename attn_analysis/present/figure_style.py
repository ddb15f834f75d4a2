"""What every figure of the paper shares: every figure is drawn at the width it is shown at (:data:`PAGE_WIDTH_IN`, the book's text
column at the glue's 110 dpi) with fonts of at least 7.5 pt, so nothing is scaled down
into illegibility. Legends sit outside the data (below the axes). Where a margin around
a speedup of one decides a verdict, the axis is linear near one and points far off it
are drawn at the edge with their value, instead of a log axis that shrinks the band.
Categorical axes (configurations, candidates) carry markers, never connecting lines.
The verdict colours are keyed by ``stats.Verdict``'s words; the mode and axis labels by
``configs.MODES`` and the sweep axes.
"""

from __future__ import annotations

import functools
import textwrap

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .. import _validate
from ..configs import Config
from ..analyse.stats import Verdict

__all__ = ["VERDICT_COLORS", "AXIS_LABELS", "MODE_LABELS", "MODE_TITLES", "PAGE_WIDTH_IN",
           "STYLE", "near_one_window", "MAX_SPAN_RATIO", "MIN_NEEDED_SPAN", "check_span",
           "interval_window"]


VERDICT_COLORS = {Verdict.FASTER.value: "#1b9e77", Verdict.FASTER_WITHIN_MARGIN.value: "#66c2a5",
                  Verdict.EQUIVALENT.value: "#7570b3", Verdict.INCONCLUSIVE.value: "#999999",
                  Verdict.UNDECIDED.value: "#e6ab02",
                  Verdict.SLOWER_WITHIN_MARGIN.value: "#fc8d62",
                  Verdict.SLOWER.value: "#d95f02"}


AXIS_LABELS = {"seq_len": "sequence length S (tokens)", "batch": "batch size B",
               "heads": "heads H"}


MODE_LABELS = {"graph": "graph (device time, hot L2)", "cold_l2": "cold_l2 (L2 flushed)",
               "per_call": "per_call (synchronise after each call)"}


MODE_TITLES = {"graph": "graph: device time, hot L2", "cold_l2": "cold_l2: L2 flushed",
               "per_call": "per_call: synchronised"}


_frame_iv = functools.partial(_validate.frame, rows=True)  # a figure needs rows


def _label_iv(device_label) -> str:
    """The device label must be a non-empty string: it is what the title says."""
    if not isinstance(device_label, str) or not device_label.strip():
        raise ValueError(f"`device_label` must be a non-empty string naming the device and "
                         f"software; got {device_label!r}.")
    return device_label.strip()


PAGE_WIDTH_IN = 7.2


STYLE = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8,
         "xtick.labelsize": 8, "ytick.labelsize": 8, "figure.titlesize": 9.5,
         "legend.title_fontsize": 8}


def _styled(func):
    """Draw inside the book's rc settings (font sizes), whatever the caller's."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return func(*args, **kwargs)
    return wrapper


def _figure(width: float, height: float) -> Figure:
    """A constrained-layout figure no wider than the page."""
    return Figure(figsize=(min(width, PAGE_WIDTH_IN), height), layout="constrained", dpi=110)


def _title(text: str, width: int = 90) -> str:
    """Wrap each line of a title so that it fits the page width."""
    return "\n".join(textwrap.fill(line, width) for line in text.split("\n"))


def _legend_below(fig, ax_or_axes=None, handles=None, labels=None, ncol=None, title=None):
    """One legend for the figure, outside and below the axes, none on the data."""
    if handles is None:
        axes = np.atleast_1d(ax_or_axes if ax_or_axes is not None else fig.axes)
        seen = {}
        for ax in axes:
            for h, lbl in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lbl, h)
            if ax.get_legend() is not None:
                ax.get_legend().remove()
        labels, handles = list(seen), list(seen.values())
    if not handles:
        return None
    ncol = ncol or min(3, len(handles))
    return fig.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False,
                      title=title)


def near_one_window(low, high, margin: float, cap: float = 0.12) -> tuple[float, float]:
    """Linear x limits around a speedup of one: three margins wide at least, wide enough for
    every interval that lies within ``cap`` of one, never wider than ``cap``."""
    lo, hi = (np.asarray(x, dtype=float) for x in (low, high))
    near = np.isfinite(lo) & np.isfinite(hi) & (lo >= 1 - cap) & (hi <= 1 + cap)
    half = max(3 * margin, float(np.max(np.abs(np.r_[lo[near], hi[near]] - 1.0), initial=0)))
    half = min(cap, half * 1.08)
    return 1 - half, 1 + half


# A linear axis may span at most this many times what its points (and reference lines)
# need; a span below MIN_NEEDED_SPAN counts as that much (a single point, or points at one).
MAX_SPAN_RATIO = 6.0
MIN_NEEDED_SPAN = 0.1


def check_span(limits, points, reference=(), name: str = "x"):
    """Raise ``ValueError`` where a linear axis ``limits`` = (low, high) spans far more than
    its ``points`` (the plotted values, not their intervals) and ``reference`` values (a
    line at one) need: more than ``MAX_SPAN_RATIO`` times their extent, at least
    ``MIN_NEEDED_SPAN``. An interval as wide as 1e11 must be clipped at the edge, never
    stretch the axis until every point sits at zero. Returns ``limits``."""
    low, high = (float(v) for v in limits)
    vals = np.asarray([*np.ravel(np.asarray(points, dtype=float)), *reference], dtype=float)
    vals = vals[np.isfinite(vals)]
    if not np.isfinite([low, high]).all() or high <= low:
        raise ValueError(f"`{name}` limits must be finite and increasing; got {limits!r}.")
    if vals.size == 0:
        return limits
    needed = max(float(vals.max() - vals.min()), MIN_NEEDED_SPAN)
    if high - low > MAX_SPAN_RATIO * needed:
        raise ValueError(f"`{name}` axis spans {low:.3g} to {high:.3g}, more than "
                         f"{MAX_SPAN_RATIO:g} times the {needed:.3g} its points need "
                         f"({vals.min():.3g} to {vals.max():.3g}): clip the intervals.")
    return limits


def interval_window(points, low, high, reference: float = 1.0) -> tuple[float, float]:
    """Linear limits that show every point and ``reference``, and the intervals as far as
    they stay within one more such span (at least ``MIN_NEEDED_SPAN``) on each side; a
    wider interval is clipped at the edge. Padded by 6 % of the width."""
    pts = np.asarray(points, dtype=float)
    pts = np.r_[pts[np.isfinite(pts)], reference]
    p_lo, p_hi = float(pts.min()), float(pts.max())
    reach = max(p_hi - p_lo, MIN_NEEDED_SPAN)
    lows = np.asarray(low, dtype=float)
    highs = np.asarray(high, dtype=float)
    lo = max(min(float(np.nanmin(lows, initial=p_lo)), p_lo), p_lo - reach)
    hi = min(max(float(np.nanmax(highs, initial=p_hi)), p_hi), p_hi + reach)
    pad = 0.06 * (hi - lo) or 0.05
    return lo - pad, hi + pad


def _speedup_points(ax, d, y, xlim, colors=VERDICT_COLORS):
    """Speedups with their intervals on a linear axis limited to ``xlim``: a point outside
    is drawn as an arrow head at the edge, labelled with its value; an interval beyond
    the edge is clipped there and ends in an open arrow head. ``xlim`` is checked against the points (:func:`check_span`)."""
    check_span(xlim, d["speedup"], reference=(1.0,))
    lo_lim, hi_lim = xlim
    for verdict, color in colors.items():
        sel = (d["verdict"] == verdict).to_numpy()
        if not sel.any():
            continue
        sp = d["speedup"].to_numpy(dtype=float)[sel]
        lo = d["ci_low"].to_numpy(dtype=float)[sel]
        hi = d["ci_high"].to_numpy(dtype=float)[sel]
        yy = np.asarray(y, dtype=float)[sel]
        inside = (sp >= lo_lim) & (sp <= hi_lim)
        if inside.any():
            ax.errorbar(sp[inside], yy[inside],
                        xerr=_err(sp[inside], np.clip(lo[inside], lo_lim, None),
                                  np.clip(hi[inside], None, hi_lim)),
                        fmt="o", color=color, capsize=3, ms=5, label=verdict)
            # an interval cut at an edge ends in an open arrow head there ("beyond")
            for cut, edge, mk in ((lo < lo_lim, lo_lim, "<"), (hi > hi_lim, hi_lim, ">")):
                cut = cut & inside
                if cut.any():
                    ax.plot(np.full(int(cut.sum()), edge), yy[cut], marker=mk, ms=6,
                            mfc="white", mec=color, ls="none", clip_on=False, zorder=3)
        for v, yv in zip(sp[~inside], yy[~inside]):
            left = v < lo_lim
            edge = lo_lim if left else hi_lim
            ax.plot([edge], [yv], marker="<" if left else ">", color=color, ms=7,
                    clip_on=False, label=verdict, ls="none")
            ax.annotate(f"{v:.2f}×", (edge, yv), xytext=(7 if left else -7, 6),
                        textcoords="offset points", ha="left" if left else "right",
                        fontsize=7.5, color=color)


def _short(key: str) -> str:
    """A compact axis label for a configuration key: 'B32 H8 S512'."""
    c = Config.from_key(key)
    text = f"B{c.batch} H{c.heads} S{c.seq_len}"
    return text + (f" D{c.head_dim}" if c.head_dim != 64 else "") + (" causal" if c.causal
                                                                     else "")


def _plain_log_axis(axis, subs=(1.0,)) -> None:
    """Label a log axis with plain numbers (0.1, 1, 10) rather than powers of ten, with
    major ticks at ``subs`` times each power of ten."""
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _finish(fig, ax, xlabel: str, ylabel: str | None, title: str, ncol: int | None = None,
            **grid) -> Figure:
    """Close a one-axes figure: axis labels, the grid (``grid``: ``ax.grid`` keywords),
    the legend below the axes (when ``ncol`` is given) and the wrapped title."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.grid(**grid)
    if ncol is not None:
        _legend_below(fig, ax, ncol=ncol)
    ax.set_title(_title(title))
    return fig


def _by_candidate(ax, df: pd.DataFrame, x: str, y: str, low: str, high: str, **style) -> None:
    """One error-bar series per candidate, in name order and tab10 colours, in ``df``'s
    row order; ``low`` and ``high`` are the interval's columns."""
    names = sorted(df["candidate"].unique())
    palette = dict(zip(names, sns.color_palette("tab10", len(names))))
    for name in names:
        d = df[df["candidate"] == name]
        ax.errorbar(d[x], d[y], yerr=_err(d[y], d[low], d[high]), color=palette[name],
                    label=name, **style)


def _err(center, low, high) -> np.ndarray:
    """Error-bar lengths from an interval, zero where the interval is missing."""
    c, lo, hi = (np.asarray(x, dtype=float) for x in (center, low, high))
    return np.nan_to_num(np.vstack([c - lo, hi - c]).clip(min=0), nan=0.0)
