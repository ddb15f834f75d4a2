"""Figures of the paper: DataFrame in, matplotlib Figure out.

Every function takes a table from :mod:`attn_analysis.summaries` and a ``device_label``
(device and software, e.g. ``summaries.run_label(run)``) that goes into the title, so no
figure leaves the notebook without saying where it was measured. Axes carry units; sizes
that span decades get log scales; intervals are drawn as error bars or bands. Figures are
built as :class:`matplotlib.figure.Figure` objects, never through pyplot's global state,
so a notebook shows one only where it glues or displays it.

Every figure is drawn at the width it is shown at (:data:`PAGE_WIDTH_IN`, the book's text
column at the glue's 110 dpi) with fonts of at least 7.5 pt, so nothing is scaled down
into illegibility. Legends sit outside the data (below the axes). Where a margin around
a speedup of one decides a verdict, the axis is linear near one and points far off it
are drawn at the edge with their value, instead of a log axis that shrinks the band.
Categorical axes (configurations, candidates) carry markers, never connecting lines.
"""

from __future__ import annotations

import functools
import math
import textwrap

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from . import _validate, workload
from .configs import Config
from .stats import Verdict

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


# --------------------------------------------------------------------------- validation

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


def _speedup_points(ax, d, y, xlim, colors=VERDICT_COLORS):
    """Speedups with their intervals on a linear axis limited to ``xlim``: a point outside
    is drawn as an arrow head at the edge, labelled with its value."""
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


# --------------------------------------------------------------------------- figures

@_styled
def speedup_forest(speedups: pd.DataFrame, device_label: str, config: str | None = None,
                   margin: float | None = None) -> Figure:
    """Speedup over the baseline per candidate, with its CI, one panel per timing mode.

    The x axis is linear around one (see :func:`near_one_window`), so the shaded
    equivalence band, where verdicts are decided, is wide enough to read; a candidate far
    off one is drawn at the panel's edge as an arrow head with its value. The dashed line
    marks no difference; points are coloured by :func:`stats.compare`'s verdict.
    """
    df = _frame_iv("speedups", speedups, ("config", "mode", "candidate", "speedup", "ci_low",
                                          "ci_high", "verdict", "margin"))
    label = _label_iv(device_label)
    if config is not None:
        df = _frame_iv("speedups (at `config`)", df[df["config"] == config], ("config",))
    elif df["config"].nunique() != 1:
        raise ValueError("`config` must be given when `speedups` holds several configurations.")
    config = df["config"].iloc[0]
    margin = float(df["margin"].iloc[0]) if margin is None else float(margin)
    modes = [m for m in MODE_LABELS if m in set(df["mode"])]
    order = (df[df["mode"] == modes[0]].sort_values("speedup")["candidate"].tolist())
    order += [c for c in df["candidate"].unique() if c not in order]
    fig = _figure(PAGE_WIDTH_IN, 0.3 * len(order) + 1.9)
    axes = fig.subplots(1, len(modes), sharey=True, squeeze=False)[0]
    for ax, mode in zip(axes, modes):
        d = df[df["mode"] == mode].set_index("candidate").reindex(order).dropna(
            subset=["speedup"])
        y = [order.index(c) for c in d.index]
        xlim = near_one_window(d["ci_low"], d["ci_high"], margin)
        ax.axvspan(1 - margin, 1 + margin, color="#7570b3", alpha=0.15, lw=0,
                   label=f"equivalence margin ±{margin:.0%}")
        ax.axvline(1.0, color="black", lw=0.8, ls="--")
        _speedup_points(ax, d, y, xlim)
        ax.set_xlim(*xlim)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.set_title(MODE_TITLES[mode])
        ax.grid(axis="x", alpha=0.3)
    axes[len(axes) // 2].set_xlabel("speedup over the default SDPA dispatch (×; above 1: "
                                    "faster)")
    axes[0].set_yticks(range(len(order)), order)
    axes[0].set_ylim(-0.6, len(order) - 0.4)
    axes[0].set_ylabel("candidate")
    _legend_below(fig, axes, ncol=5)
    conf = f" ({df['confidence'].iloc[0]:.0%} CI)" if "confidence" in df else ""
    fig.suptitle(_title(f"Speedup over default SDPA at {_short(config)}{conf}; arrow heads: "
                        f"off the axis (value shown)\n{label}", width=100))
    return fig


