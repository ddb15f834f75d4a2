"""Latency and rate figures: latency along a sweep axis, the roofline, and the devices
side by side with the reports' values (as reported). DataFrame in, Figure out, in
:mod:`.figure_style`'s style.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullFormatter

from ..analyse import workload
from ..configs import Config
from .figure_style import (AXIS_LABELS, _by_candidate, _figure, _finish, _frame_iv,
                           _label_iv, _legend_below, MODE_LABELS, MODE_TITLES,
                           PAGE_WIDTH_IN, _plain_log_axis, _short, _styled, _title)

__all__ = ["latency_sweep", "roofline", "cross_device"]


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
    # The axis ends just past the data or the roofs' ridge (peak / bandwidth), whichever
    # lies further right: no empty decade beyond the last point.
    ridges = [r[0] * 1e3 / r[1] for r in (datasheet, measured)
              if r is not None and all(np.isfinite(r)) and r[1] > 0]
    x_lo = max(df["intensity"].min() / 2, 1.0)
    x_hi = max([df["intensity"].max(), *ridges]) * 1.5
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
    ax.set_xlim(x_lo, x_hi)
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
