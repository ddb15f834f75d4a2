"""The audit chapter's and the variance chapter's figures: replay cost per call, the
calibration's error rates and the controls' effects, warm-up traces, and the variance
components. DataFrame in, Figure out, in :mod:`.figure_style`'s style.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ..configs import Config
from ..analyse.calibration import DERIVED_OUTCOMES, ROLES
from .figure_style import (_err, _figure, _finish, _frame_iv, _label_iv, _legend_below,
                           MODE_TITLES, PAGE_WIDTH_IN, _plain_log_axis, _short, _styled,
                           _title)

__all__ = ["replay_curves", "calibration_rates", "power_by_processes", "control_effects",
           "warmup_traces", "COMPONENT_COLORS", "COMPONENT_LABELS", "variance_components"]


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
def power_by_processes(rates: pd.DataFrame, power_goal: float, title: str,
                       aa_outcome: str = "beyond margin") -> Figure:
    """Power (verdict "slower", beyond the margin) of each positive control and the A/A
    control's rate of ``aa_outcome`` (default: a difference beyond the margin, the outcome
    the abstract counts; "claimed difference" also counts within-margin verdicts) against
    the processes per replication, one panel per (level, device), with Clopper-Pearson
    intervals; ``rates`` is ``design_calibration.rates_by_processes`` output, its
    ``device`` column the labels."""
    if aa_outcome not in DERIVED_OUTCOMES:
        raise ValueError(f"`aa_outcome` must be one of {list(DERIVED_OUTCOMES)}; "
                         f"got {aa_outcome!r}.")
    df = _frame_iv("rates", rates, ("device", "level", "k", "candidate", "role",
                                    "size_margins", "outcome", "rate", "ci_low", "ci_high"))
    title = _label_iv(title)
    levels = [lv for lv in ("call", "kernel") if lv in set(df["level"])]
    devices = sorted(df["device"].unique())
    fig = _figure(PAGE_WIDTH_IN, 2.6 * len(levels) + 1.4)
    axes = fig.subplots(len(levels), len(devices), sharex=True, sharey=True, squeeze=False)
    is_aa = df["role"] == ROLES["aa"]
    shown = (~is_aa & (df["outcome"] == "slower")) | (is_aa & (df["outcome"] == aa_outcome))
    names = sorted(df.loc[shown, "candidate"].unique(),
                   key=lambda c: df.loc[shown & (df["candidate"] == c), "size_margins"].mean())
    colors = dict(zip(names, sns.color_palette("tab10", len(names))))
    for (i, level), (j, device) in ((a, b) for a in enumerate(levels)
                                    for b in enumerate(devices)):
        ax = axes[i, j]
        sub = df[shown & (df["level"] == level) & (df["device"] == device)]
        ends = []  # (rate at the last k, size label, colour) of each positive control
        for cand in names:
            d = sub[sub["candidate"] == cand].sort_values("k")
            if d.empty:
                continue
            aa = d["role"].iloc[0] == ROLES["aa"]
            name = f"{cand}: A/A, {aa_outcome}" if aa else f"{cand}: slower"
            ax.errorbar(d["k"], d["rate"], yerr=_err(d["rate"], d["ci_low"], d["ci_high"]),
                        fmt="s--" if aa else "o-", ms=4, capsize=2.5, lw=1.2,
                        color="k" if aa else colors[cand], label=name)
            if not aa:  # the control's measured size, at the end of its line
                ends.append((d["rate"].iloc[-1], f"{d['size_margins'].iloc[0]:.1f} m",
                             colors[cand]))
        for y, text, color in _spread_labels(ends, gap=0.07):
            ax.annotate(text, (max(df["k"]), y), xytext=(6, 0), textcoords="offset points",
                        va="center", fontsize=7, color=color)
        ax.axhline(power_goal, color="0.4", ls=":", lw=1, label=f"power goal {power_goal:.0%}")
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlim(min(df["k"]) - 0.3, max(df["k"]) + 0.9)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
        ax.set_xticks(sorted(df["k"].unique()))
        ax.grid(alpha=0.3)
        ax.set_title(f"{device}\n{level} level")
        if i == len(levels) - 1:
            ax.set_xlabel("processes per replication, k")
        if j == 0:
            ax.set_ylabel("rate (% of replications)")
    _legend_below(fig, axes.ravel(), ncol=2)
    fig.suptitle(_title(title))
    return fig


def _spread_labels(ends, gap: float) -> list:
    """End-of-line labels (y, text, colour) moved apart to at least ``gap`` in y, lowest
    first, so that lines ending at one rate keep readable labels."""
    out, floor = [], -float("inf")
    for y, text, color in sorted(ends, key=lambda e: e[0]):
        y = max(y, floor + gap)
        out.append((y, text, color))
        floor = y
    ceiling = 1.0  # the axes end at 1.03: a label above it would not be drawn
    for i in range(len(out) - 1, -1, -1):  # push the top of the stack back under it
        y, text, color = out[i]
        out[i] = (min(y, ceiling), text, color)
        ceiling = out[i][0] - gap
    return out


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