@_styled
def latency_sweep(latency: pd.DataFrame, axis: str, device_label: str, mode: str = "graph",
                  candidates=None) -> Figure:
    """Median latency against one shape parameter, one line per candidate, log-log axes,
    with each median's CI as an error bar."""
    if axis not in AXIS_LABELS:
        raise ValueError(f"`axis` must be one of {tuple(AXIS_LABELS)}; got {axis!r}.")
    df = _frame_iv("latency", latency, ("candidate", "mode", "median_ms", "ci_low_ms",
                                        "ci_high_ms", axis))
    label = _label_iv(device_label)
    df = _frame_iv("latency (in `mode`)", df[df["mode"] == mode], ("mode",))
    if candidates is not None:
        df = _frame_iv("latency (for `candidates`)", df[df["candidate"].isin(candidates)],
                       ("candidate",))
    fig = _figure(PAGE_WIDTH_IN, 4.6)
    ax = fig.subplots()
    _by_candidate(ax, df.sort_values(axis), axis, "median_ms", "ci_low_ms", "ci_high_ms",
                  marker="o", ms=4, capsize=2, lw=1.2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_log_axis(ax.yaxis, subs=(1.0, 2.0, 5.0))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(sorted(df[axis].unique()))
    return _finish(fig, ax, AXIS_LABELS[axis] + ", log scale",
                   "median latency per call (ms, log scale)",
                   f"Latency against {AXIS_LABELS[axis]}, {MODE_TITLES.get(mode, mode)}\n{label}",
                   ncol=5, which="both", alpha=0.3)


@_styled
def speedup_heatmap(speedups: pd.DataFrame, device_label: str, mode: str = "graph") -> Figure:
    """Speedup of each candidate (columns) at each configuration (rows), coloured on a log
    scale centred at 1 and annotated with the value and its verdict (+ faster, = equivalent,
    ? inconclusive, ~ undecided at this precision, - slower)."""
    df = _frame_iv("speedups", speedups, ("config", "mode", "candidate", "speedup",
                                          "verdict"))
    label = _label_iv(device_label)
    df = _frame_iv("speedups (in `mode`)", df[df["mode"] == mode], ("mode",))
    configs = sorted(df["config"].unique(), key=Config.from_key)
    cands = (df.groupby("candidate")["speedup"].median().sort_values(ascending=False).index
             .tolist())
    val = df.pivot_table(index="config", columns="candidate", values="speedup").reindex(
        index=configs, columns=cands)
    mark = {Verdict.FASTER.value: "+", Verdict.EQUIVALENT.value: "=",
            Verdict.INCONCLUSIVE.value: "?", Verdict.UNDECIDED.value: "~",
            Verdict.SLOWER.value: "−"}
    ver = df.pivot(index="config", columns="candidate", values="verdict").reindex(
        index=configs, columns=cands)
    text = val.map(lambda v: "" if pd.isna(v) else f"{v:.2f}") + ver.map(
        lambda v: mark.get(v, "") if isinstance(v, str) else "")
    fig = _figure(PAGE_WIDTH_IN, 0.36 * len(configs) + 2.4)
    ax = fig.subplots()
    # The colours resolve differences near the margin: the scale ends at +/- HEATMAP_SPAN,
    # and cells beyond it (eager and math, several times slower) take the end colour; the
    # printed value in each cell is exact.
    bound = float(np.log2(1 + HEATMAP_SPAN))
    sns.heatmap(np.log2(val), ax=ax, cmap="RdBu", center=0.0, vmin=-bound, vmax=bound,
                annot=text.to_numpy(), fmt="", annot_kws={"fontsize": 7.5},
                cbar_kws={"label": f"speedup over default SDPA (×, log2 colour scale, "
                                   f"clipped at {1 / (1 + HEATMAP_SPAN):.2f}–"
                                   f"{1 + HEATMAP_SPAN:.2f})", "extend": "both",
                          "format": FuncFormatter(lambda v, _: f"{2 ** v:.2f}")})
    ax.set_yticks(np.arange(len(configs)) + 0.5, [_short(k) for k in configs], rotation=0)
    ax.set_xticks(np.arange(len(cands)) + 0.5, cands, rotation=35, ha="right")
    ax.set_xlabel("candidate")
    ax.set_ylabel("configuration")
    ax.set_title(_title(f"Speedup over default SDPA, {MODE_LABELS.get(mode, mode)}. After each "
                        f"value: + faster, = equivalent, ? inconclusive, ~ undecided at this "
                        f"precision, − slower\n{label}"))
    return fig


HEATMAP_SPAN = 0.25  # the heatmap's colours span speedups 1/1.25 to 1.25


@_styled
def roofline(points: pd.DataFrame, device_label: str, datasheet: tuple | None = None,
             measured: tuple | None = None, candidates=None) -> Figure:
    """Achieved TFLOP/s against arithmetic intensity on log-log axes, under two roofs.

    ``datasheet`` and ``measured`` are ``(peak_tflops, bandwidth_gbs)`` pairs: the
    datasheet's dense tensor-core peak and memory bandwidth (dashed), and the run's
    measured matrix-product and copy rates (solid). Either may be None when unknown.
    """
    df = _frame_iv("points", points, ("config", "candidate", "intensity", "tflops",
                                      "tflops_low", "tflops_high"))
    label = _label_iv(device_label)
    if candidates is not None:
        df = _frame_iv("points (for `candidates`)", df[df["candidate"].isin(candidates)],
                       ("candidate",))
    fig = _figure(PAGE_WIDTH_IN, 5.0)
    ax = fig.subplots()
    x_lo = max(df["intensity"].min() / 4, 1.0)
    x_hi = df["intensity"].max() * 8
    xs = np.geomspace(x_lo, x_hi, 200)
    for roof, style, name in ((datasheet, "--", "datasheet"), (measured, "-", "measured")):
        if roof is None or not all(np.isfinite(roof)):
            continue
        peak, bw = roof
        ax.plot(xs, np.minimum(peak, workload.roof_tflops(xs, bw)), color="black", ls=style,
                lw=1.2, label=f"{name} roof: {peak:.0f} TFLOP/s, {bw:.0f} GB/s")
    _by_candidate(ax, df, "intensity", "tflops", "tflops_low", "tflops_high", fmt="o", ms=4,
                  capsize=2, alpha=0.85)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_axis(ax.xaxis)
    _plain_log_axis(ax.yaxis, subs=(1.0, 2.0, 5.0))
    return _finish(fig, ax, "arithmetic intensity (FLOP/byte of minimum traffic, log scale)",
                   "achieved TFLOP/s (log scale)",
                   f"Roofline: attention forward against datasheet and measured ceilings\n{label}",
                   ncol=3, which="both", alpha=0.3)


@_styled
def cross_device(table: pd.DataFrame, reported: pd.DataFrame, title_note: str = "") -> Figure:
    """Each recorded device's median per configuration and mode beside the L4 values the
    reports give (hollow black markers spanning their minimum to maximum, "as reported").

    ``table`` is ``summaries.cross_device_table`` output (``device``, ``run``, ``config``,
    ``mode``, ``median_ms``); ``reported`` is ``summaries.reported_latency`` output.
    Configurations are categories: each series is a column of markers beside the others
    (never lines between configurations). The device names are in the legend, which is
    why there is no ``device_label`` here.
    """
    df = _frame_iv("table", table, ("run", "device", "config", "mode", "median_ms"))
    rep = reported if isinstance(reported, pd.DataFrame) else None
    if rep is None or not {"config", "value_ms"} <= set(rep.columns):
        raise ValueError("`reported` must be a DataFrame with columns ['config', 'value_ms'] "
                         "(summaries.reported_latency).")
    configs = sorted(set(df["config"]), key=Config.from_key)
    pos = {k: i for i, k in enumerate(configs)}
    rep = rep[rep["config"].isin(configs)]
    agg = (rep.groupby("config")["value_ms"].agg(["min", "max"]) if len(rep)
           else pd.DataFrame(columns=["min", "max"]))
    keys = sorted(df.groupby(["run", "mode"]).groups)
    runs = sorted(df["run"].unique())
    fig = _figure(PAGE_WIDTH_IN, 4.4 + 0.2 * math.ceil((len(runs) + 3) / 2))
    ax = fig.subplots()
    run_color = dict(zip(runs, sns.color_palette("tab10", len(runs))))
    markers = {"graph": "o", "cold_l2": "s", "per_call": "^"}
    width = 0.8
    for key in configs:  # dodge only among the series present at this configuration
        here = [k for k in keys if ((df["run"] == k[0]) & (df["mode"] == k[1])
                                    & (df["config"] == key)).any()]
        slots = len(here) + (key in agg.index)
        offsets = (np.arange(slots) + 0.5) / slots * width - width / 2
        for (run, mode), dx in zip(here, offsets):
            v = df[(df["run"] == run) & (df["mode"] == mode) & (df["config"] == key)]
            ax.plot([pos[key] + dx] * len(v), v["median_ms"], marker=markers.get(mode, "o"),
                    ms=4.5, ls="none", color=run_color[run],
                    mfc=run_color[run] if mode == "graph" else "white")
        if key in agg.index:
            x = pos[key] + offsets[-1]
            lo, hi = agg.loc[key, "min"], agg.loc[key, "max"]
            ax.vlines([x], [lo], [hi], color="black", lw=2)
            ax.scatter([x, x], [lo, hi], facecolors="none", edgecolors="black", s=30, zorder=3)
    devices = df.drop_duplicates("run").set_index("run")["device"]
    handles = [Line2D([], [], color=run_color[r], marker="o", ls="none") for r in runs]
    hw = {r: str(devices[r]).removeprefix("NVIDIA ").split(",")[0] for r in runs}
    software = sorted({str(d).split(",", 1)[1].strip() for d in devices if "," in str(d)})
    labels = [f"{r} ({hw[r]})" for r in runs]
    for mode in [m for m in MODE_LABELS if m in set(df["mode"])]:
        handles.append(Line2D([], [], color="0.3", marker=markers.get(mode, "o"), ls="none",
                              mfc="0.3" if mode == "graph" else "white"))
        labels.append(f"{mode} ({'filled' if mode == 'graph' else 'hollow'})")
    if len(agg):
        handles.append(Line2D([], [], color="black", marker="o", mfc="none", lw=2))
        labels.append("NVIDIA L4, as reported (min to max)")
    for b in range(len(configs) - 1):
        ax.axvline(b + 0.5, color="0.85", lw=0.6)
    ax.set_xlim(-0.5, len(configs) - 0.5)
    ax.set_xticks(range(len(configs)), [_short(k) for k in configs], rotation=40, ha="right")
    ax.set_yscale("log")
    _plain_log_axis(ax.yaxis, subs=(1.0, 2.0, 5.0))
    ax.set_xlabel("configuration (fp16; head dimension 64 unless the label says D128)")
    ax.set_ylabel("median latency per call (ms, log scale)")
    ax.grid(axis="y", which="both", alpha=0.3)
    _legend_below(fig, handles=handles, labels=labels, ncol=2)
    ax.set_title(_title("Default SDPA on every recorded device beside the reports' L4 figures"
                        + (f"; {', '.join(software)}" if software else "")
                        + (f"\n{title_note}" if title_note else "")))
    return fig


@_styled
def trial_spread(trials: pd.DataFrame, device_label: str, config: str | None = None,
                 mode: str = "graph") -> Figure:
    """Each trial's (process's) median relative to the candidate's pooled median: the
    between-process spread that decides how narrow a speedup interval can be. One dot per
    process; a box spans the middle half of each candidate's processes."""
    df = _frame_iv("trials", trials, ("config", "candidate", "mode", "trial", "median_ms"))
    label = _label_iv(device_label)
    df = df[df["mode"] == mode]
    if config is not None:
        df = df[df["config"] == config]
    df = _frame_iv("trials (at `config` and `mode`)", df, ("config",))
    if df["config"].nunique() != 1:
        raise ValueError("`config` must be given when `trials` holds several configurations.")
    rel = df.assign(rel=df["median_ms"] / df.groupby("candidate")["median_ms"]
                    .transform("median") - 1.0)
    order = sorted(rel["candidate"].unique())
    fig = _figure(PAGE_WIDTH_IN, 0.32 * len(order) + 1.7)
    ax = fig.subplots()
    sns.boxplot(data=rel, x="rel", y="candidate", order=order, ax=ax, whis=0, fliersize=0,
                color="#dddddd", width=0.6, showcaps=False)
    sns.stripplot(data=rel, x="rel", y="candidate", order=order, ax=ax, size=3.5,
                  jitter=0.15, color="#1f77b4", alpha=0.8)
    ax.axvline(0.0, color="black", lw=0.8)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:+.1%}"))
    return _finish(fig, ax,
                   "process (trial) median relative to the median of the trial medians (%)",
                   "candidate", f"Spread between independent processes at "
                   f"{_short(df['config'].iloc[0])}, {mode} ({df['trial'].nunique()} processes)"
                   f"\n{label}", axis="x", alpha=0.3)


