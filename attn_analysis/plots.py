"""Figures of the paper: DataFrame in, matplotlib Figure out.

Every function takes a table from :mod:`attn_analysis.summaries` and a ``device_label``
(device and software, e.g. ``summaries.run_label(run)``) that goes into the title, so no
figure leaves the notebook without saying where it was measured. Axes carry units; sizes
that span decades get log scales; intervals are drawn as error bars or bands. Figures are
built as :class:`matplotlib.figure.Figure` objects, never through pyplot's global state,
so a notebook shows one only where it glues or displays it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .configs import Config

VERDICT_COLORS = {"faster": "#1b9e77", "equivalent": "#7570b3", "inconclusive": "#999999",
                  "slower": "#d95f02"}
AXIS_LABELS = {"seq_len": "sequence length S (tokens)", "batch": "batch size B",
               "heads": "heads H"}
MODE_LABELS = {"graph": "graph (device time, hot L2)", "cold_l2": "cold_l2 (L2 flushed)",
               "per_call": "per_call (synchronise after each call)"}


# --------------------------------------------------------------------------- validation

def _frame_iv(name: str, df, columns) -> pd.DataFrame:
    """Check that ``df`` is a non-empty DataFrame holding ``columns``."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"`{name}` must be a pandas DataFrame; got {type(df).__name__}.")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"`{name}` must have columns {list(columns)}; missing {missing}.")
    if df.empty:
        raise ValueError(f"`{name}` must hold at least one row; got none.")
    return df


def _label_iv(device_label) -> str:
    """The device label must be a non-empty string: it is what the title says."""
    if not isinstance(device_label, str) or not device_label.strip():
        raise ValueError(f"`device_label` must be a non-empty string naming the device and "
                         f"software; got {device_label!r}.")
    return device_label.strip()


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained", dpi=110)


def _short(key: str) -> str:
    """A compact axis label for a configuration key: 'B32 H8 S512'."""
    c = Config.from_key(key)
    text = f"B{c.batch} H{c.heads} S{c.seq_len}"
    return text + (f" D{c.head_dim}" if c.head_dim != 64 else "") + (" causal" if c.causal
                                                                     else "")


