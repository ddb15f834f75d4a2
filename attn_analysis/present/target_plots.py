"""The figure of the decisive runs at the reports' shape: every confirmatory run's custom
kernels against SDPA, per level, each interval family-wise at its run's own family.

It draws the rows of :func:`attn_analysis.chapters.target_answer.confirmatory_rows` (one
per run, custom kernel and level; ``in_family`` says whether a comparison is a member of
its run's family or only judged at the same m), so the reader sees the answer to claim A
where it is decided, not in exploratory runs.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..analyse.stats import margin_iv
from .figure_style import (PAGE_WIDTH_IN, VERDICT_COLORS, _err, _figure, _frame_iv,
                           _legend_below, _styled, _title, check_span, interval_window)

__all__ = ["LEVEL_TITLES", "confirmatory_target"]

LEVEL_TITLES = {"call": "per call (graph replay)", "kernel": "per kernel (profiler)",
                "attention": "attention kernel alone"}
_COLUMNS = ("machine", "run", "m", "candidate", "label", "level", "speedup", "ci_low",
            "ci_high", "verdict", "in_family")


def _machine_key(machine: str) -> tuple:
    """Inventory order: model, then letters with shorter first ('H200-g' before 'H200-ae')."""
    model, _, letters = str(machine).partition("-")
    return model, len(letters), letters


def _row_order(rows: pd.DataFrame) -> list[tuple]:
    """(machine, run, candidate) from top to bottom: GPUs in inventory order, each run's
    kernels by name."""
    keys = rows[["machine", "run", "candidate", "label"]].drop_duplicates(
        ["machine", "run", "candidate"])
    keys = sorted(keys.itertuples(index=False, name=None),
                  key=lambda k: (_machine_key(k[0]), k[1], k[3]))
    return [k[:3] for k in keys]


@_styled
def confirmatory_target(rows: pd.DataFrame, margin: float, title: str) -> Figure:
    """Speedup over SDPA of every custom kernel in every confirmatory run at the target:
    one row per run and kernel (labelled with the GPU and the kernel), one panel per level
    (call, kernel, attention kernel), family-wise intervals at the run's m, colour by
    verdict, hollow markers for comparisons outside the run's family, the ±``margin``
    band. ``rows``: :func:`chapters.target_answer.confirmatory_rows`."""
    _frame_iv("rows", rows, _COLUMNS)
    margin = margin_iv(margin)
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"`title` must be a non-empty string; got {title!r}.")
    levels = [lv for lv in LEVEL_TITLES if (rows["level"] == lv).any()]
    order = _row_order(rows)
    ypos = {k: len(order) - 1 - i for i, k in enumerate(order)}  # first row on top
    xlim = interval_window(rows["speedup"], rows["ci_low"], rows["ci_high"],
                           reference=1.0)
    xlim = (min(xlim[0], 1 - 1.5 * margin), max(xlim[1], 1 + 1.5 * margin))
    check_span(xlim, rows["speedup"], reference=(1.0,))
    fig = _figure(PAGE_WIDTH_IN, 1.1 + 0.27 * len(order))
    axes = np.atleast_1d(fig.subplots(1, len(levels), sharey=True, sharex=True))
    breaks = [ypos[k] + 0.5 for prev, k in zip(order, order[1:]) if k[:2] != prev[:2]]
    for ax, level in zip(axes, levels):
        ax.axvspan(1 - margin, 1 + margin, color="#dddddd", zorder=0)
        ax.axvline(1.0, color="black", lw=0.8)
        for y in breaks:
            ax.axhline(y, color="#bbbbbb", lw=0.6)
        d = rows[rows["level"] == level]
        for _, r in d.iterrows():
            y = ypos[(r["machine"], r["run"], r["candidate"])]
            color = VERDICT_COLORS.get(r["verdict"], "black")
            sp = float(np.clip(r["speedup"], *xlim))
            ax.errorbar([sp], [y], xerr=_err([sp], [max(r["ci_low"], xlim[0])],
                                             [min(r["ci_high"], xlim[1])]),
                        fmt="o", ms=4.5, capsize=2, color=color, ls="none",
                        mfc=color if r["in_family"] else "white", mec=color)
        ax.set_xlim(*xlim)
        ax.set_title(LEVEL_TITLES[level])
        ax.set_xlabel("speedup over SDPA (×)")
        ax.grid(axis="x", alpha=0.3)
    labels = {k: f"{k[0]} · {lab.split(' (')[0]}" for k, lab in
              ((k, rows.loc[(rows["machine"] == k[0]) & (rows["run"] == k[1])
                            & (rows["candidate"] == k[2]), "label"].iloc[0]) for k in order)}
    axes[0].set_yticks([ypos[k] for k in order], [labels[k] for k in order])
    axes[0].set_ylim(-0.6, len(order) - 0.4)
    present = [v for v in VERDICT_COLORS if (rows["verdict"] == v).any()]
    handles = [Line2D([], [], marker="o", color=VERDICT_COLORS[v], ls="none", label=v)
               for v in present]
    if not rows["in_family"].all():
        handles.append(Line2D([], [], marker="o", color="black", mfc="white", ls="none",
                              label="outside the run's family (judged at its m)"))
    handles.append(matplotlib.patches.Patch(color="#dddddd", label=f"±{margin:.0%} margin"))
    _legend_below(fig, handles=handles, labels=[h.get_label() for h in handles], ncol=3)
    fig.suptitle(_title(title + "\nright of 1 is faster; family-wise intervals at each "
                        "run's m", 100))
    return fig