@_styled
def kernel_vs_library(table: pd.DataFrame, device_label: str) -> Figure:
    """Speedup of one kernel over the fastest library backend per configuration, with its
    CI, on a linear axis that includes one; points coloured by verdict and each shape
    labelled with that backend."""
    df = _frame_iv("table", table, ("config", "kernel", "library", "speedup", "ci_low",
                                    "ci_high", "verdict"))
    label = _label_iv(device_label)
    configs = sorted(df["config"], key=Config.from_key)
    d = df.set_index("config").reindex(configs)
    fig = _figure(PAGE_WIDTH_IN, 0.3 * len(configs) + 1.9)
    ax = fig.subplots()
    y = np.arange(len(configs))
    lo = min(float(d["ci_low"].min()), 1.0)
    hi = max(float(d["ci_high"].max()), 1.0)
    pad = 0.06 * (hi - lo) or 0.05
    ax.axvline(1.0, color="black", lw=0.8, ls="--")
    _speedup_points(ax, d, y, (lo - pad, hi + pad))
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_yticks(y, [f"{_short(k)}  (vs {lib})" for k, lib in zip(configs, d["library"])])
    ax.set_ylim(-0.6, len(configs) - 0.4)
    ax.invert_yaxis()
    return _finish(fig, ax, f"speedup of {df['kernel'].iloc[0]} over the fastest library "
                   f"backend (×); above 1: ours faster", None,
                   f"Our kernel against the fastest SDPA backend per configuration (95% CI)"
                   f"\n{label}", ncol=4, axis="x", alpha=0.3)