def _plain_log_axis(axis) -> None:
    """Label a log axis with plain numbers (0.1, 1, 10) rather than powers of ten."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _err(center, low, high) -> np.ndarray:
    """Error-bar lengths from an interval, zero where the interval is missing."""
    c, lo, hi = (np.asarray(x, dtype=float) for x in (center, low, high))
    return np.nan_to_num(np.vstack([c - lo, hi - c]).clip(min=0), nan=0.0)


# --------------------------------------------------------------------------- figures

def speedup_forest(speedups: pd.DataFrame, device_label: str, config: str | None = None,
                   margin: float | None = None) -> Figure:
    """Speedup over the baseline per candidate, with its CI, one panel per timing mode.

    The x axis is logarithmic (speedups from a few percent to above 1 share it), the
    dashed line marks no difference and the shaded band the equivalence margin; points are
    coloured by :func:`stats.compare`'s verdict.
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
    fig = _figure(4.2 * len(modes) + 1.0, 0.42 * len(order) + 1.6)
    axes = fig.subplots(1, len(modes), sharey=True, squeeze=False)[0]
    lo = min(df["ci_low"].min(), 1 - margin) * 0.9
    hi = max(df["ci_high"].max(), 1 + margin) * 1.1
    for ax, mode in zip(axes, modes):
        d = df[df["mode"] == mode].set_index("candidate").reindex(order).dropna(
            subset=["speedup"])
        y = [order.index(c) for c in d.index]
        ax.axvspan(1 - margin, 1 + margin, color="#7570b3", alpha=0.15, lw=0,
                   label=f"equivalence margin ±{margin:g}")
        ax.axvline(1.0, color="black", lw=0.8, ls="--")
        for verdict, color in VERDICT_COLORS.items():
            sel = (d["verdict"] == verdict).to_numpy()
            if sel.any():
                ax.errorbar(d["speedup"][sel], np.array(y)[sel],
                            xerr=_err(d["speedup"][sel], d["ci_low"][sel], d["ci_high"][sel]),
                            fmt="o", color=color, capsize=3, label=verdict)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        _plain_log_axis(ax.xaxis)
        ax.set_title(MODE_LABELS[mode], fontsize=9)
        ax.set_xlabel("speedup over default SDPA (×, log scale)")
        ax.grid(axis="x", which="both", alpha=0.3)
    axes[0].set_yticks(range(len(order)), order)
    axes[0].set_ylabel("candidate")
    handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
    fig.legend(handles.values(), handles.keys(), loc="outside lower center",
               ncol=min(5, len(handles)), fontsize=8, frameon=False)
    fig.suptitle(f"Speedup over the default SDPA dispatch at {_short(config)} "
                 f"({df['confidence'].iloc[0]:.0%} CI)\n{label}"
                 if "confidence" in df else f"Speedup at {_short(config)}\n{label}",
                 fontsize=10)
    return fig


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
    fig = _figure(6.4, 4.4)
    ax = fig.subplots()
    names = sorted(df["candidate"].unique())
    palette = dict(zip(names, sns.color_palette("tab10", len(names))))
    for name in names:
        d = df[df["candidate"] == name].sort_values(axis)
        ax.errorbar(d[axis], d["median_ms"], yerr=_err(d["median_ms"], d["ci_low_ms"],
                                                       d["ci_high_ms"]),
                    marker="o", ms=4, capsize=2, lw=1.2, color=palette[name], label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_log_axis(ax.xaxis)
    ax.set_xticks(sorted(df[axis].unique()))
    ax.set_xlabel(AXIS_LABELS[axis] + ", log scale")
    ax.set_ylabel("median latency per call (ms, log scale)")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    ax.set_title(f"Latency against {AXIS_LABELS[axis]} ({MODE_LABELS.get(mode, mode)})\n"
                 f"{label}", fontsize=10)
    return fig


def speedup_heatmap(speedups: pd.DataFrame, device_label: str, mode: str = "graph") -> Figure:
    """Speedup of each candidate (columns) at each configuration (rows), coloured on a log
    scale centred at 1 and annotated with the value and its verdict (+ faster, = equivalent,
    ? inconclusive, - slower)."""
    df = _frame_iv("speedups", speedups, ("config", "mode", "candidate", "speedup",
                                          "verdict"))
    label = _label_iv(device_label)
    df = _frame_iv("speedups (in `mode`)", df[df["mode"] == mode], ("mode",))
    configs = sorted(df["config"].unique(), key=Config.from_key)
    cands = (df.groupby("candidate")["speedup"].median().sort_values(ascending=False).index
             .tolist())
    val = df.pivot_table(index="config", columns="candidate", values="speedup").reindex(
        index=configs, columns=cands)
    mark = {"faster": "+", "equivalent": "=", "inconclusive": "?", "slower": "−"}
    ver = df.pivot(index="config", columns="candidate", values="verdict").reindex(
        index=configs, columns=cands)
    text = val.map(lambda v: "" if pd.isna(v) else f"{v:.2f}") + ver.map(
        lambda v: mark.get(v, "") if isinstance(v, str) else "")
    fig = _figure(1.0 * len(cands) + 2.6, 0.42 * len(configs) + 1.8)
    ax = fig.subplots()
    bound = float(np.nanmax(np.abs(np.log2(val.to_numpy(dtype=float))))) or 1.0
    sns.heatmap(np.log2(val), ax=ax, cmap="RdBu", center=0.0, vmin=-bound, vmax=bound,
                annot=text.to_numpy(), fmt="", annot_kws={"fontsize": 7},
                cbar_kws={"label": "log2 speedup over default SDPA (0: same)"})
    ax.set_yticklabels([_short(k) for k in configs], rotation=0)
    ax.set_xlabel("candidate")
    ax.set_ylabel("configuration")
    ax.set_title(f"Speedup over default SDPA, {MODE_LABELS.get(mode, mode)}; "
                 f"+ faster, = equivalent, ? inconclusive, − slower\n{label}", fontsize=9)
    return fig


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
    fig = _figure(6.8, 4.8)
    ax = fig.subplots()
    x_lo = max(df["intensity"].min() / 4, 1.0)
    x_hi = df["intensity"].max() * 8
    xs = np.geomspace(x_lo, x_hi, 200)
    for roof, style, name in ((datasheet, "--", "datasheet"), (measured, "-", "measured")):
        if roof is None or not all(np.isfinite(roof)):
            continue
        peak, bw = roof
        ax.plot(xs, np.minimum(peak, xs * bw * 1e9 / 1e12), color="black", ls=style, lw=1.2,
                label=f"{name} roof: {peak:.0f} TFLOP/s, {bw:.0f} GB/s")
    names = sorted(df["candidate"].unique())
    palette = dict(zip(names, sns.color_palette("tab10", len(names))))
    for name in names:
        d = df[df["candidate"] == name]
        ax.errorbar(d["intensity"], d["tflops"],
                    yerr=_err(d["tflops"], d["tflops_low"], d["tflops_high"]), fmt="o", ms=4,
                    capsize=2, color=palette[name], label=name, alpha=0.85)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_axis(ax.xaxis)
    _plain_log_axis(ax.yaxis)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.set_xlabel("arithmetic intensity (FLOP/byte of minimum traffic, log scale)")
    ax.set_ylabel("achieved TFLOP/s (log scale)")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    ax.set_title(f"Roofline: attention forward against datasheet and measured ceilings\n"
                 f"{label}", fontsize=10)
    return fig


def cross_device(table: pd.DataFrame, reported: pd.DataFrame, title_note: str = "") -> Figure:
    """Each recorded device's median per configuration and mode beside the L4 values the
    reports give (hollow black markers spanning their minimum to maximum, "as reported").

    ``table`` is ``summaries.cross_device_table`` output (``device``, ``run``, ``config``,
    ``mode``, ``median_ms``); ``reported`` is ``summaries.reported_latency`` output.
    The device names are in the legend, which is why there is no ``device_label`` here.
    """
    df = _frame_iv("table", table, ("run", "device", "config", "mode", "median_ms"))
    rep = reported if isinstance(reported, pd.DataFrame) else None
    if rep is None or not {"config", "value_ms"} <= set(rep.columns):
        raise ValueError("`reported` must be a DataFrame with columns ['config', 'value_ms'] "
                         "(summaries.reported_latency).")
    configs = sorted(set(df["config"]), key=Config.from_key)
    pos = {k: i for i, k in enumerate(configs)}
    fig = _figure(max(6.4, 0.75 * len(configs) + 2.5), 4.6)
    ax = fig.subplots()
    series = df.groupby(["run", "device", "mode"], sort=True)
    palette = sns.color_palette("tab10", series.ngroups)
    markers = {"graph": "o", "cold_l2": "s", "per_call": "^"}
    for i, ((run, device, mode), g) in enumerate(series):
        g = g.assign(x=g["config"].map(pos)).sort_values("x")
        ax.plot(g["x"], g["median_ms"], marker=markers.get(mode, "o"), ms=5, lw=1,
                color=palette[i], label=f"{device} [{run}], {mode}")
    rep = rep[rep["config"].isin(configs)]
    if len(rep):
        agg = rep.groupby("config")["value_ms"].agg(["min", "max"]).reindex(configs).dropna()
        x = agg.index.map(pos).to_numpy(dtype=float)
        ax.vlines(x, agg["min"], agg["max"], color="black", lw=2)
        ax.scatter(x, agg["min"], facecolors="none", edgecolors="black", s=45, zorder=3)
        ax.scatter(x, agg["max"], facecolors="none", edgecolors="black", s=45, zorder=3)
    handles, labels = ax.get_legend_handles_labels()
    if len(rep):
        handles.append(Line2D([], [], color="black", marker="o", mfc="none", lw=2))
        labels.append("NVIDIA L4, as reported (min to max of the reports' values)")
    ax.set_xticks(range(len(configs)), [_short(k) for k in configs], rotation=35, ha="right")
    ax.set_yscale("log")
    _plain_log_axis(ax.yaxis)
    ax.set_xlabel("configuration (D=64, fp16)")
    ax.set_ylabel("median latency of default SDPA (ms, log scale)")
    ax.grid(which="both", alpha=0.3)
    ax.legend(handles, labels, fontsize=7, loc="upper left")
    ax.set_title("Default SDPA on every recorded device beside the reports' L4 figures"
                 + (f"\n{title_note}" if title_note else ""), fontsize=10)
    return fig


def trial_spread(trials: pd.DataFrame, device_label: str, config: str | None = None,
                 mode: str = "graph") -> Figure:
    """Each trial's (process's) median relative to the candidate's pooled median: the
    between-process spread that decides how narrow a speedup interval can be."""
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
    fig = _figure(6.4, 0.38 * len(order) + 1.6)
    ax = fig.subplots()
    sns.stripplot(data=rel, x="rel", y="candidate", order=order, hue="trial", ax=ax, size=6,
                  jitter=False, palette="viridis")
    ax.axvline(0.0, color="black", lw=0.8)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:+.0%}"))
    ax.set_xlabel("trial median relative to the median of the trial medians (%)")
    ax.set_ylabel("candidate")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(title="trial", fontsize=7, title_fontsize=8, loc="lower right")
    ax.set_title(f"Spread between independent processes at {_short(df['config'].iloc[0])}, "
                 f"{mode}\n{label}", fontsize=10)
    return fig


