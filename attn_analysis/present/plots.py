"""Figures of the paper: DataFrame in, matplotlib Figure out.

Every function takes a table from :mod:`attn_analysis.analyse` and a ``device_label``
(device and software, e.g. ``provenance.run_label(run)``) that goes into the title, so no
figure leaves the notebook without saying where it was measured. Axes carry units; sizes
that span decades get log scales; intervals are drawn as error bars or bands. Figures are
built as :class:`matplotlib.figure.Figure` objects, never through pyplot's global state,
so a notebook shows one only where it glues or displays it.

The speedup figures live here; :mod:`.latency_plots` draws latencies and rates,
:mod:`.audit_plots` the audit's and the variance chapter's figures, and
:mod:`.figure_style` holds what they share (page width, fonts, verdict colours, legends).
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from ..configs import Config
from ..analyse.stats import Verdict, margin_iv
from .figure_style import (_err, _figure, _finish, _frame_iv, _label_iv, _legend_below,
                           check_span, interval_window,
                           MODE_LABELS, MODE_TITLES, near_one_window, PAGE_WIDTH_IN,
                           _short, _speedup_points, _styled, _title, VERDICT_COLORS)

__all__ = ["ci_label", "speedup_forest", "speedup_heatmap", "HEATMAP_SPAN", "trial_spread",
           "kernel_vs_library", "speedup_summary", "speedup_by_seq_len"]


# --------------------------------------------------------------------------- validation


# --------------------------------------------------------------------------- figures

def ci_label(df: pd.DataFrame) -> str:
    """The interval's label for a title, e.g. " (95% family-wise CI, m = 220)".

    A Bonferroni-adjusted per-comparison confidence (0.9998 at m = 220) prints as "100%"
    at whole percents, so the family-wise level is named when ``n_comparisons`` is known,
    and otherwise the per-comparison level with as many decimals as it needs. Empty
    without a ``confidence`` column."""
    if "confidence" not in df or df.empty:
        return ""
    c = float(df["confidence"].iloc[0])
    if "n_comparisons" in df and int(df["n_comparisons"].iloc[0]) > 1:
        m = int(df["n_comparisons"].iloc[0])
        return f" ({1 - (1 - c) * m:.0%} family-wise CI, m = {m})"
    digits = 0
    while digits < 6 and round(c * 100, digits) >= 100:
        digits += 1
    return f" ({c * 100:.{digits}f}% CI)"


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
    conf = ci_label(df)
    fig.suptitle(_title(f"Speedup over default SDPA at {_short(config)}{conf}; filled arrow heads: "
                        f"off the axis (value shown); open: interval continues\n{label}", width=100))
    return fig


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
    # seaborn draws the jitter from numpy's global generator: seeded here (and restored),
    # so that two builds of the same data draw the same figure
    state = np.random.get_state()
    np.random.seed(0)
    try:
        sns.stripplot(data=rel, x="rel", y="candidate", order=order, ax=ax, size=3.5,
                      jitter=0.15, color="#1f77b4", alpha=0.8)
    finally:
        np.random.set_state(state)
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
    CI, on a linear axis that includes one and every point (intervals reaching further
    are clipped at the edge, :func:`figure_style.interval_window`); points coloured by
    verdict and each shape labelled with that backend."""
    df = _frame_iv("table", table, ("config", "kernel", "library", "speedup", "ci_low",
                                    "ci_high", "verdict"))
    label = _label_iv(device_label)
    configs = sorted(df["config"], key=Config.from_key)
    d = df.set_index("config").reindex(configs)
    fig = _figure(PAGE_WIDTH_IN, 0.3 * len(configs) + 1.9)
    ax = fig.subplots()
    y = np.arange(len(configs))
    # the limits follow the points: an interval of a two-process family can reach 1e11
    # (a t quantile with one degree of freedom), and is clipped at the edge instead
    xlim = interval_window(d["speedup"], d["ci_low"], d["ci_high"])
    ax.axvline(1.0, color="black", lw=0.8, ls="--")
    _speedup_points(ax, d, y, xlim)
    ax.set_xlim(*xlim)
    ax.set_yticks(y, [f"{_short(k)}  (vs {lib})" for k, lib in zip(configs, d["library"])])
    ax.set_ylim(-0.6, len(configs) - 0.4)
    ax.invert_yaxis()
    return _finish(fig, ax, f"speedup of {df['kernel'].iloc[0]} over the fastest library "
                   f"backend (×); above 1: ours faster", None,
                   f"Our kernel against the fastest SDPA backend per configuration (95% CI)"
                   f"\nopen arrow heads: the interval continues beyond the axis\n{label}", ncol=4, axis="x", alpha=0.3)


# --------------------------------------------------------------------------- audit figures


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
    check_span(xlim, both["speedup"], reference=(1.0,))
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
                    if i == 0:  # one label per candidate: the first machine's value,
                        # beside its own arrow and away from the other machines' markers
                        # (the first machine sits lowest in the row), so it never overprints
                        # another machine's point drawn near the same edge.
                        ax.annotate(f"{v:.2f}×", (edge, yv),
                                    xytext=(8 if left else -8, -1 if off else 0),
                                    textcoords="offset points", ha="left" if left else "right",
                                    va="top" if off else "center", fontsize=7.5, color=color)
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
    margin_iv(margin)
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
    check_span((1 - span, 1 + span), df["speedup"], reference=(1.0,), name="y")
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
                # one process: no interval over processes, so no bar (hollow markers);
                # an interval past both edges says nothing at this scale: no bar, hollow
                lo, hi = (d[c].to_numpy(dtype=float) for c in ("ci_low", "ci_high"))
                wide = single | ((lo < 1 - span) & (hi > 1 + span))
                ax.plot(d["seq_len"], d["speedup"], color=palette[label], lw=1.2)
                for sel, hollow in ((wide, True), (~wide, False)):
                    if not np.any(sel):
                        continue
                    e = d[sel]
                    ax.errorbar(e["seq_len"], e["speedup"], yerr=None if hollow else _err(
                        e["speedup"], np.clip(e["ci_low"], 1 - span, None),
                        np.clip(e["ci_high"], None, 1 + span)), color=palette[label],
                        marker="o", ms=4, capsize=2, ls="none",
                        mfc="white" if hollow else palette[label], label=label)
                cut = ~wide  # cut at one edge: an open arrow head there
                for edge, mk, sel in ((1 - span, "v", cut & (lo < 1 - span)),
                                      (1 + span, "^", cut & (hi > 1 + span))):
                    if np.any(sel):
                        ax.plot(d["seq_len"].to_numpy()[sel], np.full(int(np.sum(sel)), edge),
                                marker=mk, ms=5, mfc="white", mec=palette[label], ls="none",
                                clip_on=False, zorder=3)
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
                        "default dispatch; bars: family-wise intervals (open arrow head: cut at the "
                        "axis); hollow: one process, or an interval past both edges", 100))
    return fig