@_styled
def replay_curves(anatomy: pd.DataFrame, device_label: str) -> Figure:
    """Time per call against the calls captured per graph replay (``replay_cost``), one
    panel per configuration: a fixed cost per replay shows as a fall that levels off."""
    df = _frame_iv("anatomy", anatomy, ("config", "candidate", "k", "per_call_ms"))
    label = _label_iv(device_label)
    configs = sorted(df["config"].unique(), key=Config.from_key)
    names = sorted(df["candidate"].unique())
    fig = _figure(PAGE_WIDTH_IN, 3.9)
    axes = np.atleast_1d(fig.subplots(1, len(configs)))
    for ax, key in zip(axes, configs):
        sub = df[df["config"] == key].assign(us=lambda d: d["per_call_ms"] * 1e3)
        sns.lineplot(data=sub, x="k", y="us", hue="candidate", style="candidate", markers=True,
                     dashes=False, ax=ax, hue_order=names, style_order=names)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("calls per graph replay, k (log scale)")
        ax.set_ylabel("event time per call (µs)")
        ax.set_title(_short(key))
        ax.grid(alpha=0.3, which="both")
    _legend_below(fig, axes, ncol=4)
    fig.suptitle(_title(f"Graph replay: time per call against calls per replay\n{label}"))
    return fig