def mode_overhead(modes: pd.DataFrame, device_label: str) -> Figure:
    """Each timing mode's median over the profiler's kernel time, per configuration: near
    1 a mode reads the kernels, above 1 it also reads host launch cost or idle gaps."""
    df = _frame_iv("modes", modes, ("config", "device_ms"))
    label = _label_iv(device_label)
    cols = [m for m in MODE_LABELS if f"{m}_over_device" in df.columns]
    if not cols:
        raise ValueError("`modes` must have at least one '<mode>_over_device' column "
                         "(summaries.mode_table).")
    configs = sorted(df["config"], key=Config.from_key)
    d = df.set_index("config").reindex(configs)
    fig = _figure(6.8, 4.2)
    ax = fig.subplots()
    width = 0.8 / len(cols)
    x = np.arange(len(configs))
    for i, m in enumerate(cols):
        ax.bar(x + (i - (len(cols) - 1) / 2) * width, d[f"{m}_over_device"], width,
               label=MODE_LABELS[m])
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xticks(x, [_short(k) for k in configs], rotation=35, ha="right")
    ax.set_ylabel("median / profiler kernel time (×)")
    ax.set_xlabel("configuration")
    top = float(np.nanmax(d[[f"{m}_over_device" for m in cols]].to_numpy(dtype=float)))
    ax.set_ylim(0, math.ceil(top + 0.5))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"What each timing mode reads: default SDPA against torch.profiler\n{label}",
                 fontsize=10)
    return fig