# --------------------------------------------------------------------------- audit figures

@_styled
def calibration_rates(head: pd.DataFrame, aa, spins, rows, alpha: float,
                      device_label: str, config: str, n_processes: int) -> Figure:
    """False-positive rate on the A/A controls (left) and power on the positive controls
    (right) of each protocol, with their intervals.

    ``head`` is ``calibration.headline_rates`` output; ``rows`` lists ``(protocol, k,
    legend text)`` per protocol drawn. Each panel has its own candidate axis.
    """
    df = _frame_iv("head", head, ("protocol", "k", "candidate", "rate", "ci_low", "ci_high"))
    label = _label_iv(device_label)
    aa, spins = list(aa), list(spins)
    fig = _figure(PAGE_WIDTH_IN, 0.32 * max(len(spins), 2) * len(rows) / 2 + 2.4)
    axes = fig.subplots(1, 2, width_ratios=[1, 1.25])
    colors = sns.color_palette("tab10", len(rows))
    for ax, cands, role in ((axes[0], aa, "A/A"), (axes[1], spins, "positive")):
        for j, (proto, k, name) in enumerate(rows):
            sub = df[(df["protocol"] == proto) & (df["k"] == k) & df["candidate"].isin(cands)]
            sub = sub.set_index("candidate").reindex(cands).dropna(subset=["rate"])
            y = np.array([cands.index(c) for c in sub.index]) + (j - (len(rows) - 1) / 2) * 0.18
            ax.errorbar(sub["rate"], y, xerr=_err(sub["rate"], sub["ci_low"], sub["ci_high"]),
                        fmt="o", ms=4, capsize=2.5, color=colors[j], label=name)
        ax.set_yticks(np.arange(len(cands)), cands)
        ax.set_ylim(-0.6, len(cands) - 0.4)
        ax.invert_yaxis()
        ax.set_xlim(-0.02, 1.02)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
        ax.grid(axis="x", alpha=0.3)
        if role == "A/A":
            ax.axvline(alpha, color="k", ls="--", lw=1, label=f"nominal α = {alpha:g}")
            ax.set_xlabel("false-positive rate (% of replications)")
            ax.set_title("A/A control: identical code")
        else:
            ax.set_xlabel("power: slowdown detected (% of replications)")
            ax.set_title("positive controls: known slowdowns")
    _legend_below(fig, axes, ncol=3)
    fig.suptitle(_title(f"Protocol calibration at {_short(config)}, {n_processes} processes"
                        f"\n{label}"))
    return fig


@_styled
def control_effects(effects: pd.DataFrame, effects_per_call: pd.DataFrame | None, controls,
                    margin: float, device_label: str, config: str) -> Figure:
    """Measured slowdown of each control (with its interval) against the slowdown the
    profiler's extra kernel time predicts; the diagonal is agreement, the band the
    equivalence margin."""
    cols = ("candidate", "slowdown", "slowdown_low", "slowdown_high", "slowdown_pct",
            "extra_share")
    eff = _frame_iv("effects", effects, cols)
    label = _label_iv(device_label)
    controls = list(controls)
    fig = _figure(PAGE_WIDTH_IN, 4.6)
    ax = fig.subplots()
    frames = [(eff, "graph replay", "o")]
    if effects_per_call is not None and len(effects_per_call):
        frames.append((_frame_iv("effects_per_call", effects_per_call, cols), "per call", "s"))
    for df, name, mk in frames:
        sub = df.set_index("candidate").reindex(controls)
        x = sub["extra_share"].to_numpy(dtype=float) * 100
        ax.errorbar(x + (0.05 if mk == "s" else 0), sub["slowdown_pct"] * 100,
                    yerr=_err(sub["slowdown"] * 100, sub["slowdown_low"] * 100,
                              sub["slowdown_high"] * 100),
                    fmt=mk, ms=5, capsize=3, label=f"measured, {name} (95 % CI over processes)")
    lim = max(eff["extra_share"].max(), eff["slowdown_pct"].max()) * 100 * 1.15
    ax.plot([0, lim], [0, lim], "k:", lw=1, label="slowdown = profiler's extra kernel time")
    ax.axhspan(-margin * 100, margin * 100, color="0.9", label=f"±{margin:.0%} margin")
    base = eff.set_index("candidate").reindex(controls)
    for c, xv, yv in zip(controls, base["extra_share"] * 100, base["slowdown_pct"] * 100):
        ax.annotate(c, (xv, yv), textcoords="offset points", xytext=(6, -10), fontsize=7.5)
    return _finish(fig, ax, "profiler: extra kernel time per call / sdpa kernel time (%)",
                   "slowdown of the median against sdpa (%)",
                   f"True size of the controls at {_short(config)}\n{label}", ncol=2, alpha=0.3)


@_styled
def warmup_traces(traces, warmup_calls: int, device_label: str, config: str) -> Figure:
    """Every per-call sample of a few fresh processes, in call order (log-log), with the end
    of a warm-up of ``warmup_calls`` calls marked."""
    label = _label_iv(device_label)
    if not len(traces):
        raise ValueError("`traces` must hold at least one process's samples; got none.")
    fig = _figure(PAGE_WIDTH_IN, 4.0)
    ax = fig.subplots()
    for i, w in enumerate(traces):
        w = np.asarray(w, dtype=float)
        ax.plot(np.arange(1, w.size + 1), w * 1e3, lw=0.6, alpha=0.85,
                label=f"process {i + 1}")
    ax.axvline(warmup_calls, color="k", ls="--", lw=1, label="end of the reports' warm-up")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_axis(ax.xaxis)
    _plain_log_axis(ax.yaxis, subs=(1.0, 2.0, 3.0, 5.0))
    return _finish(fig, ax, "call index in the process (log scale)",
                   "per-call time (µs, log scale)",
                   f"Per-call SDPA at {_short(config)}, no warm-up\n{label}", ncol=4,
                   alpha=0.3, which="both")


@_styled
def speedup_summary(tables: dict, margin: float, title: str) -> Figure:
    """The paper's summary: each candidate's speedup over the default dispatch at the call
    and at the kernel level, one marker per machine, on a linear axis around one with the
    margin band.

    ``tables`` maps a machine label to a :func:`comparisons.speedup_table` (one
    configuration). Points beyond the window are drawn at its edge with their value.
    """
    if not isinstance(tables, dict) or not tables:
        raise ValueError("`tables` must map machine labels to speedup tables; got none.")
    for name, t in tables.items():
        _frame_iv(f"tables[{name!r}]", t, ("candidate", "level", "speedup", "ci_low",
                                            "ci_high", "verdict"))
    both = pd.concat(tables.values(), ignore_index=True)
    cands = (both[both["level"] == "call"].groupby("candidate")["speedup"].mean()
             .sort_values().index.tolist())
    xlim = near_one_window(both["ci_low"], both["ci_high"], margin, cap=0.1)
    fig = _figure(PAGE_WIDTH_IN, 0.55 + 0.32 * len(cands))
    axes = fig.subplots(1, 2, sharey=True)
    markers = ["o", "s", "^", "D"]
    offsets = np.linspace(-0.15, 0.15, len(tables)) if len(tables) > 1 else [0.0]
    for ax, level in zip(axes, ("call", "kernel")):
        ax.axvspan(1 - margin, 1 + margin, color="#dddddd", zorder=0,
                   label=f"±{margin:.0%} margin")
        ax.axvline(1.0, color="black", lw=0.8)
        for i, ((name, t), off, mk) in enumerate(zip(tables.items(), offsets, markers)):
            d = t[t["level"] == level].set_index("candidate").reindex(cands).dropna(
                subset=["speedup"])
            y = np.array([cands.index(c) for c in d.index]) + off
            for verdict, color in VERDICT_COLORS.items():
                sel = (d["verdict"] == verdict).to_numpy()
                if not sel.any():
                    continue
                sp, lo, hi = (d[c].to_numpy(dtype=float)[sel] for c in ("speedup", "ci_low",
                                                                        "ci_high"))
                inside = (sp >= xlim[0]) & (sp <= xlim[1])
                ax.errorbar(sp[inside], y[sel][inside], xerr=_err(sp[inside], lo[inside],
                                                                  hi[inside]),
                            fmt=mk, color=color, ms=4.5, capsize=2, ls="none")
                for v, yv in zip(sp[~inside], y[sel][~inside]):
                    left = v < xlim[0]
                    edge = xlim[0] if left else xlim[1]
                    ax.plot([edge], [yv], marker="<" if left else ">", color=color, ms=6,
                            clip_on=False, ls="none")
                    if i == 0:  # one label per candidate: the first machine's value
                        ax.annotate(f"{v:.2f}×", (edge, yv - off), xytext=(8 if left else -8, 0),
                                    textcoords="offset points", ha="left" if left else "right",
                                    va="center", fontsize=7.5, color=color)
        ax.set_xlim(*xlim)
        ax.set_title(f"{level} level" + (" (profiler kernel time)" if level == "kernel"
                                         else " (graph replay per call)"))
        ax.set_xlabel("speedup over default SDPA (×)")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(cands)), cands)
    handles = [Line2D([], [], marker=mk, color="black", ls="none", label=name)
               for name, mk in zip(tables, markers)]
    handles += [Line2D([], [], marker="o", color=c, ls="none", label=v)
                for v, c in VERDICT_COLORS.items() if (both["verdict"] == v).any()]
    handles.append(matplotlib.patches.Patch(color="#dddddd", label=f"±{margin:.0%} margin"))
    _legend_below(fig, handles=handles, labels=[h.get_label() for h in handles], ncol=4)
    fig.suptitle(_title(title + "\nright of 1 is faster; values off the window are printed "
                        "at its edge", 100))
    return fig