def kernel_vs_library(table: pd.DataFrame, device_label: str) -> Figure:
    """Speedup of one kernel over the fastest library backend per configuration, with its
    CI, on a log axis; points coloured by verdict and labelled with that backend."""
    df = _frame_iv("table", table, ("config", "kernel", "library", "speedup", "ci_low",
                                    "ci_high", "verdict"))
    label = _label_iv(device_label)
    configs = sorted(df["config"], key=Config.from_key)
    d = df.set_index("config").reindex(configs)
    fig = _figure(6.8, 0.36 * len(configs) + 1.8)
    ax = fig.subplots()
    y = np.arange(len(configs))
    ax.axvline(1.0, color="black", lw=0.8, ls="--")
    for verdict, color in VERDICT_COLORS.items():
        sel = (d["verdict"] == verdict).to_numpy()
        if sel.any():
            ax.errorbar(d["speedup"][sel], y[sel],
                        xerr=_err(d["speedup"][sel], d["ci_low"][sel], d["ci_high"][sel]),
                        fmt="o", color=color, capsize=3, label=verdict)
    ax.set_yticks(y, [f"{_short(k)}  (vs {lib})" for k, lib in zip(configs, d["library"])],
                  fontsize=8)
    ax.set_xscale("log")
    _plain_log_axis(ax.xaxis)
    ax.set_xlabel(f"speedup of {df['kernel'].iloc[0]} over the fastest library backend "
                  f"(×, log scale)")
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"Our kernel against the fastest SDPA backend per configuration (95% CI)\n"
                 f"{label}", fontsize=10)
    return fig


def replay_curves(anatomy: pd.DataFrame, device_label: str) -> Figure:
    """Time per call against the calls captured per graph replay (``replay_cost``), one
    panel per configuration: a fixed cost per replay shows as a fall that levels off."""
    df = _frame_iv("anatomy", anatomy, ("config", "candidate", "k", "per_call_ms"))
    label = _label_iv(device_label)
    configs = sorted(df["config"].unique(), key=Config.from_key)
    fig = _figure(3.4 * len(configs) + 0.6, 3.8)
    axes = np.atleast_1d(fig.subplots(1, len(configs)))
    for ax, key in zip(axes, configs):
        sub = df[df["config"] == key].assign(us=lambda d: d["per_call_ms"] * 1e3)
        sns.lineplot(data=sub, x="k", y="us", hue="candidate", style="candidate", markers=True,
                     dashes=False, ax=ax, hue_order=sorted(sub["candidate"].unique()),
                     style_order=sorted(sub["candidate"].unique()))
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("calls captured per graph replay, k")
        ax.set_ylabel("event time per call (µs)")
        ax.set_title(_short(key), fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(f"Graph replay: time per call against calls per replay\n{label}", fontsize=10)
    return fig