# --------------------------------------------------------------------------- variance

COMPONENT_COLORS = {"machine": "#7570b3", "process": "#d95f02", "placement": "#1b9e77",
                    "replay": "#999999"}
COMPONENT_LABELS = {"machine": "machine (between GPUs)", "process": "process (within GPU)",
                    "placement": "placement (within process)",
                    "replay": "replay (within placement)"}


@_styled
def variance_components(components: pd.DataFrame, device_label: str, runs: str = "",
                        mode: str = "graph") -> Figure:
    """Standard deviation of each nested effect (``variance.decompose``), as grouped
    horizontal bars per candidate and configuration, call level (in ``mode``) beside kernel
    level. SDs are of the log time, shown in % (relative SD); a component that is not
    estimable (e.g. one machine) has no bar; the kernel level has no replay term."""
    df = _frame_iv("components", components, ("config", "candidate", "mode", "level",
                                              "sd_machine", "sd_process", "sd_placement",
                                              "sd_replay"))
    label = _label_iv(device_label)
    call = df[(df["level"] == "call") & (df["mode"] == mode)]
    kernel = df[df["level"] == "kernel"]
    if call.empty and kernel.empty:
        raise ValueError(f"`components` must hold call-level rows in `mode` {mode!r} or "
                         f"kernel-level rows; modes at call level: "
                         f"{sorted(set(df.loc[df['level'] == 'call', 'mode']))}.")
    keys = sorted({(c, k) for c, k in zip(pd.concat([call, kernel])["config"],
                                           pd.concat([call, kernel])["candidate"])},
                  key=lambda ck: (Config.from_key(ck[0]), ck[1]))
    panels = [(f"call level, {MODE_TITLES.get(mode, mode)}", call)] if len(call) else []
    panels += [("kernel level, profiler time", kernel)] if len(kernel) else []
    fig = _figure(PAGE_WIDTH_IN, 0.36 * len(keys) + 2.0)
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    y = np.arange(len(keys))
    factors = list(COMPONENT_COLORS)
    height = 0.8 / len(factors)
    frames = [d.set_index(["config", "candidate"]).reindex(keys) for _, d in panels]
    values = np.concatenate([f[[f"sd_{c}" for c in factors]].to_numpy(dtype=float).ravel()
                             for f in frames]) * 100
    values = values[np.isfinite(values) & (values > 0)]
    # one far-off component must not flatten the rest: beyond 2.5x the 90th percentile a
    # bar is cut at the axis edge and labelled with its value
    limit = (min(float(values.max()), 2.5 * float(np.percentile(values, 90))) * 1.08
             if values.size else 1.0)
    for ax, (title, _), d in zip(axes, panels, frames):
        for i, f in enumerate(factors):
            v = np.nan_to_num(d[f"sd_{f}"].to_numpy(dtype=float) * 100)
            yy = y + (i - (len(factors) - 1) / 2) * height
            ax.barh(yy, np.minimum(v, limit), height, color=COMPONENT_COLORS[f],
                    label=COMPONENT_LABELS[f])
            for val, yv in zip(v, yy):
                if val > limit:
                    ax.annotate(f"{val:.1f} % (cut) ▸", (limit, yv), xytext=(-3, 0),
                                textcoords="offset points", ha="right", va="center",
                                fontsize=7.5, color="black",
                                bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none",
                                          alpha=0.85))
        ax.set_xlim(0, limit)
        ax.set_title(title)
        ax.set_xlabel("standard deviation of the log time (%)")
        ax.grid(axis="x", alpha=0.3)
    for b in range(len(keys) - 1):
        if keys[b][0] != keys[b + 1][0]:
            for ax in axes:
                ax.axhline(b + 0.5, color="0.6", lw=0.8)
    axes[0].set_yticks(y, [f"{cand}, {_short(cfg)}" for cfg, cand in keys])
    axes[0].set_ylim(len(keys) - 0.5, -0.5)
    axes[0].set_ylabel("candidate, configuration")
    _legend_below(fig, axes, ncol=2)
    fig.suptitle(_title("Where the variance comes from: nested components of the log time"
                        + (f"\nruns {runs}" if runs else "") + f"\n{label}"))
    return fig


@_styled
def speedup_by_seq_len(table: pd.DataFrame, margin: float, level: str = "call",
                       title: str = "") -> Figure:
    """Speedup over SDPA's default dispatch against sequence length, one line per
    candidate (its catalog label), one row of panels per machine and one panel per head
    dimension and masking, with family-wise intervals and the margin band.

    ``table`` is one or more :func:`state_of_the_art.comparison_table` outputs stacked
    (columns ``machine``, ``label``, ``level``, ``seq_len``, ``head_dim``, ``causal``,
    ``speedup``, ``ci_low``, ``ci_high``, ``n_processes``); its rows follow the order in
    which the table first lists each machine. A machine measured with one process gets
    hollow markers and says so in its row title.
    """
    df = _frame_iv("table", table, ("machine", "label", "level", "seq_len", "head_dim",
                                    "causal", "speedup", "ci_low", "ci_high", "n_processes"))
    _validate.number_in("margin", margin)
    df = _frame_iv(f"table (level {level!r})", df[df["level"] == level], ("level",))
    machines = list(dict.fromkeys(df["machine"]))  # in the order the table lists them
    panels = sorted({(int(d), bool(c)) for d, c in zip(df["head_dim"], df["causal"])})
    labels = sorted(df["label"].unique())
    palette = dict(zip(labels, sns.color_palette("tab10", len(labels))))
    fig = _figure(PAGE_WIDTH_IN, 0.6 + 2.0 * len(machines))
    axes = np.atleast_2d(fig.subplots(len(machines), len(panels), sharex=True, sharey=True,
                                      squeeze=False))
    # The axis follows the point estimates: an interval too wide to decide anything (one
    # degree of freedom at two processes) is cut at the edge instead of flattening the rest.
    span = max(float((df["speedup"] - 1).abs().max()), 2 * margin) * 1.25
    for row, machine in zip(axes, machines):
        m = df[df["machine"] == machine]
        single = int(m["n_processes"].min()) < 2
        for ax, (head_dim, causal) in zip(row, panels):
            ax.axhspan(1 - margin, 1 + margin, color="#dddddd", zorder=0)
            ax.axhline(1.0, color="black", lw=0.8)
            p = m[(m["head_dim"] == head_dim) & (m["causal"] == causal)]
            for label in labels:
                d = p[p["label"] == label].sort_values("seq_len")
                if d.empty:
                    continue
                ax.errorbar(d["seq_len"], d["speedup"],
                            yerr=_err(d["speedup"], d["ci_low"], d["ci_high"]),
                            color=palette[label], marker="o", ms=4, capsize=2, lw=1.2,
                            mfc="white" if single else palette[label], label=label)
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(df["seq_len"].unique()))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_ylim(1 - span, 1 + span)
            ax.grid(alpha=0.3)
        row[0].set_ylabel(f"{machine}" + ("\n(1 process)" if single else ""))
    for ax, (head_dim, causal) in zip(axes[0], panels):
        ax.set_title(f"D={head_dim}, {'causal' if causal else 'not causal'}", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("sequence length S")
    fig.supylabel(f"speedup over SDPA's default dispatch (×, {level} level)", fontsize=8.5)
    handles = [Line2D([], [], color=palette[lb], marker="o", label=lb) for lb in labels]
    handles.append(matplotlib.patches.Patch(color="#dddddd", label=f"±{margin:.0%} margin"))
    _legend_below(fig, handles=handles, labels=[h.get_label() for h in handles], ncol=3)
    fig.suptitle(_title((title + "\n" if title else "") + "above 1 is faster than SDPA's "
                        "default dispatch; bars are family-wise intervals, cut at the axes", 100))
    return fig

